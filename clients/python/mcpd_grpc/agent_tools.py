"""Tools defined by the agent itself, served to every mcpd caller.

Decorate functions on an :class:`AgentTools`, then serve them over mcpd's
``ServeTools`` stream; they appear as the server you name, listed and
called like the tools of any MCP server (``mcp__<server>__<tool>``)::

    from typing import Optional

    from mcpd_grpc import AgentTools, Client

    tools = AgentTools("notes")

    @tools.tool
    def add_note(text: str, tags: Optional[list[str]] = None) -> str:
        \"\"\"Saves a note.

        Args:
            text: what to write down.
            tags: labels to file it under.
        \"\"\"
        return "saved"

    with Client() as mcpd, mcpd.serve_tools(tools) as serving:
        serving.wait()

Each function's input schema comes from its type hints (str, int, float,
bool, None, list, tuple, dict, Optional/Union, Literal, Enum, dataclasses
and TypedDicts) and each parameter's description from the docstring
(Google ``Args:`` or reST ``:param x:``). A parameter annotated
:class:`ToolContext` gets the call's context: progress reports, the
cancellation flag, the caller's ``_meta`` and deadline.

A function returns a ``str`` (one text block), content blocks, a
:class:`~mcpd_grpc.ToolResult`, a dict (structured content, with its JSON
as text) or any other JSON value (as text). An exception becomes a result
with ``is_error`` set: a tool that fails is data, not a protocol error;
:class:`ToolArgumentError` is the exception for arguments that do not fit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import functools
import inspect
import json
import queue
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Tuple, TypeVar, Union, get_args, get_origin, get_type_hints, overload

import grpc

from . import _convert as cv
from . import types as t
from .errors import MCPDError, Unavailable, from_rpc_error
from .mcpd.v1 import mcpd_pb2 as pb

__all__ = ["AgentTool", "AgentTools", "AsyncToolServing", "ToolArgumentError", "ToolContext", "ToolServing"]

F = TypeVar("F", bound=Callable[..., Any])

#: JSON-RPC "invalid params": what mcpd's callers see as INVALID_ARGUMENT.
_INVALID_PARAMS = -32602


class ToolArgumentError(ValueError):
    """Raised by a tool (or by the argument binding) when the arguments do
    not fit: the caller gets INVALID_ARGUMENT instead of a result."""


class ToolContext:
    """The context of one call, for a tool that declares a parameter of this
    type. Its methods are safe to call from any thread."""

    def __init__(
        self,
        call_id: str,
        tool: str,
        meta: Dict[str, Any],
        deadline: Optional[datetime.datetime],
        send: Callable[[pb.ServeToolsRequest], None],
    ) -> None:
        #: The call's id on the stream.
        self.call_id = call_id
        #: The tool's own name.
        self.tool = tool
        #: The ``_meta`` the caller sent.
        self.meta = meta
        #: When the caller stops waiting (UTC), if it has a deadline.
        self.deadline = deadline
        self._send = send
        self._cancelled = threading.Event()
        # Guards _on_cancel, so that it never runs once it is unset.
        self._lock = threading.Lock()
        self._on_cancel: Optional[Callable[[], object]] = None

    def report_progress(self, progress: float, total: Optional[float] = None, message: str = "") -> None:
        """Reports progress; callers of ``call_tool_stream`` receive it.
        Never blocks."""
        p = pb.Progress(progress=progress, message=message)
        if total is not None:
            p.total = total
        self._send(pb.ServeToolsRequest(progress=pb.ToolCallProgress(id=self.call_id, progress=p)))

    @property
    def cancelled(self) -> bool:
        """Whether the caller gave up on the call. A synchronous tool checks
        it (or waits on :meth:`wait_cancelled`); an async one is also
        cancelled as an asyncio task."""
        return self._cancelled.is_set()

    def wait_cancelled(self, timeout: Optional[float] = None) -> bool:
        """Waits until the caller cancels or timeout passes; returns
        :attr:`cancelled`. A sync tool can sleep with it."""
        return self._cancelled.wait(timeout)

    def _cancel(self) -> None:
        with self._lock:
            self._cancelled.set()
            if self._on_cancel is not None:
                self._on_cancel()

    def _set_on_cancel(self, hook: Optional[Callable[[], object]]) -> None:
        """Sets what a cancellation does besides setting the flag; a call
        cancelled already runs hook at once. hook must not block."""
        with self._lock:
            self._on_cancel = hook
            if hook is not None and self._cancelled.is_set():
                hook()


@dataclasses.dataclass
class AgentTool:
    """One decorated function and its declaration."""

    fn: Callable[..., Any]
    name: str
    description: str
    input_schema: Dict[str, Any]
    title: str = ""
    output_schema: Optional[Dict[str, Any]] = None
    annotations: Optional[t.ToolAnnotations] = None
    meta: Dict[str, Any] = dataclasses.field(default_factory=dict)
    #: parameter name -> type hint, for converting arguments.
    params: Dict[str, Any] = dataclasses.field(default_factory=dict)
    #: the parameter that gets the ToolContext, if any.
    context_param: Optional[str] = None

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def to_proto(self) -> pb.ToolDefinition:
        d = pb.ToolDefinition(name=self.name, title=self.title, description=self.description)
        cv.fill_struct(d.input_schema, self.input_schema)
        if self.output_schema is not None:
            cv.fill_struct(d.output_schema, self.output_schema)
        if self.meta:
            cv.fill_struct(d.meta, self.meta)
        a = self.annotations
        if a is not None:
            d.annotations.SetInParent()
            d.annotations.title = a.title
            for f in ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint"):
                v = getattr(a, f)
                if v is not None:
                    setattr(d.annotations, f, v)
        return d

    def bind(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Dict[str, Any]:
        """Turns a call's arguments into keyword arguments of fn. Raises
        ToolArgumentError for unknown or missing ones."""
        unknown = sorted(set(arguments) - set(self.params))
        if unknown:
            raise ToolArgumentError(f"unknown argument(s): {', '.join(unknown)}")
        kwargs = {k: _coerce(v, self.params[k]) for k, v in arguments.items()}
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        missing = [p for p in self.input_schema.get("required", []) if p not in kwargs]
        if missing:
            raise ToolArgumentError(f"missing argument(s): {', '.join(missing)}")
        return kwargs


class AgentTools:
    """A set of tools served as one mcpd server named ``server``.

    Args:
        server: the server name; the tools are ``mcp__<server>__<tool>``.
        instructions: shown to models in the server's status.
        version: the version shown in the server's ``server_info``.
    """

    def __init__(self, server: str, *, instructions: str = "", version: str = "") -> None:
        self.server = server
        self.instructions = instructions
        self.version = version
        self._tools: Dict[str, AgentTool] = {}

    def __repr__(self) -> str:
        return f"AgentTools({self.server!r}, tools={sorted(self._tools)})"

    @property
    def tools(self) -> List[AgentTool]:
        """The declared tools, in declaration order."""
        return list(self._tools.values())

    def get(self, name: str) -> Optional[AgentTool]:
        return self._tools.get(name)

    @overload
    def tool(self, fn: F) -> F: ...

    @overload
    def tool(
        self,
        fn: None = None,
        *,
        name: Optional[str] = None,
        title: str = "",
        description: Optional[str] = None,
        read_only: Optional[bool] = None,
        destructive: Optional[bool] = None,
        idempotent: Optional[bool] = None,
        open_world: Optional[bool] = None,
        meta: Optional[Mapping[str, Any]] = None,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        fn: Optional[F] = None,
        *,
        name: Optional[str] = None,
        title: str = "",
        description: Optional[str] = None,
        read_only: Optional[bool] = None,
        destructive: Optional[bool] = None,
        idempotent: Optional[bool] = None,
        open_world: Optional[bool] = None,
        meta: Optional[Mapping[str, Any]] = None,
    ) -> Any:
        """Declares a function (sync or async) as a tool; use it as
        ``@tools.tool`` or ``@tools.tool(name=..., read_only=True)``. The
        function is returned unchanged."""

        def register(f: F) -> F:
            hints = [read_only, destructive, idempotent, open_world]
            annotations = None
            if title or any(h is not None for h in hints):
                annotations = t.ToolAnnotations(title, read_only, destructive, idempotent, open_world)
            at = describe_function(f, name=name, description=description)
            at.title, at.annotations, at.meta = title, annotations, dict(meta or {})
            if at.name in self._tools:
                raise ValueError(f"tool {at.name!r} is declared twice")
            self._tools[at.name] = at
            return f

        if fn is not None:
            return register(fn)
        return register

    def declaration(self, *, replace: bool = False) -> pb.ServeToolsRequest:
        """The first message of a ServeTools stream."""
        decl = pb.ToolServerDeclaration(server=self.server, replace=replace, instructions=self.instructions)
        decl.tools.extend(at.to_proto() for at in self._tools.values())
        decl.server_info.name = self.server
        decl.server_info.version = self.version
        return pb.ServeToolsRequest(declare=decl)


# ---------------------------------------------------------------------------
# Schemas from type hints and docstrings.


def describe_function(fn: Callable[..., Any], *, name: Optional[str] = None, description: Optional[str] = None) -> AgentTool:
    """Builds a tool declaration from a function's signature, type hints
    and docstring."""
    sig = inspect.signature(fn)
    try:
        hints = get_type_hints(fn)
    except Exception as e:  # an annotation that does not resolve
        raise TypeError(f"{fn.__name__}: cannot resolve type hints: {e}") from e
    summary, param_docs = _parse_docstring(inspect.getdoc(fn) or "")
    props: Dict[str, Any] = {}
    required: List[str] = []
    params: Dict[str, Any] = {}
    context_param: Optional[str] = None
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"{fn.__name__}: *args and **kwargs cannot be tool parameters")
        hint = hints.get(p.name, Any)
        if hint is ToolContext:
            context_param = p.name
            continue
        schema = schema_of(hint)
        if p.name in param_docs:
            schema = {**schema, "description": param_docs[p.name]}
        if p.default is p.empty:
            required.append(p.name)
        elif _json_able(p.default):
            schema = {**schema, "default": _jsonify(p.default)}
        props[p.name] = schema
        params[p.name] = hint
    input_schema: Dict[str, Any] = {"type": "object", "properties": props}
    if required:
        input_schema["required"] = required
    output_schema = None
    ret = hints.get("return")
    if ret is not None and (dataclasses.is_dataclass(ret) or _is_typed_dict(ret)):
        output_schema = schema_of(ret)
    return AgentTool(
        fn=fn,
        name=name or fn.__name__,
        description=summary if description is None else description,
        input_schema=input_schema,
        output_schema=output_schema,
        params=params,
        context_param=context_param,
    )


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?):\s*$")
_GOOGLE_PARAM = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> Tuple[str, Dict[str, str]]:
    """Splits a docstring into its description and the descriptions of its
    parameters (Google ``Args:`` sections and reST ``:param x:`` lines)."""
    summary: List[str] = []
    params: Dict[str, str] = {}
    section: Optional[str] = None
    current: Optional[str] = None
    indent = 0
    for raw in doc.splitlines():
        line = raw.strip()
        m = _REST_PARAM.match(line)
        if m:
            current, section = m.group(1), "rest"
            params[current] = m.group(2).strip()
            continue
        if line.startswith(":"):
            section, current = "rest", None
            continue
        m = _SECTION.match(line)
        if m:
            section, current = m.group(1), None
            continue
        if section is None:
            summary.append(line)
            continue
        if section in ("Args", "Arguments", "Parameters") and line:
            this_indent = len(raw) - len(raw.lstrip())
            m = _GOOGLE_PARAM.match(line)
            if m and (current is None or this_indent <= indent):
                current, indent = m.group(1).lstrip("*"), this_indent
                params[current] = m.group(2).strip()
            elif current is not None:
                params[current] = (params[current] + " " + line).strip()
        elif section == "rest" and current is not None and line:
            params[current] = (params[current] + " " + line).strip()
    return "\n".join(summary).strip(), params


def _is_typed_dict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__annotations__") and hasattr(tp, "__total__")


def _union_types() -> Tuple[Any, ...]:
    out: List[Any] = [Union]
    if sys.version_info >= (3, 10):
        import types as _types

        out.append(_types.UnionType)
    return tuple(out)


_UNIONS = _union_types()

_SIMPLE: Dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def schema_of(tp: Any) -> Dict[str, Any]:
    """The JSON Schema of a type hint."""
    if tp is Any or tp is inspect.Parameter.empty:
        return {}
    if tp in _SIMPLE:
        return {"type": _SIMPLE[tp]}
    origin = get_origin(tp)
    args = get_args(tp)
    if origin in _UNIONS:
        options = [schema_of(a) for a in args]
        return {"anyOf": options}
    if origin is Literal:
        values = list(args)
        out: Dict[str, Any] = {"enum": values}
        types = {_SIMPLE.get(type(v)) for v in values}
        if len(types) == 1 and None not in types:
            out["type"] = types.pop()
        return out
    if origin in (list, List, Sequence, set, frozenset) or tp in (list, set, frozenset):
        out = {"type": "array"}
        if args:
            out["items"] = schema_of(args[0])
        return out
    if origin in (tuple, Tuple) or tp is tuple:
        if args and args[-1] is not Ellipsis:
            return {"type": "array", "prefixItems": [schema_of(a) for a in args], "minItems": len(args), "maxItems": len(args)}
        out = {"type": "array"}
        if args:
            out["items"] = schema_of(args[0])
        return out
    if origin in (dict, Dict, Mapping) or tp is dict:
        out = {"type": "object"}
        if len(args) == 2:
            out["additionalProperties"] = schema_of(args[1])
        return out
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return schema_of(Literal[tuple(m.value for m in tp)])
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = get_type_hints(tp)
        props: Dict[str, Any] = {}
        required: List[str] = []
        for f in dataclasses.fields(tp):
            props[f.name] = schema_of(hints.get(f.name, Any))
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
        out = {"type": "object", "properties": props}
        if required:
            out["required"] = required
        return out
    if _is_typed_dict(tp):
        hints = get_type_hints(tp)
        out = {"type": "object", "properties": {k: schema_of(v) for k, v in hints.items()}}
        req = sorted(getattr(tp, "__required_keys__", hints.keys()))
        if req:
            out["required"] = req
        return out
    raise TypeError(f"no JSON Schema for type {tp!r}")


def _coerce(value: Any, tp: Any) -> Any:
    """Converts a JSON argument to what the hint asks for: ints from whole
    floats, dataclasses and enums from their JSON forms, and so on inside
    containers. What does not fit is passed as it is."""
    if value is None:
        return None
    if tp is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    origin = get_origin(tp)
    args = get_args(tp)
    if origin in _UNIONS:
        for a in args:
            if a is type(None):
                continue
            if a in _SIMPLE and not isinstance(value, a) and not (a is float and isinstance(value, (int, float))):
                continue
            return _coerce(value, a)
        return value
    if (origin in (list, List, Sequence, set, frozenset)) and isinstance(value, list):
        items = [_coerce(v, args[0]) if args else v for v in value]
        return set(items) if origin is set else frozenset(items) if origin is frozenset else items
    if origin in (tuple, Tuple) and isinstance(value, list):
        if args and args[-1] is not Ellipsis:
            return tuple(_coerce(v, a) for v, a in zip(value, args))
        return tuple(_coerce(v, args[0]) if args else v for v in value)
    if origin in (dict, Dict, Mapping) and isinstance(value, dict) and len(args) == 2:
        return {k: _coerce(v, args[1]) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError as e:
            raise ToolArgumentError(str(e)) from e
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and isinstance(value, dict):
        hints = get_type_hints(tp)
        try:
            return tp(**{k: _coerce(v, hints.get(k, Any)) for k, v in value.items()})
        except TypeError as e:
            raise ToolArgumentError(f"{tp.__name__}: {e}") from e
    return value


def _jsonify(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return _jsonify(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonify(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _jsonify(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonify(v) for v in value]
    return value


def _json_able(value: Any) -> bool:
    try:
        json.dumps(_jsonify(value))
        return True
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------------------
# Results.


def result_message(call_id: str, value: Any) -> pb.ServeToolsRequest:
    """The answer to a call from what its function returned."""
    res = pb.CallToolResponse()
    if isinstance(value, t.ToolResult):
        res.content.extend(cv.content_to_proto(c) for c in value.content)
        if value.structured is not None:
            cv.fill_value(res.structured_content, _jsonify(value.structured))
        res.is_error = value.is_error
        if value.meta:
            cv.fill_struct(res.meta, value.meta)
    elif value is None:
        pass
    elif isinstance(value, str) or _is_content(value):
        res.content.append(cv.content_to_proto(value))
    elif isinstance(value, (list, tuple)) and value and all(isinstance(v, str) or _is_content(v) for v in value):
        res.content.extend(cv.content_to_proto(v) for v in value)
    else:
        data = _jsonify(value)
        res.content.append(pb.Content(text=pb.TextContent(text=json.dumps(data))))
        if isinstance(data, dict):
            cv.fill_struct(res.structured_content.struct_value, data)
    return pb.ServeToolsRequest(result=pb.ToolCallResult(id=call_id, result=res))


def error_result_message(call_id: str, exc: BaseException) -> pb.ServeToolsRequest:
    """A tool's failure: a result with is_error, or a protocol error for
    arguments that do not fit."""
    if isinstance(exc, ToolArgumentError):
        return pb.ServeToolsRequest(result=pb.ToolCallResult(id=call_id, error=pb.ReplyError(code=_INVALID_PARAMS, message=str(exc))))
    text = str(exc) or type(exc).__name__
    res = pb.CallToolResponse(is_error=True)
    res.content.append(pb.Content(text=pb.TextContent(text=text)))
    return pb.ServeToolsRequest(result=pb.ToolCallResult(id=call_id, result=res))


def unknown_tool_message(call_id: str, tool: str) -> pb.ServeToolsRequest:
    return pb.ServeToolsRequest(result=pb.ToolCallResult(id=call_id, error=pb.ReplyError(code=_INVALID_PARAMS, message=f"unknown tool {tool!r}")))


def _is_content(v: Any) -> bool:
    return isinstance(v, (t.TextContent, t.ImageContent, t.AudioContent, t.ResourceLink, t.EmbeddedResource))


def call_context(call: pb.ToolCall, send: Callable[[pb.ServeToolsRequest], None]) -> ToolContext:
    return ToolContext(call.id, call.tool, cv.opt_struct(call, "meta"), cv.timestamp(call, "deadline"), send)


def call_arguments(call: pb.ToolCall) -> Dict[str, Any]:
    return cv.opt_struct(call, "arguments")


def _run_tool(at: AgentTool, call: pb.ToolCall, ctx: ToolContext) -> pb.ServeToolsRequest:
    """Runs a sync tool (or an async one on a loop of its own, cancelled
    with the call) in the calling thread and returns its answer."""
    try:
        kwargs = at.bind(call_arguments(call), ctx)
        value = at.fn(**kwargs)
        if inspect.isawaitable(value):
            value = asyncio.run(_cancellable(value, ctx))
        return result_message(call.id, value)
    except (Exception, asyncio.CancelledError) as e:
        # mcpd drops the answer to a call it cancelled; a tool that raises
        # CancelledError on its own still answers.
        return error_result_message(call.id, e)


async def _cancellable(aw: Any, ctx: ToolContext) -> Any:
    """Awaits aw in a task that the call's cancellation cancels."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    ctx._set_on_cancel(lambda: loop.call_soon_threadsafe(task.cancel))
    try:
        return await aw
    finally:
        # Before asyncio.run closes the loop: no cancel reaches a closed one.
        ctx._set_on_cancel(None)


