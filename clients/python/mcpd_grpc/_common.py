"""Settings shared by the sync and asyncio clients."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

if TYPE_CHECKING:
    import logging

    import grpc

    #: The package's logger.
    log: logging.Logger

# grpc is imported where a gRPC channel is made, not here: a client on the
# HTTP wire never loads it (docs/performance.md, "Cold start").


def new_stub(channel: Any) -> Any:
    """The generated stub on channel (typed Any: the generated module has
    no annotations, and a call to it from typed code is an error under
    mypy --strict)."""
    from .mcpd.v1 import mcpd_pb2_grpc

    return mcpd_pb2_grpc.MCPHubStub(channel)  # type: ignore[no-untyped-call]


def __getattr__(name: str) -> Any:
    # logging loads when something is first logged, not at start-up.
    if name == "log":
        import logging

        logger = logging.getLogger("mcpd_grpc")
        globals()["log"] = logger
        return logger
    raise AttributeError(name)


#: A file path argument.
PathLike = Union[str, os.PathLike[str]]  # not "os.PathLike[str]": a ForwardRef is compiled at import

#: mcpd's default listen address.
DEFAULT_TARGET = "127.0.0.1:50051"
ENV_ADDRESS = "MCPD_ADDRESS"
ENV_TOKEN = "MCPD_API_TOKEN"

#: Extra deadline on top of a tool call's own timeout, so that mcpd's
#: DEADLINE_EXCEEDED (with its message) arrives before the client gives up.
CALL_TIMEOUT_GRACE = 5.0

#: Resumable streams (Subscribe, HandleServerRequests) wait this long before
#: the first reconnect, doubling up to RECONNECT_MAX.
RECONNECT_INITIAL = 0.1
RECONNECT_MAX = 2.0
#: A stream that mcpd answered this long before it failed counts as a fresh
#: outage: the reconnect budget starts again.
STABLE_STREAM = 5.0

# mcpd is usually a local sidecar: reconnect quickly after it restarts, and
# accept large resources and images. Not grpc.min_reconnect_backoff_ms:
# gRPC also takes it as the deadline of each connection attempt, and at
# 100 ms a handshake on a loaded machine, or TLS across a network, would
# fail the call with UNAVAILABLE (gRPC's default there is 20 s).
_CHANNEL_OPTIONS: Dict[str, Any] = {
    "grpc.max_receive_message_length": 64 * 1024 * 1024,
    # Each client its own connections: grpcio otherwise shares one between
    # channels of equal settings, so a client made after mcpd restarted
    # could start on a connection an older client had to the mcpd that went
    # away, its first call failing as one that may have run.
    "grpc.use_local_subchannel_pool": 1,
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 2000,
}

#: The clients' default ``keepalive=``: after this many seconds without a
#: byte from mcpd, the client checks that mcpd is still there. Without it
#: a quiet stream (a subscription, a handler stream) or a call without a
#: deadline to an mcpd that froze, or whose host or network path went away
#: without closing the connection, waits for ever.
KEEPALIVE = 30.0
#: The shortest keepalive mcpd allows (internal/server/server.go,
#: clientPingMinInterval): it closes the connection of a client that pings
#: more often (GOAWAY too_many_pings), and every call on it.
KEEPALIVE_MIN = 5.0
#: The longest a keepalive probe waits for its answer (gRPC's default).
KEEPALIVE_TIMEOUT_MAX = 20.0


def check_keepalive(keepalive: Optional[float]) -> Optional[float]:
    """The ``keepalive=`` argument in seconds, checked: None (off), or a
    number of seconds that mcpd accepts."""
    if keepalive is None:
        return None
    if isinstance(keepalive, bool) or not isinstance(keepalive, (int, float)):
        raise TypeError(f"keepalive must be a number of seconds or None, not {type(keepalive).__name__}")
    # Also refuses NaN (no comparison holds) and infinity (None turns it off).
    if not KEEPALIVE_MIN <= keepalive < float("inf"):
        raise ValueError(
            f"keepalive={keepalive!r}: want None (off) or at least {KEEPALIVE_MIN:g} seconds; "
            "mcpd closes the connection of a client that pings more often (GOAWAY too_many_pings)"
        )
    return float(keepalive)


def keepalive_timeout(keepalive: float) -> float:
    """How long a keepalive probe waits for mcpd's answer before the
    connection counts as dead: as long as the quiet before it, at most
    KEEPALIVE_TIMEOUT_MAX."""
    return min(keepalive, KEEPALIVE_TIMEOUT_MAX)


def millis(seconds: float) -> int:
    """Seconds in whole milliseconds, at most what a C int holds (gRPC's
    channel arguments and TCP_USER_TIMEOUT are C ints)."""
    return min(int(seconds * 1000), 2**31 - 1)


def keepalive_channel_options(keepalive: Optional[float]) -> Dict[str, Any]:
    """The gRPC channel options of ``keepalive=`` (checked): HTTP/2 pings
    after keepalive seconds without a byte from mcpd, and the connection,
    with every call on it, closed (UNAVAILABLE) when the answer has not
    come within keepalive_timeout."""
    if keepalive is None:
        return {}
    timeout = millis(keepalive_timeout(keepalive))
    return {
        "grpc.keepalive_time_ms": millis(keepalive),
        "grpc.keepalive_timeout_ms": timeout,
        # Newer gRPC cores wait this long for a ping's answer (1 minute
        # unless set) whatever keepalive_timeout_ms says; older ones do not
        # know it, and use keepalive_timeout_ms.
        "grpc.http2.ping_timeout_ms": timeout,
        # By default gRPC sends two pings, then none until the client sends
        # data again, which a subscription never does: it would go deaf.
        "grpc.http2.max_pings_without_data": 0,
        # Idle connections too (mcpd permits it): a dead one is found before
        # a call lands on it, and a NAT or load balancer in between does not
        # drop it for being quiet.
        "grpc.keepalive_permit_without_calls": 1,
    }


#: The scheme of the HTTP wire over a Unix socket (``--http-listen
#: unix:///path``): ``http+unix:///path/to.sock``.
HTTP_UNIX_SCHEME = "http+unix://"

#: The target prefixes of the HTTP wire (the sync Client's).
HTTP_SCHEMES = ("http://", "https://", HTTP_UNIX_SCHEME)


def resolve_target(target: Optional[str]) -> str:
    """The target argument, else $MCPD_ADDRESS, else 127.0.0.1:50051,
    checked (see :func:`check_target`)."""
    if target:
        return check_target(target, "target")
    env = os.environ.get(ENV_ADDRESS)
    if env:
        return check_target(env, "$" + ENV_ADDRESS)
    return DEFAULT_TARGET


#: The target prefixes grpcio resolves itself, passed on as they are.
GRPC_SCHEMES = ("unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:", "vsock:")

_TARGET_FORMS = "want host:port (mcpd's gRPC listener is 127.0.0.1:50051 by default), unix:///path.sock or an http(s):// URL"


def check_target(target: str, source: str) -> str:
    """target, refused with a ValueError that says why where gRPC or the
    HTTP wire would fail obscurely, or dial what nobody meant: white space,
    and a host:port without its port (gRPC dials 443). A host:port's
    trailing slashes, left from a URL, are dropped. URLs are checked by the
    HTTP wire; targets with a gRPC scheme (``unix:``, ``dns:``, ...) go to
    grpcio as they are."""
    what = f"{source} {target!r}"
    if any(c.isspace() for c in target):
        raise ValueError(f"{what} has white space")
    if target.startswith(HTTP_SCHEMES):
        return target
    if target.startswith(GRPC_SCHEMES):
        if target.startswith("unix:") and not target[len("unix:") :].lstrip("/"):
            raise ValueError(f"{what} has no socket path")
        return target
    hostport = target.rstrip("/")
    if "/" in hostport:
        raise ValueError(f"{what}: a host:port target has no path; {_TARGET_FORMS}")
    if hostport.startswith("["):
        host, _, after = hostport[1:].partition("]")
        sep, port = after[:1], after[1:]
        if after and sep != ":":
            raise ValueError(f"{what} is no host:port; {_TARGET_FORMS}")
    else:
        host, sep, port = hostport.rpartition(":")
        if not sep:
            host, port = hostport, ""
        elif ":" in host:
            raise ValueError(f"{what}: an IPv6 address goes in brackets, as in [::1]:50051")
    if not port:
        raise ValueError(f"{what} has no port; {_TARGET_FORMS}")
    if not host:
        raise ValueError(f"{what} has no host; {_TARGET_FORMS}")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what} has no valid port (1 to 65535)")
    return hostport


def resolve_metadata(token: Optional[str]) -> Tuple[Tuple[str, str], ...]:
    """The authorization metadata for token, else $MCPD_API_TOKEN."""
    token = token if token is not None else os.environ.get(ENV_TOKEN, "")
    token = token.strip()
    # gRPC metadata values are printable ASCII; gRPC would otherwise fail
    # with the token in its error text, and print it to stderr.
    if any(not " " <= ch <= "~" for ch in token):
        raise ValueError("the API token has a character that is not printable ASCII (0x20-0x7E)")
    return (("authorization", "Bearer " + token),) if token else ()


def tls_credentials(
    credentials: Optional[grpc.ChannelCredentials],
    ca_file: Optional[PathLike],
    cert_file: Optional[PathLike],
    key_file: Optional[PathLike],
) -> Optional[grpc.ChannelCredentials]:
    """The channel credentials: credentials as given, or TLS built from PEM
    files (ca_file: the CA that signed mcpd's certificate, default the
    system roots; cert_file and key_file: a client certificate for mutual
    TLS), or None for plaintext."""
    if ca_file is None and cert_file is None and key_file is None:
        return credentials
    if credentials is not None:
        raise ValueError("pass either credentials= or ca_file=/cert_file=/key_file=, not both")
    if (cert_file is None) != (key_file is None):
        raise ValueError("cert_file= and key_file= go together (a client certificate and its key)")

    def read(path: Optional[PathLike]) -> Optional[bytes]:
        if path is None:
            return None
        with open(path, "rb") as f:
            return f.read()

    import grpc

    return grpc.ssl_channel_credentials(
        root_certificates=read(ca_file),
        private_key=read(key_file),
        certificate_chain=read(cert_file),
    )


def channel_options(options: Optional[Sequence[Tuple[str, Any]]], keepalive: Optional[float] = None) -> List[Tuple[str, Any]]:
    """The defaults, then the options of keepalive (checked), then the
    caller's options, each over the ones before."""
    merged = dict(_CHANNEL_OPTIONS)
    merged.update(keepalive_channel_options(keepalive))
    merged.update(dict(options or ()))
    return list(merged.items())


