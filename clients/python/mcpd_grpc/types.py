"""Typed results and requests of the mcpd client.

Everything a :class:`~mcpd_grpc.Client` returns is one of these small,
frozen dataclasses, never a protobuf message: binary payloads are ``bytes``,
JSON (schemas, structured content, ``_meta``) is plain Python values, times
are timezone-aware :class:`datetime.datetime`, and enums are ``str`` enums
that compare equal to their lower-case value (``server.state == "ready"``).

JSON numbers travel through mcpd as ``google.protobuf.Value`` doubles; a
whole number within 2**53 comes back as ``int`` so that ``{"sum": 5}`` stays
``{"sum": 5}`` rather than ``{"sum": 5.0}``.
"""

from __future__ import annotations

import datetime
import enum
from typing import TYPE_CHECKING, Any, ClassVar, Dict, Mapping, Optional, Sequence, Tuple, Union

if TYPE_CHECKING:
    from dataclasses import dataclass, field
else:
    # The same frozen dataclasses, each built when first used: see _records.
    from ._records import dataclass, field

__all__ = [
    "Annotations",
    "AudioContent",
    "AuthorizationRequest",
    "AuthorizationResult",
    "Completion",
    "ConfigScope",
    "Content",
    "ElicitationAction",
    "ElicitationRequest",
    "ElicitationResult",
    "EmbeddedResource",
    "Event",
    "EventKind",
    "Icon",
    "ImageContent",
    "Implementation",
    "LogLevel",
    "LogMessage",
    "OAuthConfig",
    "OAuthIdentityProvider",
    "Progress",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "PromptResult",
    "Resource",
    "ResourceContents",
    "ResourceLink",
    "ResourceResult",
    "ResourceTemplate",
    "Role",
    "Root",
    "RootsRequest",
    "SamplingMessage",
    "SamplingRequest",
    "SamplingResult",
    "Server",
    "ServerConfig",
    "ServerState",
    "TextContent",
    "Tool",
    "ToolAnnotations",
    "ToolResult",
    "Transport",
]


class ServerState(str, enum.Enum):
    """Where a server is in its lifecycle (proto ``ServerState``)."""

    UNSPECIFIED = "unspecified"
    CONNECTING = "connecting"
    READY = "ready"
    RECONNECTING = "reconnecting"
    FAILED = "failed"
    STOPPED = "stopped"
    AUTHORIZATION_REQUIRED = "authorization_required"
    DISABLED = "disabled"


class ConfigScope(str, enum.Enum):
    """Where a server's configuration came from (proto ``ConfigScope``)."""

    UNSPECIFIED = "unspecified"
    DEFAULT = "default"
    MANAGED = "managed"
    USER = "user"
    PROJECT = "project"
    LOCAL = "local"
    FLAG = "flag"
    API = "api"


class Transport(str, enum.Enum):
    """How mcpd reaches a server (proto ``Transport``)."""

    UNSPECIFIED = "unspecified"
    STDIO = "stdio"
    HTTP = "http"
    SSE = "sse"
    AUTO = "auto"
    #: Tools an agent serves itself (ServeTools, or a config entry of
    #: ``"type": "sdk"``).
    AGENT = "agent"


class Role(str, enum.Enum):
    """Who speaks in a prompt or sampling message."""

    UNSPECIFIED = "unspecified"
    USER = "user"
    ASSISTANT = "assistant"


class LogLevel(str, enum.Enum):
    """MCP log severities, lowest first."""

    UNSPECIFIED = "unspecified"
    DEBUG = "debug"
    INFO = "info"
    NOTICE = "notice"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"
    ALERT = "alert"
    EMERGENCY = "emergency"


class EventKind(str, enum.Enum):
    """What an :class:`Event` reports. ``GAP`` means events were lost."""

    UNSPECIFIED = "unspecified"
    RESOURCE_UPDATED = "resource_updated"
    TOOLS_CHANGED = "tools_changed"
    PROMPTS_CHANGED = "prompts_changed"
    RESOURCES_CHANGED = "resources_changed"
    SERVER_STATE = "server_state"
    LOG = "log"
    POLL_RESULT = "poll_result"
    GAP = "gap"


