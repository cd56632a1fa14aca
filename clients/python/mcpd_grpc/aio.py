"""The asyncio mcpd client, with the same methods as the sync
:class:`~mcpd_grpc.Client`, on either wire: gRPC (grpc.aio) or the HTTP
wire (asyncio streams); create and use it inside a running event loop."""

from __future__ import annotations

import asyncio
import collections
import inspect
import time
import weakref
from typing import Any, Awaitable, Callable, Deque, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Type, TypeVar, Union, overload

import grpc
import grpc.aio

from . import _common
from . import _convert as cv
from . import names as _names
from . import types as t
from ._http_aio import EOF as _HTTP_EOF
from ._http_aio import task_cancelling as _task_cancelling
from .agent_tools import AgentTools, AsyncToolServing
from .client import (
    ApprovalReturn,
    AuthorizationReturn,
    ElicitationReturn,
    HandlerT,
    ResourceRefLike,
    RootLike,
    RootsReturn,
    SamplingReturn,
    ServerConfigLike,
    StreamItem,
    handler_registration,
)
from .errors import Cancelled, InvalidArgument, MCPDError, NotFound, from_rpc_error
from .mcpd.v1 import mcpd_pb2 as pb

#: grpc.aio's end-of-stream marker for call.read(); grpc-stubs lacks it.
_AIO_EOF: object = grpc.aio.EOF  # type: ignore[attr-defined]


async def _settled_error(call: Any, err: grpc.RpcError) -> grpc.RpcError:
    """Returns the status the call really ended with.

    A write to a call that the server has just ended (an authentication
    failure rejects HandleServerRequests at once) fails in grpc.aio with
    INTERNAL "Internal error from Core", and that stands as the call's
    status until the server's own status is processed, a moment later. So an
    INTERNAL is checked again for a short while before it counts.
    """
    if err.code() != grpc.StatusCode.INTERNAL:
        return err
    for _ in range(_SETTLE_POLLS):
        await asyncio.sleep(_SETTLE_INTERVAL)
        code = await call.code()
        if code != grpc.StatusCode.INTERNAL:
            return grpc.aio.AioRpcError(
                code, await call.initial_metadata(), await call.trailing_metadata(), await call.details(), await call.debug_error_string()
            )
    return err


def _status_lost(err: grpc.RpcError) -> bool:
    """Whether err is grpc.aio's own stand-in for a status it lost (see
    _settled_error) rather than one from mcpd: the stream is opened again,
    as after UNAVAILABLE, and the next attempt learns the real status."""
    return bool(err.code() == grpc.StatusCode.INTERNAL and err.details() == _CORE_INTERNAL)


_CORE_INTERNAL = "Internal error from Core"

#: How long _settled_error waits for a call's real status: 50 x 10 ms.
_SETTLE_POLLS = 50
_SETTLE_INTERVAL = 0.01

__all__ = ["AsyncClient", "AsyncSubscription", "AsyncToolCallStream"]

# The handlers of an AsyncClient may also be coroutine functions.
AsyncSamplingHandler = Callable[[t.SamplingRequest], Union[SamplingReturn, Awaitable[SamplingReturn]]]
AsyncElicitationHandler = Callable[[t.ElicitationRequest], Union[ElicitationReturn, Awaitable[ElicitationReturn]]]
AsyncRootsHandler = Callable[[t.RootsRequest], Union[RootsReturn, Awaitable[RootsReturn]]]
AsyncAuthorizationHandler = Callable[[t.AuthorizationRequest], Union[AuthorizationReturn, Awaitable[AuthorizationReturn]]]
AsyncApprovalHandler = Callable[[t.ApprovalRequest], Union[ApprovalReturn, Awaitable[ApprovalReturn]]]

SH = TypeVar("SH", bound=AsyncSamplingHandler)
EH = TypeVar("EH", bound=AsyncElicitationHandler)
RH = TypeVar("RH", bound=AsyncRootsHandler)
AuH = TypeVar("AuH", bound=AsyncAuthorizationHandler)
ApH = TypeVar("ApH", bound=AsyncApprovalHandler)

_UNSET: Any = object()


