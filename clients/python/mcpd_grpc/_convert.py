"""Conversions between the generated protobuf messages and mcpd_grpc.types.

Shared by the sync and asyncio clients, so both return the same objects.
"""

from __future__ import annotations

import datetime
import enum
import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar, Union, cast

from google.protobuf import duration_pb2, struct_pb2, timestamp_pb2

from . import _common
from . import types as t
from .errors import InvalidArgument, ServerRequestError
from .mcpd.v1 import mcpd_pb2 as pb

_MAX_EXACT_INT = 2**53

# ---------------------------------------------------------------------------
# JSON values.


def value_to_py(v: struct_pb2.Value) -> Any:
    kind = v.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "number_value":
        n = v.number_value
        if math.isfinite(n) and n.is_integer() and abs(n) <= _MAX_EXACT_INT:
            return int(n)
        return n
    if kind == "string_value":
        return v.string_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "struct_value":
        return struct_to_py(v.struct_value)
    return [value_to_py(x) for x in v.list_value.values]


def struct_to_py(s: struct_pb2.Struct) -> Dict[str, Any]:
    return {k: value_to_py(v) for k, v in s.fields.items()}


def opt_struct(msg: Any, name: str) -> Dict[str, Any]:
    return struct_to_py(getattr(msg, name)) if msg.HasField(name) else {}


def fill_value(v: struct_pb2.Value, x: Any) -> None:
    if x is None:
        v.null_value = struct_pb2.NULL_VALUE
    elif isinstance(x, bool):
        v.bool_value = x
    elif isinstance(x, (int, float)):
        v.number_value = float(x)
    elif isinstance(x, str):
        v.string_value = x
    elif isinstance(x, Mapping):
        fill_struct(v.struct_value, x)
    elif isinstance(x, (list, tuple)):
        lv = v.list_value
        lv.SetInParent()
        for item in x:
            fill_value(lv.values.add(), item)
    else:
        raise TypeError(f"{type(x).__name__} is not a JSON value")


def fill_struct(s: struct_pb2.Struct, m: Mapping[str, Any]) -> None:
    s.SetInParent()  # so that an empty dict is set, not absent
    for k, x in m.items():
        if not isinstance(k, str):
            raise TypeError(f"JSON object keys must be str, got {type(k).__name__}")
        fill_value(s.fields[k], x)


def to_struct(m: Optional[Mapping[str, Any]]) -> Optional[struct_pb2.Struct]:
    if m is None:
        return None
    s = struct_pb2.Struct()
    fill_struct(s, m)
    return s


def arguments_mapping(arguments: Union[None, str, bytes, Mapping[str, Any]]) -> Optional[Mapping[str, Any]]:
    """Tool arguments as given (a dict), or parsed from the JSON string a
    model returned. A string that is no JSON object raises InvalidArgument,
    as mcpd does for arguments a tool refuses: a model's malformed output
    is an error the agent loop catches with the others and hands back."""
    if not isinstance(arguments, (str, bytes)):
        return arguments
    import json  # only for arguments as JSON text: not on every client's import path

    try:
        text = arguments.decode("utf-8") if isinstance(arguments, bytes) else arguments
        parsed = json.loads(text) if text.strip() else {}
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise InvalidArgument(f"tool arguments are not valid JSON: {e}") from None
    if not isinstance(parsed, dict):
        raise InvalidArgument(f"tool arguments must be a JSON object, not a JSON {_json_type(parsed)}")
    return parsed


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "null" if value is None else "number"


def arguments_struct(arguments: Union[None, str, bytes, Mapping[str, Any]]) -> Optional[struct_pb2.Struct]:
    """Tool arguments as a dict, or as the JSON string a model returned."""
    return to_struct(arguments_mapping(arguments))


def duration(seconds: Optional[float]) -> Optional[duration_pb2.Duration]:
    if seconds is None:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"a timeout must be a finite number of seconds, not negative: got {seconds!r}")
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(seconds * 1e9))
    return d


def timestamp(msg: Any, name: str) -> Optional[datetime.datetime]:
    if not msg.HasField(name):
        return None
    ts: timestamp_pb2.Timestamp = getattr(msg, name)
    return ts.ToDatetime(tzinfo=datetime.timezone.utc)