class ElicitationAction(str, enum.Enum):
    """What the user did with an elicitation."""

    UNSPECIFIED = "unspecified"
    ACCEPT = "accept"
    DECLINE = "decline"
    CANCEL = "cancel"


# ---------------------------------------------------------------------------
# Content blocks.


@dataclass(frozen=True)
class Annotations:
    """Hints on how to use a content block or resource."""

    audience: Tuple[Role, ...] = ()
    priority: Optional[float] = None
    last_modified: str = ""


@dataclass(frozen=True)
class Icon:
    """An image a client may show for a server, tool, resource or prompt."""

    src: str
    mime_type: str = ""
    sizes: Tuple[str, ...] = ()
    theme: str = ""


@dataclass(frozen=True)
class TextContent:
    """A block of text."""

    text: str
    annotations: Optional[Annotations] = None
    meta: Dict[str, Any] = field(default_factory=dict)
    type: ClassVar[str] = "text"


@dataclass(frozen=True)
class ImageContent:
    """An image; ``data`` holds the raw bytes (not base64)."""

    data: bytes
    mime_type: str
    annotations: Optional[Annotations] = None
    meta: Dict[str, Any] = field(default_factory=dict)
    type: ClassVar[str] = "image"


@dataclass(frozen=True)
class AudioContent:
    """Audio; ``data`` holds the raw bytes (not base64)."""

    data: bytes
    mime_type: str
    annotations: Optional[Annotations] = None
    meta: Dict[str, Any] = field(default_factory=dict)
    type: ClassVar[str] = "audio"


@dataclass(frozen=True)
class ResourceLink:
    """A pointer to a resource the client may read with ``read_resource``."""

    uri: str
    name: str = ""
    title: str = ""
    description: str = ""
    mime_type: str = ""
    size: Optional[int] = None
    annotations: Optional[Annotations] = None
    meta: Dict[str, Any] = field(default_factory=dict)
    icons: Tuple[Icon, ...] = ()
    type: ClassVar[str] = "resource_link"


@dataclass(frozen=True)
class ResourceContents:
    """The contents of a resource: ``text`` or ``blob`` (raw bytes)."""

    uri: str
    mime_type: str = ""
    text: Optional[str] = None
    blob: Optional[bytes] = None
    meta: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EmbeddedResource:
    """A resource embedded in a result or message."""

    resource: ResourceContents
    annotations: Optional[Annotations] = None
    meta: Dict[str, Any] = field(default_factory=dict)
    type: ClassVar[str] = "resource"

    @property
    def text(self) -> Optional[str]:
        """The embedded resource's text, ``None`` for a blob."""
        return self.resource.text


Content = Union[TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource]
"""One block of a tool result, prompt message or sampling message."""


def _join_text(content: Sequence[Content]) -> str:
    return "\n".join(c.text for c in content if isinstance(c, TextContent))


# ---------------------------------------------------------------------------
# Servers.


@dataclass(frozen=True)
class Implementation:
    """A server's software, as it reports it."""

    name: str = ""
    version: str = ""
    title: str = ""
    description: str = ""
    website_url: str = ""
    icons: Tuple[Icon, ...] = ()


@dataclass(frozen=True)
class Server:
    """The status of one server. It never holds env or header values."""

    name: str
    state: ServerState
    transport: Transport = Transport.UNSPECIFIED
    protocol_version: str = ""
    server_info: Optional[Implementation] = None
    instructions: str = ""
    capabilities: Dict[str, Any] = field(default_factory=dict)
    tool_count: int = 0
    last_error: str = ""
    restarts: int = 0
    stderr_tail: Tuple[str, ...] = ()
    state_changed_time: Optional[datetime.datetime] = None
    command: str = ""
    args: Tuple[str, ...] = ()
    url: str = ""
    env_names: Tuple[str, ...] = ()
    header_names: Tuple[str, ...] = ()
    pid: int = 0
    authorization_url: str = ""
    authorization_expire_time: Optional[datetime.datetime] = None
    notes: Tuple[str, ...] = ()
    """Where mcpd treats the server otherwise than its declarations say."""
    #: The config scope the server came from, and its file ("--config #N"
    #: for inline JSON; for ``API``, the state file or "").
    scope: ConfigScope = ConfigScope.UNSPECIFIED
    source: str = ""

    @property
    def ready(self) -> bool:
        """Whether the server accepts calls."""
        return self.state is ServerState.READY

    @property
    def authorization_required(self) -> bool:
        """Whether the server waits for a person's OAuth consent: open
        ``authorization_url`` before ``authorization_expire_time``."""
        return self.state is ServerState.AUTHORIZATION_REQUIRED