class AsyncClient:
    """An asyncio client of one mcpd daemon; see :class:`~mcpd_grpc.Client`
    for the arguments and the two wires. Every RPC method is a coroutine;
    :meth:`subscribe` and :meth:`call_tool_stream` return async iterators.
    On the HTTP wire (an ``http://``, ``https://`` or ``http+unix://``
    target) it has no handlers and no :meth:`serve_tools`, like the sync
    Client there.

    It belongs to the running loop it is created in (made outside any
    loop, to the first loop that uses it); a call from another loop raises
    RuntimeError.

    Handlers (``on_sampling`` ...) may be ``async def`` or plain functions
    (run in a thread). They are served by a task that starts as soon as one
    is registered inside a running loop (otherwise on ``async with`` or
    :meth:`handlers_ready`).
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
        #: The exceptions a failed call raises: the HTTP wire raises
        #: MCPDError itself.
        self._wire_errors: Tuple[Type[BaseException], ...] = (MCPDError,)
        self._http = self.target.startswith(_common.HTTP_SCHEMES)
        #: The loop this client belongs to: the running one at creation,
        #: else the first that uses it. A grpc.aio channel, asyncio streams
        #: and tasks work only on their own loop.
        self._loop: Optional[asyncio.AbstractEventLoop] = _running_loop()
        #: The channel's arguments, until the channel is made in the
        #: client's loop.
        self._channel_args: Optional[Tuple[Optional[grpc.ChannelCredentials], Sequence[Tuple[str, Any]]]] = None
        self._wire_stub: Any = None
        if self._http:
            from ._http_aio import AsyncHTTPStub

            if credentials is not None or options is not None:
                raise ValueError("credentials= and options= are for the gRPC wire; an https:// target takes ca_file=/cert_file=/key_file=")
            self._wire_stub = AsyncHTTPStub(self.target, ca_file=ca_file, cert_file=cert_file, key_file=key_file, keepalive=keepalive)
        else:
            opts = _common.channel_options(options, keepalive)
            credentials = _common.tls_credentials(credentials, ca_file, cert_file, key_file)
            self._channel_args = (credentials, opts)
            if self._loop is not None:
                self._open_channel()
            self._wire_errors = (MCPDError, grpc.RpcError)
        self._timeout = timeout
        self._to_qualified: Dict[str, str] = {}
        self._handlers: Dict[str, Callable[[Any], Any]] = {}
        self._worker: Optional[_AsyncRequestWorker] = None
        self._streams: weakref.WeakSet[Any] = weakref.WeakSet()
        self._closed = False
        #: The work of close(), once it began.
        self._closing: Optional[asyncio.Task[None]] = None

    def __repr__(self) -> str:
        return f"AsyncClient(target={self.target!r})"

    def _open_channel(self) -> None:
        assert self._channel_args is not None
        credentials, opts = self._channel_args
        if credentials is not None:
            self._channel = grpc.aio.secure_channel(self.target, credentials, opts)
        else:
            self._channel = grpc.aio.insecure_channel(self.target, opts)
        self._wire_stub = _common.new_stub(self._channel)

    @property
    def _stub(self) -> Any:
        """The wire's stub, for a call from the running loop."""
        self._check_loop()
        return self._wire_stub

    def _check_loop(self) -> None:
        """Binds the client to the running loop, or refuses a loop other
        than its own (whose channel or connections this one cannot use)."""
        loop = asyncio.get_running_loop()
        if loop is self._loop:
            return
        if self._loop is not None:
            raise RuntimeError(
                "this AsyncClient belongs to the event loop it was first used in (or created in), "
                "not to the running one: create the AsyncClient inside the running loop that uses it, "
                "e.g. with `async with AsyncClient(...)` in the coroutine that asyncio.run runs"
            )
        if self._closed:
            raise ValueError("the client is closed")
        self._loop = loop
        if self._wire_stub is None:
            self._open_channel()

    async def __aenter__(self) -> AsyncClient:
        self._check_loop()
        self._ensure_worker()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Stops the request handlers and open streams, waits for the tasks
        of :meth:`serve_tools`, and closes the channel. Idempotent: a close
        whose caller is cancelled goes on to the end, and a later call
        waits for it."""
        closing = self._closing
        if closing is None:
            if self._loop is not None:
                self._check_loop()  # what needs closing belongs to the client's loop
            self._closed = True
            closing = self._closing = asyncio.get_running_loop().create_task(self._close())
            closing.add_done_callback(_retrieve)
        elif closing.done():
            return
        # Shielded: a close cut off part-way (a timeout around it, a
        # shutdown that cancels the tasks left) would leave the channel open
        # for good, the client being closed for every later call.
        await asyncio.shield(closing)

    async def _close(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            await worker.stop()
        streams = list(self._streams)
        for s in streams:
            s.close()
        # A serving's reader, writer and tool tasks end a few turns of the
        # loop after close(): wait for them, so that nothing of this client
        # is left running once close returns.
        for s in streams:
            if isinstance(s, AsyncToolServing):
                await s.stop()
        if self._channel is not None:
            await self._channel.close(None)
        elif self._http:
            self._wire_stub.close()

    # -- plumbing ----------------------------------------------------------

    async def _rpc(self, method: Any, request: Any, timeout: Any = _UNSET, tool_call: bool = False) -> Any:
        """Calls method; tool_call says that it runs a tool, which a
        connection cut off during it may have run (see from_rpc_error; the
        HTTP wire tells that itself)."""
        if self._closed:
            raise ValueError("the client is closed")
        timeout = self._timeout if timeout is _UNSET else timeout
        try:
            return await method(request, metadata=self._metadata, timeout=timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e, tool_call) from e
        except asyncio.CancelledError:
            # grpc.aio ends the calls of a channel that close() closed this
            # way; the task itself was not cancelled (as the sync Client).
            if self._is_closed() and not _task_cancelling():
                raise Cancelled("the client was closed") from None
            raise

    def _is_closed(self) -> bool:
        # A method, not the attribute: close() sets it while a call awaits,
        # and type checkers keep an attribute narrowed across awaits.
        return self._closed

    async def _pages(self, method: Any, request_type: Any, field: str, server: Optional[str]) -> List[Any]:
        out: List[Any] = []
        token = ""
        # One deadline for the whole listing, not a fresh one per page.
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while True:
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            resp = await self._rpc(method, request_type(server=server or "", page_token=token), timeout)
            out.extend(getattr(resp, field))
            token = resp.next_page_token
            if not token:
                return out

    # -- servers -----------------------------------------------------------

    async def servers(self) -> List[t.Server]:
        """Returns every server, sorted by name."""
        return [cv.server(s) for s in (await self._rpc(self._stub.ListServers, pb.ListServersRequest())).servers]

    async def get_server(self, name: str) -> t.Server:
        """Returns one server's status. Raises NotFound."""
        return cv.server((await self._rpc(self._stub.GetServer, pb.GetServerRequest(name=name))).server)

    async def connect_server(self, config: ServerConfigLike, *, replace: bool = False) -> t.Server:
        """Connects a server and waits until it is ready or has failed."""
        req = pb.ConnectServerRequest(server=cv.server_config_to_proto(config), replace=replace)
        return cv.server((await self._rpc(self._stub.ConnectServer, req)).server)

    async def disconnect_server(self, name: str) -> None:
        """Disconnects a server, stops its process and forgets it."""
        await self._rpc(self._stub.DisconnectServer, pb.DisconnectServerRequest(name=name))

    async def restart_server(self, name: str) -> t.Server:
        """Stops a server and connects it again with the same configuration."""
        return cv.server((await self._rpc(self._stub.RestartServer, pb.RestartServerRequest(name=name))).server)

    async def complete_authorization(self, server: str, redirect_url: str) -> t.Server:
        """Completes a server's pending OAuth consent with the URL the
        browser was redirected to; see
        :meth:`mcpd_grpc.Client.complete_authorization`."""
        req = pb.CompleteAuthorizationRequest(server=server, redirect_url=redirect_url)
        return cv.server((await self._rpc(self._stub.CompleteAuthorization, req)).server)

    async def forget_authorization(self, server: str) -> None:
        """Deletes a server's OAuth tokens and client registration; see
        :meth:`mcpd_grpc.Client.forget_authorization`."""
        await self._rpc(self._stub.ForgetAuthorization, pb.ForgetAuthorizationRequest(server=server))

    async def set_server_enabled(self, name: str, enabled: bool) -> t.Server:
        """Disables a server, or enables it and waits until it is ready or
        has failed."""
        req = pb.SetServerEnabledRequest(name=name, enabled=enabled)
        return cv.server((await self._rpc(self._stub.SetServerEnabled, req)).server)

    # -- tools -------------------------------------------------------------

    async def list_tools(self, server: Optional[str] = None) -> List[t.Tool]:
        """Lists the tools of one server, or of all ready servers (every page)."""
        return [cv.tool(x) for x in await self._pages(self._stub.ListTools, pb.ListToolsRequest, "tools", server)]

    async def call_tool(
        self,
        name: str,
        arguments: Union[None, str, Mapping[str, Any]] = None,
        *,
        timeout: Optional[float] = None,
        meta: Optional[Mapping[str, Any]] = None,
    ) -> t.ToolResult:
        """Calls a tool by qualified or provider-safe name; see
        :meth:`mcpd_grpc.Client.call_tool`."""
        req = cv.call_request(pb.CallToolRequest, self._to_qualified.get(name, name), arguments, timeout, meta)
        deadline = timeout + _common.CALL_TIMEOUT_GRACE if timeout is not None else _UNSET
        try:
            return cv.tool_result(await self._rpc(self._stub.CallTool, req, deadline, tool_call=True))
        except (NotFound, InvalidArgument) as e:
            # mcpd's own refusal of an unknown name carries no JSON-RPC code.
            if e.jsonrpc_code is not None:
                raise
            retry = await self._retry_name(name, req.name)
            if retry is None:
                raise
            req.name = retry
            return cv.tool_result(await self._rpc(self._stub.CallTool, req, deadline, tool_call=True))

    def call_tool_stream(
        self,
        name: str,
        arguments: Union[None, str, Mapping[str, Any]] = None,
        *,
        timeout: Optional[float] = None,
        meta: Optional[Mapping[str, Any]] = None,
    ) -> AsyncToolCallStream:
        """Calls a tool; ``async for`` over its Progress and LogMessage items,
        then its ToolResult."""
        if self._closed:
            raise ValueError("the client is closed")
        req = cv.call_request(pb.CallToolStreamRequest, self._to_qualified.get(name, name), arguments, timeout, meta)
        deadline = timeout + _common.CALL_TIMEOUT_GRACE if timeout is not None else None
        stream = AsyncToolCallStream(self._stub.CallToolStream(req, metadata=self._metadata, timeout=deadline))
        self._streams.add(stream)  # close() cancels it
        return stream

    async def serve_tools(self, tools: AgentTools, *, replace: bool = False) -> AsyncToolServing:
        """Serves the agent's own tools (see :meth:`Client.serve_tools`).
        Async tools run on this loop, sync ones in its executor."""
        if self._http:
            from ._http import needs_grpc

            raise needs_grpc("serve_tools")
        if self._closed:
            raise ValueError("the client is closed")
        serving = await AsyncToolServing.open(self._stub, self._metadata, tools, replace=replace)
        self._streams.add(serving)
        return serving

    async def tools_for_openai(self, server: Optional[str] = None, *, api: str = "chat") -> List[Dict[str, Any]]:
        """The tools in OpenAI's format, with provider-safe names."""
        return await self._definitions(server, "openai", api=api)

    async def tools_for_anthropic(self, server: Optional[str] = None) -> List[Dict[str, Any]]:
        """The tools in Anthropic's format, with provider-safe names."""
        return await self._definitions(server, "anthropic")

    async def _definitions(self, server: Optional[str], fmt: str, **kwargs: Any) -> List[Dict[str, Any]]:
        defs, back = _names.tool_definitions(await self.list_tools(server), fmt, **kwargs)
        self._to_qualified.update(back)
        return defs

    async def _retry_name(self, name: str, tried: str) -> Optional[str]:
        if tried != name:
            return None
        back = {p: q for q, p in _names.provider_names(x.name for x in await self.list_tools()).items()}
        self._to_qualified.update(back)
        q = back.get(name)
        return q if q is not None and q != name else None

    # -- resources, prompts, completion ------------------------------------

    async def list_resources(self, server: Optional[str] = None) -> List[t.Resource]:
        """Lists the resources of one server or of all ready servers."""
        return [cv.resource(x) for x in await self._pages(self._stub.ListResources, pb.ListResourcesRequest, "resources", server)]

    async def list_resource_templates(self, server: Optional[str] = None) -> List[t.ResourceTemplate]:
        """Lists the resource templates of one server or of all ready servers."""
        return [
            cv.resource_template(x) for x in await self._pages(self._stub.ListResourceTemplates, pb.ListResourceTemplatesRequest, "resource_templates", server)
        ]

    async def read_resource(self, server: str, uri: str) -> t.ResourceResult:
        """Reads one resource."""
        return cv.resource_result(await self._rpc(self._stub.ReadResource, pb.ReadResourceRequest(server=server, uri=uri)))

    async def list_prompts(self, server: Optional[str] = None) -> List[t.Prompt]:
        """Lists the prompts of one server or of all ready servers."""
        return [cv.prompt(x) for x in await self._pages(self._stub.ListPrompts, pb.ListPromptsRequest, "prompts", server)]

    async def get_prompt(self, server: str, name: str, arguments: Optional[Mapping[str, str]] = None) -> t.PromptResult:
        """Renders a prompt with string arguments."""
        req = pb.GetPromptRequest(server=server, name=name, arguments=dict(arguments or {}))
        return cv.prompt_result(await self._rpc(self._stub.GetPrompt, req))

    async def complete(
        self,
        server: str,
        argument: str,
        value: str = "",
        *,
        prompt: Optional[str] = None,
        resource_template: Optional[str] = None,
        context: Optional[Mapping[str, str]] = None,
    ) -> t.Completion:
        """Asks for completions of a prompt or resource template argument."""
        req = cv.complete_request(server, argument, value, prompt, resource_template, context)
        return cv.completion(await self._rpc(self._stub.Complete, req))

    async def set_log_level(self, server: str, level: Union[str, t.LogLevel]) -> None:
        """Sets the minimum level of log messages a server sends."""
        await self._rpc(self._stub.SetLogLevel, pb.SetLogLevelRequest(server=server, level=cv.log_level_to_proto(level)))

    async def set_roots(self, roots: Sequence[RootLike], *, server: Optional[str] = None) -> None:
        """Sets the roots offered to one server, or to all."""
        await self._rpc(self._stub.SetRoots, pb.SetRootsRequest(server=server or "", roots=cv.roots_to_proto(roots)))

    # -- events ------------------------------------------------------------

    # -- polls and tool search ----------------------------------------------

    async def start_poll(
        self,
        server: str,
        *,
        resource_uri: Optional[str] = None,
        tool: Optional[str] = None,
        arguments: Union[None, str, Mapping[str, Any]] = None,
        interval: Optional[float] = None,
    ) -> t.Poll:
        """Starts a poll; see :meth:`mcpd_grpc.Client.start_poll`."""
        req = cv.start_poll_request(server, resource_uri, tool, arguments, interval)
        return cv.poll((await self._rpc(self._stub.StartPoll, req)).poll)

    async def stop_poll(self, poll_id: str) -> None:
        """Stops a poll."""
        await self._rpc(self._stub.StopPoll, pb.StopPollRequest(id=poll_id))

    async def list_polls(self) -> List[t.Poll]:
        """Lists the polls, sorted by id."""
        return [cv.poll(p) for p in (await self._rpc(self._stub.ListPolls, pb.ListPollsRequest())).polls]

    async def search_tools(self, query: str, *, limit: int = 0, servers: Optional[Sequence[str]] = None) -> List[t.ToolMatch]:
        """Ranks tools by relevance; see :meth:`mcpd_grpc.Client.search_tools`."""
        req = pb.SearchToolsRequest(query=query, limit=limit, servers=list(servers or ()))
        return [cv.tool_match(m) for m in (await self._rpc(self._stub.SearchTools, req)).matches]

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
    ) -> AsyncSubscription:
        """Follows events with ``async for``; it reconnects and resumes like
        :meth:`mcpd_grpc.Client.subscribe`."""
        if self._closed:
            raise ValueError("the client is closed")
        req = cv.subscribe_request(servers, resources, kinds, poll_ids, fallback_poll_interval)
        sub = AsyncSubscription(self, req, after_sequence, reconnect, reconnect_timeout)
        self._streams.add(sub)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return sub  # opened by the first __anext__
        sub._open()
        return sub

    # -- server requests ---------------------------------------------------

    @overload
    def on_sampling(self, handler: SH) -> SH: ...
    @overload
    def on_sampling(self, handler: None = None) -> Callable[[SH], SH]: ...
    def on_sampling(self, handler: Optional[SH] = None) -> Union[SH, Callable[[SH], SH]]:
        """Answers sampling requests; see :meth:`mcpd_grpc.Client.on_sampling`."""
        return self._on("sampling", handler)

    @overload
    def on_elicitation(self, handler: EH) -> EH: ...
    @overload
    def on_elicitation(self, handler: None = None) -> Callable[[EH], EH]: ...
    def on_elicitation(self, handler: Optional[EH] = None) -> Union[EH, Callable[[EH], EH]]:
        """Answers elicitation requests; see :meth:`mcpd_grpc.Client.on_elicitation`."""
        return self._on("elicitation", handler)

    @overload
    def on_roots(self, handler: RH) -> RH: ...
    @overload
    def on_roots(self, handler: None = None) -> Callable[[RH], RH]: ...
    def on_roots(self, handler: Optional[RH] = None) -> Union[RH, Callable[[RH], RH]]:
        """Answers roots/list; see :meth:`mcpd_grpc.Client.on_roots`."""
        return self._on("roots", handler)

    @overload
    def on_authorization(self, handler: AuH) -> AuH: ...
    @overload
    def on_authorization(self, handler: None = None) -> Callable[[AuH], AuH]: ...
    def on_authorization(self, handler: Optional[AuH] = None) -> Union[AuH, Callable[[AuH], AuH]]:
        """Handles servers' needs for a person's OAuth consent; see
        :meth:`mcpd_grpc.Client.on_authorization`."""
        return self._on("authorization", handler)

    @overload
    def on_approval(self, handler: ApH) -> ApH: ...
    @overload
    def on_approval(self, handler: None = None) -> Callable[[ApH], ApH]: ...
    def on_approval(self, handler: Optional[ApH] = None) -> Union[ApH, Callable[[ApH], ApH]]:
        """Decides tool calls held by ``ask`` rules; see :meth:`mcpd_grpc.Client.on_approval`."""
        return self._on("approval", handler)

    def _on(self, kind: str, handler: Optional[HandlerT]) -> Union[HandlerT, Callable[[HandlerT], HandlerT]]:
        return handler_registration(self._register, kind, handler)

    def _register(self, kind: str, handler: Callable[[Any], Any]) -> None:
        if not callable(handler):
            raise TypeError(f"{kind} handler must be callable")
        if self._http:
            from ._http import needs_grpc

            raise needs_grpc(f"the {kind} handler (HandleServerRequests)")
        if self._closed:
            raise ValueError("the client is closed")
        new_kind = kind not in self._handlers
        self._handlers[kind] = handler
        if self._worker is not None:
            if new_kind:
                self._worker.reregister()
        else:
            self._ensure_worker()

    def _ensure_worker(self) -> None:
        if self._worker is not None or not self._handlers or self._closed:
            return
        if _running_loop() is None:
            return  # started later, inside the loop
        self._check_loop()
        self._worker = _AsyncRequestWorker(self)

    async def handlers_ready(self, timeout: Optional[float] = 10.0) -> bool:
        """Waits until mcpd routes requests of every registered kind to this
        client; False on timeout."""
        if self._closed:
            raise ValueError("the client is closed")
        self._ensure_worker()
        if self._worker is None:
            return True
        return await self._worker.wait_ready(timeout)


