"""Targets and servers beyond the shared daemon's Unix socket and stdio
demo: mcpd on loopback TCP, servers reached over Streamable HTTP and SSE,
and UNAVAILABLE as mcpd itself sends it."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import pytest

import mcpd_grpc
from conftest import POLL_TIMEOUT, RPC_TIMEOUT, Daemon, free_port, poll
from mcpd_grpc import Client, ServerConfig


class TCPDaemon(Daemon):
    """A Daemon on a loopback TCP port instead of a Unix socket."""

    def __init__(self, binary: str, workdir: Path, name: str, args: Optional[List[str]] = None) -> None:
        super().__init__(binary, workdir, name, args=args)
        self.port = free_port()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accepting(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False


def test_tcp_target(mcpd_bin: str, tmp_path: Path) -> None:
    d = TCPDaemon(mcpd_bin, tmp_path, "tcp").start()
    try:
        with Client(d.target, timeout=RPC_TIMEOUT) as c:
            poll("the demo server on the TCP daemon", lambda: c.get_server("demo").ready)
            assert c.call_tool("mcp__demo__echo", {"message": "over tcp"}).text == "over tcp"
    finally:
        d.stop()


@pytest.fixture(scope="module")
def everything_remote(everything_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[str, str]]:
    """server-everything over Streamable HTTP and over SSE, on loopback
    ports; yields the two endpoint URLs."""
    logs = tmp_path_factory.mktemp("everything-remote")
    procs = []
    urls = []
    try:
        for mode, path in (("streamableHttp", "/mcp"), ("sse", "/sse")):
            port = free_port()
            with open(logs / f"{mode}.log", "wb") as log:
                procs.append(
                    subprocess.Popen(
                        [everything_bin, mode],
                        env={**os.environ, "PORT": str(port)},
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                    )
                )
            deadline = time.monotonic() + POLL_TIMEOUT
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError as err:
                    if procs[-1].poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"server-everything {mode} did not listen: {(logs / f'{mode}.log').read_text()}") from err
                    time.sleep(0.05)
            urls.append(f"http://127.0.0.1:{port}{path}")
        yield urls[0], urls[1]
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)


@pytest.mark.parametrize("kind", ["http", "sse"])
def test_connect_server_remote(client: Client, everything_remote: Tuple[str, str], kind: str) -> None:
    http_url, sse_url = everything_remote
    name = f"ev-{kind}"
    config = ServerConfig.http(name, http_url) if kind == "http" else ServerConfig.sse(name, sse_url)
    s = client.connect_server(config, replace=True)
    try:
        assert s.ready, f"{name}: {s.state} {s.last_error}"
        assert s.transport.value == kind, f"got transport {s.transport}, want {kind}"
        assert client.call_tool(f"mcp__{name}__echo", {"message": "hi"}).text == "Echo: hi"
    finally:
        client.disconnect_server(name)


@pytest.mark.parametrize("kind", ["no type", "streamable_http"])
def test_connect_server_from_mcp_json_url(client: Client, everything_remote: Tuple[str, str], kind: str) -> None:
    """A .mcp.json url without a type is detected, as in a config file
    (here an SSE endpoint); streamable_http and serverUrl are read too."""
    http_url, sse_url = everything_remote
    name, entry, want = ("ev-detected", {"url": sse_url}, "sse") if kind == "no type" else ("ev-json-http", {"type": kind, "serverUrl": http_url}, "http")
    s = client.connect_server(ServerConfig.from_mcp_json(name, entry), replace=True)
    try:
        assert s.ready, f"{name}: {s.state} {s.last_error}"
        assert s.transport.value == want, f"got transport {s.transport}, want {want}"
        assert client.call_tool(f"mcp__{name}__echo", {"message": "hi"}).text == "Echo: hi"
    finally:
        client.disconnect_server(name)


def test_unavailable_from_mcpd(client: Client) -> None:
    """A call to a server that failed to start is UNAVAILABLE from mcpd
    itself, with the reason, and retryable."""
    s = client.connect_server(ServerConfig.stdio("broken", "/nonexistent/mcpd-python-test"), replace=True)
    try:
        assert not s.ready and "no such file" in s.last_error, f"got {s.state} {s.last_error!r}"
        with pytest.raises(mcpd_grpc.Unavailable) as info:
            client.call_tool("mcp__broken__echo", {"message": "x"})
        e = info.value
        assert e.retryable and e.code.name == "UNAVAILABLE" and "broken" in e.message, f"got {e!r}"
    finally:
        client.disconnect_server("broken")
