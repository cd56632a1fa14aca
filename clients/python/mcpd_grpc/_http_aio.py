"""The HTTP wire for asyncio: the calls of :mod:`mcpd_grpc._http` on
asyncio streams, for an :class:`~mcpd_grpc.AsyncClient` with an
``http://``, ``https://`` or ``http+unix://`` target. Unary calls share a
pool of keep-alive connections (one per concurrent call, kept for the
next); each server stream has a connection of its own, opened at once.

Cancelling the task that awaits a call closes the call's connection, and
mcpd cancels the call upstream when its client goes away; so does
dropping the last reference to a server stream. A server stream's
``read()`` returns :data:`EOF` at the stream's clean end, like grpc.aio's
``call.read()``.
"""

from __future__ import annotations

import asyncio
import sys
import weakref
from typing import Any, Awaitable, Callable, Dict, Optional, Sequence, Tuple, TypeVar

from ._http import (
    END_OF_TRAILERS,
    ENVELOPE_HEAD,
    HTTP2_FRAME_START,
    MAX_HEADERS,
    MAX_LINE,
    READ_GRACE,
    RESENDABLE,
    STREAM_BROKE,
    TOOL_CALLS,
    TRUNCATED,
    Closed,
    StubBase,
    add_header,
    broke,
    chunk_size,
    envelope,
    envelope_size,
    error_of,
    interim,
    set_options,
    speaks_http2,
    status_of,
    stream_broke,
    stream_cut,
    stream_message,
    unreachable,
)
from .errors import Cancelled, DeadlineExceeded, MCPDError

#: What a server stream's read() returns at the stream's clean end.
EOF: object = object()

T = TypeVar("T")

_LATE = "the call's deadline passed before mcpd answered"


