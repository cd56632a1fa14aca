"""AsyncClient streams under asyncio's ways of giving up: a read that times
out (asyncio.wait_for) leaves a subscription that goes on, and a stream
left by a break out of `async for` closes its connection. And the HTTP
wire's retry of a request that a reset idle connection never ran."""

from __future__ import annotations

import asyncio
import gc
import os
import queue
import socket
import struct
import sys
import threading
import time
import warnings
from typing import Any, List, Optional

import pytest

import mcpd_grpc
from conftest import RPC_TIMEOUT, WIRES, Daemon
from mcpd_grpc import AgentTools, AsyncClient, EventKind, Progress, ServerConfig, ServerState
from mcpd_grpc.mcpd.v1 import mcpd_pb2 as pb


def open_sockets() -> int:
    """The sockets this process has open."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass  # closed since the listing
    return count


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.asyncio
async def test_timed_out_read_leaves_the_subscription_going(daemon: Daemon, mcpd_bin: str, wire: str) -> None:
    name = f"timed-out-read-{wire}"
    async with AsyncClient(daemon.target_of(wire), timeout=RPC_TIMEOUT) as c:
        sub = c.subscribe(servers=[name], kinds=[EventKind.SERVER_STATE])

        async def reads() -> Any:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(sub.__anext__(), 0.3)  # no events yet
            await c.connect_server(ServerConfig.stdio(name, mcpd_bin, ["demo-server"]))
            return await sub.__anext__()

        reader = asyncio.create_task(reads())
        try:
            done, _ = await asyncio.wait({reader}, timeout=RPC_TIMEOUT)
            assert reader in done, "no event after the timed-out read"
            assert not reader.cancelled(), "the reading task was cancelled though nobody cancelled it"
            ev = reader.result()
            assert (ev.kind, ev.server, ev.state) == (EventKind.SERVER_STATE, name, ServerState.CONNECTING)
            assert sub.reconnects == 0
        finally:
            reader.cancel()
            sub.close()
            await c.disconnect_server(name)


class ScriptedCall:
    """A Subscribe call that hands out the messages a test gives it. Like
    grpc.aio's, a message its read took is gone if that read is cancelled."""

    def __init__(self) -> None:
        self.pending: Optional[asyncio.Future[Any]] = None
        self.reading = asyncio.Event()

    async def read(self) -> Any:
        self.pending = asyncio.get_running_loop().create_future()
        self.reading.set()
        return await self.pending

    def cancel(self) -> None:
        if self.pending is not None:
            self.pending.cancel()


@pytest.mark.asyncio
async def test_message_read_as_the_reader_is_cancelled_comes_next() -> None:
    # The event arrives and the read is cancelled in the same turn of the
    # loop: the next __anext__ must return it. No daemon: gRPC connects
    # lazily, and the stub hands out a scripted call.
    async with AsyncClient("127.0.0.1:1") as c:
        call = ScriptedCall()

        class Stub:
            def Subscribe(self, *args: object, **kwargs: object) -> ScriptedCall:
                return call

        c._wire_stub = Stub()
        sub = c.subscribe()
        first = asyncio.create_task(sub.__anext__())
        await asyncio.wait_for(call.reading.wait(), 5)
        assert call.pending is not None
        call.pending.set_result(pb.SubscribeResponse(event=pb.Event(sequence=7, server="s", tools_changed=pb.ListChanged())))
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        ev = await asyncio.wait_for(sub.__anext__(), 5)
        assert (ev.sequence, ev.kind) == (7, EventKind.TOOLS_CHANGED)
        sub.close()


@pytest.mark.asyncio
async def test_abandoned_http_streams_close_their_connections(daemon: Daemon) -> None:
    n = 8
    async with AsyncClient(daemon.http_target, timeout=RPC_TIMEOUT) as c:
        await c.servers()  # the unary pool's connection, kept
        gc.collect()  # earlier tests' garbage warns of its own things, not of these streams
        before = open_sockets()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            for _ in range(n):
                async for _ev in c.subscribe(kinds=[EventKind.SERVER_STATE], after_sequence=0):
                    break
                async for _item in c.call_tool_stream("mcp__demo__slow", {"steps": 100, "delay_ms": 100}):
                    break
            gc.collect()
            await asyncio.sleep(0.1)  # the transports' closing callbacks
        # Python 3.9 and 3.10 keep such a connection open; from 3.11 the
        # StreamWriter closes it when collected, with a ResourceWarning.
        assert open_sockets() - before <= 0, f"{open_sockets() - before} of {2 * n} abandoned streams kept their connections"
        unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
        assert not unclosed, unclosed


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.asyncio
async def test_abandoned_subscription_after_timed_out_read_ends_its_call(daemon: Daemon, wire: str) -> None:
    # The read under way outlives the timeout; when the subscription is
    # dropped, its call must not stay open with it.
    async with AsyncClient(daemon.target_of(wire), timeout=RPC_TIMEOUT) as c:
        await c.servers()
        before = open_sockets()
        reads: List[Any] = []
        for _ in range(4):
            sub = c.subscribe(servers=["no-such-server"])
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(sub.__anext__(), 0.1)
            reads.append(sub._reading)
            del sub
        gc.collect()
        done, _ = await asyncio.wait(reads, timeout=RPC_TIMEOUT)
        assert len(done) == len(reads), "a dropped subscription's read is still under way"
        await asyncio.sleep(0.1)
        assert open_sockets() - before <= 0