# ---------------------------------------------------------------------------
# Enums: proto FOO_BAR_X <-> str enum "x".


_E = TypeVar("_E", bound=enum.Enum)


def _enum_from(cls: Type[_E], proto_enum: Any, prefix: str, value: int) -> _E:
    try:
        name = proto_enum.Name(value)
    except ValueError:
        return cls("unspecified")
    try:
        return cls(name[len(prefix) :].lower())
    except ValueError:
        return cls("unspecified")


def _enum_to(proto_enum: Any, prefix: str, value: Union[str, Any], what: str) -> int:
    s = getattr(value, "value", value)
    if isinstance(s, int):
        return s
    try:
        return int(proto_enum.Value(prefix + str(s).upper()))
    except ValueError:
        raise ValueError(f"unknown {what} {value!r}") from None


def server_state(v: int) -> t.ServerState:
    return _enum_from(t.ServerState, pb.ServerState, "SERVER_STATE_", v)


def config_scope(v: int) -> t.ConfigScope:
    return _enum_from(t.ConfigScope, pb.ConfigScope, "CONFIG_SCOPE_", v)


def transport(v: int) -> t.Transport:
    return _enum_from(t.Transport, pb.Transport, "TRANSPORT_", v)


def role(v: int) -> t.Role:
    return _enum_from(t.Role, pb.Role, "ROLE_", v)


def role_to_proto(r: Union[str, t.Role]) -> pb.Role:
    return cast(pb.Role, _enum_to(pb.Role, "ROLE_", r, "role"))


def log_level(v: int) -> t.LogLevel:
    return _enum_from(t.LogLevel, pb.LogLevel, "LOG_LEVEL_", v)


def log_level_to_proto(level: Union[str, t.LogLevel]) -> pb.LogLevel:
    return cast(pb.LogLevel, _enum_to(pb.LogLevel, "LOG_LEVEL_", level, "log level"))


def event_kind_to_proto(kind: Union[str, t.EventKind]) -> pb.EventKind:
    return cast(pb.EventKind, _enum_to(pb.EventKind, "EVENT_KIND_", kind, "event kind"))


def elicitation_action_to_proto(a: Union[str, t.ElicitationAction]) -> pb.ElicitationAction:
    return cast(pb.ElicitationAction, _enum_to(pb.ElicitationAction, "ELICITATION_ACTION_", a, "elicitation action"))


# ---------------------------------------------------------------------------
# Content.


def annotations_of(msg: Any) -> Optional[t.Annotations]:
    if not msg.HasField("annotations"):
        return None
    a = msg.annotations
    return t.Annotations(
        audience=tuple(role(r) for r in a.audience),
        priority=a.priority if a.HasField("priority") else None,
        last_modified=a.last_modified,
    )


def icons_of(msg: Any) -> Tuple[t.Icon, ...]:
    return tuple(t.Icon(i.src, i.mime_type, tuple(i.sizes), i.theme) for i in msg.icons)


def resource_contents(r: pb.ResourceContents) -> t.ResourceContents:
    which = r.WhichOneof("data")
    return t.ResourceContents(
        uri=r.uri,
        mime_type=r.mime_type,
        text=r.text if which == "text" else None,
        blob=bytes(r.blob) if which == "blob" else None,
        meta=opt_struct(r, "meta"),
    )


def content(c: pb.Content) -> t.Content:
    ann, meta = annotations_of(c), opt_struct(c, "meta")
    kind = c.WhichOneof("kind")
    if kind == "image":
        return t.ImageContent(bytes(c.image.data), c.image.mime_type, ann, meta)
    if kind == "audio":
        return t.AudioContent(bytes(c.audio.data), c.audio.mime_type, ann, meta)
    if kind == "resource_link":
        rl = c.resource_link
        return t.ResourceLink(
            uri=rl.uri,
            name=rl.name,
            title=rl.title,
            description=rl.description,
            mime_type=rl.mime_type,
            size=rl.size if rl.HasField("size") else None,
            annotations=ann,
            meta=meta,
            icons=icons_of(rl),
        )
    if kind == "resource":
        return t.EmbeddedResource(resource_contents(c.resource), ann, meta)
    # text, or a kind this client does not know yet: keep it as empty text
    # rather than failing the whole result.
    return t.TextContent(c.text.text, ann, meta)


