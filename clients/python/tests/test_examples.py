"""The examples run against the fixture daemon, and the package installs
offline with pip."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path


from conftest import PY_DIR, PYTHON, REPO, Daemon, _missing, example_env

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
    assert len(lines) == 2 and all(re.fullmatch(r"#\d+ demo: resource demo://clock updated", l) for l in lines), out


def test_pip_install_offline(tmp_path: Path) -> None:
    # The documented install, into a venv that sees Debian's grpcio and
    # protobuf: pip checks the declared version ranges against them, and
    # reaches no index (--no-index). A copy keeps build/ out of the repo.
    pip_ok = subprocess.run([PYTHON, "-m", "pip", "--version"], capture_output=True, timeout=60).returncode == 0
    if not pip_ok:
        _missing("no pip for this Python (Debian: python3-pip)")
    src = tmp_path / "src"
    shutil.copytree(PY_DIR, src, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True, timeout=60)
    py = venv / "bin" / "python"
    proc = subprocess.run(
        [PYTHON, "-m", "pip", "--python", str(py), "install", "--no-build-isolation", "--no-index", "--disable-pip-version-check", str(src)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check = subprocess.run(
        [str(py), "-c", "import mcpd_grpc, mcpd_grpc.mcpd.v1.mcpd_pb2_grpc as g, importlib.metadata as m; print(mcpd_grpc.__file__); print(m.version('mcpd-grpc'))"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert check.returncode == 0, check.stderr
    path, version = check.stdout.split()
    assert path.startswith(str(venv)), f"imported from {path}, want the venv"
    assert version == "0.1.0"
