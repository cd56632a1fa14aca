"""Exceptions raised by the mcpd client.

Every gRPC error becomes an :class:`MCPDError` subclass chosen by its status
code (:class:`NotFound`, :class:`InvalidArgument`, :class:`Unavailable`, ...).
The exception keeps the gRPC code and message and, when a server answered
a JSON-RPC error, the server name and JSON-RPC code that mcpd attaches as
``google.rpc.ErrorInfo`` (domain ``mcpd.v1``, reason
``UPSTREAM_JSONRPC_ERROR``).

A tool that fails is not an exception: its :class:`~mcpd_grpc.ToolResult`
has ``is_error`` set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, Optional, Tuple, Type

if TYPE_CHECKING:
    import grpc

__all__ = [
    "Aborted",
    "AlreadyExists",
    "Cancelled",
    "DataLoss",
    "DeadlineExceeded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "MCPDError",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "ResourceExhausted",
    "ServerRequestError",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "UnknownError",
    "from_rpc_error",
]

#: The ErrorInfo domain mcpd uses.
ERROR_DOMAIN = "mcpd.v1"
#: The ErrorInfo reason of a JSON-RPC error answered by a server.
REASON_UPSTREAM_JSONRPC_ERROR = "UPSTREAM_JSONRPC_ERROR"
#: The ErrorInfo reason of a call to a server that waits for a person's
#: OAuth consent (a :class:`FailedPrecondition`; see
#: ``Server.authorization_url``).
REASON_AUTHORIZATION_REQUIRED = "AUTHORIZATION_REQUIRED"
#: The ErrorInfo reason of an ``UNAVAILABLE`` tool call whose server went
#: away after it may have started the call; metadata ``server``, ``tool``
#: and ``retried``. Such an error is not ``retryable``: the tool may have
#: had its effect, so call it again only if that is safe. The client gives
#: it too, with no metadata, to a tool call whose connection to mcpd broke
#: while it was in flight (see :func:`call_cut_off`).
REASON_CALL_MAY_HAVE_RUN = "CALL_MAY_HAVE_RUN"
#: The ErrorInfo reason of a ``RESOURCE_EXHAUSTED`` tool call that waited
#: ``--queue-timeout`` while ``--max-inflight-calls`` calls to its server
#: were in flight. Such an error is ``retryable`` (later, with backoff);
#: a ``RESOURCE_EXHAUSTED`` without it, a message over
#: ``--max-message-bytes``, fails the same way again.
REASON_QUEUE_TIMEOUT = "QUEUE_TIMEOUT"
#: The ErrorInfo reason of an ``UNAVAILABLE`` that mcpd sent because the
#: server cannot take the request now (not ``READY``, its session ended, an
#: HTTP exchange with it refused or failed); ``retryable``.
REASON_SERVER_UNAVAILABLE = "SERVER_UNAVAILABLE"
#: The ErrorInfo reason of an ``UNAVAILABLE`` that mcpd sent while stopping
#: (a call refused, a stream ended); ``retryable``, once mcpd is back.
REASON_SHUTTING_DOWN = "SHUTTING_DOWN"

_DETAILS_KEY = "grpc-status-details-bin"
_ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"


class _LazyStatusCode:
    """A class attribute that is the class's grpc.StatusCode, imported on
    first use."""

    def __get__(self, obj: Any, owner: Any) -> Any:
        import grpc

        return grpc.StatusCode[owner.code_name]


def _retryable(code_name: str, reason: str, domain: str) -> bool:
    """Whether trying the same call again later may succeed, by the status
    code and the ErrorInfo reason (mcpd's only: domain ``mcpd.v1``)."""
    ours = reason if domain == ERROR_DOMAIN else ""
    if code_name == "UNAVAILABLE":
        return ours != REASON_CALL_MAY_HAVE_RUN
    if code_name == "RESOURCE_EXHAUSTED":
        return ours == REASON_QUEUE_TIMEOUT
    return False


class _Retryable:
    """``retryable``: on an error, by its code and ErrorInfo reason; on a
    class, for an error of the class's code without a reason."""

    def __get__(self, obj: Optional[MCPDError], owner: Type[MCPDError]) -> bool:
        if obj is None:
            return _retryable(owner.code_name, "", "")
        return _retryable(obj._code_name, obj.reason, obj.domain)


class MCPDError(Exception):
    """Base of every error from mcpd.

    Attributes:
        code: the :class:`grpc.StatusCode`.
        message: the status message.
        server: the MCP server that answered with a JSON-RPC error, if any.
        jsonrpc_code: that server's JSON-RPC error code, if any.
        reason, domain, metadata: the ``google.rpc.ErrorInfo``, if any.
        retryable: whether trying the same call again later may succeed:
            True for ``UNAVAILABLE`` except with reason
            ``CALL_MAY_HAVE_RUN`` (the tool may have had its effect), and
            for ``RESOURCE_EXHAUSTED`` with reason ``QUEUE_TIMEOUT`` (too
            many calls in flight to the server); False otherwise. On a
            class (``Unavailable.retryable``) it answers for an error of
            the class's code without a reason.
    """

    retryable = _Retryable()
    #: The name of the class's :class:`grpc.StatusCode`.
    code_name = "UNKNOWN"
    # grpc loads on first use of a code: the HTTP wire never imports it.
    default_code: grpc.StatusCode = _LazyStatusCode()  # type: ignore[assignment]

    def __init__(
        self,
        message: str = "",
        *,
        code: Optional[grpc.StatusCode] = None,
        server: Optional[str] = None,
        jsonrpc_code: Optional[int] = None,
        reason: str = "",
        domain: str = "",
        metadata: Optional[Dict[str, str]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self._code_name = code.name if code is not None else self.code_name
        self.server = server
        self.jsonrpc_code = jsonrpc_code
        self.reason = reason
        self.domain = domain
        self.metadata = dict(metadata or {})

    def __str__(self) -> str:
        where = []
        if self.server:
            where.append(f"server {self.server}")
        if self.jsonrpc_code is not None:
            where.append(f"JSON-RPC {self.jsonrpc_code}")
        suffix = f" ({', '.join(where)})" if where else ""
        return f"{self._code_name}: {self.message}{suffix}"

    @property
    def code(self) -> grpc.StatusCode:
        """The :class:`grpc.StatusCode` (``code.name`` is the code's name)."""
        import grpc

        return grpc.StatusCode[self._code_name]


class Cancelled(MCPDError):
    """The call was cancelled."""

    code_name = "CANCELLED"


class UnknownError(MCPDError):
    """An error with no closer code, e.g. a server-defined JSON-RPC code."""

    code_name = "UNKNOWN"


class InvalidArgument(MCPDError):
    """A bad request field or bad tool arguments (JSON-RPC -32602)."""

    code_name = "INVALID_ARGUMENT"


class DeadlineExceeded(MCPDError):
    """The call's deadline passed."""

    code_name = "DEADLINE_EXCEEDED"


class NotFound(MCPDError):
    """An unknown server, tool, prompt or resource."""

    code_name = "NOT_FOUND"


class AlreadyExists(MCPDError):
    """A server of that name exists (pass ``replace=True``)."""

    code_name = "ALREADY_EXISTS"


class PermissionDenied(MCPDError):
    """Refused by policy (a denied tool, a command not allowed)."""

    code_name = "PERMISSION_DENIED"


class ResourceExhausted(MCPDError):
    """A limit was hit: ``--max-inflight-calls`` calls to the server were in
    flight for ``--queue-timeout`` (``reason`` ``"QUEUE_TIMEOUT"``,
    retryable), or a message was over ``--max-message-bytes`` (no reason,
    not retryable)."""

    code_name = "RESOURCE_EXHAUSTED"


class FailedPrecondition(MCPDError):
    """The server cannot do this now (e.g. missing client capabilities, or,
    with ``reason`` ``"AUTHORIZATION_REQUIRED"``, a person's OAuth consent)."""

    code_name = "FAILED_PRECONDITION"


class Aborted(MCPDError):
    """The operation was aborted."""

    code_name = "ABORTED"


class OutOfRange(MCPDError):
    """A value was out of range."""

    code_name = "OUT_OF_RANGE"


class Unimplemented(MCPDError):
    """The server or mcpd does not implement this (JSON-RPC -32601)."""

    code_name = "UNIMPLEMENTED"


class Internal(MCPDError):
    """An internal error in mcpd or a server."""

    code_name = "INTERNAL"


class Unavailable(MCPDError):
    """mcpd or the server is not reachable right now (connecting,
    reconnecting, crashed, shutting down). Retrying later may succeed,
    except after ``reason`` ``"CALL_MAY_HAVE_RUN"``: the tool call may have
    had its effect (not retryable), whether mcpd lost the server's session
    during it or the client its connection to mcpd."""

    code_name = "UNAVAILABLE"


class DataLoss(MCPDError):
    """Unrecoverable data loss."""

    code_name = "DATA_LOSS"


class Unauthenticated(MCPDError):
    """A missing or wrong API token."""

    code_name = "UNAUTHENTICATED"


_BY_CODE = {
    cls.code_name: cls
    for cls in (
        Cancelled,
        UnknownError,
        InvalidArgument,
        DeadlineExceeded,
        NotFound,
        AlreadyExists,
        PermissionDenied,
        ResourceExhausted,
        FailedPrecondition,
        Aborted,
        OutOfRange,
        Unimplemented,
        Internal,
        Unavailable,
        DataLoss,
        Unauthenticated,
    )
}


class ServerRequestError(Exception):
    """Raise from a sampling, elicitation or roots handler to refuse the
    request with a JSON-RPC error code (default -32603, internal error)."""

    def __init__(self, message: str, code: int = -32603) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


#: The end of the message of a tool call cut off with its connection.
CUT_OFF = "the call may have run: the connection to mcpd broke while it was in flight"


def call_cut_off(message: str) -> Unavailable:
    """The error of a tool call whose connection to mcpd broke while it was
    in flight, with no status from mcpd (mcpd killed or restarted, the
    connection cut): mcpd may have read it and run the tool, as when it
    loses the server's session during a call, so it has the same reason,
    ``CALL_MAY_HAVE_RUN``, and is not ``retryable``."""
    return Unavailable(f"{message}; {CUT_OFF}", reason=REASON_CALL_MAY_HAVE_RUN, domain=ERROR_DOMAIN)


#: What grpcio says of a call that never left the client: no connection
#: was made (refused, no such socket, a name that does not resolve, no TLS
#: handshake, an HTTP/1.x listener), so nothing reached mcpd.
_GRPC_NOT_SENT = ("failed to connect to all addresses", "DNS resolution failed", "errors resolving ", "empty address list")
#: What marks the UNAVAILABLE statuses of an mcpd from before they had an
#: ErrorInfo (SERVER_UNAVAILABLE, SHUTTING_DOWN: a server not ready, mcpd
#: shutting down): grpcio shows nothing else that tells them from its own
#: (a trailers-only status has no metadata to show), and its own never
#: name a server in quotes.
_GRPC_FROM_MCPD = 'server "'
_GRPC_SHUTTING_DOWN = "mcpd is shutting down"


def from_rpc_error(err: Any, tool_call: bool = False) -> MCPDError:
    """Returns the :class:`MCPDError` for a gRPC error (sync or aio).
    ``tool_call`` says that the call runs a tool: an ``UNAVAILABLE`` that
    mcpd did not send, over a connection that was made, is
    :func:`call_cut_off`."""
    code = _call(err, "code")
    message = _call(err, "details") or ""
    info = _error_info(_call(err, "trailing_metadata") or ())
    name = code.name if code is not None else "UNKNOWN"
    if tool_call and name == "UNAVAILABLE" and info is None and not _grpc_not_sent_or_from_mcpd(message):
        return call_cut_off(message)
    return _build(name, message, info)


def _grpc_not_sent_or_from_mcpd(message: str) -> bool:
    return any(m in message for m in _GRPC_NOT_SENT) or _GRPC_FROM_MCPD in message or message == _GRPC_SHUTTING_DOWN


_CONNECT_SPELLING = {"CANCELED": "CANCELLED"}


def from_connect_error(code: str, message: str, error_info: Optional[bytes]) -> MCPDError:
    """Returns the :class:`MCPDError` for a Connect protocol error: its
    ``code`` (``"invalid_argument"``), message, and the bytes of the
    google.rpc.ErrorInfo among its details, if any."""
    name = code.upper()
    # Connect spells gRPC's CANCELLED with one L.
    name = _CONNECT_SPELLING.get(name, name)
    if name not in _BY_CODE and name != "UNKNOWN":
        name = "UNKNOWN"
    info = None
    if error_info is not None:
        try:
            info = _decode_error_info(error_info)
        except ValueError:
            info = None
    return _build(name, message, info)


def _build(code_name: str, message: str, info: Optional[Tuple[str, str, Dict[str, str]]]) -> MCPDError:
    cls = _BY_CODE.get(code_name, MCPDError)
    err = cls(message)
    err._code_name = code_name
    if info is None:
        return err
    reason, domain, metadata = info
    server: Optional[str] = None
    jsonrpc_code: Optional[int] = None
    if domain == ERROR_DOMAIN:
        server = metadata.get("server") or None
        try:
            jsonrpc_code = int(metadata["jsonrpc_code"])
        except (KeyError, ValueError):
            pass
    err.server, err.jsonrpc_code = server, jsonrpc_code
    err.reason, err.domain, err.metadata = reason, domain, dict(metadata)
    return err


def _call(err: Any, name: str) -> Any:
    fn = getattr(err, name, None)
    try:
        return fn() if callable(fn) else None
    except Exception:  # an RpcError without status (e.g. a local failure)
        return None


def _error_info(trailing: Iterable[Tuple[str, object]]) -> Optional[Tuple[str, str, Dict[str, str]]]:
    """Finds google.rpc.ErrorInfo in grpc-status-details-bin.

    Debian ships no python3-googleapis-common-protos, so the two small
    messages (google.rpc.Status and ErrorInfo) are decoded from the wire
    format here; the field numbers are fixed by google/rpc/*.proto.
    """
    for key, value in trailing:
        if key != _DETAILS_KEY or not isinstance(value, bytes):
            continue
        try:
            return _decode_status(value)
        except ValueError:
            return None
    return None


def _decode_status(data: bytes) -> Optional[Tuple[str, str, Dict[str, str]]]:
    # google.rpc.Status: int32 code = 1; string message = 2;
    # repeated google.protobuf.Any details = 3.
    for num, val in _fields(data):
        if num != 3 or not isinstance(val, bytes):
            continue
        type_url, payload = "", b""
        for anum, aval in _fields(val):  # Any: string type_url = 1; bytes value = 2.
            if anum == 1 and isinstance(aval, bytes):
                type_url = aval.decode("utf-8", "replace")
            elif anum == 2 and isinstance(aval, bytes):
                payload = aval
        if type_url == _ERROR_INFO_TYPE:
            return _decode_error_info(payload)
    return None


def _decode_error_info(data: bytes) -> Tuple[str, str, Dict[str, str]]:
    # google.rpc.ErrorInfo: string reason = 1; string domain = 2;
    # map<string, string> metadata = 3 (entries: key = 1, value = 2).
    reason, domain, metadata = "", "", {}
    for num, val in _fields(data):
        if not isinstance(val, bytes):
            continue
        if num == 1:
            reason = val.decode("utf-8", "replace")
        elif num == 2:
            domain = val.decode("utf-8", "replace")
        elif num == 3:
            k = v = ""
            for enum_, eval_ in _fields(val):
                if enum_ == 1 and isinstance(eval_, bytes):
                    k = eval_.decode("utf-8", "replace")
                elif enum_ == 2 and isinstance(eval_, bytes):
                    v = eval_.decode("utf-8", "replace")
            metadata[k] = v
    return reason, domain, metadata


def _fields(data: bytes) -> Iterator[Tuple[int, object]]:
    """Yields (field number, value) of a protobuf message: int for varint
    and fixed fields, bytes for length-delimited ones."""
    i, n = 0, len(data)
    while i < n:
        tag, i = _varint(data, i)
        num, wire = tag >> 3, tag & 7
        if wire == 0:
            val, i = _varint(data, i)
            yield num, val
        elif wire == 1:
            if i + 8 > n:
                raise ValueError("truncated fixed64")
            yield num, int.from_bytes(data[i : i + 8], "little")
            i += 8
        elif wire == 2:
            size, i = _varint(data, i)
            if i + size > n:
                raise ValueError("truncated field")
            yield num, data[i : i + size]
            i += size
        elif wire == 5:
            if i + 4 > n:
                raise ValueError("truncated fixed32")
            yield num, int.from_bytes(data[i : i + 4], "little")
            i += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")


def _varint(data: bytes, i: int) -> Tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("bad varint")
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