def contents(cs: Iterable[pb.Content]) -> Tuple[t.Content, ...]:
    return tuple(content(c) for c in cs)


def _annotations_to_proto(a: Optional[t.Annotations], out: pb.Annotations) -> None:
    if a is None:
        return
    out.SetInParent()
    out.audience.extend(role_to_proto(r) for r in a.audience)
    if a.priority is not None:
        out.priority = a.priority
    out.last_modified = a.last_modified


def content_to_proto(c: Union[str, t.Content]) -> pb.Content:
    if isinstance(c, str):
        return pb.Content(text=pb.TextContent(text=c))
    out = pb.Content()
    if isinstance(c, t.TextContent):
        out.text.text = c.text
    elif isinstance(c, t.ImageContent):
        out.image.data, out.image.mime_type = c.data, c.mime_type
    elif isinstance(c, t.AudioContent):
        out.audio.data, out.audio.mime_type = c.data, c.mime_type
    elif isinstance(c, t.ResourceLink):
        rl = out.resource_link
        rl.uri, rl.name, rl.title, rl.description, rl.mime_type = c.uri, c.name, c.title, c.description, c.mime_type
        if c.size is not None:
            rl.size = c.size
        for i in c.icons:
            rl.icons.add(src=i.src, mime_type=i.mime_type, sizes=i.sizes, theme=i.theme)
    elif isinstance(c, t.EmbeddedResource):
        r = out.resource
        r.uri, r.mime_type = c.resource.uri, c.resource.mime_type
        if c.resource.blob is not None:
            r.blob = c.resource.blob
        else:
            r.text = c.resource.text or ""
        if c.resource.meta:
            fill_struct(r.meta, c.resource.meta)
    else:
        raise TypeError(f"{type(c).__name__} is not a content block")
    _annotations_to_proto(c.annotations, out.annotations)
    if c.meta:
        fill_struct(out.meta, c.meta)
    return out


# ---------------------------------------------------------------------------
# Servers, tools, resources, prompts.


def implementation(msg: Any) -> Optional[t.Implementation]:
    if not msg.HasField("server_info"):
        return None
    i = msg.server_info
    return t.Implementation(i.name, i.version, i.title, i.description, i.website_url, icons_of(i))


def server(s: pb.Server) -> t.Server:
    return t.Server(
        name=s.name,
        state=server_state(s.state),
        transport=transport(s.transport),
        protocol_version=s.protocol_version,
        server_info=implementation(s),
        instructions=s.instructions,
        capabilities=opt_struct(s, "capabilities"),
        tool_count=s.tool_count,
        last_error=s.last_error,
        restarts=s.restarts,
        stderr_tail=tuple(s.stderr_tail),
        state_changed_time=timestamp(s, "state_changed_time"),
        command=s.command,
        args=tuple(s.args),
        url=s.url,
        env_names=tuple(s.env_names),
        header_names=tuple(s.header_names),
        pid=s.pid,
        authorization_url=s.authorization_url,
        authorization_expire_time=timestamp(s, "authorization_expire_time"),
        notes=tuple(s.notes),
        scope=config_scope(s.scope),
        source=s.source,
    )


