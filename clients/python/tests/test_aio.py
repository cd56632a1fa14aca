"""AsyncClient: every method, against the shared daemon, on both wires."""

from __future__ import annotations

import json

import pytest

import mcpd_grpc
from conftest import CLOCK, RPC_TIMEOUT, WIRES, Daemon, run_async
from mcpd_grpc import AsyncClient, EventKind, ImageContent, Progress, ServerConfig, ServerState, ToolResult


@pytest.mark.parametrize("wire", WIRES)
def test_async_surface(daemon: Daemon, mcpd_bin: str, wire: str) -> None:
    name = f"aio-demo-{wire}"

    async def body() -> None:
        async with AsyncClient(daemon.target_of(wire), timeout=RPC_TIMEOUT) as c:
            # servers
            servers = await c.servers()
            assert "demo" in [s.name for s in servers]
            assert (await c.get_server("demo")).state is ServerState.READY
            s = await c.connect_server(ServerConfig.stdio(name, mcpd_bin, ["demo-server"], tools_deny=["fail"]))
            assert s.ready and s.tool_count == 7, f"got {s}"
            with pytest.raises(mcpd_grpc.AlreadyExists):
                await c.connect_server(ServerConfig.stdio(name, mcpd_bin, ["demo-server"]))
            restarted = await c.restart_server(name)
            assert restarted.ready and restarted.pid != s.pid
            await c.disconnect_server(name)
            with pytest.raises(mcpd_grpc.NotFound):
                await c.get_server(name)

            # tools
            tools = await c.list_tools("demo")
            assert len(tools) == 8 and tools[0].server == "demo"
            r = await c.call_tool("mcp__demo__add", {"a": 20, "b": 22})
            assert isinstance(r, ToolResult) and r.structured == {"sum": 42} and r.text == "42"
            img = await c.call_tool("mcp__demo__image")
            assert isinstance(img.content[0], ImageContent) and img.content[0].data.startswith(b"\x89PNG")
            stream = c.call_tool_stream("mcp__demo__slow", {"steps": 2, "delay_ms": 10})
            items = [i async for i in stream]
            assert [i.progress for i in items if isinstance(i, Progress)] == [1, 2]
            assert stream.result is items[-1] and "2 steps" in stream.result.text
            openai = await c.tools_for_openai("demo", api="responses")
            assert {t["name"] for t in openai} == {t.name for t in tools}
            anthropic = await c.tools_for_anthropic("demo")
            echo = next(t for t in anthropic if t["name"] == "mcp__demo__echo")
            r = await c.call_tool(echo["name"], json.dumps({"message": "hi"}))
            assert r.text == "hi"

            # resources, prompts, completion, settings
            assert {"demo://clock", "demo://readme"} <= {x.uri for x in await c.list_resources("demo")}
            assert [x.uri_template for x in await c.list_resource_templates("demo")] == ["demo://greeting/{name}"]
            assert (await c.read_resource("demo", "demo://greeting/Bob")).text == "Hello, Bob!"
            assert (await c.read_resource("demo", "demo://logo.png")).blob.startswith(b"\x89PNG")
            assert "greet" in [p.name for p in await c.list_prompts("demo")]
            p = await c.get_prompt("demo", "greet", {"name": "Eve"})
            assert "Eve" in p.text
            comp = await c.complete("demo", "style", "ca", prompt="greet")
            assert comp.values == ("casual",)
            await c.set_log_level("demo", "warning")
            await c.set_roots([("file:///srv/aio", "aio")])

            # events
            sub = c.subscribe(resources=[CLOCK], kinds=[EventKind.RESOURCE_UPDATED])
            ev = await sub.__anext__()
            assert ev.kind is EventKind.RESOURCE_UPDATED and ev.uri == "demo://clock"
            sub.close()
            assert [e async for e in sub] == []

            # errors
            with pytest.raises(mcpd_grpc.NotFound):
                await c.call_tool("mcp__demo__missing")
            with pytest.raises(mcpd_grpc.InvalidArgument) as info:
                await c.call_tool("mcp__demo__add", {"a": "one"})
            assert info.value.server == "demo" and info.value.jsonrpc_code == -32602
            with pytest.raises(mcpd_grpc.DeadlineExceeded):
                await c.call_tool("mcp__demo__slow", {"steps": 50, "delay_ms": 100}, timeout=0.3)

    run_async(body())


@pytest.mark.parametrize("wire", WIRES)
def test_async_stream_cancel(daemon: Daemon, wire: str) -> None:
    async def body() -> None:
        async with AsyncClient(daemon.target_of(wire), timeout=RPC_TIMEOUT) as c:
            async with c.call_tool_stream("mcp__demo__slow", {"steps": 100, "delay_ms": 50}) as stream:
                first = await stream.__anext__()
                assert isinstance(first, Progress)
            # Like the sync stream: a cancelled call raises Cancelled, not
            # asyncio.CancelledError, which would look like the task's own.
            with pytest.raises(mcpd_grpc.Cancelled):
                await stream.__anext__()
            # The call is cancelled; the daemon is still fine.
            assert (await c.call_tool("mcp__demo__echo", {"message": "after"})).text == "after"
            # Closing the client ends the streams still open.
            stream = c.call_tool_stream("mcp__demo__slow", {"steps": 100, "delay_ms": 50})
            assert isinstance(await stream.__anext__(), Progress)
        with pytest.raises(mcpd_grpc.Cancelled):
            await stream.__anext__()

    run_async(body())
