"""mcpd_grpc is the Python client of mcpd, the sidecar daemon that owns
connections to Model Context Protocol servers.

A Python agent gets the tools of every MCP server in its model API's
format, calls them, reads resources, follows events and answers the
servers' sampling, elicitation and OAuth consent requests::

    from mcpd_grpc import Client

    with Client() as mcpd:                       # $MCPD_ADDRESS, $MCPD_API_TOKEN
        tools = mcpd.tools_for_openai()          # provider-safe names
        result = mcpd.call_tool("mcp__demo__add", {"a": 2, "b": 3})
        print(result.text, result.structured)    # "5" {'sum': 5}

:class:`Client` is synchronous and thread-safe, over gRPC or, given an
``http://`` target, over mcpd's HTTP listener without loading grpc;
:class:`AsyncClient` has the same methods as coroutines (grpc.aio). Results are the dataclasses in
:mod:`mcpd_grpc.types`; errors are the exceptions in :mod:`mcpd_grpc.errors`.
The generated stubs are in :mod:`mcpd_grpc.mcpd.v1`.
"""

import importlib
from typing import TYPE_CHECKING, Any, List

from .client import Client, Subscription, ToolCallStream
from .errors import (
    Aborted,
    AlreadyExists,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    MCPDError,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    ServerRequestError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    UnknownError,
)
from .names import is_provider_safe, provider_names
from .types import (
    Annotations,
    ApprovalRequest,
    ApprovalResult,
    AudioContent,
    AuthorizationRequest,
    AuthorizationResult,
    Completion,
    ConfigScope,
    Content,
    ElicitationAction,
    ElicitationRequest,
    ElicitationResult,
    EmbeddedResource,
    Event,
    EventKind,
    Icon,
    ImageContent,
    Implementation,
    LogLevel,
    LogMessage,
    OAuthConfig,
    OAuthIdentityProvider,
    Poll,
    PollResult,
    Progress,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptResult,
    Resource,
    ResourceContents,
    ResourceLink,
    ResourceResult,
    ResourceTemplate,
    Role,
    Root,
    RootsRequest,
    SamplingMessage,
    SamplingRequest,
    SamplingResult,
    Server,
    ServerConfig,
    ServerState,
    TextContent,
    TLSConfig,
    Tool,
    ToolAnnotations,
    ToolMatch,
    ToolResult,
    Transport,
)

if TYPE_CHECKING:
    from .agent_tools import AgentTool, AgentTools, AsyncToolServing, ToolArgumentError, ToolContext, ToolServing
    from .aio import AsyncClient, AsyncSubscription, AsyncToolCallStream

__version__ = "0.1.0"

__all__ = [
    "Aborted",
    "AgentTool",
    "AgentTools",
    "AsyncToolServing",
    "AlreadyExists",
    "Annotations",
    "ApprovalRequest",
    "ApprovalResult",
    "AsyncClient",
    "AsyncSubscription",
    "AsyncToolCallStream",
    "AudioContent",
    "AuthorizationRequest",
    "AuthorizationResult",
    "Cancelled",
    "Client",
    "Completion",
    "ConfigScope",
    "Content",
    "DataLoss",
    "DeadlineExceeded",
    "ElicitationAction",
    "ElicitationRequest",
    "ElicitationResult",
    "EmbeddedResource",
    "Event",
    "EventKind",
    "FailedPrecondition",
    "Icon",
    "ImageContent",
    "Implementation",
    "Internal",
    "InvalidArgument",
    "LogLevel",
    "LogMessage",
    "MCPDError",
    "NotFound",
    "OAuthConfig",
    "OAuthIdentityProvider",
    "OutOfRange",
    "PermissionDenied",
    "Poll",
    "PollResult",
    "Progress",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "PromptResult",
    "Resource",
    "ResourceContents",
    "ResourceExhausted",
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
    "ServerRequestError",
    "ServerState",
    "Subscription",
    "TextContent",
    "TLSConfig",
    "Tool",
    "ToolAnnotations",
    "ToolArgumentError",
    "ToolCallStream",
    "ToolContext",
    "ToolMatch",
    "ToolResult",
    "ToolServing",
    "Transport",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "UnknownError",
    "is_provider_safe",
    "provider_names",
]

# The asyncio client is imported on first use: a program that uses only the
# sync Client does not load mcpd_grpc.aio.
_LAZY_AIO = ("AsyncClient", "AsyncSubscription", "AsyncToolCallStream")
#: The agent's own tools load json and a thread pool: on first use too.
_LAZY_AGENT_TOOLS = ("AgentTool", "AgentTools", "AsyncToolServing", "ToolArgumentError", "ToolContext", "ToolServing")


def __getattr__(name: str) -> Any:
    if name in _LAZY_AGENT_TOOLS:
        value = getattr(importlib.import_module(".agent_tools", __name__), name)
        globals()[name] = value
        return value
    if name in _LAZY_AIO or name == "aio":
        aio = importlib.import_module(".aio", __name__)  # binds mcpd_grpc.aio
        if name == "aio":
            return aio
        value = getattr(aio, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAZY_AIO) | set(_LAZY_AGENT_TOOLS) | {"aio"})
