"""The Python benchmark: the official MCP Python SDK calling a server
directly over stdio, against mcpd_grpc.Client and AsyncClient calling the
same server through mcpd.

For each upstream (mcpd's demo server and @modelcontextprotocol/server-
everything, both over stdio) and each concurrency level it times
`tools/call echo` for a fixed duration and prints p50, p99 and calls/s:

  sdk     mcp.ClientSession over mcp.client.stdio.stdio_client, one session,
          N asyncio tasks calling concurrently;
  aio     mcpd_grpc.AsyncClient through mcpd (Unix socket), N tasks;
  ahttp   mcpd_grpc.AsyncClient on the HTTP wire (as http below), N tasks;
  sync    mcpd_grpc.Client through mcpd, N threads;
  http    mcpd_grpc.Client on the HTTP wire (an http:// target: the Connect
          protocol over HTTP/1.1 to mcpd's --http-listen on loopback TCP),
          N threads;
  stub    the generated gRPC stub's CallTool through mcpd, N threads, with a
          request built once and the response left as protobuf: sync minus
          stub is what mcpd_grpc itself adds to a call;
  rtt     the generated stub's GetServer, N threads: a gRPC round trip to
          mcpd from Python with no MCP server behind it (grpcio's floor).

The cells of one upstream and concurrency level run interleaved, in rounds
(each round in another order), so that load from elsewhere on the machine
skews them alike.

Then the cold start: a fresh Python process, from its start to its first
tool result, through an already running mcpd (import mcpd_grpc, Client,
call_tool), the same on the HTTP wire (which never imports grpc), and
with the SDK spawning the server itself (import mcp,
stdio_client, initialize, call_tool); for reference also a bare interpreter
that prints a line, and the generated stubs alone calling CallTool (import
grpc and protobuf, no mcpd_grpc). The kinds alternate; the median of
several runs each.

It prints the ratios behind the targets (through mcpd at least as fast as
the SDK directly at p50 with one caller and in calls/s at the highest
concurrency; the cold start at most 0.1 times) with PASS or MISS. It is a
report, not a test: a MISS does not change the exit status; a setup failure
does.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import grpc
import mcp
from mcp.client.stdio import StdioServerParameters, stdio_client

import mcpd_grpc
from mcpd_grpc.mcpd.v1 import mcpd_pb2, mcpd_pb2_grpc

MESSAGE = "hello"


@dataclass
class Upstream:
    name: str  # the server's name in mcpd
    command: str
    args: list[str]
    echo_text: str  # what echo returns for MESSAGE


@dataclass
class Cell:
    upstream: str
    method: str
    concurrency: int
    calls: int
    seconds: float
    p50_ms: float
    p99_ms: float

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.seconds


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted values."""
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, int(round(q * len(sorted_values) + 0.5)) - 1))
    return sorted_values[rank]


def cell_of(upstream: str, method: str, concurrency: int, latencies: list[float], seconds: float) -> Cell:
    latencies.sort()
    return Cell(upstream, method, concurrency, len(latencies), seconds, percentile(latencies, 0.50) * 1e3, percentile(latencies, 0.99) * 1e3)


async def run_async_cell(call: Callable[[], Awaitable[None]], concurrency: int, duration: float, warmup: float) -> tuple[list[float], float]:
    """Runs concurrency tasks that each call in a loop: warmup seconds not
    counted, then duration seconds counted."""
    latencies: list[float] = []
    loop = asyncio.get_running_loop()
    start = loop.time()
    measure_from = start + warmup
    end = measure_from + duration

    async def worker() -> None:
        while True:
            t0 = time.perf_counter()
            now = loop.time()
            if now >= end:
                return
            await call()
            if now >= measure_from:
                latencies.append(time.perf_counter() - t0)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, loop.time() - measure_from


def run_thread_cell(call: Callable[[], None], concurrency: int, duration: float, warmup: float) -> tuple[list[float], float]:
    """run_async_cell with threads."""
    latencies: list[float] = []
    lock = threading.Lock()
    start = time.monotonic()
    measure_from = start + warmup
    end = measure_from + duration
    errors: list[BaseException] = []

    def worker() -> None:
        mine: list[float] = []
        try:
            while True:
                now = time.monotonic()
                if now >= end:
                    break
                t0 = time.perf_counter()
                call()
                if now >= measure_from:
                    mine.append(time.perf_counter() - t0)
        except BaseException as err:  # reported by the main thread
            errors.append(err)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, name=f"bench-{i}") for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return latencies, time.monotonic() - measure_from


def echo_text(result: object) -> str:
    content = getattr(result, "content", None) or []
    return "".join(getattr(c, "text", "") for c in content)


