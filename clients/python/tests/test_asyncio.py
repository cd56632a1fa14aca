"""AsyncClient under pytest-asyncio: coroutine tests and async fixtures, and
what asyncio users expect of cancellation: cancelling the task that awaits a
call (or iterates a stream) cancels the call upstream, at the MCP server."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import AsyncIterator, Awaitable, List, NamedTuple, TypeVar

import pytest
import pytest_asyncio

import mcpd_grpc
from conftest import POLL_TIMEOUT, RPC_TIMEOUT, WIRES, Daemon
from mcpd_grpc import AsyncClient, Progress, ServerConfig, ToolResult

RECORDING_SERVER = Path(__file__).resolve().parent / "recording_server.py"


@pytest_asyncio.fixture(params=WIRES)
async def aclient(daemon: Daemon, request: pytest.FixtureRequest) -> AsyncIterator[AsyncClient]:
    """A client of the shared daemon on each wire in turn."""
    async with AsyncClient(daemon.target_of(request.param), timeout=RPC_TIMEOUT) as c:
        yield c


class Recorder(NamedTuple):
    tool: str  # the qualified name of its wait tool
    record: Path  # the file it records to


@pytest_asyncio.fixture
async def recorder(aclient: AsyncClient, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Recorder]:
    """Connects recording_server.py under a name of its own (the daemon is
    shared) and disconnects it after the test."""
    name = "rec-" + "".join(c if c.isalnum() else "-" for c in request.node.name)[-40:].strip("-")
    record = tmp_path / "record.txt"
    record.touch()
    s = await aclient.connect_server(ServerConfig.stdio(name, sys.executable, [str(RECORDING_SERVER)], env={"RECORD_FILE": str(record)}))
    assert s.ready, f"recording server: {s.state} {s.last_error}"
    try:
        yield Recorder(f"mcp__{name}__wait", record)
    finally:
        await aclient.disconnect_server(name)


def read_record(record: Path) -> str:
    # A few bytes from a local file: not worth a thread.
    return record.read_text()


async def lines_of(record: Path, prefix: str, count: int = 1) -> List[str]:
    """Waits until record has count lines starting with prefix."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + POLL_TIMEOUT
    while True:
        text = read_record(record)
        lines = [line for line in text.splitlines() if line.startswith(prefix)]
        if len(lines) >= count:
            return lines
        if loop.time() > deadline:
            pytest.fail(f"{record} has no {prefix!r} line after {POLL_TIMEOUT}s: {text!r}")
        await asyncio.sleep(0.02)


@pytest.mark.asyncio
async def test_call_and_stream(aclient: AsyncClient) -> None:
    result = await aclient.call_tool("mcp__demo__add", {"a": 2, "b": 3})
    assert result.text == "5" and result.structured == {"sum": 5}
    items = [item async for item in aclient.call_tool_stream("mcp__demo__slow", {"steps": 3, "delay_ms": 10})]
    assert [type(i) for i in items] == [Progress, Progress, Progress, ToolResult], items
    assert isinstance(items[-1], ToolResult) and items[-1].text == "done after 3 steps"


@pytest.mark.asyncio
async def test_concurrent_calls(aclient: AsyncClient) -> None:
    results = await asyncio.gather(*(aclient.call_tool("mcp__demo__echo", {"message": str(i)}) for i in range(32)))
    assert [r.text for r in results] == [str(i) for i in range(32)]


@pytest.mark.asyncio
async def test_cancelled_task_cancels_call_upstream(aclient: AsyncClient, recorder: Recorder) -> None:
    task = asyncio.create_task(aclient.call_tool(recorder.tool))
    (called,) = await lines_of(recorder.record, "called ")
    task.cancel()
    # The task ends as asyncio cancels tasks: with CancelledError.
    with pytest.raises(asyncio.CancelledError):
        await task
    (cancelled,) = await lines_of(recorder.record, "cancelled ")
    assert cancelled.split()[1] == called.split()[1], (called, cancelled)


@pytest.mark.asyncio
async def test_timeout_cancels_call_upstream(aclient: AsyncClient, recorder: Recorder) -> None:
    with pytest.raises((asyncio.TimeoutError, mcpd_grpc.DeadlineExceeded)):
        await asyncio.wait_for(aclient.call_tool(recorder.tool), timeout=0.5)
    (called,) = await lines_of(recorder.record, "called ")
    (cancelled,) = await lines_of(recorder.record, "cancelled ")
    assert cancelled.split()[1] == called.split()[1], (called, cancelled)


@pytest.mark.asyncio
async def test_cancelled_stream_task_cancels_call_upstream(aclient: AsyncClient, recorder: Recorder) -> None:
    async def consume() -> None:
        async for _ in aclient.call_tool_stream(recorder.tool):
            pass

    task = asyncio.create_task(consume())
    (called,) = await lines_of(recorder.record, "called ")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (cancelled,) = await lines_of(recorder.record, "cancelled ")
    assert cancelled.split()[1] == called.split()[1], (called, cancelled)
    # The daemon and the client are fine afterwards.
    assert (await aclient.call_tool("mcp__demo__echo", {"message": "after"})).text == "after"


T = TypeVar("T")

_OTHER_LOOP = "belongs to the event loop it was first used in"


def _run_in_new_loop(coro: Awaitable[T]) -> T:
    # Not asyncio.run, which leaves no current loop behind: pytest-asyncio on
    # Python 3.9 then makes one for the next test that nobody closes.
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


async def _add(c: AsyncClient) -> str:
    return (await c.call_tool("mcp__demo__add", {"a": 2, "b": 3})).text


async def _stream(c: AsyncClient) -> List[object]:
    return [item async for item in c.call_tool_stream("mcp__demo__slow", {"steps": 1, "delay_ms": 1})]


async def _first_event(c: AsyncClient) -> None:
    async for _ in c.subscribe(reconnect=False):
        return


@pytest.mark.parametrize("wire", WIRES)
def test_created_outside_a_loop_belongs_to_the_loop_that_first_uses_it(daemon: Daemon, wire: str) -> None:
    c = AsyncClient(daemon.target_of(wire), timeout=RPC_TIMEOUT)
    first = asyncio.new_event_loop()
    try:
        assert first.run_until_complete(_add(c)) == "5"
        # Any other loop gets a clear error, at call time, on both wires.
        for use in (_add, _stream, _first_event, lambda c: c.close()):
            with pytest.raises(RuntimeError, match=_OTHER_LOOP) as caught:
                _run_in_new_loop(use(c))
            assert "create the AsyncClient inside the running loop" in str(caught.value)
        # The client's own loop goes on using it, and closes it.
        assert first.run_until_complete(_add(c)) == "5"
        first.run_until_complete(c.close())
    finally:
        first.close()


@pytest.mark.parametrize("wire", WIRES)
def test_created_in_one_loop_and_used_in_another(daemon: Daemon, wire: str) -> None:
    async def create() -> AsyncClient:
        return AsyncClient(daemon.target_of(wire), timeout=RPC_TIMEOUT)

    first = asyncio.new_event_loop()
    try:
        c = first.run_until_complete(create())
        with pytest.raises(RuntimeError, match=_OTHER_LOOP):
            _run_in_new_loop(_add(c))
        first.run_until_complete(c.close())
    finally:
        first.close()
