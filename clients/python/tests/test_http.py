"""The Client's HTTP wire (an http:// target, mcpd's --http-listen) beyond
what test_client.py and test_errors.py run on both wires: tokens, threads,
what it refuses, and that it never loads grpc."""

from __future__ import annotations

import asyncio
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator, List

import pytest

import mcpd_grpc
from conftest import PYTHON, RPC_TIMEOUT, Daemon, example_env, free_port, poll, run_async
from mcpd_grpc import AgentTools, AsyncClient, Client

TOKEN = "http-token-93ab"


@pytest.fixture(scope="module")
def locked_http_daemon(mcpd_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A daemon with an API token, listening on HTTP too."""
    tmp = tmp_path_factory.mktemp("locked-http")
    token_file = tmp / "token"
    token_file.write_text(TOKEN + "\n")
    d = Daemon(mcpd_bin, tmp, "locked", ["--api-token-file", str(token_file)], http=True).start()
    try:
        yield d
    finally:
        d.stop()


def test_token(locked_http_daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCPD_API_TOKEN", raising=False)
    target = locked_http_daemon.http_target
    with Client(target, timeout=RPC_TIMEOUT) as c:
        with pytest.raises(mcpd_grpc.Unauthenticated):
            c.servers()
    with Client(target, token="wrong", timeout=RPC_TIMEOUT) as c:
        with pytest.raises(mcpd_grpc.Unauthenticated):
            c.list_tools()
        with pytest.raises(mcpd_grpc.Unauthenticated):
            next(c.subscribe(kinds=["log"]))
        with pytest.raises(mcpd_grpc.Unauthenticated):
            next(c.call_tool_stream("mcp__demo__echo", {"message": "x"}))
    # The address and the token from the environment.
    monkeypatch.setenv("MCPD_ADDRESS", target)
    monkeypatch.setenv("MCPD_API_TOKEN", TOKEN)
    with Client(timeout=RPC_TIMEOUT) as c:
        assert c.target == target
        assert [s.name for s in c.servers()] == ["demo"]
        assert c.call_tool("mcp__demo__echo", {"message": "with token"}).text == "with token"


def test_calls_from_many_threads(daemon: Daemon) -> None:
    results: List[str] = []
    errors: List[BaseException] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        try:
            for j in range(20):
                text = c.call_tool("mcp__demo__echo", {"message": f"{i}-{j}"}).text
                with lock:
                    results.append(text)
        except BaseException as e:  # reported below
            with lock:
                errors.append(e)

    with daemon.client("http") as c:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=RPC_TIMEOUT)
        assert not errors, f"got {errors[:3]}"
        assert sorted(results) == sorted(f"{i}-{j}" for i in range(16) for j in range(20))
        # Connections are kept for the next calls, one per concurrent call at most.
        assert 1 <= len(c._stub._idle) <= 16


def test_server_requests_need_the_grpc_wire(daemon: Daemon) -> None:
    with daemon.client("http") as c:
        with pytest.raises(ValueError, match="gRPC wire"):
            c.on_sampling(lambda req: "x")
        with pytest.raises(ValueError, match="gRPC wire"):
            c.serve_tools(AgentTools("agent"))
        # The client still works.
        assert c.get_server("demo").ready


def test_unreachable_is_unavailable() -> None:
    with Client(f"http://127.0.0.1:{free_port()}", timeout=5) as c:
        with pytest.raises(mcpd_grpc.Unavailable) as info:
            c.servers()
        assert info.value.retryable and info.value.code.name == "UNAVAILABLE"


def test_grpc_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="gRPC wire"):
        Client("http://127.0.0.1:1", options=[("grpc.max_receive_message_length", 1)])
    with pytest.raises(ValueError, match="https"):
        Client("http://127.0.0.1:1", ca_file=tmp_path / "ca.pem")


def test_async_client_on_the_http_wire(daemon: Daemon, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What test_aio.py and test_asyncio.py do not run on both wires: the
    address from the environment, pooled connections, and what the wire
    refuses."""
    with pytest.raises(ValueError, match="gRPC wire"):
        AsyncClient("http://127.0.0.1:1", options=[("grpc.max_receive_message_length", 1)])
    with pytest.raises(ValueError, match="https"):
        AsyncClient("http://127.0.0.1:1", ca_file=tmp_path / "ca.pem")
    monkeypatch.setenv("MCPD_ADDRESS", daemon.http_target)

    async def body() -> None:
        async with AsyncClient(timeout=RPC_TIMEOUT) as c:
            assert c.target == daemon.http_target
            results = await asyncio.gather(*(c.call_tool("mcp__demo__echo", {"message": str(i)}) for i in range(16)))
            assert [r.text for r in results] == [str(i) for i in range(16)]
            # Connections are kept for the next calls, one per concurrent call at most.
            assert 1 <= len(c._stub._idle) <= 16
            with pytest.raises(ValueError, match="gRPC wire"):
                c.on_approval(lambda req: True)
            with pytest.raises(ValueError, match="gRPC wire"):
                await c.serve_tools(AgentTools("agent"))
            assert (await c.get_server("demo")).ready
        async with AsyncClient(f"http://127.0.0.1:{free_port()}", timeout=5) as c:
            with pytest.raises(mcpd_grpc.Unavailable):
                await c.servers()

    run_async(body())


#: A fresh process's import, client, call, error, stream and close; it
#: prints the grpc modules it loaded.
_NO_GRPC_CODE = """
import sys, mcpd_grpc
with mcpd_grpc.Client(timeout=30) as c:
    assert c.call_tool("mcp__demo__echo", {"message": "hi"}).text == "hi"
    try:
        c.get_server("nobody")
    except mcpd_grpc.NotFound:
        pass
    else:
        raise AssertionError("want NotFound")
    items = list(c.call_tool_stream("mcp__demo__slow", {"steps": 2, "delay_ms": 1}))
    assert items[-1].text, items
print(" ".join(sorted(m for m in sys.modules if m == "grpc" or m.startswith(("grpc.", "mcpd_grpc.aio", "mcpd_grpc.mcpd.v1.mcpd_pb2_grpc")))))
"""


def grpc_modules_loaded(target: str) -> List[str]:
    out = subprocess.run([PYTHON, "-c", _NO_GRPC_CODE], env=example_env(target), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_the_http_wire_never_imports_grpc(daemon: Daemon) -> None:
    assert grpc_modules_loaded(daemon.http_target) == [], "the HTTP wire loaded grpc"
    # The check can fail: the gRPC wire in the same program loads grpc.
    assert "grpc" in grpc_modules_loaded(daemon.target)


@pytest.fixture(scope="module")
def unix_http_daemon(mcpd_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A daemon whose HTTP listener is a Unix socket."""
    tmp = tmp_path_factory.mktemp("unix-http")
    d = Daemon(mcpd_bin, tmp, "unix", ["--http-listen", f"unix://{tmp / 'http.sock'}"]).start()
    try:
        yield d
    finally:
        d.stop()


def test_http_over_a_unix_socket(unix_http_daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    target = f"http+unix://{unix_http_daemon.workdir / 'http.sock'}"
    with Client(target, timeout=RPC_TIMEOUT) as c:
        poll("the demo server to be ready", lambda: c.get_server("demo").ready)
        assert c.call_tool("mcp__demo__echo", {"message": "over a socket"}).text == "over a socket"
        with pytest.raises(mcpd_grpc.NotFound):
            c.get_server("nobody")
        items = list(c.call_tool_stream("mcp__demo__slow", {"steps": 2, "delay_ms": 1}))
        assert items[-1].text, items
        # Concurrent calls, each on a pooled connection of its own.
        texts: List[str] = []

        def call() -> None:
            texts.append(c.call_tool("mcp__demo__echo", {"message": "t"}).text)

        threads = [threading.Thread(target=call) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert texts == ["t"] * 8
    monkeypatch.setenv("MCPD_ADDRESS", target)
    with Client(timeout=RPC_TIMEOUT) as c:
        assert c.target == target
        assert c.call_tool("mcp__demo__echo", {"message": "from the environment"}).text == "from the environment"
    assert grpc_modules_loaded(target) == [], "the HTTP wire over a Unix socket loaded grpc"

    async def aio() -> None:
        async with AsyncClient(target, timeout=RPC_TIMEOUT) as c:
            assert (await c.call_tool("mcp__demo__echo", {"message": "async socket"})).text == "async socket"
            items = [i async for i in c.call_tool_stream("mcp__demo__slow", {"steps": 2, "delay_ms": 1})]
            assert items[-1].text, items

    run_async(aio())


def test_http_unix_targets(tmp_path: Path) -> None:
    missing = f"http+unix://{tmp_path / 'none.sock'}"
    with Client(missing, timeout=5) as c:
        with pytest.raises(mcpd_grpc.Unavailable, match="http\\+unix://"):
            c.servers()
    with pytest.raises(ValueError, match="absolute"):
        Client("http+unix://relative.sock")
    with pytest.raises(ValueError, match="https"):
        Client(missing, ca_file=tmp_path / "ca.pem")


def test_a_timeout_beyond_the_header_is_left_out() -> None:
    # Connect-Timeout-Ms holds at most 10 digits (about 115 days), and mcpd
    # refuses a longer one: such a timeout is no timeout on the wire.
    from mcpd_grpc._http import HTTPStub

    stub = HTTPStub("http://127.0.0.1:1")
    assert b"Connect-Timeout-Ms: 1500\r\n" in stub.request_head("/p", "application/proto", (), 1.5, 0)
    assert b"Connect-Timeout-Ms: 9999999999\r\n" in stub.request_head("/p", "application/proto", (), 9_999_999.999, 0)
    assert b"Connect-Timeout-Ms" not in stub.request_head("/p", "application/proto", (), 10_000_000.0, 0)
    assert b"Connect-Timeout-Ms" not in stub.request_head("/p", "application/proto", (), None, 0)


_GRPC_PORT_HINT = "it answered in HTTP/2, as mcpd's gRPC listener (--listen) does"


def test_http_wire_at_the_grpc_listener_says_so(daemon: Daemon) -> None:
    # mcpd's gRPC listener speaks HTTP/2 only (h2c): an HTTP/1.1 request
    # there gets its SETTINGS frame, then a reset.
    target = "http+unix://" + str(daemon.socket)
    with Client(target, timeout=RPC_TIMEOUT) as c:
        for call in (c.servers, lambda: list(c.call_tool_stream("mcp__demo__echo", {"message": "x"})), lambda: next(c.subscribe(reconnect=False))):
            with pytest.raises(mcpd_grpc.Unavailable, match=re.escape(_GRPC_PORT_HINT)):
                call()

    async def body() -> None:
        async with mcpd_grpc.AsyncClient(target, timeout=RPC_TIMEOUT) as c:
            with pytest.raises(mcpd_grpc.Unavailable, match=re.escape(_GRPC_PORT_HINT)):
                await c.servers()
            with pytest.raises(mcpd_grpc.Unavailable, match=re.escape(_GRPC_PORT_HINT)):
                async for _ in c.call_tool_stream("mcp__demo__echo", {"message": "x"}):
                    pass
            with pytest.raises(mcpd_grpc.Unavailable, match=re.escape(_GRPC_PORT_HINT)):
                async for _ in c.subscribe(reconnect=False):
                    pass

    run_async(body())


def test_connections_idle_too_long_are_closed(daemon: Daemon) -> None:
    """A burst of concurrent calls leaves a connection each in the pool;
    those unused for idle_kept seconds are closed when a call gives one
    back, on both HTTP wires."""
    slow = ("mcp__demo__slow", {"steps": 1, "delay_ms": 500})

    def idle_after_burst(c: Client) -> int:
        threads = [threading.Thread(target=c.call_tool, args=slow) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=RPC_TIMEOUT)
        return len(c._stub._idle)

    with daemon.client("http") as c:
        assert idle_after_burst(c) == 4
        c._stub.idle_kept = 0.2
        time.sleep(0.3)
        c.call_tool("mcp__demo__echo", {"message": "x"})
        assert len(c._stub._idle) == 1

    async def body() -> None:
        async with AsyncClient(daemon.http_target, timeout=RPC_TIMEOUT) as c:
            await asyncio.gather(*(c.call_tool(*slow) for _ in range(4)))
            assert len(c._stub._idle) == 4
            c._stub.idle_kept = 0.2
            await asyncio.sleep(0.3)
            await c.call_tool("mcp__demo__echo", {"message": "x"})
            assert len(c._stub._idle) == 1

    run_async(body())