@dataclass
class Method:
    name: str
    call: Callable[[], Any]  # a coroutine function when is_async
    is_async: bool


async def bench_upstream(
    target: str, http_target: str, up: Upstream, levels: Sequence[int], duration: float, warmup: float, rounds: int, devnull: TextIO
) -> list[Cell]:
    """Every method against one upstream, interleaved per concurrency
    level: rounds slices of duration/rounds seconds each, after warmup
    seconds of calls that are not counted."""
    tool = f"mcp__{up.name}__echo"
    params = StdioServerParameters(command=up.command, args=up.args)
    async with stdio_client(params, errlog=devnull) as (read, write), mcp.ClientSession(read, write) as session:
        await session.initialize()
        async with mcpd_grpc.AsyncClient(target, timeout=60) as aclient, mcpd_grpc.AsyncClient(http_target, timeout=60) as ahclient:
            with mcpd_grpc.Client(target, timeout=60) as client, mcpd_grpc.Client(http_target, timeout=60) as hclient, grpc.insecure_channel(target) as channel:
                stub = mcpd_pb2_grpc.MCPHubStub(channel)
                request = mcpd_pb2.CallToolRequest(name=tool)
                request.arguments.update({"message": MESSAGE})
                server_request = mcpd_pb2.GetServerRequest(name=up.name)

                async def sdk() -> None:
                    await session.call_tool("echo", {"message": MESSAGE})

                async def aio() -> None:
                    await aclient.call_tool(tool, {"message": MESSAGE})

                async def ahttp() -> None:
                    await ahclient.call_tool(tool, {"message": MESSAGE})

                def sync() -> None:
                    client.call_tool(tool, {"message": MESSAGE})

                def http() -> None:
                    hclient.call_tool(tool, {"message": MESSAGE})

                def raw() -> None:
                    stub.CallTool(request, timeout=60)

                def rtt() -> None:
                    stub.GetServer(server_request, timeout=60)

                got = {
                    "sdk": echo_text(await session.call_tool("echo", {"message": MESSAGE})),
                    "aio": (await aclient.call_tool(tool, {"message": MESSAGE})).text,
                    "ahttp": (await ahclient.call_tool(tool, {"message": MESSAGE})).text,
                    "sync": client.call_tool(tool, {"message": MESSAGE}).text,
                    "http": hclient.call_tool(tool, {"message": MESSAGE}).text,
                    "stub": "".join(c.text.text for c in stub.CallTool(request, timeout=60).content),
                }
                for name, text in got.items():
                    if text != up.echo_text:
                        raise RuntimeError(f"{name} {up.name} echo: got {text!r}")
                stub.GetServer(server_request, timeout=60)

                methods = [
                    Method("sdk", sdk, True),
                    Method("aio", aio, True),
                    Method("ahttp", ahttp, True),
                    Method("sync", sync, False),
                    Method("http", http, False),
                    Method("stub", raw, False),
                    Method("rtt", rtt, False),
                ]
                cells = []
                for c in levels:
                    lat: dict[str, list[float]] = {m.name: [] for m in methods}
                    secs = dict.fromkeys(lat, 0.0)
                    for r in range(rounds):
                        for m in methods[r % len(methods) :] + methods[: r % len(methods)]:
                            if m.is_async:
                                got_lat, got_secs = await run_async_cell(m.call, c, duration / rounds, warmup)
                            else:
                                got_lat, got_secs = await asyncio.to_thread(run_thread_cell, m.call, c, duration / rounds, warmup)
                            lat[m.name] += got_lat
                            secs[m.name] += got_secs
                    cells += [cell_of(up.name, m.name, c, lat[m.name], secs[m.name]) for m in methods]
                return cells


# Cold start: each script runs in a fresh interpreter and prints one line
# when it has its first tool result; the parent times spawn to that line.
# argv: the target and the qualified tool name, or for the SDK the server's
# command and its JSON args; COLD_PYTHON only prints what it is told.
COLD_PYTHON = """
import sys
print("result", sys.argv[2], flush=True)
"""

# The stubs without mcpd_grpc: its package is registered empty, so that
# importing the generated modules under it does not run its __init__.
COLD_STUB = """
import importlib.util, sys, types
spec = importlib.util.find_spec("mcpd_grpc")
pkg = types.ModuleType("mcpd_grpc")
pkg.__path__ = list(spec.submodule_search_locations)
sys.modules["mcpd_grpc"] = pkg
import grpc
from mcpd_grpc.mcpd.v1 import mcpd_pb2, mcpd_pb2_grpc
req = mcpd_pb2.CallToolRequest(name=sys.argv[2])
req.arguments.update({"message": "hello"})
with grpc.insecure_channel(sys.argv[1]) as ch:
    r = mcpd_pb2_grpc.MCPHubStub(ch).CallTool(req, timeout=60)
    print("result", "".join(c.text.text for c in r.content), flush=True)
"""

