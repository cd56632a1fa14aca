"""The HTTP wire: mcpd's API as the Connect protocol over HTTP/1.1
(``mcpd --http-listen``, docs/http.md), with nothing but the standard
library and protobuf. Unary calls are binary protobuf POSTs
(``application/proto``) over pooled keep-alive connections; server
streams are ``application/connect+proto`` envelopes, one connection each.

HTTP/1.1 is spoken on the socket directly rather than with http.client:
mcpd's answers are simple (a status, a few headers, a body of known
length or chunks), and http.client's header parsing (the email package)
costs tens of microseconds per call and milliseconds to import.

It offers the generated stub's calling convention (``stub.Method(request,
metadata=, timeout=)``), so the Client's code is the same on both wires;
failures raise :class:`~mcpd_grpc.MCPDError` directly.
"""

from __future__ import annotations

import math
import select
import socket
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, Generic, List, Optional, Protocol, Sequence, Tuple, TypeVar, Union

from . import _common
from .errors import Cancelled, DeadlineExceeded, MCPDError, Unavailable, call_cut_off, from_connect_error
from .mcpd.v1 import mcpd_pb2 as pb

if TYPE_CHECKING:
    import ssl

_SERVICE = "/mcpd.v1.MCPHub/"
_SERVER_STREAMS = frozenset({"CallToolStream", "Subscribe"})
#: The methods that run a tool: one whose connection broke after its request
#: went out may have run it (see broke()).
TOOL_CALLS = frozenset({"CallTool", "CallToolStream"})
_BIDI_STREAMS = frozenset({"HandleServerRequests", "ServeTools"})
#: The unary methods the proto marks free of side effects or idempotent
#: (tests/test_http_wire.py checks the list against it): the only ones sent
#: again after a reused connection failed before a byte of the answer came.
#: That does not prove mcpd never read the request: it answers a unary call
#: only when the call ends, so a tool call it ran and then cut off (a
#: shutdown past its drain) fails the same way, and sending it again could
#: run the tool twice.
RESENDABLE = frozenset(
    {
        "Complete",
        "GetPrompt",
        "GetServer",
        "ListPolls",
        "ListPrompts",
        "ListResourceTemplates",
        "ListResources",
        "ListServers",
        "ListTools",
        "ReadResource",
        "SearchTools",
    }
)
_ERROR_INFO = "google.rpc.ErrorInfo"
_END_STREAM = 0x02

#: The Connect code of an HTTP status, for an error without a Connect body
#: (a proxy's answer): the protocol's own table.
_CODE_OF_STATUS = {
    400: "internal",
    401: "unauthenticated",
    403: "permission_denied",
    404: "unimplemented",
    429: "unavailable",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
}

#: Socket reads wait this much longer than a call's deadline, so that mcpd's
#: DEADLINE_EXCEEDED (with its message) arrives before the client gives up.
READ_GRACE = 1.0


_UNIX_SCHEME = _common.HTTP_UNIX_SCHEME
# _MAX_TIMEOUT_MS is one past the largest Connect-Timeout-Ms: 10 digits.
_MAX_TIMEOUT_MS = 10_000_000_000


class _Pooled(Protocol):
    """What the pool of idle connections needs of one."""

    #: When it was last given back (time.monotonic()).
    idle_since: float

    def close(self) -> None: ...


C = TypeVar("C", bound=_Pooled)


def needs_grpc(what: str) -> ValueError:
    return ValueError(f"{what} needs the gRPC wire: the Connect protocol over HTTP/1.1 has no bidirectional streams; use a host:port target for this client")