def server_config_to_proto(c: Union[t.ServerConfig, pb.ServerConfig]) -> pb.ServerConfig:
    if isinstance(c, pb.ServerConfig):
        return c
    out = pb.ServerConfig(name=c.name, protocol_version=c.protocol_version, strict_capabilities=c.strict_capabilities, trace=c.trace)
    out.tools_allow.extend(c.tools_allow)
    out.tools_deny.extend(c.tools_deny)
    out.tools_ask.extend(c.tools_ask)
    call_timeout, connect_timeout = duration(c.call_timeout), duration(c.connect_timeout)
    if call_timeout is not None:
        out.call_timeout.CopyFrom(call_timeout)
    if connect_timeout is not None:
        out.connect_timeout.CopyFrom(connect_timeout)
    tr = t.Transport(c.transport)
    if tr is t.Transport.STDIO:
        if c.tls is not None:
            raise ValueError(f"server {c.name!r}: a stdio server takes no tls (it is for http and sse servers)")
        out.stdio.command = c.command
        out.stdio.args.extend(c.args)
        out.stdio.env.update(c.env)
        out.stdio.cwd = c.cwd
    elif tr in (t.Transport.HTTP, t.Transport.SSE, t.Transport.AUTO):
        field = {t.Transport.HTTP: "http", t.Transport.SSE: "sse", t.Transport.AUTO: "remote"}[tr]
        if field not in pb.ServerConfig.DESCRIPTOR.fields_by_name:
            raise ValueError(f"this mcpd API has no ServerConfig.{field}")
        h = getattr(out, field)
        h.url = c.url
        h.headers.update(c.headers)
        if c.tls is not None:
            h.tls.CopyFrom(pb.TlsConfig(ca_file=c.tls.ca_file, cert_file=c.tls.cert_file, key_file=c.tls.key_file))
    else:
        raise ValueError(f"server {c.name!r}: no transport")
    if c.oauth is not None:
        # Set on any transport: mcpd refuses it on a stdio server, clearly.
        out.oauth.CopyFrom(oauth_config_to_proto(c.oauth))
    return out


def oauth_config_to_proto(o: t.OAuthConfig) -> pb.OAuthConfig:
    out = pb.OAuthConfig(
        client_id=o.client_id,
        client_secret=o.client_secret,
        client_metadata_url=o.client_metadata_url,
        scopes=list(o.scopes),
        token_endpoint_auth_method=o.token_endpoint_auth_method,
        private_key_file=o.private_key_file,
        signing_algorithm=o.signing_algorithm,
        grant=o.grant,
        assertion=o.assertion,
        assertion_file=o.assertion_file,
        dpop=o.dpop,
    )
    if o.idp is not None:
        i = o.idp
        out.idp.CopyFrom(
            pb.OAuthIdentityProvider(
                issuer=i.issuer,
                token_endpoint=i.token_endpoint,
                client_id=i.client_id,
                client_secret=i.client_secret,
                id_token=i.id_token,
                id_token_file=i.id_token_file,
            )
        )
    return out


def tool(x: pb.Tool) -> t.Tool:
    ann = None
    if x.HasField("annotations"):
        a = x.annotations

        def opt(name: str) -> Optional[bool]:
            return getattr(a, name) if a.HasField(name) else None

        ann = t.ToolAnnotations(
            title=a.title,
            read_only_hint=opt("read_only_hint"),
            destructive_hint=opt("destructive_hint"),
            idempotent_hint=opt("idempotent_hint"),
            open_world_hint=opt("open_world_hint"),
        )
    return t.Tool(
        name=x.name,
        server=x.server,
        tool_name=x.tool_name,
        title=x.title,
        description=x.description,
        input_schema=opt_struct(x, "input_schema"),
        output_schema=struct_to_py(x.output_schema) if x.HasField("output_schema") else None,
        annotations=ann,
        meta=opt_struct(x, "meta"),
        icons=icons_of(x),
    )


def tool_result(r: pb.CallToolResponse) -> t.ToolResult:
    return t.ToolResult(
        content=contents(r.content),
        structured=value_to_py(r.structured_content) if r.HasField("structured_content") else None,
        is_error=r.is_error,
        meta=opt_struct(r, "meta"),
    )


def progress(p: pb.Progress) -> t.Progress:
    return t.Progress(p.progress, p.total if p.HasField("total") else None, p.message)


def log_message(m: pb.LogMessage) -> t.LogMessage:
    return t.LogMessage(log_level(m.level), m.logger, value_to_py(m.data) if m.HasField("data") else None)


def stream_item(m: pb.CallToolStreamResponse) -> Union[t.Progress, t.LogMessage, t.ToolResult, None]:
    kind = m.WhichOneof("kind")
    if kind == "progress":
        return progress(m.progress)
    if kind == "log":
        return log_message(m.log)
    if kind == "result":
        return tool_result(m.result)
    return None