class AsyncToolCallStream:
    """Async iterator over a streamed tool call; ``result`` keeps the
    ToolResult. ``cancel()`` cancels the call upstream."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._cancelled = False
        self.result: Optional[t.ToolResult] = None

    def __aiter__(self) -> AsyncToolCallStream:
        return self

    async def __anext__(self) -> StreamItem:
        while True:
            try:
                m = await self._call.read()
            except grpc.RpcError as e:
                raise from_rpc_error(e, tool_call=True) from e
            except asyncio.CancelledError:
                # grpc.aio ends a read of a cancelled call this way; a
                # cancel() of ours is the call's end, not the task's.
                if self._cancelled:
                    raise Cancelled("the call was cancelled") from None
                # This task was cancelled (a timeout around the read), and
                # grpc.aio cancelled the call with it: a later read raises
                # Cancelled, as on the HTTP wire.
                self._cancelled = True
                raise
            if m is _AIO_EOF or m is _HTTP_EOF:
                raise StopAsyncIteration
            item = cv.stream_item(m)
            if item is None:
                continue
            if isinstance(item, t.ToolResult):
                self.result = item
            return item

    def cancel(self) -> None:
        """Cancels the call (and the MCP request upstream)."""
        self._cancelled = True
        self._call.cancel()

    def close(self) -> None:
        """Same as :meth:`cancel`; the client's ``close()`` calls it."""
        self.cancel()

    async def __aenter__(self) -> AsyncToolCallStream:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.cancel()