@dataclass(frozen=True)
class OAuthIdentityProvider:
    """The enterprise identity provider of the ``token_exchange`` grant
    (proto ``OAuthIdentityProvider``). ``client_secret`` and ``id_token``
    are secrets: they are left out of ``repr``."""

    issuer: str = ""
    token_endpoint: str = ""
    client_id: str = ""
    client_secret: str = field(default="", repr=False)
    id_token: str = field(default="", repr=False)
    id_token_file: str = ""


@dataclass(frozen=True)
class OAuthConfig:
    """How mcpd obtains OAuth tokens for an HTTP or SSE server (proto
    ``OAuthConfig``). Without one, a server that answers 401 is authorized
    with the authorization code grant, a dynamically registered client and
    a person's consent (see :attr:`ServerState.AUTHORIZATION_REQUIRED`).

    ``token_endpoint_auth_method`` is ``"none"``, ``"client_secret_basic"``,
    ``"client_secret_post"`` or ``"private_key_jwt"`` (empty: chosen from
    what the authorization server supports); ``grant`` is
    ``"authorization_code"`` (the default), ``"client_credentials"``,
    ``"jwt_bearer"`` or ``"token_exchange"``. ``client_secret`` and
    ``assertion`` are secrets: they are left out of ``repr``, and mcpd never
    logs or returns them.
    """

    client_id: str = ""
    client_secret: str = field(default="", repr=False)
    client_metadata_url: str = ""
    scopes: Sequence[str] = ()
    token_endpoint_auth_method: str = ""
    private_key_file: str = ""
    signing_algorithm: str = ""
    grant: str = ""
    assertion: str = field(default="", repr=False)
    assertion_file: str = ""
    idp: Optional[OAuthIdentityProvider] = None
    dpop: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.scopes, str):
            raise TypeError("scopes must be a sequence of scope names, not a str")
        object.__setattr__(self, "scopes", tuple(self.scopes))

    @classmethod
    def from_mcp_json(cls, entry: Mapping[str, Any]) -> OAuthConfig:
        """The ``oauth`` block of a ``.mcp.json`` server entry (camelCase
        keys: ``clientId``, ``clientSecret``, ``tokenEndpointAuthMethod``,
        ...). ``${VAR}`` is not expanded here."""
        unknown = set(entry) - set(_OAUTH_JSON)
        if unknown:
            raise ValueError(f"unknown oauth keys: {', '.join(sorted(unknown))}")
        kwargs: Dict[str, Any] = {_OAUTH_JSON[k]: v for k, v in entry.items() if k != "idp"}
        idp = entry.get("idp")
        if idp is not None:
            unknown = set(idp) - set(_IDP_JSON)
            if unknown:
                raise ValueError(f"unknown oauth.idp keys: {', '.join(sorted(unknown))}")
            kwargs["idp"] = OAuthIdentityProvider(**{_IDP_JSON[k]: v for k, v in idp.items()})
        return cls(**kwargs)


# .mcp.json's camelCase keys of an oauth block, and their field names.
_OAUTH_JSON = {
    "clientId": "client_id",
    "clientSecret": "client_secret",
    "clientMetadataUrl": "client_metadata_url",
    "scopes": "scopes",
    "tokenEndpointAuthMethod": "token_endpoint_auth_method",
    "privateKeyFile": "private_key_file",
    "signingAlgorithm": "signing_algorithm",
    "grant": "grant",
    "assertion": "assertion",
    "assertionFile": "assertion_file",
    "idp": "idp",
    "dpop": "dpop",
}
_IDP_JSON = {
    "issuer": "issuer",
    "tokenEndpoint": "token_endpoint",
    "clientId": "client_id",
    "clientSecret": "client_secret",
    "idToken": "id_token",
    "idTokenFile": "id_token_file",
}