def resource(r: pb.Resource) -> t.Resource:
    return t.Resource(
        server=r.server,
        uri=r.uri,
        name=r.name,
        title=r.title,
        description=r.description,
        mime_type=r.mime_type,
        size=r.size if r.HasField("size") else None,
        annotations=annotations_of(r),
        meta=opt_struct(r, "meta"),
        icons=icons_of(r),
    )


def resource_template(r: pb.ResourceTemplate) -> t.ResourceTemplate:
    return t.ResourceTemplate(
        server=r.server,
        uri_template=r.uri_template,
        name=r.name,
        title=r.title,
        description=r.description,
        mime_type=r.mime_type,
        annotations=annotations_of(r),
        meta=opt_struct(r, "meta"),
        icons=icons_of(r),
    )


def resource_result(r: pb.ReadResourceResponse) -> t.ResourceResult:
    return t.ResourceResult(tuple(resource_contents(c) for c in r.contents), opt_struct(r, "meta"))


def prompt(p: pb.Prompt) -> t.Prompt:
    return t.Prompt(
        server=p.server,
        name=p.name,
        title=p.title,
        description=p.description,
        arguments=tuple(t.PromptArgument(a.name, a.title, a.description, a.required) for a in p.arguments),
        meta=opt_struct(p, "meta"),
        icons=icons_of(p),
    )


def prompt_result(r: pb.GetPromptResponse) -> t.PromptResult:
    return t.PromptResult(
        description=r.description,
        messages=tuple(t.PromptMessage(role(m.role), content(m.content)) for m in r.messages),
        meta=opt_struct(r, "meta"),
    )


def completion(r: pb.CompleteResponse) -> t.Completion:
    return t.Completion(tuple(r.values), r.total if r.HasField("total") else None, r.has_more)


def complete_request(
    server: str,
    argument: str,
    value: str,
    prompt: Optional[str],
    resource_template: Optional[str],
    context: Optional[Mapping[str, str]],
) -> pb.CompleteRequest:
    if (prompt is None) == (resource_template is None):
        raise ValueError("complete needs exactly one of prompt= or resource_template=")
    req = pb.CompleteRequest(server=server, argument=pb.CompleteArgument(name=argument, value=value))
    if prompt is not None:
        req.prompt = prompt
    elif resource_template is not None:
        req.resource_template = resource_template
    req.context.update(context or {})
    return req


def roots_to_proto(roots: Iterable[Union[t.Root, str, Tuple[str, str], Mapping[str, str]]]) -> List[pb.Root]:
    out = []
    for r in roots:
        if isinstance(r, t.Root):
            out.append(pb.Root(uri=root_uri(r.uri), name=r.name))
        elif isinstance(r, str):
            out.append(pb.Root(uri=root_uri(r)))
        elif isinstance(r, Mapping):
            out.append(pb.Root(uri=root_uri(r["uri"]), name=r.get("name", "")))
        else:
            uri, name = r
            out.append(pb.Root(uri=root_uri(uri), name=name))
    return out


def root_uri(uri: str) -> str:
    """uri, or, for an absolute local path, its file:// URI: MCP's roots
    are file:// URIs, which mcpd checks."""
    import os.path

    if "://" not in uri and os.path.isabs(uri):
        import pathlib

        return pathlib.Path(uri).as_uri()
    return uri


# ---------------------------------------------------------------------------
# Events.


def subscribe_request(
    servers: Optional[Sequence[str]],
    resources: Optional[Iterable[Union[Tuple[str, str], Mapping[str, str]]]],
    kinds: Optional[Iterable[Union[str, t.EventKind]]],
    poll_ids: Optional[Sequence[str]] = None,
    fallback_poll_interval: Optional[float] = None,
) -> pb.SubscribeRequest:
    req = pb.SubscribeRequest(
        servers=list(servers or ()),
        poll_ids=list(poll_ids or ()),
        fallback_poll_interval=duration(fallback_poll_interval),
    )
    for r in resources or ():
        if isinstance(r, Mapping):
            req.resources.add(server=r["server"], uri=r["uri"])
        else:
            s, u = r
            req.resources.add(server=s, uri=u)
    req.kinds.extend(event_kind_to_proto(k) for k in kinds or ())
    return req


