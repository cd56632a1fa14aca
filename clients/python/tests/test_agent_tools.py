"""Tools the agent serves itself (AgentTools, serve_tools), called by
another client through mcpd; and the schemas made from type hints."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import threading
from typing import Dict, List, Literal, Optional, Tuple, TypedDict

import pytest

from conftest import RPC_TIMEOUT, Daemon, poll, run_async
from mcpd_grpc import (
    AgentTools,
    AlreadyExists,
    AsyncClient,
    InvalidArgument,
    Progress,
    ServerState,
    ToolContext,
    ToolResult,
    Transport,
    Unavailable,
    agent_tools,
)
from mcpd_grpc.agent_tools import _run_tool, describe_function
from mcpd_grpc.mcpd.v1 import mcpd_pb2 as pb


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


class Box(TypedDict):
    width: int
    height: int


def test_schema_from_hints_and_docstring() -> None:
    def paint(
        text: str,
        times: int,
        ratio: float,
        loud: bool,
        tags: List[str],
        sizes: Dict[str, int],
        pair: Tuple[int, str],
        note: Optional[str] = None,
        mode: Literal["fast", "slow"] = "fast",
        color: Color = Color.RED,
        at: Optional[Point] = None,
        box: Optional[Box] = None,
    ) -> str:
        """Paints text.

        Second line of the description.

        Args:
            text: what to paint.
            times: how often,
                at most ten.
            mode (str): how fast.

        Returns:
            nothing much.
        """
        return text

    at = describe_function(paint)
    assert at.name == "paint"
    assert at.description == "Paints text.\n\nSecond line of the description."
    s = at.input_schema
    p = s["properties"]
    assert s["type"] == "object" and s["required"] == ["text", "times", "ratio", "loud", "tags", "sizes", "pair"]
    assert p["text"] == {"type": "string", "description": "what to paint."}
    assert p["times"] == {"type": "integer", "description": "how often, at most ten."}
    assert p["ratio"] == {"type": "number"} and p["loud"] == {"type": "boolean"}
    assert p["tags"] == {"type": "array", "items": {"type": "string"}}
    assert p["sizes"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert p["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert p["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert p["mode"] == {"enum": ["fast", "slow"], "type": "string", "description": "how fast.", "default": "fast"}
    assert p["color"] == {"enum": ["red", "blue"], "type": "string", "default": "red"}
    point = p["at"]["anyOf"][0]
    assert point == {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x"]}
    assert p["box"]["anyOf"][0]["required"] == ["height", "width"]

    def with_ctx(n: int, ctx: ToolContext) -> int:
        """:param n: a number."""
        return n

    at = describe_function(with_ctx)
    assert at.context_param == "ctx" and list(at.input_schema["properties"]) == ["n"]
    assert at.input_schema["properties"]["n"]["description"] == "a number."


def test_argument_binding() -> None:
    def f(n: int, at: Point, color: Color, xs: List[int]) -> None:
        return None

    at = describe_function(f)
    ctx = ToolContext("1", "f", {}, None, lambda m: None)
    kwargs = at.bind({"n": 3.0, "at": {"x": 1, "y": 2}, "color": "blue", "xs": [1.0, 2.0]}, ctx)
    assert kwargs == {"n": 3, "at": Point(1, 2), "color": Color.BLUE, "xs": [1, 2]}
    assert isinstance(kwargs["n"], int)
    with pytest.raises(ValueError, match="unknown argument"):
        at.bind({"n": 1, "at": {"x": 1}, "color": "red", "xs": [], "zzz": 1}, ctx)
    with pytest.raises(ValueError, match="missing argument"):
        at.bind({"n": 1}, ctx)


def _agent_tools(started: threading.Event, cancelled: threading.Event) -> AgentTools:
    tools = AgentTools("pyagent", instructions="Python tools.")

    @tools.tool
    def add(a: int, b: int = 0) -> int:
        """Adds two integers.

        Args:
            a: the first.
            b: the second.
        """
        return a + b

    @tools.tool(read_only=True)
    def describe(at: Point) -> Dict[str, float]:
        """Describes a point."""
        return {"x": at.x, "y": at.y, "norm": (at.x**2 + at.y**2) ** 0.5}

    @tools.tool
    def fail(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(reason)

    @tools.tool
    def steps(n: int, ctx: ToolContext) -> str:
        """Works in n steps, reporting each."""
        for i in range(n):
            ctx.report_progress(i + 1, n, f"step {i + 1}")
        return "done"

    @tools.tool
    def wait_forever(ctx: ToolContext) -> str:
        """Waits until its caller gives up."""
        started.set()
        if ctx.wait_cancelled(RPC_TIMEOUT):
            cancelled.set()
        return "never seen"

    return tools


def test_sync_agent_tools_called_by_another_client(daemon: Daemon) -> None:
    started, cancelled = threading.Event(), threading.Event()
    tools = _agent_tools(started, cancelled)
    with daemon.client() as agent, daemon.client() as caller:
        with agent.serve_tools(tools) as serving:
            assert serving.server.state == ServerState.READY and serving.server.transport == Transport.AGENT
            listed = {t.tool_name: t for t in caller.list_tools("pyagent")}
            assert set(listed) == {"add", "describe", "fail", "steps", "wait_forever"}
            assert listed["add"].description == "Adds two integers."
            assert listed["add"].input_schema["properties"]["a"] == {"type": "integer", "description": "the first."}
            assert listed["describe"].annotations is not None and listed["describe"].annotations.read_only_hint

            r = caller.call_tool("mcp__pyagent__add", {"a": 2, "b": 3})
            assert r.text == "5" and not r.is_error
            r = caller.call_tool("mcp__pyagent__describe", {"at": {"x": 3, "y": 4}})
            assert r.structured == {"x": 3, "y": 4, "norm": 5}
            r = caller.call_tool("mcp__pyagent__fail", {"reason": "no luck"})
            assert r.is_error and r.text == "no luck"
            with pytest.raises(InvalidArgument, match="missing argument"):
                caller.call_tool("mcp__pyagent__add", {"b": 1})

            # Progress reaches a streaming caller, before the result.
            items = list(caller.call_tool_stream("mcp__pyagent__steps", {"n": 3}))
            assert [i.message for i in items if isinstance(i, Progress)] == ["step 1", "step 2", "step 3"]
            assert isinstance(items[-1], ToolResult) and items[-1].text == "done"

            # A caller that gives up cancels the call in the agent.
            stream = caller.call_tool_stream("mcp__pyagent__wait_forever")
            assert started.wait(RPC_TIMEOUT), "the call did not reach the agent"
            stream.cancel()
            assert cancelled.wait(RPC_TIMEOUT), "the agent was not told of the cancellation"

            # A second agent for the same name is refused.
            with daemon.client() as other:
                with pytest.raises(AlreadyExists):
                    other.serve_tools(tools)
            assert serving.running

        # The stream's end stops the server; its tools are unavailable.
        poll("pyagent to stop", lambda: caller.get_server("pyagent").state == ServerState.STOPPED)
        with pytest.raises(Unavailable):
            caller.call_tool("mcp__pyagent__add", {"a": 1})
        caller.disconnect_server("pyagent")


def test_async_agent_tools(daemon: Daemon) -> None:
    async def main() -> None:
        tools = AgentTools("pyasync")
        started = asyncio.Event()
        cancelled: List[bool] = []

        @tools.tool
        async def greet(name: str, ctx: ToolContext) -> str:
            """Greets someone."""
            ctx.report_progress(1, 1, "greeting")
            await asyncio.sleep(0)
            return f"hello {name}"

        @tools.tool
        async def hang() -> str:
            """Hangs until cancelled."""
            started.set()
            try:
                await asyncio.sleep(RPC_TIMEOUT)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise
            return "never"

        @tools.tool
        def double(x: float) -> float:
            """Doubles x (a sync tool in the executor)."""
            return 2 * x

        async with AsyncClient(daemon.target, timeout=RPC_TIMEOUT) as agent, AsyncClient(daemon.target, timeout=RPC_TIMEOUT) as caller:
            serving = await agent.serve_tools(tools)
            async with serving:
                r = await caller.call_tool("mcp__pyasync__greet", {"name": "Ada"})
                assert r.text == "hello Ada"
                r = await caller.call_tool("mcp__pyasync__double", {"x": 1.5})
                assert r.text == "3.0"
                items = [i async for i in caller.call_tool_stream("mcp__pyasync__greet", {"name": "Bob"})]
                assert isinstance(items[0], Progress) and items[0].message == "greeting"

                call = asyncio.ensure_future(caller.call_tool("mcp__pyasync__hang"))
                await asyncio.wait_for(started.wait(), RPC_TIMEOUT)
                call.cancel()
                await asyncio.gather(call, return_exceptions=True)
                for _ in range(int(RPC_TIMEOUT / 0.05)):
                    if cancelled:
                        break
                    await asyncio.sleep(0.05)
                assert cancelled, "the agent's task was not cancelled"

                # Replacing the server ends this stream with Aborted.
                async with await caller.serve_tools(AgentTools("pyasync"), replace=True):
                    with pytest.raises(Exception) as ei:
                        await asyncio.wait_for(serving.wait(), RPC_TIMEOUT)
                    assert type(ei.value).__name__ == "Aborted"
                assert not serving.running
            # A stream its agent stopped ends without an error.
            again = await agent.serve_tools(tools, replace=True)
            await again.stop()
            await asyncio.wait_for(again.wait(), RPC_TIMEOUT)
            await caller.disconnect_server("pyasync")

    run_async(main())


def test_sdk_config_entry_is_served(mcpd_bin: str, workdir: object) -> None:
    from pathlib import Path

    wd = Path(str(workdir))
    config = wd / "sdk.mcp.json"
    config.write_text('{"mcpServers": {"app": {"type": "sdk", "name": "app"}}}')
    d = Daemon(mcpd_bin, wd, "sdk", args=["--config", str(config)]).start()
    try:
        with d.client() as c:
            s = c.get_server("app")
            assert s.state == ServerState.CONNECTING and s.transport == Transport.AGENT and "waiting for an agent" in s.last_error
            tools = AgentTools("app")

            @tools.tool
            def ping() -> str:
                """Answers pong."""
                return "pong"

            with c.serve_tools(tools):
                poll("app to be ready", lambda: c.get_server("app").ready)
                assert c.call_tool("mcp__app__ping").text == "pong"
    finally:
        d.stop()


def test_sync_serving_cancels_async_tool(daemon: Daemon) -> None:
    # Client.serve_tools runs a coroutine tool in a worker thread; a caller
    # that gives up, and stop(), cancel its task as AsyncClient's serving does.
    tools = AgentTools("pysynccancel")
    started, cancelled = threading.Event(), threading.Event()

    @tools.tool
    async def hang() -> str:
        """Hangs until cancelled."""
        started.set()
        try:
            await asyncio.sleep(RPC_TIMEOUT)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    with daemon.client() as agent, daemon.client() as caller:
        with agent.serve_tools(tools) as serving:
            stream = caller.call_tool_stream("mcp__pysynccancel__hang")
            assert started.wait(RPC_TIMEOUT), "the call did not reach the agent"
            stream.cancel()
            assert cancelled.wait(RPC_TIMEOUT / 3), "the caller's cancel did not cancel the tool's task"

            started.clear()
            cancelled.clear()
            stream = caller.call_tool_stream("mcp__pysynccancel__hang")
            assert started.wait(RPC_TIMEOUT), "the call did not reach the agent"
            serving.stop()
            assert cancelled.wait(RPC_TIMEOUT / 3), "stop() did not cancel the tool's task"
            stream.cancel()
        caller.disconnect_server("pysynccancel")


def test_async_tool_cancelled_before_or_after_it_runs() -> None:
    # A sync serving's cancel can come before the tool's loop exists (the
    # call waits for a worker): the task is cancelled at its first await.
    # One that comes after the loop closed does nothing.
    seen: List[str] = []

    async def hang() -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "never"

    async def quick() -> str:
        return "ok"

    ctx = ToolContext("1", "hang", {}, None, lambda m: None)
    ctx._cancel()
    reply = _run_tool(describe_function(hang), pb.ToolCall(id="1", tool="hang"), ctx)
    assert seen == ["cancelled"]
    assert reply.result.id == "1" and reply.result.result.is_error

    ctx = ToolContext("2", "quick", {}, None, lambda m: None)
    reply = _run_tool(describe_function(quick), pb.ToolCall(id="2", tool="quick"), ctx)
    assert reply.result.result.content[0].text.text == "ok"
    ctx._cancel()
    assert ctx.cancelled


def _call_until_stopped(daemon: Daemon, server: str, tool: str) -> None:
    """Calls the agent tool through another client until the serving's
    stop fails the call, then removes the server. Run it in a thread: the
    caller adds no task to the loop."""
    with daemon.client() as caller:
        with pytest.raises(Unavailable, match="was stopped"):
            caller.call_tool(f"mcp__{server}__{tool}")
        caller.disconnect_server(server)


def _grpc_status_task(task: asyncio.Task[object]) -> bool:
    return str(getattr(task.get_coro(), "__qualname__", "")).startswith("_AioCall.")


def test_async_client_close_ends_serving_tasks(daemon: Daemon) -> None:
    # AsyncClient.close() (without serving.stop()) leaves no task of the
    # serving pending once it returns: not the reader, the writer, nor a
    # tool's task.
    async def main() -> None:
        tools = AgentTools("pyasyncclose")
        started = asyncio.Event()

        @tools.tool
        async def hang() -> str:
            """Hangs until cancelled."""
            started.set()
            await asyncio.sleep(RPC_TIMEOUT)
            return "never"

        before = asyncio.all_tasks()
        agent = AsyncClient(daemon.target, timeout=RPC_TIMEOUT)
        serving = await agent.serve_tools(tools)
        caller = asyncio.get_running_loop().run_in_executor(None, _call_until_stopped, daemon, "pyasyncclose", "hang")
        await asyncio.wait_for(started.wait(), RPC_TIMEOUT)
        await agent.close()
        # close() waits for them: none is left even for a turn of the loop.
        # grpc's own task that collects the cancelled call's status is not
        # the client's: it ends when grpc's core reports the cancellation,
        # some turns later on grpcio 1.51.
        left = sorted(repr(t) for t in asyncio.all_tasks() - before if not _grpc_status_task(t))
        assert not left, f"tasks still pending after AsyncClient.close(): {left}"
        assert not serving.running
        await asyncio.wait_for(caller, RPC_TIMEOUT)

    run_async(main())


def _stubborn_tools(server: str) -> Tuple[AgentTools, asyncio.Event, asyncio.Event]:
    """Tools of server with one async tool, stubborn, that ignores its
    cancellation until release is set; started is set once it runs. Make
    them inside the event loop that serves them."""
    tools = AgentTools(server)
    started, release = asyncio.Event(), asyncio.Event()

    @tools.tool
    async def stubborn() -> str:
        """Ignores its cancellation until released."""
        started.set()
        while not release.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                pass
        return "done"

    return tools, started, release


def test_async_client_close_does_not_wait_for_ever_for_a_stubborn_tool(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    # A tool that ignores its cancellation holds AsyncClient.close() only
    # for the serving's stop wait, as a sync tool holds Client.close().
    monkeypatch.setattr(agent_tools, "_STOP_WAIT", 0.5)

    async def main() -> None:
        tools, started, release = _stubborn_tools("pystubborn")

        agent = AsyncClient(daemon.target, timeout=RPC_TIMEOUT)
        serving = await agent.serve_tools(tools)
        caller = asyncio.get_running_loop().run_in_executor(None, _call_until_stopped, daemon, "pystubborn", "stubborn")
        await asyncio.wait_for(started.wait(), RPC_TIMEOUT)
        try:
            await asyncio.wait_for(agent.close(), 10)
        finally:
            release.set()  # else the tool, and the loop's end with it, would wait for ever
        assert not serving.running
        await asyncio.wait_for(caller, RPC_TIMEOUT)

    run_async(main())


def test_async_serving_ended_by_mcpd_leaves_no_task(daemon: Daemon) -> None:
    # mcpd ends a serving's stream (another agent took the server over):
    # its tasks end with it, as the sync serving's thread does, rather than
    # wait for a stop() that an agent which serves again never makes.
    async def main() -> None:
        async with AsyncClient(daemon.target, timeout=RPC_TIMEOUT) as agent, AsyncClient(daemon.target, timeout=RPC_TIMEOUT) as other:
            before = asyncio.all_tasks()
            serving = await agent.serve_tools(AgentTools("pyasyncended"))
            mine = {t for t in asyncio.all_tasks() - before if not _grpc_status_task(t)}
            assert mine, "the serving started no task"
            async with await other.serve_tools(AgentTools("pyasyncended"), replace=True):
                with pytest.raises(Exception) as ei:
                    await asyncio.wait_for(serving.wait(), RPC_TIMEOUT)
                assert type(ei.value).__name__ == "Aborted"
                _, pending = await asyncio.wait(mine, timeout=RPC_TIMEOUT)
                assert not pending, f"tasks of a serving that mcpd ended still pending: {sorted(t.get_name() for t in pending)}"
            await other.disconnect_server("pyasyncended")

    run_async(main())


def test_async_client_close_cut_short_is_finished(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    # A close() whose task is cancelled part-way (a timeout around it, a
    # shutdown that cancels the tasks left) still closes everything, and a
    # second close() waits for what the first had still to wait for,
    # rather than return at once with the client half closed.
    monkeypatch.setattr(agent_tools, "_STOP_WAIT", RPC_TIMEOUT)

    async def main() -> None:
        tools, started, release = _stubborn_tools("pyclosecut")

        before = asyncio.all_tasks()
        agent = AsyncClient(daemon.target, timeout=RPC_TIMEOUT)
        serving = await agent.serve_tools(tools)
        caller = asyncio.get_running_loop().run_in_executor(None, _call_until_stopped, daemon, "pyclosecut", "stubborn")
        await asyncio.wait_for(started.wait(), RPC_TIMEOUT)
        closing = asyncio.get_running_loop().create_task(agent.close())
        await asyncio.wait_for(serving.wait(), RPC_TIMEOUT)  # close() ended the stream; it waits for the tool now
        closing.cancel()
        await asyncio.gather(closing, return_exceptions=True)
        release.set()
        await asyncio.wait_for(agent.close(), RPC_TIMEOUT)
        left = sorted(repr(t) for t in asyncio.all_tasks() - before if not _grpc_status_task(t))
        assert not left, f"tasks still pending after a second AsyncClient.close(): {left}"
        await asyncio.wait_for(caller, RPC_TIMEOUT)

    run_async(main())
