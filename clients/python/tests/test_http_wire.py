"""The HTTP wire's HTTP/1.1 against a scripted server on loopback, for
what mcpd's own server seldom or never does: a connection it closes while
idle, one reset in the middle of an answer, a body cut short, interim
answers, chunked bodies with trailers. Each case runs on the sync Client
and the AsyncClient."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import struct
import sys
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

import mcpd_grpc
from conftest import run_async
from mcpd_grpc import AsyncClient, Client
from mcpd_grpc.mcpd.v1 import mcpd_pb2 as pb

WIRES = ["sync", "async"]

ANSWER = pb.CallToolResponse(content=[pb.Content(text=pb.TextContent(text="ok"))]).SerializeToString()
OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/proto\r\nContent-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)
#: An empty message: the answer of any unary method.
EMPTY = b"HTTP/1.1 200 OK\r\nContent-Type: application/proto\r\nContent-Length: 0\r\n\r\n"


class Conn:
    """One accepted connection, as the script sees it."""

    def __init__(self, sock: socket.socket, server: ScriptedServer) -> None:
        self.sock = sock
        self._server = server
        self._buf = b""

    def read_request(self) -> bool:
        """Reads one request; False when the client closed the connection."""
        while b"\r\n\r\n" not in self._buf:
            data = self.sock.recv(65536)
            if not data:
                return False
            self._buf += data
        head, _, rest = self._buf.partition(b"\r\n\r\n")
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
        while len(rest) < length:
            rest += self.sock.recv(65536)
        self._buf = rest[length:]
        with self._server.lock:
            self._server.requests.append(head.split(b" ", 2)[1].decode())
        return True

    def reset(self) -> None:
        """Closes with a TCP reset."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


class ScriptedServer:
    """Accepts connections on loopback; each runs script(conn, index)."""

    def __init__(self, script: Callable[[Conn, int], None]) -> None:
        self.lock = threading.Lock()
        self.requests: List[str] = []
        self.connections = 0
        self._script = script
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._threads: List[threading.Thread] = []
        self._spawn(self._accept)

    def _spawn(self, fn: Callable[..., None], *args: object) -> None:
        th = threading.Thread(target=fn, args=args, daemon=True)
        th.start()
        self._threads.append(th)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self.lock:
                index = self.connections
                self.connections += 1
            self._spawn(self._run, Conn(sock, self), index)

    def _run(self, conn: Conn, index: int) -> None:
        try:
            self._script(conn, index)
        except OSError:
            pass
        finally:
            conn.sock.close()

    def close(self) -> None:
        self._listener.close()
        for th in self._threads[1:]:
            th.join(timeout=5)


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[Conn, int], None]], ScriptedServer]]:
    servers: List[ScriptedServer] = []

    def start(script: Callable[[Conn, int], None]) -> ScriptedServer:
        servers.append(ScriptedServer(script))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def outcome(e: mcpd_grpc.MCPDError) -> str:
    """The name of an error, and its reason if it has one, and whether it
    is retryable: "Unavailable CALL_MAY_HAVE_RUN final"."""
    return " ".join(filter(None, (type(e).__name__, e.reason, "" if e.retryable else "final")))


def calls(wire: str, url: str, n: int, between: Callable[[], object] = lambda: None, arguments: Optional[Dict[str, Any]] = None) -> List[str]:
    """n tool calls in a row on one client, between() run before each but
    the first; the text of each result, or the outcome() of its error."""

    if wire == "sync":
        out = []
        with Client(url, timeout=10) as c:
            for i in range(n):
                if i:
                    between()
                try:
                    out.append(c.call_tool("mcp__x__echo", arguments).text)
                except mcpd_grpc.MCPDError as e:
                    out.append(outcome(e))
        return out

    async def body() -> List[str]:
        out = []
        async with AsyncClient(url, timeout=10) as c:
            for i in range(n):
                if i:
                    await asyncio.to_thread(between)
                    await asyncio.sleep(0)  # the loop sees the connection's end
                try:
                    out.append((await c.call_tool("mcp__x__echo", arguments)).text)
                except mcpd_grpc.MCPDError as e:
                    out.append(outcome(e))
        return out

    return run_async(body())  # type: ignore[return-value]