def event(e: pb.Event) -> t.Event:
    kind = e.WhichOneof("kind")
    common: Dict[str, Any] = dict(sequence=e.sequence, server=e.server, time=timestamp(e, "time"))
    if kind == "resource_updated":
        return t.Event(kind=t.EventKind.RESOURCE_UPDATED, uri=e.resource_updated.uri, **common)
    if kind == "tools_changed":
        return t.Event(kind=t.EventKind.TOOLS_CHANGED, **common)
    if kind == "prompts_changed":
        return t.Event(kind=t.EventKind.PROMPTS_CHANGED, **common)
    if kind == "resources_changed":
        return t.Event(kind=t.EventKind.RESOURCES_CHANGED, **common)
    if kind == "server_state":
        return t.Event(kind=t.EventKind.SERVER_STATE, state=server_state(e.server_state.state), error=e.server_state.error, **common)
    if kind == "log":
        return t.Event(kind=t.EventKind.LOG, log=log_message(e.log), **common)
    if kind == "poll_result":
        return t.Event(kind=t.EventKind.POLL_RESULT, poll=poll_result(e.poll_result), **common)
    if kind == "gap":
        return t.Event(kind=t.EventKind.GAP, gap_first=e.gap.first_sequence, gap_last=e.gap.last_sequence, **common)
    return t.Event(kind=t.EventKind.UNSPECIFIED, **common)


def poll_result(r: pb.PollResult) -> t.PollResult:
    return t.PollResult(
        poll_id=r.poll_id,
        baseline=r.baseline,
        resource_uri=r.resource_uri,
        tool=r.tool,
        contents=tuple(resource_contents(c) for c in r.contents),
        tool_result=tool_result(r.tool_result) if r.HasField("tool_result") else None,
        error=r.error,
    )


def poll(p: pb.Poll) -> t.Poll:
    target = p.WhichOneof("target")
    return t.Poll(
        id=p.id,
        server=p.server,
        resource_uri=p.resource_uri if target == "resource_uri" else "",
        tool=p.tool.name if target == "tool" else "",
        arguments=opt_struct(p.tool, "arguments") if target == "tool" else {},
        interval=p.interval.ToTimedelta().total_seconds(),
        paused=p.paused,
        polls=p.polls,
        changes=p.changes,
        last_poll_time=timestamp(p, "last_poll_time"),
        last_error=p.last_error,
    )


def start_poll_request(
    server: str,
    resource_uri: Optional[str],
    tool: Optional[str],
    arguments: Union[None, str, bytes, Mapping[str, Any]],
    interval: Optional[float],
) -> pb.StartPollRequest:
    if (resource_uri is None) == (tool is None):
        raise ValueError("a poll needs exactly one of resource_uri and tool")
    if resource_uri is not None:
        return pb.StartPollRequest(server=server, resource_uri=resource_uri, interval=duration(interval))
    call = pb.PollToolCall(name=tool or "", arguments=arguments_struct(arguments))
    return pb.StartPollRequest(server=server, tool=call, interval=duration(interval))


def tool_match(m: pb.ToolMatch) -> t.ToolMatch:
    return t.ToolMatch(tool(m.tool), m.score)


# ---------------------------------------------------------------------------
# Server requests and replies.


def server_request(r: pb.ServerRequest) -> Union[t.SamplingRequest, t.ElicitationRequest, t.RootsRequest, t.AuthorizationRequest, t.ApprovalRequest, None]:
    deadline = timestamp(r, "deadline")
    kind = r.WhichOneof("kind")
    if kind == "sampling":
        s = r.sampling
        return t.SamplingRequest(
            id=r.id,
            server=r.server,
            messages=tuple(t.SamplingMessage(role(m.role), contents(m.content)) for m in s.messages),
            system_prompt=s.system_prompt,
            max_tokens=s.max_tokens,
            params=opt_struct(s, "params"),
            deadline=deadline,
        )
    if kind == "elicitation":
        e = r.elicitation
        return t.ElicitationRequest(
            id=r.id,
            server=r.server,
            mode=e.mode,
            message=e.message,
            requested_schema=opt_struct(e, "requested_schema"),
            url=e.url,
            elicitation_id=e.elicitation_id,
            params=opt_struct(e, "params"),
            deadline=deadline,
        )
    if kind == "roots":
        return t.RootsRequest(id=r.id, server=r.server, deadline=deadline)
    if kind == "authorization":
        a = r.authorization
        return t.AuthorizationRequest(
            id=r.id,
            server=r.server,
            authorization_url=a.authorization_url,
            expire_time=timestamp(a, "expire_time"),
            deadline=deadline,
        )
    if kind == "approval":
        ap = r.approval
        return t.ApprovalRequest(
            id=r.id,
            server=r.server,
            tool=ap.tool,
            arguments=opt_struct(ap, "arguments"),
            annotations=opt_struct(ap, "annotations"),
            rule=ap.rule,
            caller=ap.caller,
            deadline=deadline,
            poll_interval=ap.poll_interval.ToTimedelta().total_seconds() if ap.HasField("poll_interval") else None,
        )
    return None


