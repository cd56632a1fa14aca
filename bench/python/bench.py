"""The Python benchmark: the official MCP Python SDK calling a server
directly over stdio, against mcpd_grpc.Client and AsyncClient calling the
same server through mcpd.

For each upstream (mcpd's demo server and @modelcontextprotocol/server-
everything, both over stdio) and each concurrency level it times
`tools/call echo` for a fixed duration and prints p50, p99 and calls/s:

  sdk     mcp.ClientSession over mcp.client.stdio.stdio_client, one session,
          N asyncio tasks calling concurrently;
  aio     mcpd_grpc.AsyncClient through mcpd (Unix socket), N tasks;
  sync    mcpd_grpc.Client through mcpd, N threads.

Then the cold start: a fresh Python process, from its start to its first
tool result, once through an already running mcpd (import mcpd_grpc,
Client, call_tool) and once with the SDK spawning the server itself
(import mcp, stdio_client, initialize, call_tool); the median of several
runs each.

It prints the ratios behind the targets (through mcpd at least as fast as
the SDK directly at p50 and at the highest concurrency; the cold start at
most 0.1 times) with PASS or MISS. It is a report, not a test: a MISS does
not change the exit status; a setup failure does.
"""

from __future__ import annotations

import argparse
import asyncio
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
from typing import TextIO

import mcp
from mcp.client.stdio import StdioServerParameters, stdio_client

import mcpd_grpc

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


async def bench_sdk(up: Upstream, levels: Sequence[int], duration: float, warmup: float, devnull: TextIO) -> list[Cell]:
    params = StdioServerParameters(command=up.command, args=up.args)
    cells = []
    async with stdio_client(params, errlog=devnull) as (read, write):
        async with mcp.ClientSession(read, write) as session:
            await session.initialize()
            first = await session.call_tool("echo", {"message": MESSAGE})
            if echo_text(first) != up.echo_text:
                raise RuntimeError(f"sdk {up.name} echo: got {first!r}")

            async def call() -> None:
                await session.call_tool("echo", {"message": MESSAGE})

            for c in levels:
                lat, secs = await run_async_cell(call, c, duration, warmup)
                cells.append(cell_of(up.name, "sdk", c, lat, secs))
    return cells


async def bench_aio(target: str, up: Upstream, levels: Sequence[int], duration: float, warmup: float) -> list[Cell]:
    cells = []
    tool = f"mcp__{up.name}__echo"
    async with mcpd_grpc.AsyncClient(target, timeout=60) as client:
        first = await client.call_tool(tool, {"message": MESSAGE})
        if first.text != up.echo_text:
            raise RuntimeError(f"aio {up.name} echo: got {first!r}")

        async def call() -> None:
            await client.call_tool(tool, {"message": MESSAGE})

        for c in levels:
            lat, secs = await run_async_cell(call, c, duration, warmup)
            cells.append(cell_of(up.name, "aio", c, lat, secs))
    return cells


def bench_sync(target: str, up: Upstream, levels: Sequence[int], duration: float, warmup: float) -> list[Cell]:
    cells = []
    tool = f"mcp__{up.name}__echo"
    with mcpd_grpc.Client(target, timeout=60) as client:
        first = client.call_tool(tool, {"message": MESSAGE})
        if first.text != up.echo_text:
            raise RuntimeError(f"sync {up.name} echo: got {first!r}")

        def call() -> None:
            client.call_tool(tool, {"message": MESSAGE})

        for c in levels:
            lat, secs = run_thread_cell(call, c, duration, warmup)
            cells.append(cell_of(up.name, "sync", c, lat, secs))
    return cells


# Cold start: each script runs in a fresh interpreter and prints one line
# when it has its first tool result; the parent times spawn to that line.
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


