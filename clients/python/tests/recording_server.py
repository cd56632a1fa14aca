"""A minimal MCP server on stdio (standard library only) that records what
reaches it, so tests can see what mcpd sent upstream.

Its one tool, ``wait``, never answers: it writes ``called <id>`` to the
file $RECORD_FILE, and the server writes ``cancelled <id>`` when the client
sends notifications/cancelled for that request.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict


def record(line: str) -> None:
    with open(os.environ["RECORD_FILE"], "a", encoding="utf-8") as f:
        f.write(line + "\n")


def reply(msg_id: Any, result: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}) + "\n")
    sys.stdout.flush()


WAIT_TOOL = {
    "name": "wait",
    "description": "Never answers; records the call and its cancellation.",
    "inputSchema": {"type": "object", "properties": {}},
}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        method = msg.get("method")
        params = msg.get("params") or {}
        if method == "initialize":
            reply(
                msg["id"],
                {
                    "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "recording-server", "version": "1.0.0"},
                },
            )
        elif method == "tools/list":
            reply(msg["id"], {"tools": [WAIT_TOOL]})
        elif method == "tools/call":
            record(f"called {msg['id']}")
        elif method == "notifications/cancelled":
            record(f"cancelled {params.get('requestId')}")
        elif method == "ping":
            reply(msg["id"], {})
        elif "id" in msg and method is not None:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": f"no method {method}"}}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
