#!/usr/bin/env python3
"""A minimal agent loop: mcpd's tools go to the model in OpenAI's format,
and the model's tool calls go straight back to mcpd.

The model here is a stand-in function (no network): swap `fake_model` for
your provider's chat call, e.g. with the openai package

    resp = openai.chat.completions.create(model=..., messages=messages, tools=tools)
    return resp.choices[0].message.model_dump(exclude_none=True)

The same loop works for Anthropic with `mcpd.tools_for_anthropic()` and
its tool_use / tool_result blocks. The client also answers servers that ask
the model for a completion (sampling) with the same stand-in.

    python3 examples/python/agent_loop.py "What is 19 + 23?"
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Dict, List

import mcpd_grpc


def fake_model(messages: List[Dict[str, Any]], tools: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Stands in for a chat model: adds two numbers with the first tool
    whose description says it adds, then answers with the tool's result."""
    last = messages[-1]
    if last["role"] == "tool":
        return {"role": "assistant", "content": f"The answer is {last['content']}."}
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", last["content"])]
    adder = next((t["function"]["name"] for t in tools if "adds" in t["function"]["description"].lower()), None)
    if adder is None or len(numbers) < 2:
        return {"role": "assistant", "content": "I have no tool for that."}
    call = {"id": "call_1", "type": "function", "function": {"name": adder, "arguments": json.dumps({"a": numbers[0], "b": numbers[1]})}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def run(mcpd: mcpd_grpc.Client, question: str, max_turns: int = 8) -> str:
    tools = mcpd.tools_for_openai()  # names are provider-safe; call_tool maps them back
    messages: List[Dict[str, Any]] = [{"role": "user", "content": question}]
    for _ in range(max_turns):
        reply = fake_model(messages, tools)
        messages.append(reply)
        calls = reply.get("tool_calls") or []
        if not calls:
            return str(reply["content"])
        for call in calls:
            fn = call["function"]
            try:
                result = mcpd.call_tool(fn["name"], fn["arguments"], timeout=60)
                content = result.text if not result.is_error else f"error: {result.text}"
            # The model should see failures too, its own malformed arguments
            # (ValueError, TypeError) included.
            except (mcpd_grpc.MCPDError, ValueError, TypeError) as e:
                content = f"error: {e}"
            print(f"  tool {fn['name']}({fn['arguments']}) -> {content}")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return "gave up after too many turns"


def main() -> int:
    question = " ".join(sys.argv[1:]) or "What is 19 + 23?"
    with mcpd_grpc.Client(timeout=30) as mcpd:

        @mcpd.on_sampling
        def sample(req: mcpd_grpc.SamplingRequest) -> mcpd_grpc.SamplingResult:
            answer = fake_model([{"role": "user", "content": req.text}], [])
            return mcpd_grpc.SamplingResult(answer["content"], model="fake-model")

        print("user:", question)
        print("assistant:", run(mcpd, question))
    return 0


if __name__ == "__main__":
    sys.exit(main())