class AsyncSubscription:
    """Async iterator of :class:`~mcpd_grpc.Event` that reconnects and
    resumes; ``close()`` (or ``await aclose()``) ends it. A read that is
    cancelled (a timeout around ``__anext__`` or ``async for``) leaves the
    stream open: the next read returns what that one was waiting for."""

    def __init__(self, client: AsyncClient, request: pb.SubscribeRequest, after: Optional[int], reconnect: bool, reconnect_timeout: Optional[float]) -> None:
        self._client = client
        self._request = request
        self._resume = after
        self._reconnect = reconnect
        self._reconnect_timeout = reconnect_timeout
        self._closed = False
        self._wake: Optional[asyncio.Event] = None
        self._call: Any = None
        #: The read of _call under way; it outlives an __anext__ that was
        #: cancelled (asyncio.wait_for), and the next one takes its message.
        self._reading: Optional[asyncio.Task[Any]] = None
        self._opened_at = 0.0
        #: The reconnect budget of the outage under way: it outlives an
        #: __anext__ that was cancelled (a timeout around the read), and
        #: ends with the next event.
        self._policy: Optional[_common.ReconnectPolicy] = None
        #: The loop of the subscription's call, for a close() from
        #: another thread.
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self.last_sequence: Optional[int] = None
        self.reconnects = 0

    def __aiter__(self) -> AsyncSubscription:
        return self

    async def __aenter__(self) -> AsyncSubscription:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Ends the subscription; a pending ``__anext__`` stops iterating."""
        self._closed = True
        loop = self._loop
        if loop is not None and not _on_loop(loop):
            # From another thread: the call, the read and the event belong
            # to the loop, and only its thread may cancel or set them.
            try:
                loop.call_soon_threadsafe(self.close)
            except RuntimeError:  # the loop is closed, and the call with it
                pass
            return
        if self._wake is not None:
            self._wake.set()
        call, self._call = self._call, None
        reading, self._reading = self._reading, None
        if call is not None:
            call.cancel()
        if reading is not None:
            reading.cancel()

    def __del__(self) -> None:
        # A read under way keeps its call referenced, so neither grpc.aio
        # nor the HTTP stream ends the call of an abandoned subscription;
        # cancelling the read does, on the loop's thread (a collection may
        # run on any thread).
        reading = getattr(self, "_reading", None)
        if reading is not None and not reading.done():
            try:
                reading.get_loop().call_soon_threadsafe(reading.cancel)
            except RuntimeError:  # the loop is closed, and the call with it
                pass

    async def aclose(self) -> None:
        """Same as :meth:`close`, for ``contextlib.aclosing`` and friends."""
        self.close()

    def _is_closed(self) -> bool:
        # A method, not the attribute: close() sets it while __anext__
        # awaits, and type checkers keep an attribute narrowed across awaits.
        return self._closed

    def _open(self) -> Any:
        req = pb.SubscribeRequest()
        req.CopyFrom(self._request)
        if self._resume is not None:
            req.after_sequence = self._resume
        call = self._call = self._client._stub.Subscribe(req, metadata=self._client._metadata)
        self._loop = asyncio.get_running_loop()
        self._opened_at = time.monotonic()
        return call

    async def __anext__(self) -> t.Event:
        while True:
            if self._closed:
                raise StopAsyncIteration
            call = self._call
            if call is None:
                call = self._open()
            reading = self._reading
            if reading is None:
                reading = self._reading = asyncio.get_running_loop().create_task(call.read())
                reading.add_done_callback(_retrieve)
            m: Any = _AIO_EOF  # what a failed read leaves: no message
            err: Optional[BaseException] = None
            try:
                # Shielded: cancelling this task (a timeout around the
                # read) must not cancel the call, or a message read off the
                # wire in that moment would be lost.
                m = await asyncio.shield(reading)
            except self._client._wire_errors as e:
                err = e
            except asyncio.CancelledError:
                # Closed: the end of the iteration, unless this task is
                # being cancelled too (that goes on as the task's own).
                if self._is_closed() and not _task_cancelling():
                    raise StopAsyncIteration from None
                if not reading.cancelled() or _task_cancelling():
                    raise  # this task's cancellation; the read carries on
                err = Cancelled("the subscription's stream was cancelled")
            if self._reading is reading:
                self._reading = None
            if m is not _AIO_EOF and m is not _HTTP_EOF:
                ev = cv.event(m.event)
                self._resume = self.last_sequence = ev.sequence
                self._policy = None
                return ev
            if self._call is call:
                self._call = None
            headers = await call.initial_metadata()
            if self._resume is None:
                # No event yet: resume where the stream started, not from
                # a later "now".
                self._resume = _common.after_sequence(headers)
            if self._closed:
                raise StopAsyncIteration
            if self._policy is None:
                self._policy = _common.ReconnectPolicy(self._reconnect_timeout)
            answered_at = _common.answered_at(headers, self._opened_at)
            wait = self._policy.next_wait(time.monotonic(), answered_at) if self._reconnect and _common.resumable(err) else None
            if wait is None:
                if err is None:
                    raise StopAsyncIteration
                if isinstance(err, MCPDError):
                    raise err
                raise from_rpc_error(err) from err
            _common.log.debug("subscribe stream dropped; resuming after %s in %.2fs", self._resume, wait)
            if self._wake is None:
                self._wake = asyncio.Event()
            try:
                await asyncio.wait_for(self._wake.wait(), wait)
            except asyncio.TimeoutError:
                pass
            self.reconnects += 1


def _running_loop() -> Optional[asyncio.AbstractEventLoop]:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the caller runs in loop (on its thread)."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Takes a finished read's exception, so that a read nobody awaits
    any more (its subscription closed) logs no "never retrieved"."""
    if not task.cancelled():
        task.exception()