@pytest.mark.parametrize("wire", WIRES)
def test_an_idle_connection_closed_by_mcpd_is_replaced(wire: str, serve: Callable[..., ScriptedServer]) -> None:
    """A pooled connection mcpd closed while idle is not used for the next
    call, a tool call here, which is never sent again."""
    closed = threading.Event()

    def script(conn: Conn, index: int) -> None:
        if conn.read_request():
            conn.sock.sendall(OK)  # kept alive by the client, then closed here
        if index > 0:
            while conn.read_request():
                conn.sock.sendall(OK)
        else:
            conn.sock.close()
            closed.set()

    server = serve(script)
    assert calls(wire, server.url, 2, between=lambda: closed.wait(10)) == ["ok", "ok"]
    assert len(server.requests) == 2 and server.connections == 2


@pytest.mark.parametrize("wire", WIRES)
def test_an_idle_connection_reset_is_replaced(wire: str, serve: Callable[..., ScriptedServer]) -> None:
    """A pooled connection a proxy reset while idle fails the next request
    before any answer: it never ran, and goes out on a new connection."""

    reset = threading.Event()

    def script(conn: Conn, index: int) -> None:
        if conn.read_request():
            conn.sock.sendall(OK)
            if index == 0:
                conn.reset()
                reset.set()
                return
        while conn.read_request():
            conn.sock.sendall(OK)

    server = serve(script)
    assert calls(wire, server.url, 2, between=lambda: reset.wait(10)) == ["ok", "ok"]
    assert len(server.requests) == 2 and server.connections == 2


def cut_after_first(conn: Conn, index: int) -> None:
    """Answers a connection's first request; reads the next one, then
    closes without a word, as a shutdown past its drain does with a call
    it ran."""
    if index == 0 and conn.read_request():
        conn.sock.sendall(OK)
        conn.read_request()
        return
    while conn.read_request():
        conn.sock.sendall(EMPTY)


def second_call(wire: str, url: str, method: str) -> str:
    """A tool call (answered), then method on the same connection: the
    second call's outcome, the name of its error if it raised."""

    def result(result: object) -> str:
        return "ok" if result is not None else "none"

    if wire == "sync":
        with Client(url, timeout=10) as c:
            c.call_tool("mcp__x__echo")
            try:
                return result(c.call_tool("mcp__x__echo") if method == "call_tool" else c.servers())
            except mcpd_grpc.MCPDError as e:
                return outcome(e)

    async def body() -> str:
        async with AsyncClient(url, timeout=10) as c:
            await c.call_tool("mcp__x__echo")
            try:
                return result(await c.call_tool("mcp__x__echo") if method == "call_tool" else await c.servers())
            except mcpd_grpc.MCPDError as e:
                return outcome(e)

    return run_async(body())  # type: ignore[return-value]


@pytest.mark.parametrize("wire", WIRES)
def test_a_tool_call_cut_unanswered_is_not_sent_again(wire: str, serve: Callable[..., ScriptedServer]) -> None:
    """A call cut off with no byte of its answer on a reused connection may
    have run: a tool call fails (UNAVAILABLE) rather than run twice, with
    reason CALL_MAY_HAVE_RUN, not retryable: nothing proves that mcpd had
    closed the connection before it read the request."""
    server = serve(cut_after_first)
    assert second_call(wire, server.url, "call_tool") == "Unavailable CALL_MAY_HAVE_RUN final"
    assert server.requests == ["/mcpd.v1.MCPHub/CallTool"] * 2 and server.connections == 1


@pytest.mark.parametrize("wire", WIRES)
def test_a_listing_cut_unanswered_is_sent_again(wire: str, serve: Callable[..., ScriptedServer]) -> None:
    """A call the proto marks free of side effects is sent again on a new
    connection: most likely mcpd closed the idle connection as it went out."""
    server = serve(cut_after_first)
    assert second_call(wire, server.url, "servers") == "ok"
    assert server.requests[1:] == ["/mcpd.v1.MCPHub/ListServers"] * 2 and server.connections == 2


def test_resendable_methods_are_those_the_proto_marks() -> None:
    from google.protobuf import descriptor_pb2

    from mcpd_grpc._http import RESENDABLE

    options = descriptor_pb2.MethodOptions
    marked = {
        m.name for m in pb.DESCRIPTOR.services_by_name["MCPHub"].methods if m.GetOptions().idempotency_level in (options.NO_SIDE_EFFECTS, options.IDEMPOTENT)
    }
    assert RESENDABLE == marked


