"""Tool calls held by an ``ask`` rule, decided by a Python approval handler."""

from __future__ import annotations

from pathlib import Path
from typing import List

import pytest

from conftest import RPC_TIMEOUT, Daemon, poll
from mcpd_grpc import ApprovalRequest, ApprovalResult, PermissionDenied


def test_approval_handler(mcpd_bin: str, tmp_path: Path) -> None:
    d = Daemon(mcpd_bin, tmp_path, "ask", ["--ask-tool", "mcp__demo__echo"]).start()
    try:
        with d.client() as c:
            poll("demo to be ready", lambda: c.get_server("demo").ready)
            with pytest.raises(PermissionDenied, match="no agent"):
                c.call_tool("mcp__demo__echo", {"message": "unasked"})

            seen: List[ApprovalRequest] = []

            @c.on_approval
            def approve(req: ApprovalRequest) -> ApprovalResult:
                seen.append(req)
                if req.arguments.get("message") == "yes":
                    return ApprovalResult(approved=True)
                return ApprovalResult(reason="not this one")

            assert c.handlers_ready(RPC_TIMEOUT), "mcpd did not confirm the handler"
            assert c.call_tool("mcp__demo__echo", {"message": "yes"}).text == "yes"
            with pytest.raises(PermissionDenied, match="not this one"):
                c.call_tool("mcp__demo__echo", {"message": "no"})
            req = seen[0]
            assert req.server == "demo" and req.tool == "mcp__demo__echo" and req.rule == "ask mcp__demo__echo"
            assert req.annotations.get("readOnlyHint") is True and req.deadline is not None and req.poll_interval is None
            # Tools no rule holds are not asked about.
            assert c.call_tool("mcp__demo__add", {"a": 1, "b": 2}).text == "3"
            assert len(seen) == 2
            # A poll of the tool is asked about once, saying how often it calls.
            p = c.start_poll("demo", tool="echo", arguments={"message": "yes"}, interval=7)
            c.stop_poll(p.id)
            assert len(seen) == 3 and seen[2].poll_interval == 7 and seen[2].arguments == {"message": "yes"}
    finally:
        d.stop()
