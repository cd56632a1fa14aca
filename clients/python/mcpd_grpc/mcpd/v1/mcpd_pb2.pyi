from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

CONFIG_SCOPE_API: ConfigScope
CONFIG_SCOPE_DEFAULT: ConfigScope
CONFIG_SCOPE_FLAG: ConfigScope
CONFIG_SCOPE_LOCAL: ConfigScope
CONFIG_SCOPE_MANAGED: ConfigScope
CONFIG_SCOPE_PROJECT: ConfigScope
CONFIG_SCOPE_UNSPECIFIED: ConfigScope
CONFIG_SCOPE_USER: ConfigScope
DESCRIPTOR: _descriptor.FileDescriptor
ELICITATION_ACTION_ACCEPT: ElicitationAction
ELICITATION_ACTION_CANCEL: ElicitationAction
ELICITATION_ACTION_DECLINE: ElicitationAction
ELICITATION_ACTION_UNSPECIFIED: ElicitationAction
EVENT_KIND_LOG: EventKind
EVENT_KIND_POLL_RESULT: EventKind
EVENT_KIND_PROMPTS_CHANGED: EventKind
EVENT_KIND_RESOURCES_CHANGED: EventKind
EVENT_KIND_RESOURCE_UPDATED: EventKind
EVENT_KIND_SERVER_STATE: EventKind
EVENT_KIND_TOOLS_CHANGED: EventKind
EVENT_KIND_UNSPECIFIED: EventKind
LOG_LEVEL_ALERT: LogLevel
LOG_LEVEL_CRITICAL: LogLevel
LOG_LEVEL_DEBUG: LogLevel
LOG_LEVEL_EMERGENCY: LogLevel
LOG_LEVEL_ERROR: LogLevel
LOG_LEVEL_INFO: LogLevel
LOG_LEVEL_NOTICE: LogLevel
LOG_LEVEL_UNSPECIFIED: LogLevel
LOG_LEVEL_WARNING: LogLevel
ROLE_ASSISTANT: Role
ROLE_UNSPECIFIED: Role
ROLE_USER: Role
SERVER_REQUEST_KIND_APPROVAL: ServerRequestKind
SERVER_REQUEST_KIND_AUTHORIZATION: ServerRequestKind
SERVER_REQUEST_KIND_ELICITATION: ServerRequestKind
SERVER_REQUEST_KIND_ROOTS: ServerRequestKind
SERVER_REQUEST_KIND_SAMPLING: ServerRequestKind
SERVER_REQUEST_KIND_UNSPECIFIED: ServerRequestKind
SERVER_STATE_AUTHORIZATION_REQUIRED: ServerState
SERVER_STATE_CONNECTING: ServerState
SERVER_STATE_DISABLED: ServerState
SERVER_STATE_FAILED: ServerState
SERVER_STATE_READY: ServerState
SERVER_STATE_RECONNECTING: ServerState
SERVER_STATE_STOPPED: ServerState
SERVER_STATE_UNSPECIFIED: ServerState
TRANSPORT_AGENT: Transport
TRANSPORT_AUTO: Transport
TRANSPORT_HTTP: Transport
TRANSPORT_SSE: Transport
TRANSPORT_STDIO: Transport
TRANSPORT_UNSPECIFIED: Transport

class Annotations(_message.Message):
    __slots__ = ["audience", "last_modified", "priority"]
    AUDIENCE_FIELD_NUMBER: _ClassVar[int]
    LAST_MODIFIED_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    audience: _containers.RepeatedScalarFieldContainer[Role]
    last_modified: str
    priority: float
    def __init__(self, audience: _Optional[_Iterable[_Union[Role, str]]] = ..., priority: _Optional[float] = ..., last_modified: _Optional[str] = ...) -> None: ...