class ResettingServer:
    """An HTTP server that answers ListServers on each connection it
    accepts, then keeps the connection idle until the test has it reset
    (an RST, as proxies and load balancers do to idle connections)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.target = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._conns: queue.Queue[socket.socket] = queue.Queue()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        body = pb.ListServersResponse(servers=[pb.Server(name="x")]).SerializeToString()
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            with conn.makefile("rb") as f:
                while f.readline() not in (b"\r\n", b""):
                    pass
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/proto\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            self._conns.put(conn)

    def reset_one(self) -> None:
        conn = self._conns.get(timeout=RPC_TIMEOUT)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()

    def close(self) -> None:
        self._listener.close()
        while not self._conns.empty():
            self._conns.get().close()


@pytest.mark.asyncio
async def test_request_on_reset_idle_connection_is_retried() -> None:
    server = ResettingServer()
    try:
        async with AsyncClient(server.target, timeout=RPC_TIMEOUT) as c:
            assert [s.name for s in await c.servers()] == ["x"]
            # Reset the pooled connection without letting the loop run: the
            # client takes it as usable, and the request fails as it goes
            # out. It never ran, so it goes out again on a new connection.
            server.reset_one()
            time.sleep(0.05)  # noqa: ASYNC251 - the loop must not see the reset before the call
            assert [s.name for s in await c.servers()] == ["x"]
    finally:
        server.close()


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.asyncio
async def test_tool_stream_read_after_a_timed_out_read_raises_cancelled(daemon: Daemon, wire: str) -> None:
    # A read that times out ends a tool call's stream: its call is
    # cancelled, on both wires. The next read says so with Cancelled, as
    # after cancel(), not with asyncio.CancelledError in a task that nobody
    # cancelled.
    async with AsyncClient(daemon.target_of(wire), timeout=RPC_TIMEOUT) as c:
        stream = c.call_tool_stream("mcp__demo__slow", {"steps": 100, "delay_ms": 2000})
        assert isinstance(await stream.__anext__(), Progress)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(stream.__anext__(), 0.05)
        err: Optional[BaseException] = None
        try:
            await stream.__anext__()
        except BaseException as e:  # noqa: BLE001 - CancelledError is what is checked for
            err = e
        assert isinstance(err, mcpd_grpc.Cancelled), f"got {err!r}"


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.asyncio
async def test_close_during_a_unary_call_cancels_no_task(daemon: Daemon, wire: str) -> None:
    # Like the sync Client (Cancelled: "Channel closed!"): a call that
    # close() cuts short raises Cancelled, or completes; the task that
    # awaited it is not cancelled (it would cancel whoever awaits it).
    c = AsyncClient(daemon.target_of(wire), timeout=RPC_TIMEOUT)
    task = asyncio.ensure_future(c.call_tool("mcp__demo__slow", {"steps": 20, "delay_ms": 100}))
    await asyncio.sleep(0.3)
    assert not task.done()
    await c.close()
    done, _ = await asyncio.wait({task}, timeout=RPC_TIMEOUT)
    assert task in done
    assert not task.cancelled(), "close() cancelled the task that awaited a call"
    err = task.exception()
    assert err is None or isinstance(err, mcpd_grpc.Cancelled), f"got {err!r}"


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.asyncio
async def test_async_subscription_closed_from_another_thread_ends(daemon: Daemon, wire: str) -> None:
    # README, Events: "close() ends the iteration from any thread (async
    # for over AsyncClient.subscribe works the same)".
    async with AsyncClient(daemon.target_of(wire), timeout=RPC_TIMEOUT) as c:
        sub = c.subscribe(servers=["no-such-server"])
        timer = threading.Timer(0.2, sub.close)
        timer.start()

        async def drain() -> None:
            async for _ in sub:
                pass

        task = asyncio.ensure_future(drain())
        try:
            done, _ = await asyncio.wait({task}, timeout=5)
            assert task in done, "close() from another thread did not end the iteration within 5s"
            task.result()
        finally:
            task.cancel()
            timer.join()


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.asyncio
async def test_closed_async_client_raises_value_error(daemon: Daemon, wire: str) -> None:
    # As the sync Client on both wires, and the AsyncClient on HTTP.
    c = AsyncClient(daemon.target_of(wire), timeout=RPC_TIMEOUT)
    await c.close()
    with pytest.raises(ValueError):
        await c.servers()
    with pytest.raises(ValueError):
        await c.call_tool_stream("mcp__demo__add", {"a": 1, "b": 2}).__anext__()
    with pytest.raises(ValueError):
        await c.serve_tools(AgentTools("pyclosed"))
    with pytest.raises(ValueError):
        await c.handlers_ready(0)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio tells a task's own cancellation (Task.cancelling) from 3.11")
@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.asyncio
async def test_cancelling_a_task_whose_subscription_closes_cancels_it(daemon: Daemon, wire: str) -> None:
    # Shutting down (AsyncClient.close, then cancelling the consumers, in
    # one turn of the loop): the consumer's cancellation must not become
    # the end of its `async for`, after which it would go on.
    async with AsyncClient(daemon.target_of(wire), timeout=RPC_TIMEOUT) as c:
        sub = c.subscribe(servers=["no-such-server"])
        went_on = asyncio.Event()

        async def consume() -> None:
            async for _ in sub:
                pass
            went_on.set()
            await asyncio.sleep(RPC_TIMEOUT)

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.2)
        sub.close()
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=5)
        assert not went_on.is_set(), "the cancelled task went on after its `async for`"
        assert task in done and task.cancelled()