class AsyncHTTPStub(StubBase["Connection"]):
    """Calls MCPHub's methods over HTTP from one event loop: ``await
    stub.Method(request, metadata=, timeout=)`` for a unary call,
    ``stub.Method(...)`` an :class:`AsyncServerStream` for a server
    stream. Failures raise :class:`~mcpd_grpc.MCPDError`. Its pool needs
    no lock: everything runs on the loop's thread."""

    def _unary_method(self, path: str, out: Any) -> Callable[..., Any]:
        resendable = path.rsplit("/", 1)[-1] in RESENDABLE
        tool_call = path.rsplit("/", 1)[-1] in TOOL_CALLS

        async def unary(request: Any, metadata: Sequence[Tuple[str, str]] = (), timeout: Optional[float] = None) -> Any:
            return await self._unary(path, out, request, metadata, timeout, resendable, tool_call)

        return unary

    def _stream_method(self, path: str, out: Any) -> Callable[..., Any]:
        def stream(request: Any, metadata: Sequence[Tuple[str, str]] = (), timeout: Optional[float] = None) -> AsyncServerStream:
            if self._closed:
                raise ValueError("the client is closed")
            s = AsyncServerStream(self, path, out, request, metadata, timeout)
            self._streams.add(s)
            return s

        return stream

    def close(self) -> None:
        """Closes the idle connections and cancels the open streams; a
        unary call under way closes its connection when it ends."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        for s in list(self._streams):
            s.cancel()

    async def connect(self) -> Connection:
        if self._unix is not None:
            reader, writer = await asyncio.open_unix_connection(self._unix, limit=MAX_LINE)
        else:
            # asyncio sets TCP_NODELAY on its TCP connections.
            server_hostname = self._host if self._ssl is not None else None
            reader, writer = await asyncio.open_connection(self._host, self._port, ssl=self._ssl, server_hostname=server_hostname, limit=MAX_LINE)
            set_options(writer.get_extra_info("socket"), self._sockopts)
        return Connection(reader, writer)

    def _take_idle(self) -> Optional[Connection]:
        """An idle connection that mcpd has not closed, if there is one."""
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                return conn
            conn.close()
        return None

    async def _unary(
        self, path: str, out: Any, request: Any, metadata: Sequence[Tuple[str, str]], timeout: Optional[float], resendable: bool, tool_call: bool
    ) -> Any:
        body = request.SerializeToString()
        data = self.request_head(path, "application/proto", metadata, timeout, len(body)) + body
        deadline = _deadline(timeout)
        while True:
            if self._closed:
                raise ValueError("the client is closed")
            conn = self._take_idle()
            reused = conn is not None
            try:
                if conn is None:
                    conn = await bounded(self.connect(), deadline, _LATE)
            except OSError as e:
                raise unreachable(self, e) from e
            try:
                status, headers, answer = await bounded(conn.exchange(data), deadline, _LATE)
            except (Closed, ConnectionResetError, BrokenPipeError) as e:
                conn.close()
                # Resent: a read, most likely on a connection mcpd closed
                # while it was idle (see RESENDABLE). A tool call on one is
                # not: the request went out, and nothing proves that mcpd did
                # not read it.
                if reused and not conn.answered and resendable:
                    continue
                raise broke(self, e, tool_call and conn.sent) from e
            except (OSError, ValueError, EOFError) as e:
                conn.close()
                raise broke(self, e, tool_call and conn.sent) from e
            except BaseException:
                # A cancelled task among them: closing the connection is what
                # makes mcpd cancel the call upstream.
                conn.close()
                raise
            for c in self._pool(conn) if conn.reusable(headers) and not self._closed else [conn]:
                c.close()
            if status != 200:
                raise error_of(status, answer)
            msg = out()
            msg.ParseFromString(answer)
            return msg


def _deadline(timeout: Optional[float]) -> Optional[float]:
    """The loop time by which a call with this deadline gives up waiting
    for mcpd: its deadline and a grace, so that mcpd's own
    DEADLINE_EXCEEDED, with its message, comes first."""
    if timeout is None:
        return None
    return asyncio.get_running_loop().time() + timeout + READ_GRACE


if sys.version_info >= (3, 11):

    async def bounded(aw: Awaitable[T], deadline: Optional[float], what: str) -> T:
        """Awaits aw until the loop time deadline (None: no limit);
        DeadlineExceeded after that."""
        if deadline is None:
            return await aw
        timeout = asyncio.timeout_at(deadline)
        try:
            async with timeout:
                return await aw
        except TimeoutError as e:
            if timeout.expired():
                raise DeadlineExceeded(what) from e
            raise  # a socket's own ETIMEDOUT

else:

    async def bounded(aw: Awaitable[T], deadline: Optional[float], what: str) -> T:
        """Awaits aw until the loop time deadline (None: no limit);
        DeadlineExceeded after that."""
        if deadline is None:
            return await aw
        try:
            return await asyncio.wait_for(aw, deadline - asyncio.get_running_loop().time())
        except asyncio.TimeoutError as e:  # not the builtin TimeoutError before 3.11
            raise DeadlineExceeded(what) from e


class Connection:
    """One HTTP/1.1 connection on asyncio streams."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self._writer = writer
        self._loop = asyncio.get_running_loop()
        self._to_eof = False  # the last body ran to the connection's end
        #: Whether a byte of the last response came (see _http.Connection).
        self.answered = False
        #: Whether the last request was written (see _http.Connection): a
        #: drain that fails means the transport lost the connection with
        #: the request not written whole.
        self.sent = False
        #: Whether a response head was read (only the first is checked for HTTP/2).
        self._first_head_read = False
        #: When the pool last took it back.
        self.idle_since = 0.0

    async def send(self, data: bytes) -> None:
        # A failure from here on, before a byte of the answer, means the
        # request never ran: the previous response's answer must not count.
        self.answered = False
        self.sent = False
        self._writer.write(data)
        await self._writer.drain()
        self.sent = True

    async def exchange(self, data: bytes) -> Tuple[int, Dict[str, str], bytes]:
        """Sends a request; the response's status, headers and body."""
        await self.send(data)
        status, headers = await self.read_head()
        return status, headers, await self.read_body(headers)

    async def read_head(self) -> Tuple[int, Dict[str, str]]:
        """The status and the headers (names in lower case) of a response."""
        self.answered = False
        first = b""
        if not self._first_head_read:
            self._first_head_read = True
            first = await self.reader.read(1)
            if first == HTTP2_FRAME_START:
                raise speaks_http2()
        while True:
            # The byte read above begins the status line, unless it ended it.
            line = first if first == b"\n" else first + await self.reader.readline()
            first = b""
            self.answered = self.answered or bool(line)
            status = status_of(line)
            headers: Dict[str, str] = {}
            for _ in range(MAX_HEADERS + 1):
                if add_header(headers, await self.reader.readline()):
                    break
            else:
                raise ValueError("too many response headers")
            if not interim(status):
                return status, headers

    async def read_body(self, headers: Dict[str, str]) -> bytes:
        """The whole body of a response."""
        body = Body(self.reader, headers)
        out = await body.read(None)
        if body.incomplete:
            raise Closed(TRUNCATED)
        self._to_eof = body.length_unknown
        return out

    def reusable(self, headers: Dict[str, str]) -> bool:
        return not self._to_eof and headers.get("connection", "").lower() != "close"

    def usable(self) -> bool:
        """Whether an idle connection is still open at both ends."""
        return not self.reader.at_eof() and not self._writer.is_closing()

    def close(self) -> None:
        self._writer.close()

    def close_abandoned(self) -> None:
        """Closes the connection of a stream nobody holds any more, from its
        finalizer: nothing there may await, and a closed loop has closed
        its sockets already."""
        if not self._loop.is_closed():
            self._writer.close()


