"""The synchronous mcpd client."""

from __future__ import annotations

import collections
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar, Union, overload

from . import _common
from . import _convert as cv
from . import names as _names
from . import types as t
from .errors import InvalidArgument, MCPDError, NotFound, from_rpc_error
from .mcpd.v1 import mcpd_pb2 as pb

if TYPE_CHECKING:
    import queue

    import grpc

    from .agent_tools import AgentTools, ToolServing

__all__ = ["Client", "Subscription", "ToolCallStream"]

_UNSET: Any = object()
_END = object()  # closes a request queue

ServerConfigLike = Union[t.ServerConfig, pb.ServerConfig]
ResourceRefLike = Union[Tuple[str, str], Mapping[str, str]]
RootLike = Union[t.Root, str, Tuple[str, str], Mapping[str, str]]
StreamItem = Union[t.Progress, t.LogMessage, t.ToolResult]

# What each kind of server-request handler takes and may return.
SamplingReturn = Union[t.SamplingResult, str]
ElicitationReturn = Union[t.ElicitationResult, Mapping[str, Any], None]
RootsReturn = Iterable[RootLike]
AuthorizationReturn = Union[t.AuthorizationResult, str, None]
ApprovalReturn = Union[t.ApprovalResult, bool]

SamplingHandler = Callable[[t.SamplingRequest], SamplingReturn]
ElicitationHandler = Callable[[t.ElicitationRequest], ElicitationReturn]
RootsHandler = Callable[[t.RootsRequest], RootsReturn]
AuthorizationHandler = Callable[[t.AuthorizationRequest], AuthorizationReturn]
ApprovalHandler = Callable[[t.ApprovalRequest], ApprovalReturn]

# The decorators return the handler as given, with its own type.
SH = TypeVar("SH", bound=SamplingHandler)
EH = TypeVar("EH", bound=ElicitationHandler)
RH = TypeVar("RH", bound=RootsHandler)
AuH = TypeVar("AuH", bound=AuthorizationHandler)
ApH = TypeVar("ApH", bound=ApprovalHandler)
HandlerT = TypeVar("HandlerT", bound=Callable[[Any], Any])


def handler_registration(register: Callable[[str, Any], None], kind: str, handler: Optional[HandlerT]) -> Union[HandlerT, Callable[[HandlerT], HandlerT]]:
    """A handler method of both clients: registers handler for kind and
    returns it, or, without one, is the decorator that does so."""
    if handler is None:

        def decorate(h: HandlerT) -> HandlerT:
            register(kind, h)
            return h

        return decorate
    register(kind, handler)
    return handler