#: How many requests mcpd hands one agent before it skips that agent
#: (docs/server-requests.md): the handler threads of a client, started only
#: as needed, so that a handler that waits on a person or a model holds up
#: no other request.
HANDLER_THREADS = 64


def handler_pool() -> Any:
    """The thread pool that runs a client's sync handlers."""
    from concurrent.futures import ThreadPoolExecutor  # only with handlers: not at start-up

    return ThreadPoolExecutor(max_workers=HANDLER_THREADS, thread_name_prefix="mcpd-handler")


def next_backoff(delay: float) -> float:
    return min(delay * 2, RECONNECT_MAX)


#: Subscribe's response header: the sequence the stream's events follow.
AFTER_SEQUENCE_HEADER = "mcpd-after-sequence"


def answered_at(metadata: Any, opened_at: float) -> Optional[float]:
    """When mcpd answered a Subscribe stream that was opened at opened_at
    and has ended, from its response headers (pairs): mcpd sends them at
    once, so about opened_at; None when none came (the stream never reached
    a running mcpd). On the gRPC wire only mcpd's own header shows: a quiet
    stream from an mcpd older than that counts as never answered."""
    return opened_at if metadata else None


def after_sequence(metadata: Any) -> Optional[int]:
    """The sequence a Subscribe stream starts after, from its response
    headers (pairs); None when they do not say (an older mcpd, or a
    stream that failed before its headers)."""
    for key, value in metadata or ():
        if str(key).lower() == AFTER_SEQUENCE_HEADER:
            try:
                return int(value)
            except ValueError:
                return None
    return None


