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
import math
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
        kwargs = _json_fields("oauth", entry, _OAUTH_JSON)
        idp = entry.get("idp")
        if idp is not None:
            kwargs["idp"] = OAuthIdentityProvider(**_json_fields("oauth.idp", idp, _IDP_JSON))
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
class TLSConfig:
    """A private CA and a client certificate for an HTTP or SSE server
    (proto ``TlsConfig``; a config file's ``tls`` block): absolute paths of
    PEM files on mcpd's machine, read again at every connect. ``ca_file``
    holds the CA certificates the server's certificate must chain to
    (instead of the system's roots); ``cert_file`` (the chain, leaf first)
    and ``key_file`` go together. mcpd uses them for the server's OAuth
    requests too. While mcpd runs with ``--allow-command``, it refuses a
    ``connect_server`` that names them (PermissionDenied)."""

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""

    @classmethod
    def from_mcp_json(cls, block: Mapping[str, Any]) -> TLSConfig:
        """The ``tls`` block of a ``.mcp.json`` server entry (``ca``,
        ``cert``, ``key``). ``${VAR}`` is not expanded here. A block that
        names no file is refused, as mcpd refuses it."""
        fields = _json_fields("tls", block, _TLS_JSON)
        if not any(fields.values()):
            raise ValueError("tls: the block names no file (want ca, or cert and key, or all three)")
        return cls(**fields)


# .mcp.json's keys of a tls block, and their field names.
_TLS_JSON = {"ca": "ca_file", "cert": "cert_file", "key": "key_file"}


