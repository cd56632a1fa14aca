"""Fixtures: a real bin/mcpd on a Unix socket in a temporary folder.

Environment (set by `make test`):
  MCPD_BIN             the mcpd binary (default: <repo>/bin/mcpd)
  MCPD_EVERYTHING_BIN  @modelcontextprotocol/server-everything; tests that
                       need it are skipped without it ...
  MCPD_E2E_REQUIRED=1  ... unless this is set: then they fail instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest

import mcpd_grpc
from mcpd_grpc import Client, ServerConfig

REPO = Path(__file__).resolve().parents[3]
PY_DIR = REPO / "clients" / "python"

#: Every test ends within this many seconds or the run dumps all stacks and
#: exits: no wait in this suite is unbounded.
TEST_WATCHDOG = 120
#: Bound of one RPC in tests, and of the helpers' polling loops.
RPC_TIMEOUT = 30.0
POLL_TIMEOUT = 20.0


def _required() -> bool:
    return os.environ.get("MCPD_E2E_REQUIRED") == "1"


def _missing(what: str) -> None:
    if _required():
        pytest.fail(f"{what} (MCPD_E2E_REQUIRED=1)")
    pytest.skip(what)


#: Daemons still running, for the watchdog to stop before it exits.
_LIVE_DAEMONS: set[Daemon] = set()


def _watchdog_fired() -> None:
    sys.__stderr__.write(f"\nwatchdog: a test ran longer than {TEST_WATCHDOG}s; stacks:\n")
    faulthandler.dump_traceback(file=sys.__stderr__, all_threads=True)
    for d in list(_LIVE_DAEMONS):
        d.kill()
    sys.__stderr__.flush()
    os._exit(1)


@pytest.fixture(autouse=True)
def _watchdog() -> Iterator[None]:
    timer = threading.Timer(TEST_WATCHDOG, _watchdog_fired)
    timer.daemon = True
    timer.start()
    yield
    timer.cancel()
    # Like goleak: a closed client leaves no server-request thread behind.
    leaked = [t for t in threading.enumerate() if t.name == "mcpd-server-requests"]
    for t in leaked:
        t.join(timeout=5)
    assert not [t for t in leaked if t.is_alive()], "a Client's server-request thread outlived the test"


def poll(what: str, fn: Callable[[], object], timeout: float = POLL_TIMEOUT, interval: float = 0.05) -> object:
    """Calls fn until it returns something truthy; fails after timeout."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out waiting for {what}; last: {last!r}")
        time.sleep(interval)


CLOCK = ("demo", "demo://clock")


def until_live(sub: Iterator[mcpd_grpc.Event]) -> None:
    """Reads sub until the first tick of demo://clock (which it must
    subscribe to): from then on mcpd surely delivers every event to it."""
    for ev in sub:
        if ev.kind == "resource_updated" and (ev.server, ev.uri) == CLOCK:
            return
    pytest.fail("the subscription ended before its first clock tick")


def run_async(coro: asyncio.Future[object], timeout: float = 60.0) -> object:
    """Runs a coroutine on a fresh loop, bounded by timeout."""

    async def bounded() -> object:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


#: The Client's wires: gRPC (the default) and the Connect protocol over
#: HTTP/1.1 (an http:// target, mcpd's --http-listen).
WIRES = ["grpc", "http"]


def free_port() -> int:
    """A loopback TCP port that no one listens on, for a daemon to bind.
    It is taken from below the kernel's ephemeral range: a port from that
    range, once released, can go to any outgoing connection before the
    daemon binds it. Below the range the kernel hands out nothing, and
    free_port never hands out the same port twice (as the Go tests'
    freePort)."""
    low = _ephemeral_ports_from() - _FREE_PORT_SPAN
    for _ in range(1000):
        port = low + random.randrange(_FREE_PORT_SPAN)
        if port in _given_ports:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # someone else's
        _given_ports.add(port)
        return port
    raise RuntimeError(f"no free port in {low}..{low + _FREE_PORT_SPAN - 1}")


#: How many ports below the ephemeral range free_port picks from.
_FREE_PORT_SPAN = 10000
_given_ports: set[int] = set()


