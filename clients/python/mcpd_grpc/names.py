"""Tool names that model providers accept, and tool definitions in their
formats.

OpenAI and Anthropic take tool names of 1 to 64 characters of
``[a-zA-Z0-9_-]``. mcpd's qualified names are ``mcp__<server>__<tool>``;
server names already fit, but a server's own tool name may hold other
characters (``.``, ``/``, spaces) or be long. :func:`provider_names` maps
each qualified name to a provider-safe one:

1. a qualified name that is already safe is kept as is;
2. otherwise every other character becomes ``_``;
3. if that is longer than 64 characters or collides with another tool's
   name, it is cut to 55 characters and ``_`` plus the first 8 hex digits of
   the SHA-256 of the qualified name are appended.

The result depends only on the set of tools, so it is the same in every
process; :class:`~mcpd_grpc.Client` keeps the reverse map so that the name a
model calls can be passed straight to ``call_tool``.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Sequence, Set

from .types import Tool

__all__ = ["MAX_NAME_LENGTH", "anthropic_tool", "is_provider_safe", "openai_tool", "provider_names"]

#: The longest tool name OpenAI and Anthropic accept.
MAX_NAME_LENGTH = 64

_SAFE = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_UNSAFE_CHAR = re.compile(r"[^a-zA-Z0-9_-]")
_HASH_DIGITS = 8


def is_provider_safe(name: str) -> bool:
    """Whether ``name`` is 1 to 64 characters of ``[a-zA-Z0-9_-]``."""
    return _SAFE.fullmatch(name) is not None


def provider_names(qualified: Iterable[str]) -> Dict[str, str]:
    """Maps each qualified tool name to a provider-safe name, injectively."""
    names = sorted(set(qualified))
    out: Dict[str, str] = {q: q for q in names if is_provider_safe(q)}
    taken = set(out.values())
    for q in names:
        if q in out:
            continue
        candidate = _UNSAFE_CHAR.sub("_", q) or "_"
        if len(candidate) > MAX_NAME_LENGTH or candidate in taken:
            candidate = _hashed(q, candidate, taken)
        out[q] = candidate
        taken.add(candidate)
    return out


def _hashed(qualified: str, sanitized: str, taken: Set[str]) -> str:
    import hashlib  # rarely needed: not on the import path of every client

    digest = hashlib.sha256(qualified.encode("utf-8")).hexdigest()
    # 8 hex digits make a collision unlikely; take more if one happens.
    for k in range(_HASH_DIGITS, len(digest) + 1):
        candidate = sanitized[: MAX_NAME_LENGTH - 1 - k] + "_" + digest[:k]
        if candidate not in taken:
            return candidate
    raise ValueError(f"no provider-safe name for {qualified!r}")  # pragma: no cover


def _parameters(tool: Tool) -> Dict[str, Any]:
    schema = dict(tool.input_schema or {})
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    return schema


def _description(tool: Tool) -> str:
    return tool.description or tool.title or tool.tool_name


def openai_tool(tool: Tool, name: str, *, api: str = "chat") -> Dict[str, Any]:
    """One tool in OpenAI's format: ``api="chat"`` for Chat Completions
    (``{"type": "function", "function": {...}}``), ``"responses"`` for the
    Responses API (``{"type": "function", "name", ...}``)."""
    fn = {"name": name, "description": _description(tool), "parameters": _parameters(tool)}
    if api == "chat":
        return {"type": "function", "function": fn}
    if api == "responses":
        return {"type": "function", **fn}
    raise ValueError(f"api must be 'chat' or 'responses', got {api!r}")


def anthropic_tool(tool: Tool, name: str) -> Dict[str, Any]:
    """One tool in Anthropic's Messages API format."""
    return {"name": name, "description": _description(tool), "input_schema": _parameters(tool)}


def tool_definitions(tools: Sequence[Tool], fmt: str, **kwargs: Any) -> tuple[List[Dict[str, Any]], Dict[str, str]]:
    """Returns the definitions of ``tools`` in format ``fmt`` ("openai" or
    "anthropic") and the map from provider name back to qualified name."""
    names = provider_names(t.name for t in tools)
    defs = []
    for t in tools:
        if fmt == "openai":
            defs.append(openai_tool(t, names[t.name], **kwargs))
        else:
            defs.append(anthropic_tool(t, names[t.name]))
    return defs, {p: q for q, p in names.items()}