def start_mcpd(binary: str, workdir: Path, upstreams: Sequence[Upstream]) -> tuple[subprocess.Popen[bytes], str]:
    config = {"mcpServers": {u.name: {"command": u.command, "args": u.args} for u in upstreams}}
    (workdir / "mcp.json").write_text(json.dumps(config))
    sock = workdir / "mcpd.sock"
    log = open(workdir / "mcpd.log", "wb")
    proc = subprocess.Popen(
        [binary, "--listen", f"unix://{sock}", "--config", str(workdir / "mcp.json"), "--log-level", "warn"],
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
            with mcpd_grpc.Client(target, timeout=10) as c:
                if all(c.get_server(u.name).ready for u in upstreams):
                    return proc, target
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
    parser.add_argument("--duration", type=float, default=3.0, help="seconds measured per cell")
    parser.add_argument("--warmup", type=float, default=0.5, help="seconds of calls before each cell, not measured")
    parser.add_argument("--concurrency", default="1,16,64", help="concurrent calls per cell, comma-separated")
    parser.add_argument("--cold-runs", type=int, default=5, help="runs of each cold start (the median is reported)")
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    top = max(levels)

    upstreams = [Upstream("demo", args.mcpd, ["demo-server"], MESSAGE)]
    if args.everything:
        upstreams.append(Upstream("everything", args.everything, ["stdio"], f"Echo: {MESSAGE}"))

    print(f"python {sys.version.split()[0]}, mcp {_version('mcp')}, grpcio {_version('grpcio')}, protobuf {_version('protobuf')}, {os.cpu_count()} CPUs")
    print(f"tools/call echo, {args.duration:g}s per cell after {args.warmup:g}s warm-up; mcpd over a Unix socket\n")

    cells: list[Cell] = []
    cold: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="mcpd-pybench-") as tmp:
        proc, target = start_mcpd(args.mcpd, Path(tmp), upstreams)
        try:
            for up in upstreams:
                with open(os.devnull, "w") as devnull:  # the server's stderr
                    cells += asyncio.run(bench_sdk(up, levels, args.duration, args.warmup, devnull))
                cells += asyncio.run(bench_aio(target, up, levels, args.duration, args.warmup))
                cells += bench_sync(target, up, levels, args.duration, args.warmup)
            for up in upstreams:
                via = [cold_start([sys.executable, "-c", COLD_MCPD, target, f"mcp__{up.name}__echo"], up.echo_text) for _ in range(args.cold_runs)]
                direct = [cold_start([sys.executable, "-c", COLD_SDK, up.command, json.dumps(up.args)], up.echo_text) for _ in range(args.cold_runs)]
                cold[up.name] = {"mcpd_ms": statistics.median(via) * 1e3, "sdk_ms": statistics.median(direct) * 1e3}
        finally:
            stop(proc)

    print(f"{'upstream':<11} {'client':<6} {'conc':>4} {'calls':>7} {'p50 ms':>8} {'p99 ms':>8} {'calls/s':>9}")
    for c in cells:
        print(f"{c.upstream:<11} {c.method:<6} {c.concurrency:>4} {c.calls:>7} {c.p50_ms:>8.3f} {c.p99_ms:>8.3f} {c.calls_per_s:>9.0f}")

    def find(up: str, method: str, conc: int) -> Cell:
        return next(c for c in cells if (c.upstream, c.method, c.concurrency) == (up, method, conc))

    print(f"\ncold start, fresh python process to its first tool result (median of {args.cold_runs}):")
    for name, v in cold.items():
        print(f"  {name:<11} through warm mcpd {v['mcpd_ms']:8.1f} ms   sdk spawning the server {v['sdk_ms']:8.1f} ms   ratio {v['mcpd_ms'] / v['sdk_ms']:.2f}")

    print("\ntargets (through mcpd / sdk directly):")
    for up in upstreams:
        for method in ("aio", "sync"):
            sdk1, via1 = find(up.name, "sdk", 1), find(up.name, method, 1)
            sdk_top, via_top = find(up.name, "sdk", top), find(up.name, method, top)
            print(ratio_line(f"{up.name} {method} p50 ratio at 1", via1.p50_ms / sdk1.p50_ms, 1.0, True))
            print(ratio_line(f"{up.name} {method} calls/s ratio at {top}", via_top.calls_per_s / sdk_top.calls_per_s, 1.0, False))
        print(ratio_line(f"{up.name} cold start ratio", cold[up.name]["mcpd_ms"] / cold[up.name]["sdk_ms"], 0.1, True))

    if args.json:
        Path(args.json).write_text(json.dumps({"cells": [dict(vars(c), calls_per_s=c.calls_per_s) for c in cells], "cold_start": cold}, indent=2) + "\n")
    return 0


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


if __name__ == "__main__":
    sys.exit(main())