def sampling_reply(req_id: str, result: Any) -> pb.ServerRequestReply:
    if isinstance(result, str):
        result = t.SamplingResult(content=result)
    if not isinstance(result, t.SamplingResult):
        raise TypeError(f"a sampling handler must return SamplingResult or str, not {type(result).__name__}")
    body = result.content
    blocks = [body] if isinstance(body, (str, t.TextContent, t.ImageContent, t.AudioContent, t.ResourceLink, t.EmbeddedResource)) else list(body)
    # What mcpd refuses, refused here: the handler's developer sees it in
    # the handler's failure, not in a refusal later.
    if len(blocks) != 1:
        problem = "no content" if not blocks else f"{len(blocks)} content blocks"
        raise ValueError(f"a sampling result holds one text, image or audio block, not {problem}")
    if not isinstance(blocks[0], (str, t.TextContent, t.ImageContent, t.AudioContent)):
        raise ValueError(f"a sampling result holds a text, image or audio block, not {type(blocks[0]).__name__}")
    out = pb.SamplingResult(role=role_to_proto(result.role), model=result.model, stop_reason=result.stop_reason)
    out.content.append(content_to_proto(blocks[0]))
    return pb.ServerRequestReply(id=req_id, sampling=out)


def cancel_reason(cancel: pb.ServerRequestCancel) -> str:
    return cancel.reason or "mcpd stopped waiting for the reply"


def not_awaitable(kind: str, result: Any) -> Any:
    """result, unless a sync Client's handler returned an awaitable (a plain
    function returning a coroutine): nothing on the handler's thread would
    await it."""
    import inspect  # only with handlers: not at start-up

    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()  # no "never awaited" warning on top of this error
        raise TypeError(
            f"the {kind} handler returned an awaitable ({type(result).__name__}): "
            "a Client runs handlers on threads and awaits nothing; register it on an AsyncClient"
        )
    return result


def log_refusal(refused: pb.ServerRequestReplyRefused) -> None:
    """Logs mcpd's refusal of a reply: the server got an error instead."""
    _common.log.warning("mcpd refused the reply to request %s (the server got an error instead): %s", refused.id, refused.reason)


def elicitation_reply(req_id: str, result: Any) -> pb.ServerRequestReply:
    if result is None:
        result = t.ElicitationResult(action=t.ElicitationAction.DECLINE)
    elif isinstance(result, Mapping):
        result = t.ElicitationResult(action=t.ElicitationAction.ACCEPT, content=result)
    if not isinstance(result, t.ElicitationResult):
        raise TypeError(f"an elicitation handler must return ElicitationResult, dict or None, not {type(result).__name__}")
    out = pb.ElicitationResult(action=elicitation_action_to_proto(result.action))
    if result.content is not None:
        fill_struct(out.content, result.content)
    return pb.ServerRequestReply(id=req_id, elicitation=out)


def approval_reply(req_id: str, result: Any) -> pb.ServerRequestReply:
    if isinstance(result, bool):
        result = t.ApprovalResult(approved=result)
    if not isinstance(result, t.ApprovalResult):
        raise TypeError(f"an approval handler must return ApprovalResult or bool, not {type(result).__name__}")
    return pb.ServerRequestReply(id=req_id, approval=pb.ApprovalResult(approved=result.approved, reason=result.reason))