def _json_fields(where: str, block: Any, names: Mapping[str, str]) -> Dict[str, Any]:
    """The fields of an oauth block (or its idp object) by their field
    names, checked as mcpd decodes them: strings, except scopes (an array
    of strings) and dpop (a boolean); a null counts as absent. Errors name
    keys and JSON kinds, never values (secrets among them)."""
    if not isinstance(block, Mapping):
        raise ValueError(f"{where} is {_json_kind(block)}, want an object")
    unknown = set(block) - set(names)
    if unknown:
        raise ValueError(f"unknown {where} keys: {', '.join(sorted(unknown))}")
    out: Dict[str, Any] = {}
    for key, value in block.items():
        if value is None or key == "idp":
            continue
        if key == "scopes":
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{where}.{key} is {_json_kind(value)}, want an array of strings")
        elif key == "dpop":
            if not isinstance(value, bool):
                raise ValueError(f"{where}.{key} is {_json_kind(value)}, want true or false")
        elif not isinstance(value, str):
            raise ValueError(f"{where}.{key} is {_json_kind(value)}, want a string")
        out[names[key]] = value
    return out


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
    tls: Optional[TLSConfig] = None
    """A private CA and client certificate of an HTTP or SSE server."""

    def __repr__(self) -> str:
        # env and header values are secrets: show only their names (and
        # OAuthConfig's repr leaves its secrets out). TLS paths are not.
        oauth = f", oauth={self.oauth!r}" if self.oauth is not None else ""
        tls = f", tls={self.tls!r}" if self.tls is not None else ""
        return (
            f"ServerConfig(name={self.name!r}, transport={self.transport.value!r}, "
            f"command={self.command!r}, args={self.args!r}, url={self.url!r}, "
            f"env_names={sorted(self.env)!r}, header_names={sorted(self.headers)!r}{oauth}{tls})"
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
        return cls(name, Transport.STDIO, command=command, args=_string_tuple("args", args), env=dict(env or {}), cwd=cwd, **_options(options))

    @classmethod
    def http(
        cls,
        name: str,
        url: str,
        *,
        headers: Optional[Mapping[str, str]] = None,
        oauth: Optional[OAuthConfig] = None,
        tls: Optional[TLSConfig] = None,
        **options: Any,
    ) -> ServerConfig:
        """A server at a Streamable HTTP endpoint; ``oauth`` configures its
        authorization (default: consent on the first 401, see
        :class:`OAuthConfig`), ``tls`` a private CA and client certificate
        (:class:`TLSConfig`)."""
        return cls(name, Transport.HTTP, url=url, headers=dict(headers or {}), oauth=oauth, tls=tls, **_options(options))

    @classmethod
    def sse(
        cls,
        name: str,
        url: str,
        *,
        headers: Optional[Mapping[str, str]] = None,
        oauth: Optional[OAuthConfig] = None,
        tls: Optional[TLSConfig] = None,
        **options: Any,
    ) -> ServerConfig:
        """A server at a legacy HTTP+SSE endpoint."""
        return cls(name, Transport.SSE, url=url, headers=dict(headers or {}), oauth=oauth, tls=tls, **_options(options))

    @classmethod
    def remote(
        cls,
        name: str,
        url: str,
        *,
        headers: Optional[Mapping[str, str]] = None,
        oauth: Optional[OAuthConfig] = None,
        tls: Optional[TLSConfig] = None,
        **options: Any,
    ) -> ServerConfig:
        """A server at a URL whose transport mcpd detects (Streamable HTTP,
        then legacy SSE). Needs an mcpd whose API has ``ServerConfig.remote``."""
        return cls(name, Transport.AUTO, url=url, headers=dict(headers or {}), oauth=oauth, tls=tls, **_options(options))

    @classmethod
    def from_mcp_json(cls, name: str, entry: Mapping[str, Any], **options: Any) -> ServerConfig:
        """One entry of a ``.mcp.json`` ``mcpServers`` (or ``servers``) map,
        read as mcpd's config file reader reads it, for ``connect_server``.

        Read, with the daemon's names, spellings and units:

        - ``type``: ``stdio``; ``http`` (also ``streamable-http``,
          ``streamable_http``, ``streamableHttp``); ``sse``; ``auto``; in
          any case. Without one, an entry with a ``url`` is ``auto`` (its
          transport is detected when mcpd connects: Streamable HTTP, then
          legacy SSE; :meth:`remote`), one with a ``command`` is stdio, and
          one with both is refused.
        - stdio: ``command``, ``args``, ``env``, ``cwd``.
        - ``http``, ``sse``, ``auto``: ``url`` (``serverUrl`` when ``url``
          is empty), ``headers``, ``oauth`` (camelCase keys, see
          :meth:`OAuthConfig.from_mcp_json`), ``tls`` (``ca``, ``cert``,
          ``key``: :meth:`TLSConfig.from_mcp_json`).
        - ``timeout`` (``call_timeout``) and ``connectTimeout``, in seconds,
          0 meaning the daemon's default; ``protocolVersion``,
          ``toolsAllow``, ``toolsDeny`` (and ``disabledTools``, as Windsurf,
          Roo Code and Kiro write it, which adds to it), ``toolsAsk``,
          ``strictCapabilities``, ``trace``.

        ``${VAR}`` is not expanded here: mcpd expands it only in files, and
        uses ``ConnectServer``'s values as given, so expand what you need
        before.

        Refused with a ValueError that names the key, since ``ConnectServer``
        has no field for it and dropping it would leave the server less
        guarded, or otherwise, than the entry says: unless empty,
        ``permissions``, ``alwaysAllow``, ``autoApprove`` and
        ``traceRedact``. ``"disabled": true`` is refused
        too: a server cannot be connected disabled, and connecting it would
        start what the entry parks (leave such an entry out).

        Refused as mcpd refuses them: a value of the wrong JSON type, a field
        of the other transport (``headers`` on a stdio server, ...) and a
        timeout that is negative or over a year. A key mcpd does not know
        (``envFile``; ``ToolsDeny``, as keys are read as spelled; a misspelt
        ``toolDeny``) is refused too: mcpd ignores one with a warning in the
        server's status, which here would reach no one. An ``sdk`` entry is
        refused: an agent serves it (:meth:`Client.serve_tools`). Ignored as
        by mcpd: ``name`` (an agent SDK's; the entry's key names the
        server). A known key whose value is ``null`` counts as absent.

        ``options`` (``call_timeout=``, ``tools_deny=``, ...) add to the
        entry; one the entry sets too is refused rather than replace it.
        """
        if not isinstance(entry, Mapping):
            raise ValueError(f"server {name!r}: entry is {_json_kind(entry)}, want an object")
        e = _Entry(name, entry)
        unknown = sorted(k for k in entry if k not in _ENTRY_READ and k not in _ENTRY_REFUSED and k not in _ENTRY_IGNORED)
        if unknown:
            raise e.error(
                f"not understood by mcpd: {', '.join(map(repr, unknown))} (mcpd's config file reader ignores such fields with "
                "a warning; refused here so that a misspelt setting is not lost without a word)"
            )
        for key, why in _ENTRY_REFUSED.items():
            value = entry.get(key)
            if key == "disabled":
                if e.boolean(key):
                    raise e.error(
                        'the entry is "disabled": true, and ConnectServer cannot add a server disabled: connecting it would start '
                        f'what the entry parks. Leave the entry out, or remove "disabled" and call set_server_enabled({name!r}, False) '
                        "after connecting (which starts it first)"
                    )
            elif value is not None and _says_something(value):
                raise e.error(f"{key!r} cannot be sent with ConnectServer, which has no field for it ({why}): connect this server from a config file")
        url, server_url = e.string("url"), e.string("serverUrl")
        url = url or server_url
        command, args, env, cwd = e.string("command"), e.strings("args"), e.string_map("env"), e.string("cwd")
        headers = e.string_map("headers")
        kind = e.string("type")
        if kind:
            transport = _MCP_JSON_TYPES.get(kind.lower())
            if transport is None:
                if kind.lower() in ("sdk", "agent"):
                    raise e.error("an sdk server is not connected but served by an agent: Client.serve_tools")
                raise e.error(f"unknown type {kind!r} (want stdio, http, sse, auto, streamable-http or sdk)")
        elif url and command:
            raise e.error('entry has both command and url; set "type" or remove one')
        elif url:
            transport = Transport.AUTO
        elif command:
            transport = Transport.STDIO
        else:
            raise e.error("entry needs a command (stdio) or a url (http, sse)")
        raw_oauth, raw_tls = entry.get("oauth"), entry.get("tls")
        if raw_oauth is not None and not isinstance(raw_oauth, Mapping):
            raise e.error(f"field 'oauth' is {_json_kind(raw_oauth)}, want an object")
        if raw_tls is not None and not isinstance(raw_tls, Mapping):
            raise e.error(f"field 'tls' is {_json_kind(raw_tls)}, want an object")

        for key, option in _ENTRY_OPTIONS.items():
            if entry.get(key) is not None and option in options:
                raise e.error(f"{key!r} is in the entry and {option}= is given too: give it once")
        opts: Dict[str, Any] = {
            "call_timeout": e.seconds("timeout"),
            "connect_timeout": e.seconds("connectTimeout"),
            "protocol_version": e.string("protocolVersion"),
            "tools_allow": e.strings("toolsAllow"),
            # Windsurf's, Roo Code's and Kiro's disabledTools: more toolsDeny.
            "tools_deny": e.strings("toolsDeny") + e.strings("disabledTools"),
            "tools_ask": e.strings("toolsAsk"),
            "strict_capabilities": e.boolean("strictCapabilities"),
            "trace": e.boolean("trace"),
        }
        opts.update(options)

        if transport is Transport.STDIO:
            if not command:
                raise e.error("stdio server needs a command")
            if url:
                raise e.error("stdio server takes no url")
            if headers:
                raise e.error("stdio server takes no headers")
            if raw_oauth is not None:
                raise e.error("stdio server takes no oauth block (OAuth is for http and sse servers)")
            if raw_tls is not None:
                raise e.error("stdio server takes no tls block (tls is for http and sse servers)")
            return cls.stdio(name, command, args, env=env, cwd=cwd, **opts)
        if not url:
            raise e.error("http and sse servers need a url")
        if command or args or env or cwd:
            raise e.error(f"{transport.value} server takes no command, args, env or cwd")
        try:
            oauth = OAuthConfig.from_mcp_json(raw_oauth) if raw_oauth is not None else None
            tls = TLSConfig.from_mcp_json(raw_tls) if raw_tls is not None else None
        except ValueError as err:
            raise e.error(str(err)) from None
        return cls(name, transport, url=url, headers=headers, oauth=oauth, tls=tls, **_options(opts))


# How ServerConfig.from_mcp_json treats each key mcpd's config file reader
# knows in a server entry (internal/config's entry). The keys are listed in
# clients/testdata/mcp-json-keys.json, which tests check against both.
_ENTRY_READ = frozenset(
    {
        "type",
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "serverUrl",
        "headers",
        "oauth",
        "tls",
        "timeout",
        "connectTimeout",
        "protocolVersion",
        "toolsAllow",
        "toolsDeny",
        "disabledTools",
        "toolsAsk",
        "strictCapabilities",
        "trace",
    }
)
# Keys mcpd honours that ConnectServer cannot carry, and why: refused when
# they say something (disabled when true, with a message of its own).
_ENTRY_REFUSED = {
    "permissions": "a server's own tool rules are read from config files only",
    "alwaysAllow": "tools that run without asking are read from config files only",
    "autoApprove": "tools that run without asking are read from config files only",
    "traceRedact": "the fields a trace redacts are read from config files only",
    "disabled": "a server cannot be connected disabled",
}
# Keys mcpd reads and leaves: an agent SDK's name for the server.
_ENTRY_IGNORED = frozenset({"name"})
# The entry's option keys and ServerConfig's fields for them.
_ENTRY_OPTIONS = {
    "timeout": "call_timeout",
    "connectTimeout": "connect_timeout",
    "protocolVersion": "protocol_version",
    "toolsAllow": "tools_allow",
    "toolsDeny": "tools_deny",
    "disabledTools": "tools_deny",
    "toolsAsk": "tools_ask",
    "strictCapabilities": "strict_capabilities",
    "trace": "trace",
}
# The values of "type", lower-cased, as mcpd reads them.
_MCP_JSON_TYPES = {
    "stdio": Transport.STDIO,
    "http": Transport.HTTP,
    "streamable-http": Transport.HTTP,
    "streamable_http": Transport.HTTP,
    "streamablehttp": Transport.HTTP,
    "sse": Transport.SSE,
    "auto": Transport.AUTO,
}
# mcpd's bound on a config file's timeouts: a year, in seconds.
_MAX_TIMEOUT_SECONDS = 365 * 24 * 60 * 60


def _json_kind(v: Any) -> str:
    """What v is, in JSON's words; never v itself, which may be a secret."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, Mapping):
        return "an object"
    if isinstance(v, (list, tuple)):
        return "an array"
    return f"a {type(v).__name__}"


def _says_something(v: Any) -> bool:
    """Whether a value sets anything: not false, nor an empty string, array
    or object."""
    if isinstance(v, (str, list, tuple, Mapping)):
        return len(v) > 0
    return v is not False


class _Entry:
    """The typed fields of one .mcp.json entry; a field that is null or
    absent has its type's zero value, as when mcpd decodes it."""

    def __init__(self, name: str, entry: Mapping[str, Any]) -> None:
        self.name = name
        self.entry = entry

    def error(self, problem: str) -> ValueError:
        return ValueError(f"server {self.name!r}: {problem}")

    def _wrong(self, key: str, v: Any, want: str) -> ValueError:
        return self.error(f"field {key!r} is {_json_kind(v)}, want {want}")

    def string(self, key: str) -> str:
        v = self.entry.get(key)
        if v is None:
            return ""
        if not isinstance(v, str):
            raise self._wrong(key, v, "a string")
        return v

    def boolean(self, key: str) -> bool:
        v = self.entry.get(key)
        if v is None:
            return False
        if not isinstance(v, bool):
            raise self._wrong(key, v, "true or false")
        return v

    def strings(self, key: str) -> Tuple[str, ...]:
        v = self.entry.get(key)
        if v is None:
            return ()
        if not isinstance(v, (list, tuple)):
            raise self._wrong(key, v, "an array of strings")
        for i, s in enumerate(v):
            if not isinstance(s, str):
                raise self._wrong(f"{key}[{i}]", s, "a string")
        return tuple(v)

    def string_map(self, key: str) -> Dict[str, str]:
        v = self.entry.get(key)
        if v is None:
            return {}
        if not isinstance(v, Mapping):
            raise self._wrong(key, v, "an object with string values")
        for k, s in v.items():
            if not isinstance(k, str):
                raise self.error(f"field {key!r} has a name that is {_json_kind(k)}, want a string")
            if not isinstance(s, str):
                raise self._wrong(f"{key}.{k}", s, "a string")
        return dict(v)

    def seconds(self, key: str) -> Optional[float]:
        v = self.entry.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self._wrong(key, v, "a number of seconds")
        if not math.isfinite(v):
            raise self.error(f"field {key!r} is not a finite number")
        if v < 0:
            raise self.error(f"field {key!r} is negative")
        if v > _MAX_TIMEOUT_SECONDS:
            raise self.error(f"field {key!r} is more than {_MAX_TIMEOUT_SECONDS} seconds")
        return float(v) if v else None


_OPTION_NAMES = ("call_timeout", "connect_timeout", "protocol_version", "tools_allow", "tools_deny", "tools_ask", "strict_capabilities", "trace")


def _options(options: Mapping[str, Any]) -> Dict[str, Any]:
    unknown = set(options) - set(_OPTION_NAMES)
    if unknown:
        raise TypeError(f"unknown server options: {', '.join(sorted(unknown))}")
    out = dict(options)
    for k in ("tools_allow", "tools_deny", "tools_ask"):
        if k in out:
            out[k] = _string_tuple(k, out[k])
    return out


def _string_tuple(what: str, values: Sequence[str]) -> Tuple[str, ...]:
    """values as a tuple; a lone string is refused, since tuple() would
    split it into characters: tools_deny="rm" would deny "r" and "m"."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{what}: want a sequence of strings, not one string (wrap it in a list)")
    return tuple(values)


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


class _Cancellation:
    """Whether mcpd stopped waiting for the reply to a server request, and
    why. Shared by copies of the request; safe to use from any thread."""

    __slots__ = ("_event", "reason")

    def __init__(self) -> None:
        import threading  # only with server requests: not at start-up

        self._event = threading.Event()
        self.reason = ""

    def cancel(self, reason: str) -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: Optional[float]) -> bool:
        return self._event.wait(timeout)

    def __deepcopy__(self, memo: Any) -> _Cancellation:
        return self  # a copy of a request is the same request

    def __reduce__(self) -> Any:
        return (_Cancellation, ())  # an Event does not pickle; a copy elsewhere is never cancelled


def cancellation_of(request: Any) -> _Cancellation:
    """The cancellation of a server request (made on first use: a request
    a program builds itself has one too). Kept outside the fields, so that
    equality, repr and replace() see only the request."""
    c: _Cancellation = request.__dict__.setdefault("_cancellation", _Cancellation())
    return c


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

    @property
    def cancelled(self) -> bool:
        """Whether mcpd stopped waiting for the reply: the server withdrew
        the request, the call it belongs to ended, its deadline passed, or
        the client closed. A handler on a :class:`~mcpd_grpc.Client`
        checks it (or waits with :meth:`wait_cancelled`) to end its model
        call or form early; an :class:`~mcpd_grpc.AsyncClient` also
        cancels the handler's task. A reply after it is not sent."""
        return cancellation_of(self).is_set()

    def wait_cancelled(self, timeout: Optional[float] = None) -> bool:
        """Waits until mcpd stops waiting for the reply or timeout passes;
        returns :attr:`cancelled`."""
        return cancellation_of(self).wait(timeout)

    @property
    def cancel_reason(self) -> str:
        """Why mcpd stopped waiting; empty while it waits."""
        return cancellation_of(self).reason


@dataclass(frozen=True)
class SamplingResult:
    """The model's answer to a :class:`SamplingRequest`. A handler may also
    return a plain ``str``, which becomes a text answer. ``content`` is one
    text, image or audio block (or a sequence of one), as an MCP sampling
    result holds: the client refuses anything else with ValueError."""

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

    @property
    def cancelled(self) -> bool:
        """Whether mcpd stopped waiting for the reply (see
        :attr:`SamplingRequest.cancelled`)."""
        return cancellation_of(self).is_set()

    def wait_cancelled(self, timeout: Optional[float] = None) -> bool:
        """Waits until mcpd stops waiting for the reply or timeout passes;
        returns :attr:`cancelled`."""
        return cancellation_of(self).wait(timeout)

    @property
    def cancel_reason(self) -> str:
        """Why mcpd stopped waiting; empty while it waits."""
        return cancellation_of(self).reason


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

    @property
    def cancelled(self) -> bool:
        """Whether mcpd stopped waiting for the reply (see
        :attr:`SamplingRequest.cancelled`)."""
        return cancellation_of(self).is_set()

    def wait_cancelled(self, timeout: Optional[float] = None) -> bool:
        """Waits until mcpd stops waiting for the reply or timeout passes;
        returns :attr:`cancelled`."""
        return cancellation_of(self).wait(timeout)

    @property
    def cancel_reason(self) -> str:
        """Why mcpd stopped waiting; empty while it waits."""
        return cancellation_of(self).reason


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

    @property
    def cancelled(self) -> bool:
        """Whether mcpd stopped waiting for the reply (see
        :attr:`SamplingRequest.cancelled`)."""
        return cancellation_of(self).is_set()

    def wait_cancelled(self, timeout: Optional[float] = None) -> bool:
        """Waits until mcpd stops waiting for the reply or timeout passes;
        returns :attr:`cancelled`."""
        return cancellation_of(self).wait(timeout)

    @property
    def cancel_reason(self) -> str:
        """Why mcpd stopped waiting; empty while it waits."""
        return cancellation_of(self).reason


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

    @property
    def cancelled(self) -> bool:
        """Whether mcpd stopped waiting for the reply (see
        :attr:`SamplingRequest.cancelled`)."""
        return cancellation_of(self).is_set()

    def wait_cancelled(self, timeout: Optional[float] = None) -> bool:
        """Waits until mcpd stops waiting for the reply or timeout passes;
        returns :attr:`cancelled`."""
        return cancellation_of(self).wait(timeout)

    @property
    def cancel_reason(self) -> str:
        """Why mcpd stopped waiting; empty while it waits."""
        return cancellation_of(self).reason


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