class ApprovalRequest(_message.Message):
    __slots__ = ["annotations", "arguments", "caller", "poll_interval", "rule", "tool"]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    POLL_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    annotations: _struct_pb2.Struct
    arguments: _struct_pb2.Struct
    caller: str
    poll_interval: _duration_pb2.Duration
    rule: str
    tool: str
    def __init__(self, tool: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., annotations: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., rule: _Optional[str] = ..., caller: _Optional[str] = ..., poll_interval: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ApprovalResult(_message.Message):
    __slots__ = ["approved", "reason"]
    APPROVED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    approved: bool
    reason: str
    def __init__(self, approved: bool = ..., reason: _Optional[str] = ...) -> None: ...

class AuthorizationRequest(_message.Message):
    __slots__ = ["authorization_url", "expire_time"]
    AUTHORIZATION_URL_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    authorization_url: str
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, authorization_url: _Optional[str] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AuthorizationResult(_message.Message):
    __slots__ = ["redirect_url"]
    REDIRECT_URL_FIELD_NUMBER: _ClassVar[int]
    redirect_url: str
    def __init__(self, redirect_url: _Optional[str] = ...) -> None: ...

class CallToolRequest(_message.Message):
    __slots__ = ["arguments", "meta", "name", "timeout"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    arguments: _struct_pb2.Struct
    meta: _struct_pb2.Struct
    name: str
    timeout: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CallToolResponse(_message.Message):
    __slots__ = ["content", "is_error", "meta", "structured_content"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_CONTENT_FIELD_NUMBER: _ClassVar[int]
    content: _containers.RepeatedCompositeFieldContainer[Content]
    is_error: bool
    meta: _struct_pb2.Struct
    structured_content: _struct_pb2.Value
    def __init__(self, content: _Optional[_Iterable[_Union[Content, _Mapping]]] = ..., structured_content: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., is_error: bool = ..., meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CallToolStreamRequest(_message.Message):
    __slots__ = ["arguments", "meta", "name", "timeout"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    arguments: _struct_pb2.Struct
    meta: _struct_pb2.Struct
    name: str
    timeout: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CallToolStreamResponse(_message.Message):
    __slots__ = ["log", "progress", "result"]
    LOG_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    log: LogMessage
    progress: Progress
    result: CallToolResponse
    def __init__(self, progress: _Optional[_Union[Progress, _Mapping]] = ..., log: _Optional[_Union[LogMessage, _Mapping]] = ..., result: _Optional[_Union[CallToolResponse, _Mapping]] = ...) -> None: ...

class CompleteArgument(_message.Message):
    __slots__ = ["name", "value"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class CompleteAuthorizationRequest(_message.Message):
    __slots__ = ["redirect_url", "server"]
    REDIRECT_URL_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    redirect_url: str
    server: str
    def __init__(self, server: _Optional[str] = ..., redirect_url: _Optional[str] = ...) -> None: ...

class CompleteAuthorizationResponse(_message.Message):
    __slots__ = ["server"]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    server: Server
    def __init__(self, server: _Optional[_Union[Server, _Mapping]] = ...) -> None: ...

class CompleteRequest(_message.Message):
    __slots__ = ["argument", "context", "prompt", "resource_template", "server"]
    class ContextEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ARGUMENT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    argument: CompleteArgument
    context: _containers.ScalarMap[str, str]
    prompt: str
    resource_template: str
    server: str
    def __init__(self, server: _Optional[str] = ..., prompt: _Optional[str] = ..., resource_template: _Optional[str] = ..., argument: _Optional[_Union[CompleteArgument, _Mapping]] = ..., context: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CompleteResponse(_message.Message):
    __slots__ = ["has_more", "total", "values"]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    has_more: bool
    total: int
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ..., total: _Optional[int] = ..., has_more: bool = ...) -> None: ...

class ConnectServerRequest(_message.Message):
    __slots__ = ["replace", "server"]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    replace: bool
    server: ServerConfig
    def __init__(self, server: _Optional[_Union[ServerConfig, _Mapping]] = ..., replace: bool = ...) -> None: ...

class ConnectServerResponse(_message.Message):
    __slots__ = ["server"]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    server: Server
    def __init__(self, server: _Optional[_Union[Server, _Mapping]] = ...) -> None: ...

class Content(_message.Message):
    __slots__ = ["annotations", "audio", "image", "meta", "resource", "resource_link", "text"]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    AUDIO_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_LINK_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    annotations: Annotations
    audio: MediaContent
    image: MediaContent
    meta: _struct_pb2.Struct
    resource: ResourceContents
    resource_link: ResourceLink
    text: TextContent
    def __init__(self, text: _Optional[_Union[TextContent, _Mapping]] = ..., image: _Optional[_Union[MediaContent, _Mapping]] = ..., audio: _Optional[_Union[MediaContent, _Mapping]] = ..., resource_link: _Optional[_Union[ResourceLink, _Mapping]] = ..., resource: _Optional[_Union[ResourceContents, _Mapping]] = ..., annotations: _Optional[_Union[Annotations, _Mapping]] = ..., meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class DisconnectServerRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DisconnectServerResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ElicitationRequest(_message.Message):
    __slots__ = ["elicitation_id", "message", "mode", "params", "requested_schema", "url"]
    ELICITATION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    elicitation_id: str
    message: str
    mode: str
    params: _struct_pb2.Struct
    requested_schema: _struct_pb2.Struct
    url: str
    def __init__(self, mode: _Optional[str] = ..., message: _Optional[str] = ..., requested_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., url: _Optional[str] = ..., elicitation_id: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ElicitationResult(_message.Message):
    __slots__ = ["action", "content"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    action: ElicitationAction
    content: _struct_pb2.Struct
    def __init__(self, action: _Optional[_Union[ElicitationAction, str]] = ..., content: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ["gap", "log", "poll_result", "prompts_changed", "resource_updated", "resources_changed", "sequence", "server", "server_state", "time", "tools_changed"]
    GAP_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    POLL_RESULT_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_CHANGED_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_UPDATED_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    SERVER_STATE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    TOOLS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    gap: Gap
    log: LogMessage
    poll_result: PollResult
    prompts_changed: ListChanged
    resource_updated: ResourceUpdated
    resources_changed: ListChanged
    sequence: int
    server: str
    server_state: ServerStateChanged
    time: _timestamp_pb2.Timestamp
    tools_changed: ListChanged
    def __init__(self, sequence: _Optional[int] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., server: _Optional[str] = ..., resource_updated: _Optional[_Union[ResourceUpdated, _Mapping]] = ..., tools_changed: _Optional[_Union[ListChanged, _Mapping]] = ..., prompts_changed: _Optional[_Union[ListChanged, _Mapping]] = ..., resources_changed: _Optional[_Union[ListChanged, _Mapping]] = ..., server_state: _Optional[_Union[ServerStateChanged, _Mapping]] = ..., log: _Optional[_Union[LogMessage, _Mapping]] = ..., gap: _Optional[_Union[Gap, _Mapping]] = ..., poll_result: _Optional[_Union[PollResult, _Mapping]] = ...) -> None: ...

class ForgetAuthorizationRequest(_message.Message):
    __slots__ = ["server"]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    server: str
    def __init__(self, server: _Optional[str] = ...) -> None: ...

class ForgetAuthorizationResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Gap(_message.Message):
    __slots__ = ["first_sequence", "last_sequence"]
    FIRST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    first_sequence: int
    last_sequence: int
    def __init__(self, first_sequence: _Optional[int] = ..., last_sequence: _Optional[int] = ...) -> None: ...

class GetPromptRequest(_message.Message):
    __slots__ = ["arguments", "name", "server"]
    class ArgumentsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    arguments: _containers.ScalarMap[str, str]
    name: str
    server: str
    def __init__(self, server: _Optional[str] = ..., name: _Optional[str] = ..., arguments: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GetPromptResponse(_message.Message):
    __slots__ = ["description", "messages", "meta"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    description: str
    messages: _containers.RepeatedCompositeFieldContainer[PromptMessage]
    meta: _struct_pb2.Struct
    def __init__(self, description: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[PromptMessage, _Mapping]]] = ..., meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GetServerRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetServerResponse(_message.Message):
    __slots__ = ["server"]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    server: Server
    def __init__(self, server: _Optional[_Union[Server, _Mapping]] = ...) -> None: ...

class HandleServerRequestsRequest(_message.Message):
    __slots__ = ["register", "reply"]
    REGISTER_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    register: ServerRequestRegistration
    reply: ServerRequestReply
    def __init__(self, register: _Optional[_Union[ServerRequestRegistration, _Mapping]] = ..., reply: _Optional[_Union[ServerRequestReply, _Mapping]] = ...) -> None: ...

class HandleServerRequestsResponse(_message.Message):
    __slots__ = ["cancel", "registered", "reply_refused", "request"]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_FIELD_NUMBER: _ClassVar[int]
    REPLY_REFUSED_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    cancel: ServerRequestCancel
    registered: ServerRequestRegistration
    reply_refused: ServerRequestReplyRefused
    request: ServerRequest
    def __init__(self, registered: _Optional[_Union[ServerRequestRegistration, _Mapping]] = ..., request: _Optional[_Union[ServerRequest, _Mapping]] = ..., cancel: _Optional[_Union[ServerRequestCancel, _Mapping]] = ..., reply_refused: _Optional[_Union[ServerRequestReplyRefused, _Mapping]] = ...) -> None: ...

class HttpConfig(_message.Message):
    __slots__ = ["headers", "tls", "url"]
    class HeadersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    TLS_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    headers: _containers.ScalarMap[str, str]
    tls: TlsConfig
    url: str
    def __init__(self, url: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., tls: _Optional[_Union[TlsConfig, _Mapping]] = ...) -> None: ...

class Icon(_message.Message):
    __slots__ = ["mime_type", "sizes", "src", "theme"]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZES_FIELD_NUMBER: _ClassVar[int]
    SRC_FIELD_NUMBER: _ClassVar[int]
    THEME_FIELD_NUMBER: _ClassVar[int]
    mime_type: str
    sizes: _containers.RepeatedScalarFieldContainer[str]
    src: str
    theme: str
    def __init__(self, src: _Optional[str] = ..., mime_type: _Optional[str] = ..., sizes: _Optional[_Iterable[str]] = ..., theme: _Optional[str] = ...) -> None: ...

class Implementation(_message.Message):
    __slots__ = ["description", "icons", "name", "title", "version", "website_url"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ICONS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WEBSITE_URL_FIELD_NUMBER: _ClassVar[int]
    description: str
    icons: _containers.RepeatedCompositeFieldContainer[Icon]
    name: str
    title: str
    version: str
    website_url: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., website_url: _Optional[str] = ..., icons: _Optional[_Iterable[_Union[Icon, _Mapping]]] = ...) -> None: ...

class ListChanged(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListPollsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListPollsResponse(_message.Message):
    __slots__ = ["polls"]
    POLLS_FIELD_NUMBER: _ClassVar[int]
    polls: _containers.RepeatedCompositeFieldContainer[Poll]
    def __init__(self, polls: _Optional[_Iterable[_Union[Poll, _Mapping]]] = ...) -> None: ...

class ListPromptsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "server"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    server: str
    def __init__(self, server: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListPromptsResponse(_message.Message):
    __slots__ = ["next_page_token", "prompts"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    prompts: _containers.RepeatedCompositeFieldContainer[Prompt]
    def __init__(self, prompts: _Optional[_Iterable[_Union[Prompt, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListResourceTemplatesRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "server"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    server: str
    def __init__(self, server: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListResourceTemplatesResponse(_message.Message):
    __slots__ = ["next_page_token", "resource_templates"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    resource_templates: _containers.RepeatedCompositeFieldContainer[ResourceTemplate]
    def __init__(self, resource_templates: _Optional[_Iterable[_Union[ResourceTemplate, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListResourcesRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "server"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    server: str
    def __init__(self, server: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListResourcesResponse(_message.Message):
    __slots__ = ["next_page_token", "resources"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    resources: _containers.RepeatedCompositeFieldContainer[Resource]
    def __init__(self, resources: _Optional[_Iterable[_Union[Resource, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListServersRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListServersResponse(_message.Message):
    __slots__ = ["servers"]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedCompositeFieldContainer[Server]
    def __init__(self, servers: _Optional[_Iterable[_Union[Server, _Mapping]]] = ...) -> None: ...

class ListToolsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "server"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    server: str
    def __init__(self, server: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListToolsResponse(_message.Message):
    __slots__ = ["next_page_token", "tools"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    def __init__(self, tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class LogMessage(_message.Message):
    __slots__ = ["data", "level", "logger"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    LOGGER_FIELD_NUMBER: _ClassVar[int]
    data: _struct_pb2.Value
    level: LogLevel
    logger: str
    def __init__(self, level: _Optional[_Union[LogLevel, str]] = ..., logger: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class MediaContent(_message.Message):
    __slots__ = ["data", "mime_type"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    mime_type: str
    def __init__(self, data: _Optional[bytes] = ..., mime_type: _Optional[str] = ...) -> None: ...

class OAuthConfig(_message.Message):
    __slots__ = ["assertion", "assertion_file", "client_id", "client_metadata_url", "client_secret", "dpop", "grant", "idp", "private_key_file", "scopes", "signing_algorithm", "token_endpoint_auth_method"]
    ASSERTION_FIELD_NUMBER: _ClassVar[int]
    ASSERTION_FILE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_METADATA_URL_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SECRET_FIELD_NUMBER: _ClassVar[int]
    DPOP_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    IDP_FIELD_NUMBER: _ClassVar[int]
    PRIVATE_KEY_FILE_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    SIGNING_ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ENDPOINT_AUTH_METHOD_FIELD_NUMBER: _ClassVar[int]
    assertion: str
    assertion_file: str
    client_id: str
    client_metadata_url: str
    client_secret: str
    dpop: bool
    grant: str
    idp: OAuthIdentityProvider
    private_key_file: str
    scopes: _containers.RepeatedScalarFieldContainer[str]
    signing_algorithm: str
    token_endpoint_auth_method: str
    def __init__(self, client_id: _Optional[str] = ..., client_secret: _Optional[str] = ..., client_metadata_url: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., token_endpoint_auth_method: _Optional[str] = ..., private_key_file: _Optional[str] = ..., signing_algorithm: _Optional[str] = ..., grant: _Optional[str] = ..., assertion: _Optional[str] = ..., assertion_file: _Optional[str] = ..., idp: _Optional[_Union[OAuthIdentityProvider, _Mapping]] = ..., dpop: bool = ...) -> None: ...

class OAuthIdentityProvider(_message.Message):
    __slots__ = ["client_id", "client_secret", "id_token", "id_token_file", "issuer", "token_endpoint"]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SECRET_FIELD_NUMBER: _ClassVar[int]
    ID_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ID_TOKEN_FILE_FIELD_NUMBER: _ClassVar[int]
    ISSUER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    client_secret: str
    id_token: str
    id_token_file: str
    issuer: str
    token_endpoint: str
    def __init__(self, issuer: _Optional[str] = ..., token_endpoint: _Optional[str] = ..., client_id: _Optional[str] = ..., client_secret: _Optional[str] = ..., id_token: _Optional[str] = ..., id_token_file: _Optional[str] = ...) -> None: ...

class Poll(_message.Message):
    __slots__ = ["changes", "id", "interval", "last_error", "last_poll_time", "paused", "polls", "resource_uri", "server", "tool"]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_POLL_TIME_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    POLLS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    changes: int
    id: str
    interval: _duration_pb2.Duration
    last_error: str
    last_poll_time: _timestamp_pb2.Timestamp
    paused: bool
    polls: int
    resource_uri: str
    server: str
    tool: PollToolCall
    def __init__(self, id: _Optional[str] = ..., server: _Optional[str] = ..., resource_uri: _Optional[str] = ..., tool: _Optional[_Union[PollToolCall, _Mapping]] = ..., interval: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., paused: bool = ..., polls: _Optional[int] = ..., changes: _Optional[int] = ..., last_poll_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ...) -> None: ...

class PollResult(_message.Message):
    __slots__ = ["baseline", "contents", "error", "poll_id", "resource_uri", "tool", "tool_result"]
    BASELINE_FIELD_NUMBER: _ClassVar[int]
    CONTENTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    POLL_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    baseline: bool
    contents: _containers.RepeatedCompositeFieldContainer[ResourceContents]
    error: str
    poll_id: str
    resource_uri: str
    tool: str
    tool_result: CallToolResponse
    def __init__(self, poll_id: _Optional[str] = ..., baseline: bool = ..., resource_uri: _Optional[str] = ..., tool: _Optional[str] = ..., contents: _Optional[_Iterable[_Union[ResourceContents, _Mapping]]] = ..., tool_result: _Optional[_Union[CallToolResponse, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class PollToolCall(_message.Message):
    __slots__ = ["arguments", "name"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    arguments: _struct_pb2.Struct
    name: str
    def __init__(self, name: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ["message", "progress", "total"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    message: str
    progress: float
    total: float
    def __init__(self, progress: _Optional[float] = ..., total: _Optional[float] = ..., message: _Optional[str] = ...) -> None: ...

class Prompt(_message.Message):
    __slots__ = ["arguments", "description", "icons", "meta", "name", "server", "title"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ICONS_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    arguments: _containers.RepeatedCompositeFieldContainer[PromptArgument]
    description: str
    icons: _containers.RepeatedCompositeFieldContainer[Icon]
    meta: _struct_pb2.Struct
    name: str
    server: str
    title: str
    def __init__(self, server: _Optional[str] = ..., name: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., arguments: _Optional[_Iterable[_Union[PromptArgument, _Mapping]]] = ..., meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., icons: _Optional[_Iterable[_Union[Icon, _Mapping]]] = ...) -> None: ...

class PromptArgument(_message.Message):
    __slots__ = ["description", "name", "required", "title"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    description: str
    name: str
    required: bool
    title: str
    def __init__(self, name: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., required: bool = ...) -> None: ...

class PromptMessage(_message.Message):
    __slots__ = ["content", "role"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    content: Content
    role: Role
    def __init__(self, role: _Optional[_Union[Role, str]] = ..., content: _Optional[_Union[Content, _Mapping]] = ...) -> None: ...

class ReadResourceRequest(_message.Message):
    __slots__ = ["server", "uri"]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    server: str
    uri: str
    def __init__(self, server: _Optional[str] = ..., uri: _Optional[str] = ...) -> None: ...

class ReadResourceResponse(_message.Message):
    __slots__ = ["contents", "meta"]
    CONTENTS_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    contents: _containers.RepeatedCompositeFieldContainer[ResourceContents]
    meta: _struct_pb2.Struct
    def __init__(self, contents: _Optional[_Iterable[_Union[ResourceContents, _Mapping]]] = ..., meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ReplyError(_message.Message):
    __slots__ = ["code", "message"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class Resource(_message.Message):
    __slots__ = ["annotations", "description", "icons", "meta", "mime_type", "name", "server", "size", "title", "uri"]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ICONS_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    annotations: Annotations
    description: str
    icons: _containers.RepeatedCompositeFieldContainer[Icon]
    meta: _struct_pb2.Struct
    mime_type: str
    name: str
    server: str
    size: int
    title: str
    uri: str
    def __init__(self, server: _Optional[str] = ..., uri: _Optional[str] = ..., name: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., mime_type: _Optional[str] = ..., size: _Optional[int] = ..., annotations: _Optional[_Union[Annotations, _Mapping]] = ..., meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., icons: _Optional[_Iterable[_Union[Icon, _Mapping]]] = ...) -> None: ...

class ResourceContents(_message.Message):
    __slots__ = ["blob", "meta", "mime_type", "text", "uri"]
    BLOB_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    blob: bytes
    meta: _struct_pb2.Struct
    mime_type: str
    text: str
    uri: str
    def __init__(self, uri: _Optional[str] = ..., mime_type: _Optional[str] = ..., text: _Optional[str] = ..., blob: _Optional[bytes] = ..., meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ResourceLink(_message.Message):
    __slots__ = ["description", "icons", "mime_type", "name", "size", "title", "uri"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ICONS_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    description: str
    icons: _containers.RepeatedCompositeFieldContainer[Icon]
    mime_type: str
    name: str
    size: int
    title: str
    uri: str
    def __init__(self, uri: _Optional[str] = ..., name: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., mime_type: _Optional[str] = ..., size: _Optional[int] = ..., icons: _Optional[_Iterable[_Union[Icon, _Mapping]]] = ...) -> None: ...

class ResourceRef(_message.Message):
    __slots__ = ["server", "uri"]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    server: str
    uri: str
    def __init__(self, server: _Optional[str] = ..., uri: _Optional[str] = ...) -> None: ...

class ResourceTemplate(_message.Message):
    __slots__ = ["annotations", "description", "icons", "meta", "mime_type", "name", "server", "title", "uri_template"]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ICONS_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    URI_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    annotations: Annotations
    description: str
    icons: _containers.RepeatedCompositeFieldContainer[Icon]
    meta: _struct_pb2.Struct
    mime_type: str
    name: str
    server: str
    title: str
    uri_template: str
    def __init__(self, server: _Optional[str] = ..., uri_template: _Optional[str] = ..., name: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., mime_type: _Optional[str] = ..., annotations: _Optional[_Union[Annotations, _Mapping]] = ..., meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., icons: _Optional[_Iterable[_Union[Icon, _Mapping]]] = ...) -> None: ...

class ResourceUpdated(_message.Message):
    __slots__ = ["uri"]
    URI_FIELD_NUMBER: _ClassVar[int]
    uri: str
    def __init__(self, uri: _Optional[str] = ...) -> None: ...

class RestartServerRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RestartServerResponse(_message.Message):
    __slots__ = ["server"]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    server: Server
    def __init__(self, server: _Optional[_Union[Server, _Mapping]] = ...) -> None: ...

class Root(_message.Message):
    __slots__ = ["name", "uri"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    name: str
    uri: str
    def __init__(self, uri: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class RootsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class RootsResult(_message.Message):
    __slots__ = ["roots"]
    ROOTS_FIELD_NUMBER: _ClassVar[int]
    roots: _containers.RepeatedCompositeFieldContainer[Root]
    def __init__(self, roots: _Optional[_Iterable[_Union[Root, _Mapping]]] = ...) -> None: ...

class SamplingMessage(_message.Message):
    __slots__ = ["content", "role"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    content: _containers.RepeatedCompositeFieldContainer[Content]
    role: Role
    def __init__(self, role: _Optional[_Union[Role, str]] = ..., content: _Optional[_Iterable[_Union[Content, _Mapping]]] = ...) -> None: ...

class SamplingRequest(_message.Message):
    __slots__ = ["max_tokens", "messages", "params", "system_prompt"]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    max_tokens: int
    messages: _containers.RepeatedCompositeFieldContainer[SamplingMessage]
    params: _struct_pb2.Struct
    system_prompt: str
    def __init__(self, messages: _Optional[_Iterable[_Union[SamplingMessage, _Mapping]]] = ..., system_prompt: _Optional[str] = ..., max_tokens: _Optional[int] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SamplingResult(_message.Message):
    __slots__ = ["content", "model", "role", "stop_reason"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    content: _containers.RepeatedCompositeFieldContainer[Content]
    model: str
    role: Role
    stop_reason: str
    def __init__(self, role: _Optional[_Union[Role, str]] = ..., content: _Optional[_Iterable[_Union[Content, _Mapping]]] = ..., model: _Optional[str] = ..., stop_reason: _Optional[str] = ...) -> None: ...

class SearchToolsRequest(_message.Message):
    __slots__ = ["limit", "query", "servers"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    limit: int
    query: str
    servers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, query: _Optional[str] = ..., limit: _Optional[int] = ..., servers: _Optional[_Iterable[str]] = ...) -> None: ...

class SearchToolsResponse(_message.Message):
    __slots__ = ["matches"]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    matches: _containers.RepeatedCompositeFieldContainer[ToolMatch]
    def __init__(self, matches: _Optional[_Iterable[_Union[ToolMatch, _Mapping]]] = ...) -> None: ...

class ServeToolsRequest(_message.Message):
    __slots__ = ["declare", "progress", "result"]
    DECLARE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    declare: ToolServerDeclaration
    progress: ToolCallProgress
    result: ToolCallResult
    def __init__(self, declare: _Optional[_Union[ToolServerDeclaration, _Mapping]] = ..., result: _Optional[_Union[ToolCallResult, _Mapping]] = ..., progress: _Optional[_Union[ToolCallProgress, _Mapping]] = ...) -> None: ...

class ServeToolsResponse(_message.Message):
    __slots__ = ["call", "cancel", "serving"]
    CALL_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    SERVING_FIELD_NUMBER: _ClassVar[int]
    call: ToolCall
    cancel: ToolCallCancel
    serving: Server
    def __init__(self, serving: _Optional[_Union[Server, _Mapping]] = ..., call: _Optional[_Union[ToolCall, _Mapping]] = ..., cancel: _Optional[_Union[ToolCallCancel, _Mapping]] = ...) -> None: ...

class Server(_message.Message):
    __slots__ = ["args", "authorization_expire_time", "authorization_url", "capabilities", "command", "config_warnings", "env_names", "header_names", "instructions", "last_error", "name", "notes", "pid", "protocol_version", "restarts", "scope", "server_info", "source", "state", "state_changed_time", "stderr_tail", "tool_count", "transport", "url"]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_URL_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    CONFIG_WARNINGS_FIELD_NUMBER: _ClassVar[int]
    ENV_NAMES_FIELD_NUMBER: _ClassVar[int]
    HEADER_NAMES_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SERVER_INFO_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    STATE_CHANGED_TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STDERR_TAIL_FIELD_NUMBER: _ClassVar[int]
    TOOL_COUNT_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    args: _containers.RepeatedScalarFieldContainer[str]
    authorization_expire_time: _timestamp_pb2.Timestamp
    authorization_url: str
    capabilities: _struct_pb2.Struct
    command: str
    config_warnings: _containers.RepeatedScalarFieldContainer[str]
    env_names: _containers.RepeatedScalarFieldContainer[str]
    header_names: _containers.RepeatedScalarFieldContainer[str]
    instructions: str
    last_error: str
    name: str
    notes: _containers.RepeatedScalarFieldContainer[str]
    pid: int
    protocol_version: str
    restarts: int
    scope: ConfigScope
    server_info: Implementation
    source: str
    state: ServerState
    state_changed_time: _timestamp_pb2.Timestamp
    stderr_tail: _containers.RepeatedScalarFieldContainer[str]
    tool_count: int
    transport: Transport
    url: str
    def __init__(self, name: _Optional[str] = ..., state: _Optional[_Union[ServerState, str]] = ..., transport: _Optional[_Union[Transport, str]] = ..., protocol_version: _Optional[str] = ..., server_info: _Optional[_Union[Implementation, _Mapping]] = ..., instructions: _Optional[str] = ..., capabilities: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tool_count: _Optional[int] = ..., last_error: _Optional[str] = ..., restarts: _Optional[int] = ..., stderr_tail: _Optional[_Iterable[str]] = ..., state_changed_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., command: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ..., url: _Optional[str] = ..., env_names: _Optional[_Iterable[str]] = ..., header_names: _Optional[_Iterable[str]] = ..., pid: _Optional[int] = ..., authorization_url: _Optional[str] = ..., authorization_expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., scope: _Optional[_Union[ConfigScope, str]] = ..., source: _Optional[str] = ..., notes: _Optional[_Iterable[str]] = ..., config_warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class ServerConfig(_message.Message):
    __slots__ = ["call_timeout", "connect_timeout", "http", "name", "oauth", "protocol_version", "remote", "sse", "stdio", "strict_capabilities", "tools_allow", "tools_ask", "tools_deny", "trace"]
    CALL_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    CONNECT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OAUTH_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    REMOTE_FIELD_NUMBER: _ClassVar[int]
    SSE_FIELD_NUMBER: _ClassVar[int]
    STDIO_FIELD_NUMBER: _ClassVar[int]
    STRICT_CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    TOOLS_ALLOW_FIELD_NUMBER: _ClassVar[int]
    TOOLS_ASK_FIELD_NUMBER: _ClassVar[int]
    TOOLS_DENY_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    call_timeout: _duration_pb2.Duration
    connect_timeout: _duration_pb2.Duration
    http: HttpConfig
    name: str
    oauth: OAuthConfig
    protocol_version: str
    remote: HttpConfig
    sse: HttpConfig
    stdio: StdioConfig
    strict_capabilities: bool
    tools_allow: _containers.RepeatedScalarFieldContainer[str]
    tools_ask: _containers.RepeatedScalarFieldContainer[str]
    tools_deny: _containers.RepeatedScalarFieldContainer[str]
    trace: bool
    def __init__(self, name: _Optional[str] = ..., stdio: _Optional[_Union[StdioConfig, _Mapping]] = ..., http: _Optional[_Union[HttpConfig, _Mapping]] = ..., sse: _Optional[_Union[HttpConfig, _Mapping]] = ..., remote: _Optional[_Union[HttpConfig, _Mapping]] = ..., call_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., connect_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., protocol_version: _Optional[str] = ..., tools_allow: _Optional[_Iterable[str]] = ..., tools_deny: _Optional[_Iterable[str]] = ..., tools_ask: _Optional[_Iterable[str]] = ..., oauth: _Optional[_Union[OAuthConfig, _Mapping]] = ..., strict_capabilities: bool = ..., trace: bool = ...) -> None: ...

class ServerRequest(_message.Message):
    __slots__ = ["approval", "authorization", "deadline", "elicitation", "id", "roots", "sampling", "server"]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    ELICITATION_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ROOTS_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    approval: ApprovalRequest
    authorization: AuthorizationRequest
    deadline: _timestamp_pb2.Timestamp
    elicitation: ElicitationRequest
    id: str
    roots: RootsRequest
    sampling: SamplingRequest
    server: str
    def __init__(self, id: _Optional[str] = ..., server: _Optional[str] = ..., sampling: _Optional[_Union[SamplingRequest, _Mapping]] = ..., elicitation: _Optional[_Union[ElicitationRequest, _Mapping]] = ..., roots: _Optional[_Union[RootsRequest, _Mapping]] = ..., authorization: _Optional[_Union[AuthorizationRequest, _Mapping]] = ..., approval: _Optional[_Union[ApprovalRequest, _Mapping]] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ServerRequestCancel(_message.Message):
    __slots__ = ["id", "reason"]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    reason: str
    def __init__(self, id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ServerRequestRegistration(_message.Message):
    __slots__ = ["kinds", "servers"]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    kinds: _containers.RepeatedScalarFieldContainer[ServerRequestKind]
    servers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, servers: _Optional[_Iterable[str]] = ..., kinds: _Optional[_Iterable[_Union[ServerRequestKind, str]]] = ...) -> None: ...

class ServerRequestReply(_message.Message):
    __slots__ = ["approval", "authorization", "elicitation", "error", "id", "roots", "sampling"]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_FIELD_NUMBER: _ClassVar[int]
    ELICITATION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ROOTS_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    approval: ApprovalResult
    authorization: AuthorizationResult
    elicitation: ElicitationResult
    error: ReplyError
    id: str
    roots: RootsResult
    sampling: SamplingResult
    def __init__(self, id: _Optional[str] = ..., sampling: _Optional[_Union[SamplingResult, _Mapping]] = ..., elicitation: _Optional[_Union[ElicitationResult, _Mapping]] = ..., roots: _Optional[_Union[RootsResult, _Mapping]] = ..., authorization: _Optional[_Union[AuthorizationResult, _Mapping]] = ..., approval: _Optional[_Union[ApprovalResult, _Mapping]] = ..., error: _Optional[_Union[ReplyError, _Mapping]] = ...) -> None: ...

class ServerRequestReplyRefused(_message.Message):
    __slots__ = ["id", "reason"]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    reason: str
    def __init__(self, id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ServerStateChanged(_message.Message):
    __slots__ = ["error", "state"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    error: str
    state: ServerState
    def __init__(self, state: _Optional[_Union[ServerState, str]] = ..., error: _Optional[str] = ...) -> None: ...

class SetLogLevelRequest(_message.Message):
    __slots__ = ["level", "server"]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    level: LogLevel
    server: str
    def __init__(self, server: _Optional[str] = ..., level: _Optional[_Union[LogLevel, str]] = ...) -> None: ...

class SetLogLevelResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SetRootsRequest(_message.Message):
    __slots__ = ["roots", "server"]
    ROOTS_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    roots: _containers.RepeatedCompositeFieldContainer[Root]
    server: str
    def __init__(self, server: _Optional[str] = ..., roots: _Optional[_Iterable[_Union[Root, _Mapping]]] = ...) -> None: ...

class SetRootsResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SetServerEnabledRequest(_message.Message):
    __slots__ = ["enabled", "name"]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    name: str
    def __init__(self, name: _Optional[str] = ..., enabled: bool = ...) -> None: ...

class SetServerEnabledResponse(_message.Message):
    __slots__ = ["server"]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    server: Server
    def __init__(self, server: _Optional[_Union[Server, _Mapping]] = ...) -> None: ...

class StartPollRequest(_message.Message):
    __slots__ = ["interval", "resource_uri", "server", "tool"]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    interval: _duration_pb2.Duration
    resource_uri: str
    server: str
    tool: PollToolCall
    def __init__(self, server: _Optional[str] = ..., resource_uri: _Optional[str] = ..., tool: _Optional[_Union[PollToolCall, _Mapping]] = ..., interval: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class StartPollResponse(_message.Message):
    __slots__ = ["poll"]
    POLL_FIELD_NUMBER: _ClassVar[int]
    poll: Poll
    def __init__(self, poll: _Optional[_Union[Poll, _Mapping]] = ...) -> None: ...

class StdioConfig(_message.Message):
    __slots__ = ["args", "command", "cwd", "env"]
    class EnvEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ARGS_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    args: _containers.RepeatedScalarFieldContainer[str]
    command: str
    cwd: str
    env: _containers.ScalarMap[str, str]
    def __init__(self, command: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., cwd: _Optional[str] = ...) -> None: ...

class StopPollRequest(_message.Message):
    __slots__ = ["id"]
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class StopPollResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ["after_sequence", "fallback_poll_interval", "kinds", "poll_ids", "resources", "servers"]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_POLL_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    POLL_IDS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    after_sequence: int
    fallback_poll_interval: _duration_pb2.Duration
    kinds: _containers.RepeatedScalarFieldContainer[EventKind]
    poll_ids: _containers.RepeatedScalarFieldContainer[str]
    resources: _containers.RepeatedCompositeFieldContainer[ResourceRef]
    servers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, servers: _Optional[_Iterable[str]] = ..., resources: _Optional[_Iterable[_Union[ResourceRef, _Mapping]]] = ..., kinds: _Optional[_Iterable[_Union[EventKind, str]]] = ..., after_sequence: _Optional[int] = ..., poll_ids: _Optional[_Iterable[str]] = ..., fallback_poll_interval: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class SubscribeResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: Event
    def __init__(self, event: _Optional[_Union[Event, _Mapping]] = ...) -> None: ...

class TextContent(_message.Message):
    __slots__ = ["text"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class TlsConfig(_message.Message):
    __slots__ = ["ca_file", "cert_file", "key_file"]
    CA_FILE_FIELD_NUMBER: _ClassVar[int]
    CERT_FILE_FIELD_NUMBER: _ClassVar[int]
    KEY_FILE_FIELD_NUMBER: _ClassVar[int]
    ca_file: str
    cert_file: str
    key_file: str
    def __init__(self, ca_file: _Optional[str] = ..., cert_file: _Optional[str] = ..., key_file: _Optional[str] = ...) -> None: ...

class Tool(_message.Message):
    __slots__ = ["annotations", "description", "icons", "input_schema", "meta", "name", "output_schema", "server", "title", "tool_name"]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ICONS_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    annotations: ToolAnnotations
    description: str
    icons: _containers.RepeatedCompositeFieldContainer[Icon]
    input_schema: _struct_pb2.Struct
    meta: _struct_pb2.Struct
    name: str
    output_schema: _struct_pb2.Struct
    server: str
    title: str
    tool_name: str
    def __init__(self, name: _Optional[str] = ..., server: _Optional[str] = ..., tool_name: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., input_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., output_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., annotations: _Optional[_Union[ToolAnnotations, _Mapping]] = ..., meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., icons: _Optional[_Iterable[_Union[Icon, _Mapping]]] = ...) -> None: ...

class ToolAnnotations(_message.Message):
    __slots__ = ["destructive_hint", "idempotent_hint", "open_world_hint", "read_only_hint", "title"]
    DESTRUCTIVE_HINT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_HINT_FIELD_NUMBER: _ClassVar[int]
    OPEN_WORLD_HINT_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_HINT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    destructive_hint: bool
    idempotent_hint: bool
    open_world_hint: bool
    read_only_hint: bool
    title: str
    def __init__(self, title: _Optional[str] = ..., read_only_hint: bool = ..., destructive_hint: bool = ..., idempotent_hint: bool = ..., open_world_hint: bool = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ["arguments", "deadline", "id", "meta", "tool"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    arguments: _struct_pb2.Struct
    deadline: _timestamp_pb2.Timestamp
    id: str
    meta: _struct_pb2.Struct
    tool: str
    def __init__(self, id: _Optional[str] = ..., tool: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ToolCallCancel(_message.Message):
    __slots__ = ["id", "reason"]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    reason: str
    def __init__(self, id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ToolCallProgress(_message.Message):
    __slots__ = ["id", "progress"]
    ID_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    id: str
    progress: Progress
    def __init__(self, id: _Optional[str] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ...) -> None: ...

class ToolCallResult(_message.Message):
    __slots__ = ["error", "id", "result"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    error: ReplyError
    id: str
    result: CallToolResponse
    def __init__(self, id: _Optional[str] = ..., result: _Optional[_Union[CallToolResponse, _Mapping]] = ..., error: _Optional[_Union[ReplyError, _Mapping]] = ...) -> None: ...

class ToolDefinition(_message.Message):
    __slots__ = ["annotations", "description", "input_schema", "meta", "name", "output_schema", "title"]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    META_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    annotations: ToolAnnotations
    description: str
    input_schema: _struct_pb2.Struct
    meta: _struct_pb2.Struct
    name: str
    output_schema: _struct_pb2.Struct
    title: str
    def __init__(self, name: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., input_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., output_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., annotations: _Optional[_Union[ToolAnnotations, _Mapping]] = ..., meta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ToolMatch(_message.Message):
    __slots__ = ["score", "tool"]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    score: float
    tool: Tool
    def __init__(self, tool: _Optional[_Union[Tool, _Mapping]] = ..., score: _Optional[float] = ...) -> None: ...

class ToolServerDeclaration(_message.Message):
    __slots__ = ["instructions", "replace", "server", "server_info", "tools"]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    SERVER_INFO_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    instructions: str
    replace: bool
    server: str
    server_info: Implementation
    tools: _containers.RepeatedCompositeFieldContainer[ToolDefinition]
    def __init__(self, server: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[ToolDefinition, _Mapping]]] = ..., replace: bool = ..., instructions: _Optional[str] = ..., server_info: _Optional[_Union[Implementation, _Mapping]] = ...) -> None: ...

class ServerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ConfigScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Transport(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class LogLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class EventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ServerRequestKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ElicitationAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