def roots_reply(req_id: str, result: Any) -> pb.ServerRequestReply:
    if result is None:
        result = []
    return pb.ServerRequestReply(id=req_id, roots=pb.RootsResult(roots=roots_to_proto(result)))


def authorization_reply(req_id: str, result: Any) -> pb.ServerRequestReply:
    if result is None:
        result = t.AuthorizationResult()
    elif isinstance(result, str):
        result = t.AuthorizationResult(redirect_url=result)
    if not isinstance(result, t.AuthorizationResult):
        raise TypeError(f"an authorization handler must return AuthorizationResult, str or None, not {type(result).__name__}")
    return pb.ServerRequestReply(id=req_id, authorization=pb.AuthorizationResult(redirect_url=result.redirect_url))


def call_request(cls: Any, name: str, arguments: Any, timeout: Optional[float], meta: Optional[Mapping[str, Any]]) -> Any:
    """A CallToolRequest or CallToolStreamRequest (cls) for a qualified
    tool name."""
    req = cls(name=name)
    args = arguments_mapping(arguments)
    # Filled in place: no Struct built apart and copied in.
    if args is not None:
        fill_struct(req.arguments, args)
    if timeout is not None:
        req.timeout.CopyFrom(duration(timeout))
    if meta is not None:
        fill_struct(req.meta, meta)
    return req


#: JSON-RPC error codes of the replies a client makes on its own.
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603


def error_reply(req_id: str, code: int, message: str) -> pb.ServerRequestReply:
    return pb.ServerRequestReply(id=req_id, error=pb.ReplyError(code=code, message=message))


def unknown_kind_reply(req_id: str) -> pb.ServerRequestReply:
    """The reply to a request of a kind this client version does not know."""
    return error_reply(req_id, METHOD_NOT_FOUND, "this client does not know the request kind")


def no_handler(kind: str) -> ServerRequestError:
    return ServerRequestError(f"no {kind} handler is registered", METHOD_NOT_FOUND)


def failure_reply(req: Any, kind: str, exc: Exception) -> pb.ServerRequestReply:
    """The reply to a request whose handler raised exc; call it inside the
    except block, so that the traceback reaches the log."""
    if isinstance(exc, ServerRequestError):
        return error_reply(req.id, exc.code, exc.message)
    _common.log.exception("%s handler failed for server %s", kind, req.server)
    # The exception text stays in the log: a handler wraps model calls whose
    # errors may carry ids or URLs the server must not get.
    return error_reply(req.id, INTERNAL_ERROR, f"{kind} handler failed: {type(exc).__name__}")


def reply_for(req: Any, result: Any) -> pb.ServerRequestReply:
    if isinstance(req, t.SamplingRequest):
        return sampling_reply(req.id, result)
    if isinstance(req, t.ElicitationRequest):
        return elicitation_reply(req.id, result)
    if isinstance(req, t.AuthorizationRequest):
        return authorization_reply(req.id, result)
    if isinstance(req, t.ApprovalRequest):
        return approval_reply(req.id, result)
    return roots_reply(req.id, result)


def kind_of(req: Any) -> str:
    if isinstance(req, t.SamplingRequest):
        return "sampling"
    if isinstance(req, t.ElicitationRequest):
        return "elicitation"
    if isinstance(req, t.AuthorizationRequest):
        return "authorization"
    if isinstance(req, t.ApprovalRequest):
        return "approval"
    return "roots"


REQUEST_KINDS = {
    "sampling": pb.SERVER_REQUEST_KIND_SAMPLING,
    "elicitation": pb.SERVER_REQUEST_KIND_ELICITATION,
    "roots": pb.SERVER_REQUEST_KIND_ROOTS,
    "authorization": pb.SERVER_REQUEST_KIND_AUTHORIZATION,
    "approval": pb.SERVER_REQUEST_KIND_APPROVAL,
}


def registration(kinds: Iterable[str]) -> pb.HandleServerRequestsRequest:
    reg = pb.ServerRequestRegistration(kinds=[REQUEST_KINDS[k] for k in sorted(kinds)])
    return pb.HandleServerRequestsRequest(register=reg)