COLD_MCPD = """
import sys, mcpd_grpc
with mcpd_grpc.Client(sys.argv[1], timeout=60) as c:
    r = c.call_tool(sys.argv[2], {"message": "hello"})
    print("result", r.text, flush=True)
"""

COLD_SDK = """
import asyncio, json, os, sys
import mcp
from mcp.client.stdio import StdioServerParameters, stdio_client

async def main():
    params = StdioServerParameters(command=sys.argv[1], args=json.loads(sys.argv[2]))
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write):
            async with mcp.ClientSession(read, write) as s:
                await s.initialize()
                r = await s.call_tool("echo", {"message": "hello"})
                print("result", "".join(getattr(b, "text", "") for b in r.content), flush=True)

asyncio.run(main())
"""


def cold_start(argv: list[str], want: str) -> float:
    """Seconds from spawning argv to its 'result ...' line."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        elapsed = time.perf_counter() - t0
        if line.strip() != f"result {want}":
            raise RuntimeError(f"cold start {argv[:3]}: got {line!r}")
        return elapsed
    finally:
        proc.wait(timeout=60)


def cold_starts(target: str, http_target: str, up: Upstream, runs: int) -> dict[str, float]:
    """The median cold start (ms) of each kind against one upstream; the
    kinds alternate, each round in another order."""
    tool = f"mcp__{up.name}__echo"
    kinds = {
        "python": [sys.executable, "-c", COLD_PYTHON, "", up.echo_text],
        "stub": [sys.executable, "-c", COLD_STUB, target, tool],
        "mcpd_grpc": [sys.executable, "-c", COLD_MCPD, target, tool],
        "http": [sys.executable, "-c", COLD_MCPD, http_target, tool],
        "sdk": [sys.executable, "-c", COLD_SDK, up.command, json.dumps(up.args)],
    }
    names = list(kinds)
    times: dict[str, list[float]] = {k: [] for k in names}
    for r in range(runs):
        for k in names[r % len(names) :] + names[: r % len(names)]:
            times[k].append(cold_start(kinds[k], up.echo_text))
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def bytecode_state() -> str:
    """Whether the cold starts load compiled bytecode or compile every
    module from source (no .pyc written, as with PYTHONDONTWRITEBYTECODE=1
    after an install that did not compile)."""
    spec = importlib.util.find_spec("grpc")
    origin = spec.origin if spec is not None else None
    compiled = origin is not None and Path(importlib.util.cache_from_source(origin)).exists()
    return "compiled (.pyc present)" if compiled else "NOT compiled: every cold start compiles grpc, protobuf and mcpd_grpc from source"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_mcpd(binary: str, workdir: Path, upstreams: Sequence[Upstream]) -> tuple[subprocess.Popen[bytes], str, str]:
    config = {"mcpServers": {u.name: {"command": u.command, "args": u.args} for u in upstreams}}
    (workdir / "mcp.json").write_text(json.dumps(config))
    sock = workdir / "mcpd.sock"
    http_target = f"http://127.0.0.1:{free_port()}"
    log = open(workdir / "mcpd.log", "wb")
    proc = subprocess.Popen(
        [
            binary,
            "--listen",
            f"unix://{sock}",
            "--http-listen",
            http_target.removeprefix("http://"),
            "--config",
            str(workdir / "mcp.json"),
            "--log-level",
            "warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    log.close()
    target = f"unix://{sock}"
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"mcpd exited with {proc.returncode}: {(workdir / 'mcpd.log').read_text()}")
        if time.monotonic() > deadline:
            raise RuntimeError("mcpd and its servers were not ready within 60s")
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(sock))
            s.close()
            with mcpd_grpc.Client(target, timeout=10) as c, mcpd_grpc.Client(http_target, timeout=10) as h:
                if all(c.get_server(u.name).ready for u in upstreams) and h.servers():
                    return proc, target, http_target
        except (OSError, mcpd_grpc.MCPDError):
            pass
        time.sleep(0.05)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def ratio_line(what: str, value: float, target: float, lower_is_better: bool) -> str:
    ok = value <= target if lower_is_better else value >= target
    sign = "<=" if lower_is_better else ">="
    return f"  {'PASS' if ok else 'MISS'}  {what}: {value:.2f} (target {sign} {target:g})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mcpd", required=True, help="the mcpd binary")
    parser.add_argument("--everything", default="", help="mcp-server-everything (empty: the demo server only)")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds measured per cell, over all rounds")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved slices each cell's duration is split into")
    parser.add_argument("--warmup", type=float, default=0.2, help="seconds of calls before each slice, not measured")
    parser.add_argument("--concurrency", default="1,16,64", help="concurrent calls per cell, comma-separated")
    parser.add_argument("--cold-runs", type=int, default=7, help="runs of each cold start (the median is reported)")
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    low, top = min(levels), max(levels)

    upstreams = [Upstream("demo", args.mcpd, ["demo-server"], MESSAGE)]
    if args.everything:
        upstreams.append(Upstream("everything", args.everything, ["stdio"], f"Echo: {MESSAGE}"))

    print(f"python {sys.version.split()[0]}, mcp {_version('mcp')}, grpcio {_version('grpcio')}, protobuf {_version('protobuf')}, {os.cpu_count()} CPUs")
    print(f"bytecode: {bytecode_state()}")
    print(
        f"tools/call echo, {args.duration:g}s per cell in {args.rounds} interleaved rounds, {args.warmup:g}s warm-up each;"
        " mcpd over a Unix socket (http: loopback TCP)\n"
    )

    cells: list[Cell] = []
    cold: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="mcpd-pybench-") as tmp:
        proc, target, http_target = start_mcpd(args.mcpd, Path(tmp), upstreams)
        try:
            for up in upstreams:
                with open(os.devnull, "w") as devnull:  # the server's stderr
                    cells += asyncio.run(bench_upstream(target, http_target, up, levels, args.duration, args.warmup, args.rounds, devnull))
            for up in upstreams:
                cold[up.name] = cold_starts(target, http_target, up, args.cold_runs)
        finally:
            stop(proc)

    print(f"{'upstream':<11} {'client':<6} {'conc':>4} {'calls':>7} {'p50 ms':>8} {'p99 ms':>8} {'calls/s':>9}")
    for c in cells:
        print(f"{c.upstream:<11} {c.method:<6} {c.concurrency:>4} {c.calls:>7} {c.p50_ms:>8.3f} {c.p99_ms:>8.3f} {c.calls_per_s:>9.0f}")

    def find(up: str, method: str, conc: int) -> Cell:
        return next(c for c in cells if (c.upstream, c.method, c.concurrency) == (up, method, conc))

    print(f"\nwhere the time of one call goes at {low} caller(s), p50 in ms:")
    for up in upstreams:
        sdk, sync, http, raw, rtt = (find(up.name, m, low).p50_ms for m in ("sdk", "sync", "http", "stub", "rtt"))
        print(
            f"  {up.name:<11} sdk {sdk:.3f}   sync {sync:.3f} = stub {raw:.3f} + mcpd_grpc {sync - raw:+.3f};"
            f"   stub = gRPC round trip (rtt) {rtt:.3f} + mcpd and the server {raw - rtt:+.3f};   http {http:.3f}"
        )

    print(f"\ncold start, fresh python process to its first tool result (median of {args.cold_runs}), ms:")
    for name, v in cold.items():
        print(
            f"  {name:<11} python {v['python']:6.1f}   stub {v['stub']:6.1f}   mcpd_grpc {v['mcpd_grpc']:6.1f}   http {v['http']:6.1f}   sdk {v['sdk']:7.1f}"
            f"   ratio mcpd_grpc/sdk {v['mcpd_grpc'] / v['sdk']:.2f}, http/sdk {v['http'] / v['sdk']:.2f} (stub/sdk {v['stub'] / v['sdk']:.2f})"
        )

    print("\ntargets (through mcpd / sdk directly):")
    for up in upstreams:
        for method in ("aio", "ahttp", "sync", "http"):
            sdk1, via1 = find(up.name, "sdk", low), find(up.name, method, low)
            sdk_top, via_top = find(up.name, "sdk", top), find(up.name, method, top)
            print(ratio_line(f"{up.name} {method} p50 ratio at {low}", via1.p50_ms / sdk1.p50_ms, 1.0, True))
            print(ratio_line(f"{up.name} {method} calls/s ratio at {top}", via_top.calls_per_s / sdk_top.calls_per_s, 1.0, False))
        print(ratio_line(f"{up.name} cold start ratio", cold[up.name]["mcpd_grpc"] / cold[up.name]["sdk"], 0.1, True))
        print(ratio_line(f"{up.name} http cold start ratio", cold[up.name]["http"] / cold[up.name]["sdk"], 0.1, True))

    if args.json:
        Path(args.json).write_text(json.dumps({"cells": [dict(vars(c), calls_per_s=c.calls_per_s) for c in cells], "cold_start_ms": cold}, indent=2) + "\n")
    return 0


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


if __name__ == "__main__":
    sys.exit(main())