async def _read_upto(reader: asyncio.StreamReader, n: int) -> bytes:
    """n bytes, fewer only at the connection's end."""
    try:
        return await reader.readexactly(n)
    except asyncio.IncompleteReadError as e:
        return e.partial


class Body:
    """A response's body: Content-Length, chunked, or to the connection's
    end."""

    def __init__(self, reader: asyncio.StreamReader, headers: Dict[str, str]) -> None:
        self._reader = reader
        self._chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        length = None if self._chunked else headers.get("content-length")
        self._left: Optional[int] = int(length) if length is not None else None
        self.length_unknown = not self._chunked and length is None
        self._eof = False

    @property
    def incomplete(self) -> bool:
        """Whether the connection ended before the body did."""
        return not self._eof if self._chunked else bool(self._left)

    async def read(self, n: Optional[int]) -> bytes:
        """Up to n bytes (None: all), fewer only at the body's end."""
        if self._chunked:
            return await self._read_chunked(n)
        if self._left is None:
            return await (self._reader.read() if n is None else _read_upto(self._reader, n))
        data = await _read_upto(self._reader, self._left if n is None else min(n, self._left))
        self._left -= len(data)
        return data

    async def _read_chunked(self, n: Optional[int]) -> bytes:
        out = bytearray()
        while (n is None or len(out) < n) and not self._eof:
            if not self._left:
                line = await self._reader.readline()
                if not line:
                    break
                self._left = chunk_size(line)
                if self._left == 0:
                    while await self._reader.readline() not in END_OF_TRAILERS:
                        pass
                    self._eof = True
                    break
            assert self._left is not None
            data = await _read_upto(self._reader, self._left if n is None else min(self._left, n - len(out)))
            if not data:
                break
            out += data
            self._left -= len(data)
            if self._left == 0:
                await self._reader.readline()  # the chunk's CRLF
        return bytes(out)