@dataclass(frozen=True)
class ServerConfig:
    """How mcpd reaches a server; build one with :meth:`stdio`,
    :meth:`http`, :meth:`sse`, :meth:`remote` or :meth:`from_mcp_json`.

    Timeouts are in seconds; ``None`` means the daemon's default.
    ``tools_allow`` / ``tools_deny`` filter tools by the server's own names (a
    trailing ``*`` matches a prefix; deny wins). Calls of the tools in
    ``tools_ask`` (same form) wait for an agent's approval; it only adds to
    the daemon's tool rules, never loosens them.
    """

    name: str
    transport: Transport
    command: str = ""
    args: Tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    call_timeout: Optional[float] = None
    connect_timeout: Optional[float] = None
    protocol_version: str = ""
    tools_allow: Tuple[str, ...] = ()
    tools_deny: Tuple[str, ...] = ()
    tools_ask: Tuple[str, ...] = ()
    oauth: Optional[OAuthConfig] = None
    strict_capabilities: bool = False
    """List tools only when the server declares the tools capability."""
    trace: bool = False
    """Log every JSON-RPC message of the server at mcpd's debug level
    (docs/servers.md, "Wire tracing")."""

    def __repr__(self) -> str:
        # env and header values are secrets: show only their names (and
        # OAuthConfig's repr leaves its secrets out).
        oauth = f", oauth={self.oauth!r}" if self.oauth is not None else ""
        return (
            f"ServerConfig(name={self.name!r}, transport={self.transport.value!r}, "
            f"command={self.command!r}, args={self.args!r}, url={self.url!r}, "
            f"env_names={sorted(self.env)!r}, header_names={sorted(self.headers)!r}{oauth})"
        )

    @classmethod
    def stdio(
        cls,
        name: str,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: str = "",
        **options: Any,
    ) -> ServerConfig:
        """A server run as a child process speaking MCP on stdin/stdout."""
        return cls(name, Transport.STDIO, command=command, args=tuple(args), env=dict(env or {}), cwd=cwd, **_options(options))

    @classmethod
    def http(
        cls,
        name: str,
        url: str,
        *,
        headers: Optional[Mapping[str, str]] = None,
        oauth: Optional[OAuthConfig] = None,
        **options: Any,
    ) -> ServerConfig:
        """A server at a Streamable HTTP endpoint; ``oauth`` configures its
        authorization (default: consent on the first 401, see
        :class:`OAuthConfig`)."""
        return cls(name, Transport.HTTP, url=url, headers=dict(headers or {}), oauth=oauth, **_options(options))

    @classmethod
    def sse(
        cls,
        name: str,
        url: str,
        *,
        headers: Optional[Mapping[str, str]] = None,
        oauth: Optional[OAuthConfig] = None,
        **options: Any,
    ) -> ServerConfig:
        """A server at a legacy HTTP+SSE endpoint."""
        return cls(name, Transport.SSE, url=url, headers=dict(headers or {}), oauth=oauth, **_options(options))

    @classmethod
    def remote(
        cls,
        name: str,
        url: str,
        *,
        headers: Optional[Mapping[str, str]] = None,
        oauth: Optional[OAuthConfig] = None,
        **options: Any,
    ) -> ServerConfig:
        """A server at a URL whose transport mcpd detects (Streamable HTTP,
        then legacy SSE). Needs an mcpd whose API has ``ServerConfig.remote``."""
        return cls(name, Transport.AUTO, url=url, headers=dict(headers or {}), oauth=oauth, **_options(options))

    @classmethod
    def from_mcp_json(cls, name: str, entry: Mapping[str, Any], **options: Any) -> ServerConfig:
        """One entry of a ``.mcp.json`` ``mcpServers`` map: ``{"command",
        "args", "env", "cwd"}`` or ``{"type": "http"|"sse", "url", "headers",
        "oauth"}``. ``${VAR}`` is not expanded here (the daemon expands it
        only in files)."""
        kind = entry.get("type", "stdio" if "command" in entry else "http")
        if kind == "stdio":
            return cls.stdio(name, entry["command"], entry.get("args", ()), env=entry.get("env"), cwd=entry.get("cwd", ""), **options)
        oauth = OAuthConfig.from_mcp_json(entry["oauth"]) if entry.get("oauth") is not None else None
        if kind in ("http", "streamable-http", "streamableHttp"):
            return cls.http(name, entry["url"], headers=entry.get("headers"), oauth=oauth, **options)
        if kind == "sse":
            return cls.sse(name, entry["url"], headers=entry.get("headers"), oauth=oauth, **options)
        if kind == "sdk":
            raise ValueError(f"server {name!r}: an sdk server is not connected but served by an agent: Client.serve_tools")
        raise ValueError(f"server {name!r}: unknown type {kind!r}")