# ---------------------------------------------------------------------------
# The sync client's stream.

_END = object()  # closes the request queue


def _drain(outbox: queue.Queue[Any]) -> Any:
    while True:
        m = outbox.get()
        if m is _END:
            return
        yield m


class ToolServing:
    """A running ServeTools stream of a :class:`~mcpd_grpc.Client` (see
    :meth:`Client.serve_tools`). One thread reads calls; each runs on a
    thread pool. ``stop()`` (or leaving the ``with`` block) ends the stream,
    and mcpd turns the server STOPPED."""

    def __init__(self, stub: Any, metadata: Any, tools: AgentTools, *, replace: bool = False, max_workers: int = 8) -> None:
        self.tools = tools
        self._outbox: queue.Queue[Any] = queue.Queue()
        self._outbox.put(tools.declaration(replace=replace))
        self._call = stub.ServeTools(_drain(self._outbox), metadata=metadata)
        try:
            first = next(self._call)
        except grpc.RpcError as e:
            self._outbox.put(_END)
            raise from_rpc_error(e) from e
        except StopIteration:
            self._outbox.put(_END)
            raise Unavailable("mcpd ended the ServeTools stream before it served the tools") from None
        #: The server's status when mcpd started serving it.
        self.server = cv.server(first.serving)
        self._lock = threading.Lock()
        self._contexts: Dict[str, ToolContext] = {}
        self._stopping = False
        self._error: Optional[MCPDError] = None
        self._done = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="mcpd-tool")
        self._thread = threading.Thread(target=self._run, name="mcpd-serve-tools", daemon=True)
        self._thread.start()

    def __enter__(self) -> ToolServing:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _send(self, m: pb.ServeToolsRequest) -> None:
        self._outbox.put(m)

    def _run(self) -> None:
        try:
            for msg in self._call:
                which = msg.WhichOneof("message")
                if which == "call":
                    ctx = call_context(msg.call, self._send)
                    with self._lock:
                        self._contexts[msg.call.id] = ctx
                    self._pool.submit(self._handle, msg.call, ctx)
                elif which == "cancel":
                    with self._lock:
                        cancelled = self._contexts.get(msg.cancel.id)
                    if cancelled is not None:
                        cancelled._cancel()
        except grpc.RpcError as e:
            if not (self._stopping and e.code() == grpc.StatusCode.CANCELLED):
                self._error = from_rpc_error(e)
        except RuntimeError:  # the pool shut down under us: stopping
            pass
        finally:
            self._outbox.put(_END)
            with self._lock:
                contexts = list(self._contexts.values())
            for ctx in contexts:
                ctx._cancel()
            self._done.set()

    def _handle(self, call: pb.ToolCall, ctx: ToolContext) -> None:
        at = self.tools.get(call.tool)
        try:
            reply = unknown_tool_message(call.id, call.tool) if at is None else _run_tool(at, call, ctx)
        finally:
            with self._lock:
                self._contexts.pop(call.id, None)
        self._send(reply)

    @property
    def running(self) -> bool:
        """Whether the stream still serves."""
        return not self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until the stream ends (mcpd ended it, or :meth:`stop`);
        returns False on timeout. Raises the error the stream ended with
        (Aborted: another agent replaced this one, or the server was
        removed; Unavailable: mcpd shut down)."""
        if not self._done.wait(timeout):
            return False
        if self._error is not None:
            raise self._error
        return True

    def stop(self) -> None:
        """Ends the stream; calls in flight see :attr:`ToolContext.cancelled`
        and async tools are cancelled. Idempotent."""
        self._stopping = True
        self._call.cancel()
        self._thread.join(timeout=10)
        # A sync tool still running finishes on its own; its answer goes nowhere.
        self._pool.shutdown(wait=False, cancel_futures=True)

    close = stop


# ---------------------------------------------------------------------------
# The asyncio client's stream.


#: How long AsyncToolServing.stop waits for tools that ignore their
#: cancellation (ToolServing.stop waits as long for its thread).
_STOP_WAIT = 10.0


class AsyncToolServing:
    """A running ServeTools stream of an :class:`~mcpd_grpc.AsyncClient`
    (see :meth:`AsyncClient.serve_tools`). Each call runs as a task (a sync
    tool in the loop's executor); a caller's cancellation cancels the task.
    ``await stop()`` (or leaving the ``async with`` block) ends the
    stream."""

    def __init__(self, call: Any, tools: AgentTools, server: t.Server) -> None:
        self.tools = tools
        #: The server's status when mcpd started serving it.
        self.server = server
        self._call = call
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[pb.ServeToolsRequest] = asyncio.Queue()
        self._tasks: Dict[str, Tuple[asyncio.Task[Any], ToolContext]] = {}
        self._stopping = False
        self._error: Optional[MCPDError] = None
        self._writer = self._loop.create_task(self._write(), name="mcpd-serve-tools-writer")
        self._reader = self._loop.create_task(self._read(), name="mcpd-serve-tools")

    @classmethod
    async def open(cls, stub: Any, metadata: Any, tools: AgentTools, *, replace: bool = False) -> AsyncToolServing:
        call = stub.ServeTools(metadata=metadata)
        try:
            await call.write(tools.declaration(replace=replace))
            first = await call.read()
        except grpc.RpcError as e:
            raise from_rpc_error(e) from e
        if first is grpc.aio.EOF:  # type: ignore[attr-defined]
            raise Unavailable("mcpd ended the ServeTools stream before it served the tools")
        return cls(call, tools, cv.server(first.serving))

    async def __aenter__(self) -> AsyncToolServing:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    def _send(self, m: pb.ServeToolsRequest) -> None:
        # From the loop or from an executor thread (a sync tool's progress).
        self._loop.call_soon_threadsafe(self._queue.put_nowait, m)

    async def _write(self) -> None:
        while True:
            m = await self._queue.get()
            try:
                await self._call.write(m)
            except Exception:  # the stream ended; the reader reports why
                return

    async def _read(self) -> None:
        try:
            while True:
                msg = await self._call.read()
                if msg is grpc.aio.EOF:  # type: ignore[attr-defined]
                    return
                which = msg.WhichOneof("message")
                if which == "call":
                    ctx = call_context(msg.call, self._send)
                    task = self._loop.create_task(self._handle(msg.call, ctx))
                    self._tasks[msg.call.id] = (task, ctx)
                elif which == "cancel":
                    entry = self._tasks.get(msg.cancel.id)
                    if entry is not None:
                        entry[1]._cancel()
                        entry[0].cancel()
        except grpc.RpcError as e:
            if not (self._stopping and e.code() == grpc.StatusCode.CANCELLED):
                self._error = from_rpc_error(e)
        except asyncio.CancelledError:
            # grpc.aio ends a read of a call that stop() cancelled this way.
            if not self._stopping:
                raise
        finally:
            # The stream is over, whoever ended it: nothing more goes out
            # on it, and the writer, waiting on its queue, would otherwise
            # stay pending until a stop() that may never come.
            self._writer.cancel()
            self._cancel_calls()

    def _cancel_calls(self) -> None:
        for task, ctx in list(self._tasks.values()):
            ctx._cancel()
            task.cancel()

    async def _handle(self, call: pb.ToolCall, ctx: ToolContext) -> None:
        at = self.tools.get(call.tool)
        try:
            if at is None:
                reply = unknown_tool_message(call.id, call.tool)
            elif at.is_async:
                try:
                    reply = result_message(call.id, await at.fn(**at.bind(call_arguments(call), ctx)))
                except Exception as e:
                    reply = error_result_message(call.id, e)
            else:
                reply = await self._loop.run_in_executor(None, functools.partial(_run_tool, at, call, ctx))
        except asyncio.CancelledError:
            # The caller gave up (mcpd answered it already) or the stream
            # ends: there is no one to answer.
            return
        finally:
            self._tasks.pop(call.id, None)
        self._send(reply)

    @property
    def running(self) -> bool:
        """Whether the stream still serves."""
        return not self._reader.done()

    async def wait(self) -> None:
        """Waits until the stream ends; raises the error it ended with (see
        :meth:`ToolServing.wait`)."""
        await asyncio.shield(self._reader)
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Ends the stream and cancels the calls in flight without waiting
        (AsyncClient.close calls it): its tasks end in the loop's next
        turns. Idempotent."""
        self._stopping = True
        self._call.cancel()
        self._writer.cancel()
        self._cancel_calls()

    async def stop(self) -> None:
        """Ends the stream and cancels the calls in flight, and waits for
        its tasks; a tool that ignores its cancellation is waited for 10 s
        at most, then left to finish on its own (its answer goes nowhere),
        as :meth:`ToolServing.stop` leaves a sync tool. Idempotent."""
        self.close()
        await asyncio.gather(self._reader, self._writer, return_exceptions=True)
        tasks = [task for task, _ in self._tasks.values()]
        if tasks:
            done, _ = await asyncio.wait(tasks, timeout=_STOP_WAIT)
            for task in done:
                if not task.cancelled():
                    task.exception()  # retrieved: nothing of it is left to report