def resumable(err: Any) -> bool:
    """Whether a resumable stream that ended with err (None: mcpd ended it
    cleanly; an MCPDError on the HTTP wire, a grpc.RpcError on gRPC) may be
    opened again."""
    from .errors import MCPDError

    if err is None:
        return True
    if isinstance(err, MCPDError):
        return err._code_name == "UNAVAILABLE"
    code = err.code()
    return code is not None and code.name == "UNAVAILABLE"


class ReconnectPolicy:
    """When to reopen a resumable stream that dropped: after waits that
    double from RECONNECT_INITIAL to RECONNECT_MAX, within a budget of
    timeout seconds (None: no limit) from the first drop of an outage. A
    stream that mcpd answered STABLE_STREAM seconds before it dropped starts
    a new outage."""

    def __init__(self, timeout: Optional[float]) -> None:
        self._timeout = timeout
        self._outage = False
        self._give_up: Optional[float] = None
        self._delay = RECONNECT_INITIAL

    def next_wait(self, now: float, answered_at: Optional[float]) -> Optional[float]:
        """Seconds to wait before reopening a stream that mcpd answered at
        answered_at (None: never) and that dropped at now; None when the
        budget is spent. How long a stream stayed open says nothing: one to
        an mcpd that stopped answering stays open until the connection is
        given up on (a keepalive ping left unanswered, gRPC's connect
        deadline)."""
        if not self._outage or (answered_at is not None and now - answered_at >= STABLE_STREAM):
            self._outage = True
            self._give_up = None if self._timeout is None else now + self._timeout
            self._delay = RECONNECT_INITIAL
        if self._give_up is not None and now >= self._give_up:
            return None
        wait = self._delay if self._give_up is None else min(self._delay, self._give_up - now)
        self._delay = next_backoff(self._delay)
        return wait
