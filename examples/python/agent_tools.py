#!/usr/bin/env python3
"""Agent-defined tools: serve Python functions as the mcpd server "notes",
then call them from a second client as any other caller of mcpd would.

Run mcpd first (`make run`), then:

    MCPD_ADDRESS=127.0.0.1:50051 python3 examples/python/agent_tools.py

With --serve the script only serves the tools, until Ctrl-C; call them
from anywhere else (another agent, grpcurl, the Go client).
"""

from __future__ import annotations

import sys
import time
from typing import Dict, List, Literal, Optional

import mcpd_grpc
from mcpd_grpc import AgentTools, ToolContext

tools = AgentTools("notes", instructions="A notebook kept by the agent.")
NOTES: Dict[str, List[str]] = {}


@tools.tool
def add_note(text: str, tags: Optional[List[str]] = None) -> str:
    """Saves a note.

    Args:
        text: what to write down.
        tags: labels to file it under.
    """
    for tag in tags or ["untagged"]:
        NOTES.setdefault(tag, []).append(text)
    return f"saved under {', '.join(tags or ['untagged'])}"


@tools.tool(read_only=True)
def find_notes(tag: str, order: Literal["oldest", "newest"] = "oldest") -> Dict[str, List[str]]:
    """Returns the notes filed under a tag.

    Args:
        tag: the label.
        order: which note comes first.
    """
    found = list(NOTES.get(tag, []))
    return {"notes": found if order == "oldest" else found[::-1]}


@tools.tool
def summarize(tag: str, ctx: ToolContext) -> str:
    """Summarizes a tag's notes, one note at a time, reporting progress.

    Args:
        tag: the label.
    """
    notes = NOTES.get(tag, [])
    words = 0
    for i, note in enumerate(notes):
        if ctx.cancelled:  # the caller gave up
            return "cancelled"
        words += len(note.split())
        ctx.report_progress(i + 1, len(notes), f"read note {i + 1}")
    return f"{len(notes)} notes, {words} words"


def main() -> int:
    with mcpd_grpc.Client(timeout=30) as agent, agent.serve_tools(tools, replace=True) as serving:
        print(f"serving {serving.server.name}: {serving.server.state.value}, {serving.server.tool_count} tools")
        if "--serve" in sys.argv[1:]:
            try:
                while serving.running:
                    time.sleep(1)
            except KeyboardInterrupt:
                pass
            return 0

        # Any other client sees the tools like those of an MCP server.
        with mcpd_grpc.Client(timeout=30) as caller:
            for tool in caller.list_tools("notes"):
                print(f"  {tool.name}: {tool.description}")
            print(caller.call_tool("mcp__notes__add_note", {"text": "buy milk", "tags": ["todo"]}).text)
            print(caller.call_tool("mcp__notes__add_note", {"text": "call the plumber today", "tags": ["todo"]}).text)
            print("find_notes ->", caller.call_tool("mcp__notes__find_notes", {"tag": "todo", "order": "newest"}).structured)
            for item in caller.call_tool_stream("mcp__notes__summarize", {"tag": "todo"}):
                if isinstance(item, mcpd_grpc.Progress):
                    print(f"  progress {item.progress:g}/{item.total:g}: {item.message}")
                elif isinstance(item, mcpd_grpc.ToolResult):
                    print("summarize ->", item.text)
            try:
                caller.call_tool("mcp__notes__add_note", {"tags": ["todo"]})
            except mcpd_grpc.InvalidArgument as e:
                print("missing text ->", type(e).__name__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