class AsyncServerStream:
    """One server stream on its own connection. The request goes out at
    once (inside a running loop; otherwise at the first ``read()``): a
    subscription's "from now" is when it was made. Each ``await read()``
    returns the next message, or :data:`EOF` at the end; it raises
    MCPDError when the stream ends with an error. ``cancel()`` closes the
    connection."""

    def __init__(self, stub: AsyncHTTPStub, path: str, out: Any, request: Any, metadata: Sequence[Tuple[str, str]], timeout: Optional[float]) -> None:
        self._stub = stub
        self._out = out
        self._timeout = timeout
        body = envelope(request)
        self._request = stub.request_head(path, "application/connect+proto", metadata, timeout, len(body)) + body
        self._conn: Optional[Connection] = None
        self._body: Optional[Body] = None
        self._headers: Dict[str, str] = {}
        self._cancelled = False
        self._done = False
        #: Whether the stream runs a tool (see _http.broke()).
        self._tool_call = path.rsplit("/", 1)[-1] in TOOL_CALLS
        self._opening: Optional[asyncio.Task[Optional[BaseException]]] = None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._opening = loop.create_task(self._open())

    async def initial_metadata(self) -> Tuple[Tuple[str, str], ...]:
        """The response headers read so far (names in lower case), as
        grpc.aio's call gives them; empty before the first read."""
        return tuple(self._headers.items())

    def cancel(self) -> None:
        self._cancelled = True
        if self._opening is not None:
            self._opening.cancel()
        self._finish()

    def _finish(self) -> None:
        self._done = True
        if self._conn is not None:
            self._conn.close()

    def _is_cancelled(self) -> bool:
        # A method, not the attribute: cancel() may set it while read()
        # awaits, and type checkers keep an attribute narrowed across awaits.
        return self._cancelled

    async def _open(self) -> Optional[BaseException]:
        """Connects and sends the request; the error (kept for the first
        read, so that no task ends with an exception nobody retrieves)."""
        try:
            conn = await bounded(self._stub.connect(), _deadline(self._timeout), _LATE)
        except OSError as e:
            return unreachable(self._stub, e)
        except MCPDError as e:
            return e
        self._conn = conn
        # A stream left by a break out of `async for` would keep its
        # connection, and mcpd the call, until the loop ends (Python 3.9
        # and 3.10; StreamWriter.__del__ closes it from 3.11).
        weakref.finalize(self, conn.close_abandoned).atexit = False
        if self._done:  # cancelled, or given up on, while connecting
            self._finish()
            return None
        try:
            await conn.send(self._request)
        except OSError as e:
            return unreachable(self._stub, e)
        return None

    async def read(self) -> Any:
        if self._cancelled:
            self._finish()
            raise Cancelled("the stream was cancelled")
        if self._done:
            return EOF
        try:
            # Each read waits up to the call's deadline, as the sync wire's
            # socket timeout does.
            msg = await bounded(self._next(), _deadline(self._timeout), "the call's deadline passed")
        except MCPDError:
            self._finish()
            raise
        except (OSError, ValueError, EOFError) as e:
            self._finish()
            if self._cancelled:
                raise Cancelled("the stream was cancelled") from e
            raise stream_broke(STREAM_BROKE, self._tool_call) from e
        except asyncio.CancelledError:
            self._finish()
            if self._is_cancelled() and not task_cancelling():
                raise Cancelled("the stream was cancelled") from None
            # The reading task was cancelled: mcpd cancels the call when its
            # connection closes, and the stream is over.
            self._cancelled = True
            raise
        except BaseException:
            self._cancelled = True
            self._finish()
            raise
        if msg is EOF:
            self._finish()
        return msg

    async def _next(self) -> Any:
        if self._opening is None:
            self._opening = asyncio.get_running_loop().create_task(self._open())
        err = await asyncio.shield(self._opening) if not self._opening.done() else self._opening.result()
        if err is not None:
            raise err
        if self._cancelled or self._conn is None:
            raise Cancelled("the stream was cancelled")
        if self._body is None:
            status, headers = await self._conn.read_head()
            if status != 200:
                raise error_of(status, await self._conn.read_body(headers))
            self._headers = headers
            self._body = Body(self._conn.reader, headers)
        head = await self._body.read(ENVELOPE_HEAD)
        if len(head) < ENVELOPE_HEAD:
            if self._cancelled:
                raise Cancelled("the stream was cancelled")
            raise stream_cut(head, self._tool_call)
        msg = stream_message(head, await self._body.read(envelope_size(head)), self._out, self._tool_call)
        return EOF if msg is None else msg


def task_cancelling() -> bool:
    """Whether the current task is being cancelled (Python 3.11 and later
    can tell; before, a CancelledError after our own cancel() counts as
    ours)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling()) if cancelling is not None else False