@pytest.mark.parametrize("wire", WIRES)
def test_a_body_to_the_connections_end_is_not_reused(wire: str, serve: Callable[..., ScriptedServer]) -> None:
    """A body without a length runs to the connection's end: that
    connection is done, and the next call opens another."""

    def script(conn: Conn, index: int) -> None:
        if index == 0:
            if conn.read_request():
                conn.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/proto\r\n\r\n" + ANSWER)
            return  # closes
        while conn.read_request():
            conn.sock.sendall(OK)

    server = serve(script)
    assert calls(wire, server.url, 2) == ["ok", "ok"]
    assert server.connections == 2


@pytest.mark.parametrize("wire", WIRES)
def test_a_reset_after_the_answer_began_is_not_sent_again(wire: str, serve: Callable[..., ScriptedServer]) -> None:
    def script(conn: Conn, index: int) -> None:
        if conn.read_request():
            conn.sock.sendall(OK)
        if conn.read_request():
            conn.sock.sendall(b"HTTP/1.1 200 OK\r\n")
            conn.reset()

    server = serve(script)
    assert calls(wire, server.url, 2) == ["ok", "Unavailable CALL_MAY_HAVE_RUN final"]
    # The tool may have run: the request is not sent a second time.
    assert len(server.requests) == 2 and server.connections == 1


@pytest.mark.parametrize("wire", WIRES)
def test_a_body_cut_short_is_unavailable(wire: str, serve: Callable[..., ScriptedServer]) -> None:
    def script(conn: Conn, index: int) -> None:
        if conn.read_request():
            conn.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER[:3]))

    server = serve(script)
    assert calls(wire, server.url, 1) == ["Unavailable CALL_MAY_HAVE_RUN final"]


@pytest.mark.parametrize("wire", WIRES)
def test_a_tool_call_cut_before_its_answer_may_have_run(wire: str, serve: Callable[..., ScriptedServer]) -> None:
    """A tool call read whole on a fresh connection that then closes without
    a word (mcpd killed in the middle of the call) may have run."""

    def script(conn: Conn, index: int) -> None:
        conn.read_request()

    server = serve(script)
    assert calls(wire, server.url, 1) == ["Unavailable CALL_MAY_HAVE_RUN final"]
    assert server.requests == ["/mcpd.v1.MCPHub/CallTool"]


#: Arguments far larger than what the kernels of both ends buffer on a
#: connection whose reader reads nothing.
HUGE = {"message": "x" * (16 << 20)}


@pytest.mark.parametrize("wire", WIRES)
def test_a_tool_call_not_written_whole_never_ran(wire: str, serve: Callable[..., ScriptedServer]) -> None:
    """A tool call whose request the connection took only in part (reset
    before it read any of it) reached no handler: it is retryable."""

    def script(conn: Conn, index: int) -> None:
        conn.reset()

    server = serve(script)
    assert calls(wire, server.url, 1, arguments=HUGE) == ["Unavailable"]


@pytest.mark.parametrize("wire", WIRES)
def test_interim_answers_chunks_and_trailers(wire: str, serve: Callable[..., ScriptedServer]) -> None:
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (ANSWER[:4], ANSWER[4:]))
    answer = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked + b"0\r\nX-Trailer: yes\r\n\r\n"
    )

    def script(conn: Conn, index: int) -> None:
        while conn.read_request():
            conn.sock.sendall(answer)

    server = serve(script)
    # The second call reuses the connection: the first answer was read whole.
    assert calls(wire, server.url, 2) == ["ok", "ok"]
    assert server.connections == 1


def test_an_async_stream_is_opened_at_once(serve: Callable[..., ScriptedServer]) -> None:
    """A subscription's "from now" is when it was made, not its first read."""
    got = threading.Event()

    def script(conn: Conn, index: int) -> None:
        if conn.read_request():
            got.set()
            conn.read_request()  # until the client goes away

    server = serve(script)

    async def body() -> None:
        async with AsyncClient(server.url, timeout=10) as c:
            sub = c.subscribe(kinds=["log"], reconnect=False)
            assert await asyncio.to_thread(got.wait, 10), "the stream's request was not sent before its first read"
            sub.close()
            assert [e async for e in sub] == []

    run_async(body())
    assert server.requests == ["/mcpd.v1.MCPHub/Subscribe"]