_OPTION_NAMES = ("call_timeout", "connect_timeout", "protocol_version", "tools_allow", "tools_deny", "tools_ask", "strict_capabilities", "trace")


def _options(options: Mapping[str, Any]) -> Dict[str, Any]:
    unknown = set(options) - set(_OPTION_NAMES)
    if unknown:
        raise TypeError(f"unknown server options: {', '.join(sorted(unknown))}")
    out = dict(options)
    for k in ("tools_allow", "tools_deny", "tools_ask"):
        if k in out:
            out[k] = tuple(out[k])
    return out


# ---------------------------------------------------------------------------
# Tools.


@dataclass(frozen=True)
class ToolAnnotations:
    """A server's hints about a tool (not guarantees); ``None`` means unset."""

    title: str = ""
    read_only_hint: Optional[bool] = None
    destructive_hint: Optional[bool] = None
    idempotent_hint: Optional[bool] = None
    open_world_hint: Optional[bool] = None


@dataclass(frozen=True)
class Tool:
    """One tool of one server. ``name`` is the qualified
    ``mcp__<server>__<tool>`` name that :meth:`Client.call_tool` takes."""

    name: str
    server: str
    tool_name: str
    title: str = ""
    description: str = ""
    input_schema: Dict[str, Any] = field(default_factory=dict)
    output_schema: Optional[Dict[str, Any]] = None
    annotations: Optional[ToolAnnotations] = None
    meta: Dict[str, Any] = field(default_factory=dict)
    icons: Tuple[Icon, ...] = ()


@dataclass(frozen=True)
class ToolResult:
    """A tool's result. A tool that fails returns one with ``is_error``
    set (its content says why); only protocol failures raise."""

    content: Tuple[Content, ...] = ()
    structured: Any = None
    is_error: bool = False
    meta: Dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The text blocks, joined with newlines."""
        return _join_text(self.content)


@dataclass(frozen=True)
class Progress:
    """Progress of a streamed tool call."""

    progress: float
    total: Optional[float] = None
    message: str = ""


@dataclass(frozen=True)
class LogMessage:
    """A log message a server sent; ``data`` is any JSON value."""

    level: LogLevel
    logger: str = ""
    data: Any = None


# ---------------------------------------------------------------------------
# Resources, prompts, completion.


@dataclass(frozen=True)
class Resource:
    """One resource of one server."""

    server: str
    uri: str
    name: str = ""
    title: str = ""
    description: str = ""
    mime_type: str = ""
    size: Optional[int] = None
    annotations: Optional[Annotations] = None
    meta: Dict[str, Any] = field(default_factory=dict)
    icons: Tuple[Icon, ...] = ()


@dataclass(frozen=True)
class ResourceTemplate:
    """A family of resources named by an RFC 6570 URI template."""

    server: str
    uri_template: str
    name: str = ""
    title: str = ""
    description: str = ""
    mime_type: str = ""
    annotations: Optional[Annotations] = None
    meta: Dict[str, Any] = field(default_factory=dict)
    icons: Tuple[Icon, ...] = ()


@dataclass(frozen=True)
class ResourceResult:
    """What ``read_resource`` returns: one or more parts."""

    contents: Tuple[ResourceContents, ...] = ()
    meta: Dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The text parts, joined with newlines."""
        return "\n".join(c.text for c in self.contents if c.text is not None)

    @property
    def blob(self) -> Optional[bytes]:
        """The first binary part, ``None`` when there is none."""
        return next((c.blob for c in self.contents if c.blob is not None), None)


