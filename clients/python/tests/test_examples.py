"""The examples run against the fixture daemon, and the tests run against
the installed distribution."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess

import pytest

import mcpd_grpc
from conftest import INSTALLED, PYTHON, REPO, Daemon, example_env

EXAMPLES = REPO / "examples" / "python"


def run_example(daemon: Daemon, name: str, *args: str) -> str:
    proc = subprocess.run(
        [PYTHON, str(EXAMPLES / name), *args],
        env=example_env(daemon.target),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_quickstart(daemon: Daemon) -> None:
    out = run_example(daemon, "quickstart.py")
    assert "server demo: ready, 8 tools" in out, out
    assert "mcp__demo__echo:" in out
    assert "add(2, 3) -> 5 {'sum': 5}" in out
    assert "progress 3/3" in out and "slow -> done after 3 steps" in out
    assert "bad arguments -> InvalidArgument from server demo (JSON-RPC -32602)" in out


def test_agent_loop(daemon: Daemon) -> None:
    out = run_example(daemon, "agent_loop.py", "What is 40 + 2?")
    assert re.search(r"tool mcp__\w+__\w+\(\{\"a\": 40\.0, \"b\": 2\.0\}\) -> 42", out), out
    assert "assistant: The answer is 42." in out, out


def test_follow_events(daemon: Daemon) -> None:
    out = run_example(daemon, "follow_events.py", "--limit", "2", "--server", "demo")
    lines = out.splitlines()
    assert len(lines) == 2 and all(re.fullmatch(r"#\d+ demo: resource demo://clock updated", line) for line in lines), out


def test_agent_tools_example(daemon: Daemon) -> None:
    out = run_example(daemon, "agent_tools.py")
    assert "serving notes: ready, 3 tools" in out, out
    assert "mcp__notes__add_note: Saves a note." in out
    assert "find_notes -> {'notes': ['call the plumber today', 'buy milk']}" in out, out
    assert "progress 2/2: read note 2" in out and "summarize -> 2 notes, 6 words" in out, out
    assert "missing text -> InvalidArgument" in out, out


def test_installed_distribution() -> None:
    # `make test-python` installs the wheel (newest set) or the sdist (oldest
    # set) of `make python-dist` and runs the tests against it: the package
    # imported here must be that distribution, not the source tree.
    if os.environ.get("MCPD_PYTHON_INSTALLED") != "1":
        pytest.skip("runs on the source tree (MCPD_PYTHON_INSTALLED is not 1)")
    assert INSTALLED, f"mcpd_grpc imported from {mcpd_grpc.__file__}, want site-packages"
    assert importlib.metadata.version("mcpd-grpc") == "0.1.0"
    files = {str(f) for f in importlib.metadata.files("mcpd-grpc") or []}
    for want in ("mcpd_grpc/py.typed", "mcpd_grpc/mcpd/v1/mcpd_pb2.pyi", "mcpd_grpc/mcpd/v1/mcpd_pb2_grpc.py"):
        assert want in files, f"{want} is not in the distribution: {sorted(files)}"