class Client:
    """A synchronous client of one mcpd daemon. Thread-safe.

    Args:
        target: ``host:port`` or ``unix:///path/to.sock`` (gRPC), or
            ``http://host:port``, ``https://host:port`` or
            ``http+unix:///path/to.sock`` for the HTTP wire (mcpd's
            ``--http-listen``: lower latency and a faster start, without
            grpc; no server-request handlers or ``serve_tools``);
            default ``$MCPD_ADDRESS``, else ``127.0.0.1:50051``. A
            ``host:port`` without its port, with a path or with white
            space raises ValueError.
        token: the API token, sent as ``authorization: Bearer <token>``;
            default ``$MCPD_API_TOKEN``, else none.
        timeout: default deadline in seconds of every unary RPC (None: no
            deadline). ``call_tool(timeout=)`` overrides it for that call.
        keepalive: seconds without a byte from mcpd after which the client
            checks that mcpd is still there (default 30; at least 5, the
            most often mcpd allows; None: never). On the gRPC wire it
            sends an HTTP/2 ping; without an answer within as long again
            (at most 20 s) it closes the connection, and the calls and
            streams on it raise Unavailable (a subscription reconnects,
            within its ``reconnect_timeout``). On the HTTP wire it turns
            on TCP keepalive, which finds a dead host or network path but
            not a frozen mcpd (its kernel still answers); nothing on a
            Unix socket.
        credentials: ``grpc.ChannelCredentials`` for a TLS target; default
            plaintext (loopback or Unix socket).
        options: extra gRPC channel options, merged over the defaults
            (gRPC wire only).
        ca_file: PEM file of the CA that signed mcpd's certificate: turns
            on TLS (without it, but with ``cert_file``, the system roots).
        cert_file, key_file: PEM client certificate and key, for mcpd
            with mutual TLS (``--tls-client-ca``).

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        target: Optional[str] = None,
        *,
        token: Optional[str] = None,
        timeout: Optional[float] = None,
        keepalive: Optional[float] = _common.KEEPALIVE,
        credentials: Optional[grpc.ChannelCredentials] = None,
        options: Optional[Sequence[Tuple[str, Any]]] = None,
        ca_file: Optional[_common.PathLike] = None,
        cert_file: Optional[_common.PathLike] = None,
        key_file: Optional[_common.PathLike] = None,
    ) -> None:
        self.target = _common.resolve_target(target)
        self._metadata = _common.resolve_metadata(token)
        keepalive = _common.check_keepalive(keepalive)
        self._channel: Any = None
        #: The exceptions the wire raises for a failed call: the HTTP wire
        #: raises MCPDError itself.
        self._wire_errors: Tuple[Type[BaseException], ...] = ()
        self._http = self.target.startswith(_common.HTTP_SCHEMES)
        if self._http:
            from . import _http

            if credentials is not None or options is not None:
                raise ValueError("credentials= and options= are for the gRPC wire; an https:// target takes ca_file=/cert_file=/key_file=")
            self._stub: Any = _http.HTTPStub(self.target, ca_file=ca_file, cert_file=cert_file, key_file=key_file, keepalive=keepalive)
        else:
            import grpc

            opts = _common.channel_options(options, keepalive)
            credentials = _common.tls_credentials(credentials, ca_file, cert_file, key_file)
            if credentials is not None:
                self._channel = grpc.secure_channel(self.target, credentials, opts)
            else:
                self._channel = grpc.insecure_channel(self.target, opts)
            self._stub = _common.new_stub(self._channel)
            self._wire_errors = (grpc.RpcError,)
        self._timeout = timeout
        self._lock = threading.Lock()
        self._to_qualified: Dict[str, str] = {}
        self._handlers: Dict[str, Callable[[Any], Any]] = {}
        self._worker: Optional[_RequestWorker] = None
        self._streams: weakref.WeakSet[Any] = weakref.WeakSet()
        self._closed = False

    def __repr__(self) -> str:
        return f"Client(target={self.target!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stops the request handlers and open streams and closes the
        channel. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            worker, self._worker = self._worker, None
            streams = list(self._streams)
        if worker is not None:
            worker.stop()
        for s in streams:
            s.close()
        if self._channel is not None:
            self._channel.close()
        else:
            self._stub.close()

    # -- plumbing ----------------------------------------------------------

    def _check_open(self) -> None:
        # grpcio would say "Cannot invoke RPC on closed channel!"; both wires
        # say the same, as the AsyncClient does.
        if self._closed:
            raise ValueError("the client is closed")

    def _rpc(self, method: Any, request: Any, timeout: Any = _UNSET, tool_call: bool = False) -> Any:
        """Calls method; tool_call says that it runs a tool, which a
        connection cut off during it may have run (see from_rpc_error; the
        HTTP wire tells that itself)."""
        self._check_open()
        timeout = self._timeout if timeout is _UNSET else timeout
        try:
            return method(request, metadata=self._metadata, timeout=timeout)
        except self._wire_errors as e:
            raise from_rpc_error(e, tool_call) from e

    def _pages(self, method: Any, request_type: Any, field: str, server: Optional[str]) -> List[Any]:
        out: List[Any] = []
        token = ""
        # One deadline for the whole listing, not a fresh one per page.
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while True:
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            resp = self._rpc(method, request_type(server=server or "", page_token=token), timeout)
            out.extend(getattr(resp, field))
            token = resp.next_page_token
            if not token:
                return out

    # -- servers -----------------------------------------------------------

    def servers(self) -> List[t.Server]:
        """Returns every server, sorted by name."""
        return [cv.server(s) for s in self._rpc(self._stub.ListServers, pb.ListServersRequest()).servers]

    def get_server(self, name: str) -> t.Server:
        """Returns one server's status. Raises NotFound."""
        return cv.server(self._rpc(self._stub.GetServer, pb.GetServerRequest(name=name)).server)

    def connect_server(self, config: ServerConfigLike, *, replace: bool = False) -> t.Server:
        """Connects a server (see :class:`~mcpd_grpc.ServerConfig`'s
        ``stdio``/``http``/``sse`` helpers) and waits until it is ready or has
        failed; check the returned ``state``: a server that needs a person's
        OAuth consent returns in ``AUTHORIZATION_REQUIRED`` with its
        ``authorization_url`` (see :meth:`on_authorization`). Raises
        AlreadyExists unless ``replace``, PermissionDenied for a command mcpd
        does not allow."""
        req = pb.ConnectServerRequest(server=cv.server_config_to_proto(config), replace=replace)
        return cv.server(self._rpc(self._stub.ConnectServer, req).server)

    def disconnect_server(self, name: str) -> None:
        """Disconnects a server, stops its process and forgets it."""
        self._rpc(self._stub.DisconnectServer, pb.DisconnectServerRequest(name=name))

    def restart_server(self, name: str) -> t.Server:
        """Stops a server and connects it again with the same configuration."""
        return cv.server(self._rpc(self._stub.RestartServer, pb.RestartServerRequest(name=name)).server)

    def complete_authorization(self, server: str, redirect_url: str) -> t.Server:
        """Completes a server's pending OAuth consent with the full URL the
        browser was redirected to (with its ``code`` and ``state``), for a
        host whose browser cannot reach mcpd's redirect listener. Returns the
        server. Raises InvalidArgument for a malformed URL or a wrong
        ``state``, FailedPrecondition when no consent is pending or the
        authorization server refused."""
        req = pb.CompleteAuthorizationRequest(server=server, redirect_url=redirect_url)
        return cv.server(self._rpc(self._stub.CompleteAuthorization, req).server)

    def forget_authorization(self, server: str) -> None:
        """Deletes a server's OAuth tokens and client registration, on disk
        and in mcpd's memory; the next request the server refuses asks for
        consent again."""
        self._rpc(self._stub.ForgetAuthorization, pb.ForgetAuthorizationRequest(server=server))

    def set_server_enabled(self, name: str, enabled: bool) -> t.Server:
        """Disables a server (stopped, kept with its configuration, state
        ``DISABLED``) or enables it and waits until it is ready or has
        failed. Requests to a disabled server raise FailedPrecondition."""
        req = pb.SetServerEnabledRequest(name=name, enabled=enabled)
        return cv.server(self._rpc(self._stub.SetServerEnabled, req).server)

    # -- tools -------------------------------------------------------------

    def list_tools(self, server: Optional[str] = None) -> List[t.Tool]:
        """Lists the tools of one server, or of all ready servers (every
        page), sorted by qualified name."""
        return [cv.tool(x) for x in self._pages(self._stub.ListTools, pb.ListToolsRequest, "tools", server)]

    def call_tool(
        self,
        name: str,
        arguments: Union[None, str, Mapping[str, Any]] = None,
        *,
        timeout: Optional[float] = None,
        meta: Optional[Mapping[str, Any]] = None,
    ) -> t.ToolResult:
        """Calls a tool and returns its result.

        Args:
            name: the qualified name (``mcp__<server>__<tool>``) or the
                provider-safe name from :meth:`tools_for_openai` /
                :meth:`tools_for_anthropic`.
            arguments: a dict, or the JSON object string a model returned
                (InvalidArgument, before anything is sent, if it is none).
            timeout: seconds mcpd gives the call (default: the server's call
                timeout); DeadlineExceeded when it passes.
            meta: ``_meta`` sent with the MCP request.

        A tool that fails returns a result with ``is_error`` set; protocol
        and transport failures raise :class:`~mcpd_grpc.MCPDError`.
        """
        req = cv.call_request(pb.CallToolRequest, self._qualified(name), arguments, timeout, meta)
        deadline = timeout + _common.CALL_TIMEOUT_GRACE if timeout is not None else _UNSET
        try:
            return cv.tool_result(self._rpc(self._stub.CallTool, req, deadline, tool_call=True))
        except (NotFound, InvalidArgument) as e:
            # mcpd's own refusal of an unknown name carries no JSON-RPC code.
            if e.jsonrpc_code is not None:
                raise
            retry = self._retry_name(name, req.name)
            if retry is None:
                raise
            req.name = retry
            return cv.tool_result(self._rpc(self._stub.CallTool, req, deadline, tool_call=True))

    def call_tool_stream(
        self,
        name: str,
        arguments: Union[None, str, Mapping[str, Any]] = None,
        *,
        timeout: Optional[float] = None,
        meta: Optional[Mapping[str, Any]] = None,
    ) -> ToolCallStream:
        """Calls a tool and iterates over its :class:`~mcpd_grpc.Progress`
        and :class:`~mcpd_grpc.LogMessage` messages while it runs, then its
        :class:`~mcpd_grpc.ToolResult` (last). ``cancel()`` (or leaving a
        ``with`` block) cancels the call upstream."""
        self._check_open()
        req = cv.call_request(pb.CallToolStreamRequest, self._qualified(name), arguments, timeout, meta)
        deadline = timeout + _common.CALL_TIMEOUT_GRACE if timeout is not None else None
        call = self._stub.CallToolStream(req, metadata=self._metadata, timeout=deadline)
        return ToolCallStream(call, self._wire_errors)

    def serve_tools(self, tools: AgentTools, *, replace: bool = False, max_workers: int = 8) -> ToolServing:
        """Serves the agent's own tools (see :class:`~mcpd_grpc.AgentTools`)
        as the server ``tools.server``, to every caller of mcpd, until the
        returned :class:`~mcpd_grpc.ToolServing` stops. Returns once mcpd
        serves them. Raises AlreadyExists when another agent serves that
        name (or a server of another kind has it) and ``replace`` is not
        set; PermissionDenied without the ``manage`` permission."""
        if self._http:
            from ._http import needs_grpc

            raise needs_grpc("serve_tools")
        self._check_open()
        from .agent_tools import ToolServing  # on first use: it loads json

        serving = ToolServing(self._stub, self._metadata, tools, replace=replace, max_workers=max_workers)
        with self._lock:
            self._streams.add(serving)
        return serving

    def tools_for_openai(self, server: Optional[str] = None, *, api: str = "chat") -> List[Dict[str, Any]]:
        """The tools in OpenAI's format (``api="chat"`` for Chat Completions,
        ``"responses"`` for the Responses API), with provider-safe names that
        :meth:`call_tool` maps back."""
        return self._definitions(server, "openai", api=api)

    def tools_for_anthropic(self, server: Optional[str] = None) -> List[Dict[str, Any]]:
        """The tools in Anthropic's Messages API format, with provider-safe
        names that :meth:`call_tool` maps back."""
        return self._definitions(server, "anthropic")

    def _definitions(self, server: Optional[str], fmt: str, **kwargs: Any) -> List[Dict[str, Any]]:
        defs, back = _names.tool_definitions(self.list_tools(server), fmt, **kwargs)
        with self._lock:
            self._to_qualified.update(back)
        return defs

    def _qualified(self, name: str) -> str:
        with self._lock:
            return self._to_qualified.get(name, name)

    def _retry_name(self, name: str, tried: str) -> Optional[str]:
        # A provider-safe name this client has not mapped yet (e.g. the
        # definitions came from another process): learn the names once.
        if tried != name:
            return None
        back = {p: q for q, p in _names.provider_names(x.name for x in self.list_tools()).items()}
        with self._lock:
            self._to_qualified.update(back)
        q = back.get(name)
        return q if q is not None and q != name else None

    # -- resources, prompts, completion ------------------------------------

    def list_resources(self, server: Optional[str] = None) -> List[t.Resource]:
        """Lists the resources of one server or of all ready servers."""
        return [cv.resource(x) for x in self._pages(self._stub.ListResources, pb.ListResourcesRequest, "resources", server)]

    def list_resource_templates(self, server: Optional[str] = None) -> List[t.ResourceTemplate]:
        """Lists the resource templates of one server or of all ready servers."""
        return [cv.resource_template(x) for x in self._pages(self._stub.ListResourceTemplates, pb.ListResourceTemplatesRequest, "resource_templates", server)]

    def read_resource(self, server: str, uri: str) -> t.ResourceResult:
        """Reads one resource; ``.text`` for text, ``.blob`` for bytes."""
        return cv.resource_result(self._rpc(self._stub.ReadResource, pb.ReadResourceRequest(server=server, uri=uri)))

    def list_prompts(self, server: Optional[str] = None) -> List[t.Prompt]:
        """Lists the prompts of one server or of all ready servers."""
        return [cv.prompt(x) for x in self._pages(self._stub.ListPrompts, pb.ListPromptsRequest, "prompts", server)]

    def get_prompt(self, server: str, name: str, arguments: Optional[Mapping[str, str]] = None) -> t.PromptResult:
        """Renders a prompt with string arguments."""
        req = pb.GetPromptRequest(server=server, name=name, arguments=dict(arguments or {}))
        return cv.prompt_result(self._rpc(self._stub.GetPrompt, req))

    def complete(
        self,
        server: str,
        argument: str,
        value: str = "",
        *,
        prompt: Optional[str] = None,
        resource_template: Optional[str] = None,
        context: Optional[Mapping[str, str]] = None,
    ) -> t.Completion:
        """Asks for completions of ``argument`` (typed so far: ``value``) of a
        prompt or a resource template (exactly one); ``context`` gives the
        arguments already chosen."""
        req = cv.complete_request(server, argument, value, prompt, resource_template, context)
        return cv.completion(self._rpc(self._stub.Complete, req))

    def set_log_level(self, server: str, level: Union[str, t.LogLevel]) -> None:
        """Sets the minimum level of log messages a server sends (kept across
        reconnects)."""
        self._rpc(self._stub.SetLogLevel, pb.SetLogLevelRequest(server=server, level=cv.log_level_to_proto(level)))

    def set_roots(self, roots: Sequence[RootLike], *, server: Optional[str] = None) -> None:
        """Sets the roots offered to one server, or to all. Roots are
        :class:`~mcpd_grpc.Root`, URI strings, ``(uri, name)`` or dicts."""
        self._rpc(self._stub.SetRoots, pb.SetRootsRequest(server=server or "", roots=cv.roots_to_proto(roots)))

    # -- polls and tool search ----------------------------------------------

    def start_poll(
        self,
        server: str,
        *,
        resource_uri: Optional[str] = None,
        tool: Optional[str] = None,
        arguments: Union[None, str, Mapping[str, Any]] = None,
        interval: Optional[float] = None,
    ) -> t.Poll:
        """Polls a resource, or a tool of ``server`` (its own name) with
        ``arguments``, every ``interval`` seconds (at least 1; default 5).
        Changed results arrive as POLL_RESULT events on :meth:`subscribe`,
        the first one marked ``baseline``."""
        req = cv.start_poll_request(server, resource_uri, tool, arguments, interval)
        return cv.poll(self._rpc(self._stub.StartPoll, req).poll)

    def stop_poll(self, poll_id: str) -> None:
        """Stops a poll."""
        self._rpc(self._stub.StopPoll, pb.StopPollRequest(id=poll_id))

    def list_polls(self) -> List[t.Poll]:
        """Lists the polls, sorted by id."""
        return [cv.poll(p) for p in self._rpc(self._stub.ListPolls, pb.ListPollsRequest()).polls]

    def search_tools(self, query: str, *, limit: int = 0, servers: Optional[Sequence[str]] = None) -> List[t.ToolMatch]:
        """Ranks the tools of the ready servers by relevance to ``query``
        (BM25; see docs/tools.md), best first; ``limit`` 0 means 10."""
        req = pb.SearchToolsRequest(query=query, limit=limit, servers=list(servers or ()))
        return [cv.tool_match(m) for m in self._rpc(self._stub.SearchTools, req).matches]

    # -- events ------------------------------------------------------------

    def subscribe(
        self,
        *,
        servers: Optional[Sequence[str]] = None,
        resources: Optional[Sequence[ResourceRefLike]] = None,
        kinds: Optional[Sequence[Union[str, t.EventKind]]] = None,
        after_sequence: Optional[int] = None,
        reconnect: bool = True,
        reconnect_timeout: Optional[float] = 30.0,
        poll_ids: Optional[Sequence[str]] = None,
        fallback_poll_interval: Optional[float] = None,
    ) -> Subscription:
        """Follows events; iterate over the returned :class:`Subscription`.

        Args:
            servers: only these servers' events (default all).
            resources: ``(server, uri)`` pairs to subscribe to; resource
                updates arrive only for these.
            kinds: only these :class:`~mcpd_grpc.EventKind` values (default all).
            after_sequence: resume after this sequence (0: everything still
                buffered); default: events from now on.
            reconnect: when the stream drops (mcpd restarting, connection
                lost), open it again with ``after_sequence`` = the last
                sequence seen, so every event still in mcpd's buffer arrives
                once; events that fell out arrive as one GAP event.
            reconnect_timeout: give up (raise Unavailable) after this many
                seconds without a connection; None: never.
            poll_ids: only these polls' POLL_RESULT events.
            fallback_poll_interval: poll the ``resources`` of servers that
                cannot notify every so many seconds (at least 1) instead of
                failing; a change is a RESOURCE_UPDATED event.

        A restarted daemon has an empty buffer and numbers its events from
        the time it started, above any number its last run gave out: a
        subscription that reconnects to it gets a GAP event first; read the
        state you care about again. Until the first event arrives, a
        reconnect resumes from where the stream started (mcpd says so in
        its ``mcpd-after-sequence`` header), or from ``after_sequence`` if
        given: nothing mcpd still buffers is lost even then.

        The stream opens before this method returns, but mcpd starts the
        subscription only when the request reaches it: an event published
        right after ``subscribe()`` may come before that. Where that matters,
        resume from a sequence you know (``after_sequence``), or wait for a
        first event (e.g. of a subscribed resource) before acting.
        """
        req = cv.subscribe_request(servers, resources, kinds, poll_ids, fallback_poll_interval)
        sub = Subscription(self, req, after_sequence, reconnect, reconnect_timeout)
        with self._lock:
            if self._closed:
                raise ValueError("the client is closed")
            self._streams.add(sub)
        try:
            sub._open()  # now, not at the first next(): "from now" means now
        except StopIteration:
            # close() ran on another thread since the check above.
            raise ValueError("the client is closed") from None
        return sub

    # -- server requests ---------------------------------------------------

    @overload
    def on_sampling(self, handler: SH) -> SH: ...
    @overload
    def on_sampling(self, handler: None = None) -> Callable[[SH], SH]: ...
    def on_sampling(self, handler: Optional[SH] = None) -> Union[SH, Callable[[SH], SH]]:
        """Answers servers' sampling requests with ``handler(SamplingRequest)``
        returning a :class:`~mcpd_grpc.SamplingResult` or a ``str``. Usable as
        a decorator. Handlers run on a small thread pool; raise
        :class:`~mcpd_grpc.ServerRequestError` to refuse."""
        return self._on("sampling", handler)

    @overload
    def on_elicitation(self, handler: EH) -> EH: ...
    @overload
    def on_elicitation(self, handler: None = None) -> Callable[[EH], EH]: ...
    def on_elicitation(self, handler: Optional[EH] = None) -> Union[EH, Callable[[EH], EH]]:
        """Answers elicitation requests with ``handler(ElicitationRequest)``
        returning an :class:`~mcpd_grpc.ElicitationResult`, a ``dict``
        (accept with that content) or ``None`` (decline)."""
        return self._on("elicitation", handler)

    @overload
    def on_roots(self, handler: RH) -> RH: ...
    @overload
    def on_roots(self, handler: None = None) -> Callable[[RH], RH]: ...
    def on_roots(self, handler: Optional[RH] = None) -> Union[RH, Callable[[RH], RH]]:
        """Answers roots/list with ``handler(RootsRequest)`` returning roots
        (:class:`~mcpd_grpc.Root`, URI strings or ``(uri, name)``). Without a
        roots handler mcpd answers from :meth:`set_roots`."""
        return self._on("roots", handler)

    @overload
    def on_authorization(self, handler: AuH) -> AuH: ...
    @overload
    def on_authorization(self, handler: None = None) -> Callable[[AuH], AuH]: ...
    def on_authorization(self, handler: Optional[AuH] = None) -> Union[AuH, Callable[[AuH], AuH]]:
        """Handles servers' needs for a person's OAuth consent with
        ``handler(AuthorizationRequest)``: show its ``authorization_url``
        (a desktop agent opens the browser) and return ``None``, and the
        browser's redirect reaches mcpd's redirect listener; or return the
        URL the browser ended on (a ``str`` or
        :class:`~mcpd_grpc.AuthorizationResult`), and mcpd completes the
        consent with it. Return before the request's ``deadline``; a URL
        caught later goes to :meth:`complete_authorization`. Only clients
        that register this handler are asked."""
        return self._on("authorization", handler)

    @overload
    def on_approval(self, handler: ApH) -> ApH: ...
    @overload
    def on_approval(self, handler: None = None) -> Callable[[ApH], ApH]: ...
    def on_approval(self, handler: Optional[ApH] = None) -> Union[ApH, Callable[[ApH], ApH]]:
        """Decides tool calls that an ``ask`` tool rule holds with
        ``handler(ApprovalRequest)`` returning an
        :class:`~mcpd_grpc.ApprovalResult` or a ``bool``. Without an approval
        handler attached anywhere, such calls are denied."""
        return self._on("approval", handler)

    def _on(self, kind: str, handler: Optional[HandlerT]) -> Union[HandlerT, Callable[[HandlerT], HandlerT]]:
        return handler_registration(self._register, kind, handler)

    def _register(self, kind: str, handler: Callable[[Any], Any]) -> None:
        if not callable(handler):
            raise TypeError(f"{kind} handler must be callable")
        import inspect  # only with handlers: not at start-up

        if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(type(handler).__call__):
            # It would run on a thread and return a coroutine nobody awaits.
            raise TypeError(f"{kind} handler is an async def: a Client runs handlers on threads; register it on an AsyncClient")
        if self._http:
            from ._http import needs_grpc

            raise needs_grpc(f"the {kind} handler (HandleServerRequests)")
        with self._lock:
            if self._closed:
                raise ValueError("the client is closed")
            new_kind = kind not in self._handlers
            self._handlers[kind] = handler
            if self._worker is None:
                self._worker = _RequestWorker(self)
                return
            worker = self._worker
        if new_kind:
            worker.reregister()

    def handlers_ready(self, timeout: Optional[float] = 10.0) -> bool:
        """Waits until mcpd routes requests of every registered kind to this
        client; False on timeout. Raises the error that stopped the handler
        stream for good (e.g. Unauthenticated)."""
        self._check_open()
        with self._lock:
            worker = self._worker
        if worker is None:
            return True
        return worker.wait_ready(timeout)

    def _handler_for(self, kind: str) -> Optional[Callable[[Any], Any]]:
        with self._lock:
            return self._handlers.get(kind)

    def _handler_kinds(self) -> List[str]:
        with self._lock:
            return sorted(self._handlers)