@pytest.mark.parametrize("wire", WIRES)
def test_a_connection_the_kernel_gave_up_on_is_unavailable(wire: str, serve: Callable[..., ScriptedServer], monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection the kernel gave up on (TCP keepalive probes or sent
    bytes left unanswered) fails its reads with ETIMEDOUT, a TimeoutError
    like the socket's own timeout from Python 3.10: the call raises
    Unavailable, as for any connection that broke, not DeadlineExceeded
    (a tool call sent on it may have run), and a subscription reconnects."""
    from mcpd_grpc import _http, _http_aio

    def script(conn: Conn, index: int) -> None:
        while conn.read_request():
            pass  # no answer: the client's reads fail first

    def dead(*args: object) -> None:
        raise TimeoutError(errno.ETIMEDOUT, os.strerror(errno.ETIMEDOUT))

    monkeypatch.setattr(_http.Connection if wire == "sync" else _http_aio.Connection, "read_head", dead)
    server = serve(script)
    assert calls(wire, server.url, 1) == ["Unavailable CALL_MAY_HAVE_RUN final"]

    if wire == "sync":
        with Client(server.url, timeout=10) as c:
            with pytest.raises(mcpd_grpc.Unavailable):
                next(c.subscribe(kinds=["log"], reconnect=False))
        return

    async def body() -> None:
        async with AsyncClient(server.url, timeout=10) as c:
            with pytest.raises(mcpd_grpc.Unavailable):
                await c.subscribe(kinds=["log"], reconnect=False).__anext__()

    run_async(body())


#: The socket options of TCP keepalive, by name, where Linux has them.
KEEPALIVE_OPTIONS = [
    (socket.SOL_SOCKET, "SO_KEEPALIVE"),
    *((socket.IPPROTO_TCP, name) for name in ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT", "TCP_USER_TIMEOUT")),
]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the TCP keepalive options checked are Linux's")
@pytest.mark.parametrize("wire", WIRES)
def test_tcp_keepalive(wire: str, serve: Callable[..., ScriptedServer]) -> None:
    """keepalive= turns on the kernel's TCP keepalive on the connections:
    three probes after keepalive seconds of quiet, spread over as long
    again (at most 20 s), and the connection ends when none is answered."""

    def script(conn: Conn, index: int) -> None:
        while conn.read_request():
            conn.sock.sendall(OK)

    server = serve(script)

    def options(sock: socket.socket) -> Dict[str, int]:
        return {name: sock.getsockopt(level, getattr(socket, name)) for level, name in KEEPALIVE_OPTIONS}

    def pooled_connection_options(**kwargs: object) -> Dict[str, int]:
        """The options of the connection a call leaves in the pool."""
        if wire == "sync":
            with Client(server.url, timeout=10, **kwargs) as c:  # type: ignore[arg-type]
                assert c.call_tool("mcp__x__echo").text == "ok"
                return options(c._stub._idle[0]._sock)

        async def body() -> Dict[str, int]:
            async with AsyncClient(server.url, timeout=10, **kwargs) as c:  # type: ignore[arg-type]
                assert (await c.call_tool("mcp__x__echo")).text == "ok"
                return options(c._stub._idle[0]._writer.get_extra_info("socket"))

        return run_async(body())  # type: ignore[return-value]

    want = {"SO_KEEPALIVE": 1, "TCP_KEEPIDLE": 30, "TCP_KEEPINTVL": 7, "TCP_KEEPCNT": 3, "TCP_USER_TIMEOUT": 50_000}
    assert pooled_connection_options() == want, "the default, keepalive=30"
    want = {"SO_KEEPALIVE": 1, "TCP_KEEPIDLE": 7, "TCP_KEEPINTVL": 3, "TCP_KEEPCNT": 3, "TCP_USER_TIMEOUT": 14_000}
    assert pooled_connection_options(keepalive=7) == want
    assert pooled_connection_options(keepalive=None)["SO_KEEPALIVE"] == 0