class _AsyncRequestWorker:
    """Owns the HandleServerRequests stream of an AsyncClient: one task
    reads requests and reopens the stream; each request runs as a task. A
    handler of a new kind is registered on the open stream (mcpd confirms
    each registration in turn), so that replies of requests under way keep
    their stream."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._cond = asyncio.Condition()
        self._want = 0
        self._have = -1
        self._call: Any = None
        #: Generations of the registrations sent on the open stream that
        #: mcpd has not confirmed yet.
        self._unconfirmed: Deque[int] = collections.deque()
        #: Whether a registration went out again on the open stream (an
        #: mcpd older than that refuses it, and the stream is opened anew).
        self._again = False
        self._error: Optional[BaseException] = None
        self._stopped = False
        self._wake = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._tasks: Set[asyncio.Task[Any]] = set()
        #: The requests whose handlers have not answered yet, by id, with
        #: their tasks: a cancel from mcpd cancels the task.
        self._pending: Dict[str, Tuple[Any, asyncio.Task[Any]]] = {}
        #: Runs the sync handlers (the loop's default executor has a few
        #: threads, shared with the program): made on first use.
        self._pool: Any = None
        self._task = asyncio.get_running_loop().create_task(self._run(), name="mcpd-server-requests")

    def reregister(self) -> None:
        self._want += 1
        call = self._call
        if call is not None:
            self._again = True
            self._unconfirmed.append(self._want)
            task = asyncio.get_running_loop().create_task(self._write(call, cv.registration(sorted(self._client._handlers))))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _write(self, call: Any, msg: Any) -> None:
        """Writes one message on the stream, in turn with the others."""
        try:
            async with self._write_lock:
                await call.write(msg)
        except Exception as e:  # the stream ended: a reply goes nowhere, the next stream registers anew
            _common.log.debug("server-request stream message not sent: %s", e)

    async def wait_ready(self, timeout: Optional[float]) -> bool:
        def ready() -> bool:
            return self._have == self._want or self._error is not None or self._stopped

        async with self._cond:
            try:
                await asyncio.wait_for(self._cond.wait_for(ready), timeout)
            except asyncio.TimeoutError:
                pass
            if self._error is not None:
                raise self._error
            return self._have == self._want

    async def stop(self) -> None:
        self._stopped = True
        self._cancel_pending("the client closed")
        self._wake.set()
        async with self._cond:
            self._cond.notify_all()  # wait_ready returns now, not at its timeout
        if self._call is not None:
            self._call.cancel()
        self._task.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(self._task, *self._tasks, return_exceptions=True)
        if self._pool is not None:
            # A sync handler cannot be stopped, only told (its request is
            # cancelled): the pool ends once the handlers return.
            self._pool.shutdown(wait=False)

    async def _set_have(self, gen: int) -> None:
        async with self._cond:
            self._have = gen
            self._cond.notify_all()

    def _is_stopped(self) -> bool:
        # A method, not the attribute: stop() sets it while _run awaits, and
        # type checkers keep an attribute narrowed across awaits.
        return self._stopped

    async def _run(self) -> None:
        delay = _common.RECONNECT_INITIAL
        while not self._is_stopped():
            self._unconfirmed.clear()
            self._unconfirmed.append(self._want)
            self._again = False
            kinds = sorted(self._client._handlers)
            call = self._call = self._client._stub.HandleServerRequests(metadata=self._client._metadata)
            err: Optional[grpc.RpcError] = None
            try:
                async with self._write_lock:
                    await call.write(cv.registration(kinds))
                while True:
                    msg = await call.read()
                    if msg is _AIO_EOF:
                        break
                    which = msg.WhichOneof("message")
                    if which == "registered":
                        delay = _common.RECONNECT_INITIAL
                        if self._unconfirmed:
                            await self._set_have(self._unconfirmed.popleft())
                    elif which == "request":
                        req = cv.server_request(msg.request)
                        task = asyncio.get_running_loop().create_task(self._handle(msg.request, req, call))
                        self._tasks.add(task)
                        task.add_done_callback(self._tasks.discard)
                        if req is not None:
                            self._pending[req.id] = (req, task)
                    elif which == "cancel":
                        self._cancel(msg.cancel.id, cv.cancel_reason(msg.cancel))
                    elif which == "reply_refused":
                        cv.log_refusal(msg.reply_refused)
            except grpc.RpcError as e:
                err = await _settled_error(call, e)
            finally:
                if self._call is call:
                    self._call = None
                self._have = -1
                # No reply reaches mcpd after the stream: the handlers still
                # running stop.
                self._cancel_pending("the server-request stream ended")
            if self._is_stopped():
                break
            if err is not None and err.code() == grpc.StatusCode.INVALID_ARGUMENT and self._again:
                _common.log.debug("mcpd refused a registration sent again (an older mcpd); opening a new stream")
                continue
            if err is not None and err.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED) and not _status_lost(err):
                self._error = from_rpc_error(err)
                async with self._cond:
                    self._cond.notify_all()
                _common.log.error("server-request stream failed: %s", self._error)
                return
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
            except asyncio.TimeoutError:
                pass
            delay = _common.next_backoff(delay)

    def _cancel(self, req_id: str, reason: str) -> None:
        """Tells the request's handler that mcpd stopped waiting: its
        request says so (a sync handler in the executor checks it), and its
        task is cancelled."""
        entry = self._pending.pop(req_id, None)
        if entry is not None:
            req, task = entry
            t.cancellation_of(req).cancel(reason)
            task.cancel()

    def _cancel_pending(self, reason: str) -> None:
        for req_id in list(self._pending):
            self._cancel(req_id, reason)

    async def _handle(self, msg: pb.ServerRequest, req: Any, call: Any) -> None:
        if req is None:
            reply = cv.unknown_kind_reply(msg.id)
        else:
            kind = cv.kind_of(req)
            handler = self._client._handlers.get(kind)
            try:
                try:
                    if handler is None:
                        raise cv.no_handler(kind)
                    if inspect.iscoroutinefunction(handler):
                        result = await handler(req)
                    else:
                        if self._pool is None:
                            self._pool = _common.handler_pool()
                        result = await asyncio.get_running_loop().run_in_executor(self._pool, handler, req)
                    if inspect.isawaitable(result):
                        result = await result
                    reply = cv.reply_for(req, result)
                except Exception as e:
                    if req.cancelled:
                        return  # it stopped at the cancel, as asked: no failure to log
                    reply = cv.failure_reply(req, kind, e)
            except asyncio.CancelledError:
                if req.cancelled:
                    return  # mcpd stopped waiting: no reply
                raise
            finally:
                self._pending.pop(req.id, None)
            if req.cancelled:
                # The handler caught its cancellation and answered anyway.
                _common.log.debug("%s handler answered request %s after mcpd stopped waiting (%s); the reply is not sent", kind, req.id, req.cancel_reason)
                return
        await self._write(call, pb.HandleServerRequestsRequest(reply=reply))