def _ephemeral_ports_from() -> int:
    """The first port of the kernel's ephemeral range, or Linux's default
    where it cannot be read."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            first = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
    return first if first > _FREE_PORT_SPAN + 1024 else 32768


class Daemon:
    """One mcpd process listening on a Unix socket, and with http=True
    also on HTTP (--http-listen) on a free loopback port."""

    def __init__(self, binary: str, workdir: Path, name: str, args: Optional[List[str]] = None, env: Optional[dict] = None, http: bool = False) -> None:
        self.binary = binary
        self.workdir = workdir
        self.socket = workdir / f"{name}.sock"
        self.log = workdir / f"{name}.log"
        self.args = list(args or [])
        self.env = env
        self.http_port = free_port() if http else 0
        if http:
            self.args += ["--http-listen", f"127.0.0.1:{self.http_port}"]
        self.proc: Optional[subprocess.Popen] = None

    @property
    def target(self) -> str:
        return f"unix://{self.socket}"

    @property
    def http_target(self) -> str:
        assert self.http_port, "this daemon was started without http=True"
        return f"http://127.0.0.1:{self.http_port}"

    def start(self) -> Daemon:
        env = dict(os.environ if self.env is None else self.env)
        env.pop("MCPD_API_TOKEN", None)  # only the flags of this Daemon count
        # The machine's config scopes (~/.mcp.json, ~/.claude.json, the
        # managed file) must not reach the tests.
        env["HOME"] = str(self.workdir)
        env["MCPD_MANAGED_CONFIG"] = str(self.workdir / "managed-mcp.json")
        env["MCPD_CLAUDE_MANAGED_DIR"] = str(self.workdir / "claude-code")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "--listen", self.target, "--log-level", "debug", *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.workdir,
            )
        _LIVE_DAEMONS.add(self)
        deadline = time.monotonic() + RPC_TIMEOUT
        while not self._accepting():
            if self.proc.poll() is not None:
                raise RuntimeError(f"mcpd exited with {self.proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"mcpd did not listen within {RPC_TIMEOUT}s:\n{self.log_tail()}")
            time.sleep(0.05)
        return self

    def _accepting(self) -> bool:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(str(self.socket))
        except OSError:
            return False
        finally:
            s.close()
        if not self.http_port:
            return True
        try:
            socket.create_connection(("127.0.0.1", self.http_port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if mcpd has not exited in 15 s."""
        _LIVE_DAEMONS.discard(self)
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def kill(self) -> None:
        """SIGTERM without waiting (mcpd stops its servers itself)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.send_signal(signal.SIGCONT)  # a frozen mcpd exits too

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Stops mcpd (SIGSTOP) for the block: its sockets stay open, and
        its kernel still accepts connections and takes their bytes, but
        mcpd answers nothing, as when it deadlocks."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        try:
            # The signal stops one thread, which then stops the others: until
            # they all are, mcpd may still answer a call made right away.
            poll("every thread of mcpd to stop", self._all_threads_stopped, interval=0.01)
            yield
        finally:
            self.proc.send_signal(signal.SIGCONT)

    def _all_threads_stopped(self) -> bool:
        assert self.proc is not None
        tasks = Path(f"/proc/{self.proc.pid}/task")
        for task in tasks.iterdir():
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue  # the thread has ended
            # "tid (comm) state ...": comm may hold spaces and parentheses.
            if stat.rpartition(")")[2].split()[0] not in ("T", "t"):
                return False
        return True

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def target_of(self, wire: str) -> str:
        """The address of the wire, "grpc" or "http"."""
        return self.http_target if wire == "http" else self.target

    def client(self, wire: str = "grpc", **kwargs: object) -> Client:
        kwargs.setdefault("timeout", RPC_TIMEOUT)
        return Client(self.target_of(wire), **kwargs)


@pytest.fixture(scope="session")
def mcpd_bin() -> str:
    binary = os.environ.get("MCPD_BIN") or str(REPO / "bin" / "mcpd")
    if not os.access(binary, os.X_OK):
        _missing(f"no mcpd binary at {binary}; run `make build` or set MCPD_BIN")
    return binary


@pytest.fixture(scope="session")
def everything_bin() -> str:
    binary = os.environ.get("MCPD_EVERYTHING_BIN", "")
    if not binary or not os.access(binary, os.X_OK):
        _missing(f"MCPD_EVERYTHING_BIN={binary!r} is not an executable server-everything; run `make tools`")
    return binary


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Unix socket paths are limited to ~107 bytes; pytest's base temp is short.
    return tmp_path_factory.mktemp("mcpd")


@pytest.fixture(scope="session")
def daemon(mcpd_bin: str, workdir: Path) -> Iterator[Daemon]:
    """The shared daemon: default config, i.e. the built-in demo server."""
    d = Daemon(mcpd_bin, workdir, "shared", http=True).start()
    try:
        with d.client() as c:
            poll("the demo server to be ready", lambda: c.get_server("demo").ready)
        yield d
    finally:
        d.stop()


@pytest.fixture
def client(daemon: Daemon) -> Iterator[Client]:
    with daemon.client() as c:
        yield c


@pytest.fixture(params=WIRES)
def wire_client(request: pytest.FixtureRequest, daemon: Daemon) -> Iterator[Client]:
    """A client of the shared daemon on each wire in turn."""
    with daemon.client(request.param) as c:
        yield c


EVERYTHING_CONDITIONAL = {"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"}


@pytest.fixture(scope="session")
def everything(daemon: Daemon, everything_bin: str) -> str:
    """Connects server-everything to the shared daemon as "ev" and waits
    for the tools it lists only after mcpd initialized it (sampling,
    elicitation, roots). Returns the server name."""
    with daemon.client() as c:
        s = c.connect_server(ServerConfig.stdio("ev", everything_bin, ["stdio"]), replace=True)
        assert s.ready, f"server-everything: {s.state} {s.last_error}"
        poll(
            "server-everything's conditional tools",
            lambda: EVERYTHING_CONDITIONAL <= {t.tool_name for t in c.list_tools("ev")},
        )
    return "ev"


class FakeMcpd:
    """A fake of some MCPHub methods (a servicer subclass), served by
    grpcio's server in process on a Unix socket, for client behaviour that
    needs mcpd to answer in a particular way."""

    def __init__(self, hub: object, path: str) -> None:
        from concurrent import futures

        import grpc

        from mcpd_grpc.mcpd.v1 import mcpd_pb2_grpc

        self.target = f"unix://{path}"
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        mcpd_pb2_grpc.add_MCPHubServicer_to_server(hub, self.server)  # type: ignore[no-untyped-call]
        self.server.add_insecure_port(self.target)
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=None)


class UnixProxy:
    """A byte-level proxy from one Unix socket to another, so a test can
    cut every connection (and refuse new ones) while mcpd keeps running,
    or hold mcpd's first bytes on each new connection for reply_delay
    seconds (a slow handshake); accepted counts the connections it took."""

    def __init__(self, listen: Path, upstream: Path) -> None:
        self.listen = listen
        self.upstream = upstream
        self.reply_delay = 0.0
        self.accepted = 0
        self._lock = threading.Lock()
        self._conns: List[socket.socket] = []
        self._refusing = False
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(listen))
        self._server.listen(16)
        self._threads: List[threading.Thread] = []
        self._spawn(self._accept_loop)

    @property
    def target(self) -> str:
        return f"unix://{self.listen}"

    def _spawn(self, fn: Callable[..., None], *args: object) -> None:
        th = threading.Thread(target=fn, args=args, daemon=True)
        th.start()
        self._threads.append(th)

    def _accept_loop(self) -> None:
        while True:
            try:
                down, _ = self._server.accept()
            except OSError:
                return  # closed
            with self._lock:
                self.accepted += 1
                refusing = self._refusing
            if refusing:
                down.close()
                continue
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                up.connect(str(self.upstream))
            except OSError:
                down.close()
                up.close()
                continue
            with self._lock:
                self._conns += [down, up]
            self._spawn(self._pump, down, up)
            self._spawn(self._pump, up, down, self.reply_delay)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, delay: float = 0.0) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if delay:
                    time.sleep(delay)
                    delay = 0.0
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self, refuse: bool = True) -> None:
        """Drops every open connection; with refuse, new ones too until
        :meth:`allow`."""
        with self._lock:
            self._refusing = refuse
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def allow(self) -> None:
        with self._lock:
            self._refusing = False

    def close(self) -> None:
        self.cut()
        try:
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()
        for th in self._threads:
            th.join(timeout=5)


@pytest.fixture
def proxy(daemon: Daemon, tmp_path: Path) -> Iterator[UnixProxy]:
    p = UnixProxy(tmp_path / "proxy.sock", daemon.socket)
    try:
        yield p
    finally:
        p.close()


#: Whether mcpd_grpc comes from an installed distribution (as in `make
#: test-python`, MCPD_PYTHON_INSTALLED=1) rather than from the source tree.
INSTALLED = PY_DIR not in Path(mcpd_grpc.__file__).resolve().parents


def example_env(target: str, token: str = "") -> dict:
    env = dict(os.environ)
    env["MCPD_ADDRESS"] = target
    if not INSTALLED:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PY_DIR), env.get("PYTHONPATH", "")]))
    if token:
        env["MCPD_API_TOKEN"] = token
    else:
        env.pop("MCPD_API_TOKEN", None)
    return env


PYTHON = sys.executable