class StubBase(Generic[C]):
    """What both HTTP stubs share: the address, TLS, the pool of idle
    connections (C), and the generated stub's calling convention
    (``stub.Method(request, metadata=, timeout=)``); a subclass makes the
    unary and server-stream callables."""

    def __init__(
        self,
        url: str,
        *,
        ca_file: Optional[_common.PathLike] = None,
        cert_file: Optional[_common.PathLike] = None,
        key_file: Optional[_common.PathLike] = None,
        keepalive: Optional[float] = None,
    ) -> None:
        if (cert_file is None) != (key_file is None):
            raise ValueError("cert_file= and key_file= go together (a client certificate and its key)")
        #: The Unix socket's path, for an http+unix:// target.
        self._unix: Optional[str] = None
        if url.startswith(_UNIX_SCHEME):
            scheme, host, port, path = "http", "localhost", 80, ""
            self._unix = url[len(_UNIX_SCHEME) :]
            if not self._unix.startswith("/"):
                raise ValueError(f"not an mcpd HTTP address: {url!r} (want http+unix:///absolute/path.sock)")
        else:
            scheme, host, port, path = _split_url(url)
        self._https = scheme == "https"
        if not self._https and (ca_file is not None or cert_file is not None):
            raise ValueError("ca_file=/cert_file=/key_file= need an https:// target")
        self._host = host
        self._port = port or (443 if self._https else 80)
        self._prefix = path.rstrip("/") + _SERVICE
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._host_header = f"{host}:{self._port}"
        #: The socket options of every TCP connection (none on a Unix socket).
        self._sockopts = keepalive_options(keepalive) if self._unix is None else []
        self._ssl: Optional[ssl.SSLContext] = None
        if self._https:
            import ssl  # https only: it costs milliseconds at start-up

            ctx = ssl.create_default_context(cafile=None if ca_file is None else str(ca_file))
            if cert_file is not None and key_file is not None:
                ctx.load_cert_chain(str(cert_file), str(key_file))
            self._ssl = ctx
        self._methods: Dict[str, Callable[..., Any]] = {}
        #: Kept-alive connections free for the next call.
        self._idle: List[C] = []
        self._closed = False
        #: Guards _idle and _closed where calls come from many threads.
        self._lock = threading.Lock()
        #: The server streams still open, cancelled by close().
        self._streams: weakref.WeakSet[Any] = weakref.WeakSet()

    #: Seconds a connection may stay in the pool unused: an older one is
    #: closed when a call gives one back, rather than kept half-closed (mcpd
    #: closes a connection idle for 2 minutes) until a call finds it. A
    #: burst of concurrent calls so leaves no connections behind for long.
    idle_kept = 60.0

    def _pool(self, conn: C) -> List[C]:
        """Puts conn in the pool of idle connections, and takes out those
        idle for longer than idle_kept, which the caller closes. Called
        with the lock held where there is one."""
        now = time.monotonic()
        conn.idle_since = now
        self._idle.append(conn)
        stale: List[C] = []
        while now - self._idle[0].idle_since > self.idle_kept:
            stale.append(self._idle.pop(0))
        return stale

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        fn = self._methods.get(name)
        if fn is not None:
            return fn
        method = pb.DESCRIPTOR.services_by_name["MCPHub"].methods_by_name.get(name)
        if method is None:
            raise AttributeError(name)
        if name in _BIDI_STREAMS:
            raise needs_grpc(name)
        out = getattr(pb, method.output_type.name)
        path = self._prefix + name
        fn = self._stream_method(path, out) if name in _SERVER_STREAMS else self._unary_method(path, out)
        self._methods[name] = fn
        return fn

    def _unary_method(self, path: str, out: Any) -> Callable[..., Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _stream_method(self, path: str, out: Any) -> Callable[..., Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def request_head(self, path: str, content_type: str, metadata: Sequence[Tuple[str, str]], timeout: Optional[float], length: int) -> bytes:
        lines = [
            f"POST {path} HTTP/1.1",
            f"Host: {self._host_header}",
            f"Content-Type: {content_type}",
            "Connect-Protocol-Version: 1",
            f"Content-Length: {length}",
        ]
        if timeout is not None and timeout * 1000 < _MAX_TIMEOUT_MS:
            # The Connect protocol's header holds at most 10 digits (about
            # 115 days); a longer timeout is no timeout on the wire.
            lines.append(f"Connect-Timeout-Ms: {max(1, int(timeout * 1000))}")
        for k, v in metadata:
            if "\r" in v or "\n" in v or "\r" in k or "\n" in k:
                raise ValueError("a header has a line break")
            lines.append(f"{k}: {v}")
        lines += ["", ""]
        return "\r\n".join(lines).encode("latin-1")

    def is_closed(self) -> bool:
        # A method, not the attribute: another thread may set it between
        # two reads, and type checkers keep an attribute narrowed.
        return self._closed

    def address(self) -> str:
        if self._unix is not None:
            return _UNIX_SCHEME + self._unix
        return f"{'https' if self._https else 'http'}://{self._host}:{self._port}"


class HTTPStub(StubBase["Connection"]):
    """Calls MCPHub's methods over HTTP on a pool of keep-alive connections
    (one per concurrent call, kept for the next). Thread-safe."""

    def _unary_method(self, path: str, out: Any) -> Callable[..., Any]:
        resendable = path.rsplit("/", 1)[-1] in RESENDABLE
        tool_call = path.rsplit("/", 1)[-1] in TOOL_CALLS

        def unary(request: Any, metadata: Sequence[Tuple[str, str]] = (), timeout: Optional[float] = None) -> Any:
            return self._unary(path, out, request, metadata, timeout, resendable, tool_call)

        return unary

    def _stream_method(self, path: str, out: Any) -> Callable[..., Any]:
        def stream(request: Any, metadata: Sequence[Tuple[str, str]] = (), timeout: Optional[float] = None) -> ServerStream:
            with self._lock:
                if self._closed:
                    raise ValueError("the client is closed")
            s = ServerStream(self, path, out, request, metadata, timeout)
            with self._lock:
                self._streams.add(s)
            if self.is_closed():  # close() ran while the stream was being opened
                s.cancel()
            return s

        return stream

    def close(self) -> None:
        """Closes the idle connections and cancels the open streams; a
        unary call under way closes its connection when it ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            streams = list(self._streams)
        for conn in idle:
            conn.close()
        for s in streams:
            s.cancel()

    def new_connection(self, timeout: Optional[float]) -> Connection:
        return Connection(self._host, self._port, self._ssl, timeout, self._unix, self._sockopts)

    def _take(self, timeout: Optional[float]) -> Tuple[Connection, bool]:
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if conn.dropped():
                    conn.close()
                    continue
                conn.set_timeout(timeout)
                return conn, True
        return self.new_connection(timeout), False

    def _give_back(self, conn: Connection) -> None:
        with self._lock:
            stale = [conn] if self._closed else self._pool(conn)
        for c in stale:
            c.close()

    def _unary(
        self, path: str, out: Any, request: Any, metadata: Sequence[Tuple[str, str]], timeout: Optional[float], resendable: bool, tool_call: bool
    ) -> Any:
        body = request.SerializeToString()
        head = self.request_head(path, "application/proto", metadata, timeout, len(body))
        while True:
            with self._lock:
                if self._closed:
                    raise ValueError("the client is closed")
            conn = None
            reused = False
            try:
                conn, reused = self._take(timeout)
                conn.send(head + body)
                status, headers = conn.read_head()
                data = conn.read_body(headers)
            except (Closed, ConnectionResetError, BrokenPipeError) as e:
                if conn is None:
                    raise unreachable(self, e) from e
                conn.close()
                # Resent: a read, most likely on a connection mcpd closed
                # while it was idle. A tool call on one is not: the request
                # went out, and nothing proves that mcpd did not read it.
                if reused and not conn.answered and resendable:
                    continue
                raise broke(self, e, tool_call and conn.sent) from e
            except socket.timeout as e:
                if conn is not None:
                    conn.close()
                if not deadline_passed(e):
                    raise broke(self, e, tool_call and conn is not None and conn.sent) from e
                raise DeadlineExceeded("the call's deadline passed before mcpd answered") from e
            except (OSError, ValueError) as e:
                if conn is not None:
                    conn.close()
                raise broke(self, e, tool_call and conn is not None and conn.sent) from e
            except BaseException:
                if conn is not None:
                    conn.close()
                raise
            if headers.get("connection", "").lower() == "close":
                conn.close()
            elif not conn.closed:
                self._give_back(conn)
            if status != 200:
                raise error_of(status, data)
            msg = out()
            msg.ParseFromString(data)
            return msg


class ServerStream:
    """One server stream on its own connection: iterates over the response
    messages; raises MCPDError when it ends with an error. ``cancel()``
    from any thread closes the connection."""

    def __init__(self, stub: HTTPStub, path: str, out: Any, request: Any, metadata: Sequence[Tuple[str, str]], timeout: Optional[float]) -> None:
        self._stub = stub
        self._out = out
        self._lock = threading.Lock()
        self._cancelled = False
        self._done = False
        self._body: Optional[_Body] = None
        self._headers: Dict[str, str] = {}
        self._error: Optional[BaseException] = None
        self._conn: Optional[Connection] = None
        #: Whether the stream runs a tool (see broke()).
        self._tool_call = path.rsplit("/", 1)[-1] in TOOL_CALLS
        body = envelope(request)
        try:
            # The request goes out now; the response headers may come with
            # the first message only, so they are read by the first next().
            self._conn = stub.new_connection(timeout)
            self._conn.send(stub.request_head(path, "application/connect+proto", metadata, timeout, len(body)) + body)
        except OSError as e:
            if self._conn is not None:
                self._conn.close()
            self._error = unreachable(stub, e)

    def __iter__(self) -> ServerStream:
        return self

    def initial_metadata(self) -> Tuple[Tuple[str, str], ...]:
        """The response headers read so far (names in lower case), as
        grpc's call gives them; empty before the first read."""
        return tuple(self._headers.items())

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
        if self._conn is not None:
            self._conn.shutdown()  # wakes a blocked read
            # A read under way holds the buffer's lock until the shutdown
            # ends it, so closing waits for it.
            self._conn.close()

    def __next__(self) -> Any:
        if self._error is not None:
            err, self._error = self._error, None
            self._done = True
            raise err
        if self._done:
            raise StopIteration
        try:
            return self._read()
        except (MCPDError, StopIteration):
            self._finish()
            raise
        except socket.timeout as e:
            self._finish()
            if not deadline_passed(e):
                raise stream_broke(STREAM_BROKE, self._tool_call) from e
            raise DeadlineExceeded("the call's deadline passed") from e
        except (OSError, ValueError) as e:
            self._finish()
            if self._cancelled:
                raise Cancelled("the stream was cancelled") from e
            raise stream_broke(STREAM_BROKE, self._tool_call) from e

    def _finish(self) -> None:
        self._done = True
        if self._conn is not None:
            self._conn.close()

    def _read(self) -> Any:
        if self._cancelled:
            raise Cancelled("the stream was cancelled")
        assert self._conn is not None
        resp = self._body
        if resp is None:
            status, headers = self._conn.read_head()
            if status != 200:
                raise error_of(status, self._conn.read_body(headers))
            self._headers = headers
            resp = self._body = self._conn.body_reader(headers)
        head = resp.read(ENVELOPE_HEAD)
        if len(head) < ENVELOPE_HEAD:
            if self._cancelled:
                raise Cancelled("the stream was cancelled")
            raise stream_cut(head, self._tool_call)
        data = resp.read(envelope_size(head))
        msg = stream_message(head, data, self._out, self._tool_call)
        if msg is None:
            raise StopIteration
        return msg


class Closed(ConnectionError):
    """The peer closed the connection before a response began."""


MAX_LINE = 65536
MAX_HEADERS = 100
#: What ends a chunked body's trailers (b"": the connection's end).
END_OF_TRAILERS = (b"\r\n", b"\n", b"")
#: The five bytes before each message of a stream: flags and length.
ENVELOPE_HEAD = 5


def status_of(line: bytes) -> int:
    """The status of a response's first line."""
    if not line:
        raise Closed("mcpd closed the connection")
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise ValueError("not an HTTP/1.1 response")
    return int(parts[1])


def interim(status: int) -> bool:
    """Whether a status is an interim answer (1xx) that the real one
    follows."""
    return 100 <= status < 200 and status != 101


#: The error of a response that ends before its body does.
TRUNCATED = "mcpd closed the connection in the middle of a response"


def add_header(headers: Dict[str, str], line: bytes) -> bool:
    """Adds a header line to headers (names in lower case); True at the
    blank line that ends them."""
    if line in (b"\r\n", b"\n"):
        return True
    if not line:
        raise ValueError("the response ended in its headers")
    name, _, value = line.decode("latin-1").partition(":")
    headers[name.strip().lower()] = value.strip()
    return False


def chunk_size(line: bytes) -> int:
    """The size in a chunked body's size line."""
    return int(line.split(b";", 1)[0].strip(), 16)


def envelope(request: Any) -> bytes:
    """A stream's request: one message in the Connect envelope."""
    payload: bytes = request.SerializeToString()
    return bytes([0]) + len(payload).to_bytes(4, "big") + payload


def envelope_size(head: bytes) -> int:
    return int.from_bytes(head[1:ENVELOPE_HEAD], "big")


#: The error of a stream whose connection failed.
STREAM_BROKE = "the stream to mcpd broke"


def stream_broke(message: str, tool_call: bool) -> Unavailable:
    """The error of a stream whose connection ended or failed after its
    request went out: for a tool call (CallToolStream), one that may have
    run."""
    return call_cut_off(message) if tool_call else Unavailable(message)


def stream_cut(head: bytes, tool_call: bool) -> Unavailable:
    """The error of a stream whose connection ended before its end message
    (head: what came of the next envelope)."""
    if head:
        return stream_broke("mcpd closed the stream in the middle of a message", tool_call)
    return stream_broke("mcpd closed the stream without ending it", tool_call)


def stream_message(head: bytes, data: bytes, out: Any, tool_call: bool) -> Any:
    """The message of one envelope, or None at the stream's clean end;
    raises the error the stream ended with."""
    if len(data) < envelope_size(head):
        raise stream_broke("mcpd closed the stream in the middle of a message", tool_call)
    if head[0] & _END_STREAM:
        err = _end_stream_error(data)
        if err is not None:
            raise err
        return None
    msg = out()
    msg.ParseFromString(data)
    return msg


#: A socket option: level, name, value.
SocketOption = Tuple[int, int, int]

#: How many TCP keepalive probes go unanswered before the kernel gives up.
KEEPALIVE_PROBES = 3
#: The longest idle time Linux takes for TCP keepalive (MAX_TCP_KEEPIDLE).
_MAX_KEEPIDLE = 32767


def keepalive_options(keepalive: Optional[float]) -> List[SocketOption]:
    """The socket options of ``keepalive=`` (checked) on a TCP connection:
    the kernel probes the connection after keepalive seconds without a
    byte from mcpd, and ends it (reads fail, the call raises Unavailable)
    when KEEPALIVE_PROBES probes spread over keepalive_timeout went
    unanswered. A kernel answers the probes of its process whether that
    runs or not: this finds a dead host or network path (gone without a
    FIN or a reset), not an mcpd that is frozen or deadlocked."""
    if keepalive is None:
        return []
    idle = min(math.ceil(keepalive), _MAX_KEEPIDLE)
    timeout = _common.keepalive_timeout(keepalive)
    opts = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    # The names the platforms have (Linux, Windows, the BSDs: TCP_KEEPIDLE;
    # macOS: TCP_KEEPALIVE); without them, the system's own idle time and
    # probes (two hours on Linux).
    for name, value in (
        ("TCP_KEEPIDLE" if hasattr(socket, "TCP_KEEPIDLE") else "TCP_KEEPALIVE", idle),
        ("TCP_KEEPINTVL", max(1, math.ceil(timeout / KEEPALIVE_PROBES))),
        ("TCP_KEEPCNT", KEEPALIVE_PROBES),
        # Linux: data that mcpd's kernel leaves unacknowledged this long
        # ends the connection too (without it, retransmissions go on for
        # about 15 minutes); it also ends a quiet connection whose probes
        # went unanswered, at the same time as the probe count would.
        ("TCP_USER_TIMEOUT", _common.millis(keepalive + timeout)),
    ):
        option = getattr(socket, name, None)
        if option is not None:
            opts.append((socket.IPPROTO_TCP, option, value))
    return opts


def deadline_passed(e: OSError) -> bool:
    """Whether a socket.timeout is the socket's own timeout (the call's
    deadline), not the kernel's ETIMEDOUT on a connection it gave up on
    (socket.timeout is TimeoutError from Python 3.10, which ETIMEDOUT
    raises too)."""
    return e.errno is None


def set_options(sock: Any, opts: Sequence[SocketOption]) -> None:
    """Sets socket options where the system takes them: keepalive is
    worth having, not worth failing a connection for."""
    for level, name, value in opts:
        try:
            sock.setsockopt(level, name, value)
        except OSError:
            pass


def _address_host(host: str) -> Union[str, bytes]:
    """host for getaddrinfo: an ASCII name or address as bytes, which
    spares the import of the IDNA codec (about 2 ms of a cold start) that
    a str makes."""
    return host.encode("ascii") if host.isascii() else host


class Connection:
    """One HTTP/1.1 connection: writes requests, reads responses."""

    #: Whether a byte of the last response came: a request of a RESENDABLE
    #: method that failed before that may be sent again on a new connection
    #: if this one was idle (mcpd closed it), one that failed after it may
    #: not.
    answered = False
    #: Whether the last request was written whole (to the kernel): one
    #: that was not never reached a handler of mcpd's.
    sent = False
    #: When the pool last took it back.
    idle_since = 0.0
    #: Whether a response head was read (only the first is checked for HTTP/2).
    _first_head_read = False
    #: Whether the connection is closed (a body that ran to its end), and
    #: so must not go back to the pool.
    closed = False

    def __init__(
        self,
        host: str,
        port: int,
        ssl_context: Optional[ssl.SSLContext],
        timeout: Optional[float],
        unix: Optional[str] = None,
        sockopts: Sequence[SocketOption] = (),
    ) -> None:
        sock_timeout = None if timeout is None else timeout + READ_GRACE
        if unix is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(sock_timeout)
                sock.connect(unix)
            except BaseException:
                sock.close()
                raise
            self._sock = sock
            self._rfile = sock.makefile("rb")
            return
        # create_connection hands the host to getaddrinfo, which takes bytes
        # too (typeshed says str only).
        address = (_address_host(host), port)
        sock = socket.create_connection(address, timeout=sock_timeout)  # type: ignore[arg-type]
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            set_options(sock, sockopts)
            if ssl_context is not None:
                sock = ssl_context.wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._rfile = sock.makefile("rb")

    def set_timeout(self, timeout: Optional[float]) -> None:
        self._sock.settimeout(None if timeout is None else timeout + READ_GRACE)

    def dropped(self) -> bool:
        """Whether this idle connection is readable: mcpd (or a proxy)
        closed or reset it, or sent on it unasked. Either way it must not
        carry a request, which would fail, or worse, unanswered."""
        if not hasattr(select, "poll"):  # Windows: select takes sockets there
            return bool(select.select([self._sock], [], [], 0)[0])
        p = select.poll()
        p.register(self._sock, select.POLLIN)
        return bool(p.poll(0))

    def send(self, data: bytes) -> None:
        # Nothing of this request's answer has come yet: a reset idle
        # connection fails it unanswered, and it may be sent again if its
        # method is RESENDABLE.
        self.answered = False
        self.sent = False
        self._sock.sendall(data)
        self.sent = True

    def read_head(self) -> Tuple[int, Dict[str, str]]:
        """The status and the headers (names in lower case) of a response."""
        self.answered = False
        if not self._first_head_read:
            self._first_head_read = True
            if self._rfile.peek(1)[:1] == HTTP2_FRAME_START:
                raise speaks_http2()
        while True:
            line = self._rfile.readline(MAX_LINE + 1)
            self.answered = self.answered or bool(line)
            status = status_of(line)
            headers: Dict[str, str] = {}
            for _ in range(MAX_HEADERS + 1):
                if add_header(headers, self._rfile.readline(MAX_LINE + 1)):
                    break
            else:
                raise ValueError("too many response headers")
            if not interim(status):
                return status, headers

    def body_reader(self, headers: Dict[str, str]) -> _Body:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            return _Chunked(self._rfile)
        length = headers.get("content-length")
        return _Plain(self._rfile, int(length) if length is not None else None)

    def read_body(self, headers: Dict[str, str]) -> bytes:
        """The whole body of a response."""
        body = self.body_reader(headers)
        out = body.read(None)
        if body.incomplete:
            raise Closed(TRUNCATED)
        if body.length_unknown:
            self.close()  # the body ran to the connection's end
        return out

    def shutdown(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        self.closed = True
        self._rfile.close()
        self._sock.close()


class _Body:
    length_unknown = False

    @property
    def incomplete(self) -> bool:
        """Whether the connection ended before the body did."""
        return False

    def read(self, n: Optional[int]) -> bytes:  # pragma: no cover - abstract
        raise NotImplementedError


class _Plain(_Body):
    def __init__(self, rfile: Any, length: Optional[int]) -> None:
        self._rfile = rfile
        self._left = length
        self.length_unknown = length is None

    @property
    def incomplete(self) -> bool:
        return bool(self._left)

    def read(self, n: Optional[int]) -> bytes:
        if self._left is None:
            return bytes(self._rfile.read() if n is None else self._rfile.read(n))
        want = self._left if n is None else min(n, self._left)
        data = bytes(self._rfile.read(want))
        self._left -= len(data)
        return data


class _Chunked(_Body):
    def __init__(self, rfile: Any) -> None:
        self._rfile = rfile
        self._left = 0  # of the current chunk
        self._eof = False

    @property
    def incomplete(self) -> bool:
        return not self._eof

    def read(self, n: Optional[int]) -> bytes:
        out = bytearray()
        while (n is None or len(out) < n) and not self._eof:
            if self._left == 0:
                line = self._rfile.readline(MAX_LINE + 1)
                if not line:
                    break
                size = chunk_size(line)
                if size == 0:
                    while self._rfile.readline(MAX_LINE + 1) not in END_OF_TRAILERS:
                        pass
                    self._eof = True
                    break
                self._left = size
            want = self._left if n is None else min(self._left, n - len(out))
            data = self._rfile.read(want)
            if not data:
                break
            out += data
            self._left -= len(data)
            if self._left == 0:
                self._rfile.readline(MAX_LINE + 1)  # the chunk's CRLF
        return bytes(out)


def _split_url(url: str) -> Tuple[str, str, int, str]:
    """The scheme, host, port (0: the scheme's) and path of an http(s) URL
    (urllib.parse would cost milliseconds at start-up)."""
    bad = ValueError(f"not an mcpd HTTP address: {url!r} (want http://host:port, https://host:port or http+unix:///path.sock)")
    scheme, _, rest = url.partition("://")
    hostport, slash, path = rest.partition("/")
    if scheme not in ("http", "https") or not hostport or any(c in rest for c in "?#@ "):
        raise bad
    if hostport.startswith("["):
        host, _, after = hostport[1:].partition("]")
        if after and not after.startswith(":"):
            raise bad
        sep, port_text = after[:1], after[1:]
    else:
        host, sep, port_text = hostport.partition(":")
    if not host or (port_text and not port_text.isdigit()) or (sep and not port_text):
        raise bad
    port = int(port_text) if port_text else 0
    if port > 65535:
        raise bad
    return scheme, host, port, slash + path


#: The first byte of what an HTTP/2 server sends first, its SETTINGS frame
#: (a 24-bit length, well under 64 KiB); an HTTP/1.x answer starts "HTTP/".
HTTP2_FRAME_START = b"\x00"


def speaks_http2() -> Unavailable:
    """The error of an address that answered in HTTP/2: mcpd's gRPC
    listener is h2c only, and resets an HTTP/1.1 request after its SETTINGS
    frame, which would otherwise read as a bare "connection reset"."""
    return Unavailable(
        "cannot speak HTTP/1.1 to mcpd: it answered in HTTP/2, as mcpd's gRPC listener (--listen) does; "
        "give that address as host:port or unix:///path for the gRPC wire, or use mcpd's --http-listen address"
    )


def unreachable(stub: StubBase[Any], e: BaseException) -> Unavailable:
    reason = getattr(e, "strerror", None) or type(e).__name__
    return Unavailable(f"cannot reach mcpd at {stub.address()}: {reason}")


def broke(stub: StubBase[Any], e: BaseException, may_have_run: bool) -> Unavailable:
    """The error of a unary call whose connection failed. may_have_run: the
    call runs a tool and its request was written whole, so mcpd may have
    read it and run the tool before the connection broke (killed,
    restarted, the connection cut), which an answer would have said: it is
    call_cut_off. A request not written whole reached no handler."""
    if not may_have_run:
        return unreachable(stub, e)
    reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
    return call_cut_off(f"the connection to mcpd at {stub.address()} broke: {reason}")


def error_of(status: int, body: bytes) -> MCPDError:
    """The error of a non-200 answer: its Connect error body, or the
    protocol's code for the HTTP status."""
    import json  # on errors only: json is not loaded at start-up

    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("code"), str):
        return _connect_error(doc)
    return from_connect_error(_CODE_OF_STATUS.get(status, "unknown"), f"mcpd answered HTTP {status}", None)


def _end_stream_error(data: bytes) -> Optional[MCPDError]:
    import json

    try:
        doc = json.loads(data or b"{}")
    except ValueError:
        return Unavailable("mcpd ended the stream with a malformed message")
    err = doc.get("error") if isinstance(doc, dict) else None
    return _connect_error(err) if isinstance(err, dict) else None


def _connect_error(doc: Dict[str, Any]) -> MCPDError:
    info: Optional[bytes] = None
    for d in doc.get("details") or ():
        if isinstance(d, dict) and d.get("type") == _ERROR_INFO and isinstance(d.get("value"), str):
            value = d["value"]
            try:
                # Standard or URL-safe alphabet, padded or not.
                import base64

                info = base64.urlsafe_b64decode(value.replace("+", "-").replace("/", "_") + "=" * (-len(value) % 4))
            except ValueError:
                info = None
            break
    return from_connect_error(str(doc.get("code") or "unknown"), str(doc.get("message") or ""), info)