@dataclass(frozen=True)
class PromptArgument:
    """One argument of a prompt."""

    name: str
    title: str = ""
    description: str = ""
    required: bool = False


@dataclass(frozen=True)
class Prompt:
    """A prompt template of one server."""

    server: str
    name: str
    title: str = ""
    description: str = ""
    arguments: Tuple[PromptArgument, ...] = ()
    meta: Dict[str, Any] = field(default_factory=dict)
    icons: Tuple[Icon, ...] = ()


@dataclass(frozen=True)
class PromptMessage:
    """One message of a rendered prompt."""

    role: Role
    content: Content

    @property
    def text(self) -> str:
        """The message's text, empty for non-text content."""
        return self.content.text if isinstance(self.content, TextContent) else ""


@dataclass(frozen=True)
class PromptResult:
    """A rendered prompt."""

    description: str = ""
    messages: Tuple[PromptMessage, ...] = ()
    meta: Dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The text of every message, joined with newlines."""
        return "\n".join(m.text for m in self.messages if m.text)


@dataclass(frozen=True)
class Completion:
    """Completion suggestions for an argument."""

    values: Tuple[str, ...] = ()
    total: Optional[int] = None
    has_more: bool = False


@dataclass(frozen=True)
class Root:
    """A directory or file (``file://`` URI) a server may work in."""

    uri: str
    name: str = ""


# ---------------------------------------------------------------------------
# Events.


@dataclass(frozen=True)
class Event:
    """One event from :meth:`Client.subscribe`.

    ``sequence`` numbers are per daemon, increasing and gap-free. Which other
    fields are set depends on ``kind``: ``uri`` for RESOURCE_UPDATED,
    ``state``/``error`` for SERVER_STATE, ``log`` for LOG, ``poll`` for
    POLL_RESULT, and ``gap_first``..``gap_last`` (the sequences this stream
    missed) for GAP.
    """

    sequence: int
    kind: EventKind
    server: str = ""
    time: Optional[datetime.datetime] = None
    uri: str = ""
    state: Optional[ServerState] = None
    error: str = ""
    log: Optional[LogMessage] = None
    gap_first: Optional[int] = None
    gap_last: Optional[int] = None
    poll: Optional[PollResult] = None


@dataclass(frozen=True)
class PollResult:
    """A poll's new result (or its first, ``baseline``): the resource's
    ``contents`` or the tool's ``tool_result``, or the ``error`` of a failed
    poll (which goes on)."""

    poll_id: str
    baseline: bool = False
    resource_uri: str = ""
    tool: str = ""
    contents: Tuple[ResourceContents, ...] = ()
    tool_result: Optional[ToolResult] = None
    error: str = ""


@dataclass(frozen=True)
class Poll:
    """A poll started with :meth:`Client.start_poll`: a resource read, or a
    tool call (``tool`` with ``arguments``), every ``interval`` seconds."""

    id: str
    server: str
    resource_uri: str = ""
    tool: str = ""
    arguments: Dict[str, Any] = field(default_factory=dict)
    interval: float = 0.0
    paused: bool = False
    polls: int = 0
    changes: int = 0
    last_poll_time: Optional[datetime.datetime] = None
    last_error: str = ""


@dataclass(frozen=True)
class ToolMatch:
    """A tool that matches a :meth:`Client.search_tools` query, with its
    BM25 ``score`` (higher is better)."""

    tool: Tool
    score: float


# ---------------------------------------------------------------------------
# Server requests (answered by handlers) and their results.


@dataclass(frozen=True)
class SamplingMessage:
    """One message of a sampling conversation."""

    role: Role
    content: Tuple[Content, ...] = ()

    @property
    def text(self) -> str:
        """The text blocks, joined with newlines."""
        return _join_text(self.content)


@dataclass(frozen=True)
class SamplingRequest:
    """A server asks the agent's model for a message (sampling/createMessage).

    ``params`` holds the full MCP request params (model preferences,
    temperature, stop sequences, ...) as JSON.
    """

    id: str
    server: str
    messages: Tuple[SamplingMessage, ...] = ()
    system_prompt: str = ""
    max_tokens: int = 0
    params: Dict[str, Any] = field(default_factory=dict)
    deadline: Optional[datetime.datetime] = None

    @property
    def text(self) -> str:
        """The text of the last message (usually the user's question)."""
        return self.messages[-1].text if self.messages else ""


@dataclass(frozen=True)
class SamplingResult:
    """The model's answer to a :class:`SamplingRequest`. A handler may also
    return a plain ``str``, which becomes a text answer. ``content`` is one
    text, image or audio block (or a sequence of one): mcpd refuses more,
    for an MCP sampling result holds one."""

    content: Union[str, Content, Sequence[Content]]
    model: str = ""
    stop_reason: str = "endTurn"
    role: Role = Role.ASSISTANT


@dataclass(frozen=True)
class ElicitationRequest:
    """A server asks the user for input (elicitation/create): ``mode`` is
    ``"form"`` (answer matching ``requested_schema``) or ``"url"`` (open
    ``url``). ``params`` holds the full MCP request params (``_meta``
    among them)."""

    id: str
    server: str
    mode: str = ""
    message: str = ""
    requested_schema: Dict[str, Any] = field(default_factory=dict)
    url: str = ""
    elicitation_id: str = ""
    deadline: Optional[datetime.datetime] = None
    params: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ElicitationResult:
    """The user's answer. A handler may also return a ``dict`` (accept with
    that content) or ``None`` (decline)."""

    action: Union[ElicitationAction, str] = ElicitationAction.ACCEPT
    content: Optional[Mapping[str, Any]] = None


@dataclass(frozen=True)
class RootsRequest:
    """A server asks for the client's roots (roots/list)."""

    id: str
    server: str
    deadline: Optional[datetime.datetime] = None


@dataclass(frozen=True)
class AuthorizationRequest:
    """A server needs a person's OAuth consent: show ``authorization_url``
    to the person (a desktop agent opens the browser) before
    ``expire_time``. The server is in
    :attr:`ServerState.AUTHORIZATION_REQUIRED` meanwhile."""

    id: str
    server: str
    authorization_url: str = ""
    expire_time: Optional[datetime.datetime] = None
    deadline: Optional[datetime.datetime] = None


@dataclass(frozen=True)
class ApprovalRequest:
    """mcpd asks whether a tool call that an ``ask`` tool rule holds may
    run: ``tool`` is the qualified name, ``server`` its server, ``rule`` the
    rule that asked, ``caller`` who made the call. ``poll_interval``
    (seconds) is set when the approval is for a poll of the tool: approved,
    mcpd calls it with ``arguments`` that often until the poll stops,
    without asking again."""

    id: str
    server: str
    tool: str = ""
    arguments: Dict[str, Any] = field(default_factory=dict)
    annotations: Dict[str, Any] = field(default_factory=dict)
    rule: str = ""
    caller: str = ""
    deadline: Optional[datetime.datetime] = None
    poll_interval: Optional[float] = None


@dataclass(frozen=True)
class AuthorizationResult:
    """The answer to an :class:`AuthorizationRequest`: ``redirect_url`` is
    the URL the browser was redirected to, when the agent caught it (mcpd
    then completes the consent with it). A handler may also return that URL
    as a ``str``, or ``None``: the URL was shown to a person, and the
    browser's redirect reaches mcpd's own redirect listener."""

    redirect_url: str = ""


@dataclass(frozen=True)
class ApprovalResult:
    """The answer to an approval request. A handler may also return a
    ``bool``."""

    approved: bool = False
    reason: str = ""
