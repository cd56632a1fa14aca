#!/usr/bin/env python3
"""Quickstart: list the servers and tools mcpd offers, then call a tool.

Run mcpd first (`make run` serves the built-in demo server), then:

    MCPD_ADDRESS=127.0.0.1:50051 python3 examples/python/quickstart.py

MCPD_ADDRESS also takes unix:///path/to.sock; MCPD_API_TOKEN is sent as a
bearer token when set.
"""

from __future__ import annotations

import sys

import mcpd_grpc


def main() -> int:
    with mcpd_grpc.Client(timeout=30) as mcpd:
        for server in mcpd.servers():
            print(f"server {server.name}: {server.state.value}, {server.tool_count} tools")

        tools = mcpd.list_tools()
        for tool in tools:
            print(f"  {tool.name}: {tool.description}")

        names = {t.name for t in tools}
        if "mcp__demo__add" not in names:
            print("no demo server: call one of the tools above with mcpd.call_tool(name, {...})")
            return 0

        result = mcpd.call_tool("mcp__demo__add", {"a": 2, "b": 3})
        print("add(2, 3) ->", result.text, result.structured)  # "5" {'sum': 5}

        weather = mcpd.call_tool("mcp__demo__weather", {"city": "Lisbon"})
        print("weather ->", weather.structured)

        image = mcpd.call_tool("mcp__demo__image").content[0]
        assert isinstance(image, mcpd_grpc.ImageContent)
        print(f"image -> {image.mime_type}, {len(image.data)} bytes")

        for item in mcpd.call_tool_stream("mcp__demo__slow", {"steps": 3, "delay_ms": 100}):
            if isinstance(item, mcpd_grpc.Progress):
                total = f"/{item.total:g}" if item.total is not None else ""
                print(f"  progress {item.progress:g}{total} {item.message}")
            elif isinstance(item, mcpd_grpc.ToolResult):
                print("slow ->", item.text)

        try:
            mcpd.call_tool("mcp__demo__add", {"a": "two", "b": 3})
        except mcpd_grpc.InvalidArgument as e:
            print(f"bad arguments -> {type(e).__name__} from server {e.server} (JSON-RPC {e.jsonrpc_code})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