class ToolCallStream:
    """Iterator over a streamed tool call: Progress and LogMessage items,
    then the ToolResult (also kept as ``.result``)."""

    def __init__(self, call: Any, wire_errors: Tuple[Type[BaseException], ...] = ()) -> None:
        self._call = call
        self._wire_errors = wire_errors
        self.result: Optional[t.ToolResult] = None

    def __iter__(self) -> ToolCallStream:
        return self

    def __next__(self) -> StreamItem:
        while True:
            try:
                m = next(self._call)
            except self._wire_errors as e:
                raise from_rpc_error(e, tool_call=True) from e
            item = cv.stream_item(m)
            if item is None:
                continue
            if isinstance(item, t.ToolResult):
                self.result = item
            return item

    def cancel(self) -> None:
        """Cancels the call (and the MCP request upstream)."""
        self._call.cancel()

    def __enter__(self) -> ToolCallStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cancel()


class Subscription:
    """An iterator of :class:`~mcpd_grpc.Event` that reconnects and resumes
    (see :meth:`Client.subscribe`). ``close()`` ends it from any thread; the
    iteration then stops. ``last_sequence`` is the last sequence seen."""

    def __init__(self, client: Client, request: pb.SubscribeRequest, after: Optional[int], reconnect: bool, reconnect_timeout: Optional[float]) -> None:
        self._client = client
        self._errors: Tuple[Type[BaseException], ...] = (MCPDError, *client._wire_errors)
        self._request = request
        self._resume = after
        self._reconnect = reconnect
        self._reconnect_timeout = reconnect_timeout
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._call: Any = None
        self._opened_at = 0.0
        self.last_sequence: Optional[int] = None
        #: How often the stream was opened again after a drop.
        self.reconnects = 0

    def __iter__(self) -> Subscription:
        return self

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Ends the subscription; a blocked ``next()`` stops iterating."""
        self._closed.set()
        with self._lock:
            call, self._call = self._call, None
        if call is not None:
            call.cancel()

    def _open(self) -> Any:
        req = pb.SubscribeRequest()
        req.CopyFrom(self._request)
        if self._resume is not None:
            req.after_sequence = self._resume
        call = self._client._stub.Subscribe(req, metadata=self._client._metadata)
        with self._lock:
            if self._closed.is_set():
                call.cancel()
                raise StopIteration
            self._call = call
        self._opened_at = time.monotonic()
        return call

    def __next__(self) -> t.Event:
        policy = _common.ReconnectPolicy(self._reconnect_timeout)
        while True:
            if self._closed.is_set():
                raise StopIteration
            with self._lock:
                call = self._call
            if call is None:
                call = self._open()
            err: Optional[BaseException] = None
            try:
                m = next(call)
            except StopIteration:
                pass  # mcpd ended the stream: resume like after a drop
            except self._errors as e:
                err = e
            else:
                ev = cv.event(m.event)
                self._resume = self.last_sequence = ev.sequence
                return ev
            with self._lock:
                if self._call is call:
                    self._call = None
            headers = call.initial_metadata()
            if self._resume is None:
                # No event yet: resume where the stream started, not from
                # a later "now".
                self._resume = _common.after_sequence(headers)
            if self._closed.is_set():
                raise StopIteration
            answered_at = _common.answered_at(headers, self._opened_at)
            wait = policy.next_wait(time.monotonic(), answered_at) if self._reconnect and _common.resumable(err) else None
            if wait is None:
                if err is None:
                    raise StopIteration
                if isinstance(err, MCPDError):
                    raise err
                raise from_rpc_error(err) from err
            _common.log.debug("subscribe stream dropped; resuming after %s in %.2fs", self._resume, wait)
            if self._closed.wait(wait):
                raise StopIteration
            self.reconnects += 1


class _RequestWorker:
    """Owns the HandleServerRequests stream of a Client: one thread reads
    requests and reopens the stream after drops; a handler of a new kind
    is registered on the open stream (mcpd confirms each registration in
    turn), so that replies of requests under way keep their stream.
    Handlers run on a pool and queue their replies."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._cond = threading.Condition()
        self._want = 0  # registration generation the handlers need
        self._have = -1  # generation mcpd confirmed on the open stream
        self._call: Any = None
        #: The open stream's outbox, and the generations of the
        #: registrations sent on it that mcpd has not confirmed yet.
        self._outbox: Optional[queue.Queue[Any]] = None
        self._unconfirmed: Deque[int] = collections.deque()
        #: Whether a registration went out again on the open stream (an
        #: mcpd older than that refuses it, and the stream is opened anew).
        self._again = False
        self._error: Optional[BaseException] = None
        self._stopped = threading.Event()
        self._pool = _common.handler_pool()
        #: The requests whose handlers have not answered yet, by id: a
        #: cancel from mcpd reaches them through these.
        self._pending: Dict[str, Any] = {}
        self._pending_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="mcpd-server-requests", daemon=True)
        self._thread.start()

    def reregister(self) -> None:
        with self._cond:
            self._want += 1
            if self._outbox is not None:
                self._again = True
                self._register(self._outbox)

    def _register(self, outbox: queue.Queue[Any]) -> None:
        """Sends the current kinds on a stream (under _cond)."""
        self._unconfirmed.append(self._want)
        outbox.put(cv.registration(self._client._handler_kinds()))

    def wait_ready(self, timeout: Optional[float]) -> bool:
        with self._cond:
            self._cond.wait_for(lambda: self._have == self._want or self._error is not None or self._stopped.is_set(), timeout)
            if self._error is not None:
                raise self._error
            return self._have == self._want

    def stop(self) -> None:
        self._stopped.set()
        self._cancel_pending("the client closed")
        with self._cond:
            call = self._call
            self._cond.notify_all()
        if call is not None:
            call.cancel()
        self._thread.join(timeout=10)
        if self._thread.is_alive():  # pragma: no cover - a gRPC bug
            _common.log.warning("server-request stream did not stop within 10s")
        # A handler still running (a slow model call) sees its request
        # cancelled and finishes on its own; its reply goes nowhere.
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        import queue

        import grpc

        delay = _common.RECONNECT_INITIAL
        while not self._stopped.is_set():
            outbox: queue.Queue[Any] = queue.Queue()
            with self._cond:
                self._unconfirmed.clear()
                self._again = False
                self._register(outbox)
                self._outbox = outbox
            call = self._client._stub.HandleServerRequests(_drain(outbox), metadata=self._client._metadata)
            with self._cond:
                self._call = call
            if self._stopped.is_set():
                call.cancel()
            err: Optional[grpc.RpcError] = None
            try:
                for msg in call:
                    which = msg.WhichOneof("message")
                    if which == "registered":
                        delay = _common.RECONNECT_INITIAL
                        with self._cond:
                            if self._unconfirmed:
                                self._have = self._unconfirmed.popleft()
                            self._cond.notify_all()
                    elif which == "request":
                        req = cv.server_request(msg.request)
                        if req is not None:
                            with self._pending_lock:
                                self._pending[req.id] = req
                        self._pool.submit(self._handle, msg.request, req, outbox)
                    elif which == "cancel":
                        self._cancel(msg.cancel.id, cv.cancel_reason(msg.cancel))
                    elif which == "reply_refused":
                        cv.log_refusal(msg.reply_refused)
            except grpc.RpcError as e:
                err = e
            except RuntimeError:  # the pool shut down under us: stopping
                pass
            finally:
                outbox.put(_END)
                # No reply reaches mcpd after the stream: the handlers still
                # running may stop.
                self._cancel_pending("the server-request stream ended")
                with self._cond:
                    self._call = None
                    self._outbox = None
                    self._have = -1
            if self._stopped.is_set():
                break
            if err is not None and err.code() == grpc.StatusCode.INVALID_ARGUMENT and self._again:
                _common.log.debug("mcpd refused a registration sent again (an older mcpd); opening a new stream")
                continue
            if err is not None and err.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                with self._cond:
                    self._error = from_rpc_error(err)
                    self._cond.notify_all()
                _common.log.error("server-request stream failed: %s", self._error)
                return
            _common.log.debug("server-request stream ended (%s); reopening in %.2fs", err and err.code(), delay)
            if self._stopped.wait(delay):
                break
            delay = _common.next_backoff(delay)

    def _cancel(self, req_id: str, reason: str) -> None:
        with self._pending_lock:
            req = self._pending.pop(req_id, None)
        if req is not None:
            t.cancellation_of(req).cancel(reason)

    def _cancel_pending(self, reason: str) -> None:
        with self._pending_lock:
            ids = list(self._pending)
        for req_id in ids:
            self._cancel(req_id, reason)

    def _handle(self, msg: pb.ServerRequest, req: Any, outbox: queue.Queue[Any]) -> None:
        if req is None:
            reply = cv.unknown_kind_reply(msg.id)
        else:
            kind = cv.kind_of(req)
            try:
                if req.cancelled:
                    return  # while it waited for a thread
                handler = self._client._handler_for(kind)
                try:
                    if handler is None:
                        raise cv.no_handler(kind)
                    reply = cv.reply_for(req, cv.not_awaitable(kind, handler(req)))
                except Exception as e:
                    if req.cancelled:
                        return  # it stopped at the cancel, as asked: no failure to log
                    reply = cv.failure_reply(req, kind, e)
                if req.cancelled:
                    _common.log.debug("%s handler answered request %s after mcpd stopped waiting (%s); the reply is not sent", kind, req.id, req.cancel_reason)
                    return
            finally:
                with self._pending_lock:
                    self._pending.pop(req.id, None)
        outbox.put(pb.HandleServerRequestsRequest(reply=reply))


def _drain(outbox: queue.Queue[Any]) -> Iterator[Any]:
    while True:
        m = outbox.get()
        if m is _END:
            return
        yield m
