#!/usr/bin/env python3
"""Checks the Python and TypeScript examples of mcpd's documentation.

`make check-doc-snippets` (part of `make test`) runs this with the pinned
tools `make lint-python` and `make build-typescript` use: every Python
block of PAGES goes through `mypy --strict` (the client package's own
config, against clients/python/mcpd_grpc), and every TypeScript block
through `tsc` (the client's strict tsconfig, against clients/typescript/src).
All blocks of one language are checked in one run of the tool, and the
blocks marked "run" then run against one mcpd, so the whole check takes a
few seconds. An error is reported at the page and line of the block.

The rules a block follows (its info string is the text after the fence):

  - "python", "ts" or "typescript": a complete program, checked as written.
  - "... fragment": a fragment that relies on what the surrounding text set
    up, checked after a prelude:
      Python: PY_PRELUDE (asyncio, os, typing's names, mcpd_grpc and its
        ServerConfig, and a Client `mcpd`), then the fragment indented
        into the body of an `async def` (so that it may `await` and
        `async with`, and rebind `mcpd`, to an AsyncClient say), which the
        program then runs with asyncio.run.
      TypeScript: the fragment's own import lines, an import of
        TS_PRELUDE_NAMES from mcpd-client (less those the fragment imports
        itself), `const mcpd = new Client()`, then the rest of the
        fragment in `try { ... } finally { await mcpd.close(); }`:
        top-level await works in it, and a `const mcpd` of its own shadows
        the prelude's.
  - "... run" (after the language, and after "fragment" if any): the block
    also runs, and must exit 0, against an mcpd started with the default
    config (the demo server) on loopback ports, gRPC and HTTP (Connect).
    127.0.0.1:50051 in the block is rewritten to its gRPC address and
    127.0.0.1:8080 to its HTTP address; $MCPD_ADDRESS is the gRPC address
    for Python and the HTTP address for TypeScript (whose default wire is
    Connect), as the clients' READMEs say to start mcpd. Only blocks that
    end by themselves, in seconds, and need no other server, are marked.
  - An HTML comment "<!-- prelude ... -->" on the line right before the
    fence is added after the standard prelude (at module level): the
    stand-ins of the reader's own code a block calls (a model, say), as
    declarations with types, or a mypy inline config ("# mypy:
    allow-untyped-calls" for the untyped generated gRPC stubs). Readers
    of the rendered page do not see it.
  - Blocks with any other info string are not checked.

Run it by hand with `make check-doc-snippets`, or from the repository root
as `bin/python/build/bin/python tools/doc_snippets.py --mypy MYPY --tsc TSC
--mcpd bin/mcpd` (without --mcpd nothing runs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent

# The pages whose blocks are checked, relative to ROOT.
PAGES = ["README.md", "docs/*.md", "clients/python/README.md", "clients/typescript/README.md"]

PYTHON = "python"
TYPESCRIPT = "typescript"
LANGS = {"python": PYTHON, "ts": TYPESCRIPT, "typescript": TYPESCRIPT}
FLAGS = ("fragment", "run")

PY_PRELUDE = """\
import asyncio
import os
from typing import Any, Dict, List, Optional, Union

import mcpd_grpc
from mcpd_grpc import ServerConfig

mcpd = mcpd_grpc.Client()
"""
PY_TRAILER = "\n\nasyncio.run(_fragment())\nmcpd.close()\n"

# The names the TypeScript prelude imports from mcpd-client, unless the
# fragment imports them itself.
TS_PRELUDE_NAMES = ["Client", "ServerConfig", "ServerRequestError", "Unavailable", "Cancelled", "DeadlineExceeded", "MCPDError"]

# The addresses the examples use, rewritten to the test daemon's in blocks
# that run: mcpd's default --listen, and the --http-listen the READMEs show.
DOCS_GRPC_ADDR = "127.0.0.1:50051"
DOCS_HTTP_ADDR = "127.0.0.1:8080"
# Bounds a run that hangs; the blocks that run take well under a second.
RUN_TIMEOUT_S = 60
# Bounds the wait for the daemon's demo server to be ready.
DAEMON_START_TIMEOUT_S = 30


@dataclass
class Block:
    page: str  # relative to ROOT
    line: int  # of the first line of code, 1-based
    lang: str  # PYTHON or TYPESCRIPT
    fragment: bool
    run: bool
    code: List[str]
    prelude: List[str]  # from a "<!-- prelude -->" comment right before the fence


@dataclass
class Snippet:
    block: Block
    name: str  # file name
    text: str
    offset: int  # how many lines come before the block's first


FENCE = re.compile(r"^(`{3,})(.*)$")
PRELUDE_START = "<!-- prelude"


def parse_info(info: str) -> Optional[Tuple[str, bool, bool]]:
    """Returns the language and the fragment and run flags of a checked
    block's info string, or None for a block that is not checked."""
    words = info.split()
    if not words or words[0] not in LANGS:
        return None
    flags = words[1:]
    # In FLAGS' order, each at most once.
    if any(f not in FLAGS for f in flags) or flags != sorted(set(flags), key=FLAGS.index):
        return None
    return LANGS[words[0]], "fragment" in flags, "run" in flags


def read_blocks(page: str) -> List[Block]:
    """Returns the checked fenced blocks of a page."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    blocks: List[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), parse_info(m.group(2))
        prelude: List[str] = []
        if i > 0 and lines[i - 1].rstrip().endswith("-->"):
            j = i - 1
            while j >= 0 and not lines[j].startswith("<!--"):
                j -= 1
            if j >= 0 and lines[j].startswith(PRELUDE_START):
                comment = lines[j:i]
                comment[0] = comment[0][len(PRELUDE_START) :]
                comment[-1] = comment[-1].rstrip()[: -len("-->")]
                prelude = [c for c in comment if c.strip()]
        start = i + 1
        i += 1
        while i < len(lines) and not lines[i].startswith(fence):
            i += 1
        if info is not None:
            blocks.append(Block(page, start + 1, info[0], info[1], info[2], lines[start:i], prelude))
        i += 1
    return blocks


def all_blocks() -> List[Block]:
    out: List[Block] = []
    seen: List[Path] = []
    for p in PAGES:
        for path in sorted(ROOT.glob(p)):
            if path not in seen:
                seen.append(path)
                out.extend(read_blocks(path.relative_to(ROOT).as_posix()))
    return out


def file_name(block: Block, ext: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9]+", "_", block.page.removesuffix(".md")).strip("_").lower()
    return f"{stem}_L{block.line}.{ext}"


def python_snippet(block: Block) -> Snippet:
    name = file_name(block, "py")
    extra = "".join(f"{p}\n" for p in block.prelude)
    if not block.fragment:
        return Snippet(block, name, extra + "\n".join(block.code) + "\n", extra.count("\n"))
    head = PY_PRELUDE + extra + "\n\nasync def _fragment() -> None:\n"
    body = textwrap.indent("\n".join(block.code), "    ") + "\n"
    return Snippet(block, name, head + body + PY_TRAILER, head.count("\n"))


TS_IMPORT = re.compile(r'^import\s+(type\s+)?\{([^}]*)\}\s+from\s+"([^"]+)";?\s*$')


def ts_snippet(block: Block) -> Snippet:
    name = file_name(block, "ts")
    extra = "".join(f"{p}\n" for p in block.prelude)
    if not block.fragment:
        # export {}: a module even without imports, so its names stay its own.
        head = "export {};\n" + extra
        return Snippet(block, name, head + "\n".join(block.code) + "\n", head.count("\n"))
    # The fragment's import lines go first; to keep line numbers simple
    # they are blanked in the body, not removed.
    imports: List[str] = []
    own: set[str] = set()
    body: List[str] = []
    for line in block.code:
        m = TS_IMPORT.match(line)
        if m and m.group(3) == "mcpd-client":
            own.update(n.strip().split(" as ")[-1] for n in m.group(2).split(",") if n.strip())
        if line.startswith("import "):
            imports.append(line)
            body.append("")
        else:
            body.append(line)
    names = [n for n in TS_PRELUDE_NAMES if n not in own]
    client = "Client" if "Client" in names else "__Client"
    if client != "Client":
        names.append("Client as __Client")
    head = "".join(f"{i}\n" for i in imports)
    head += "import { " + ", ".join(names) + ' } from "mcpd-client";\n'
    head += f"const mcpd = new {client}();\n" + extra + "try {\n"
    return Snippet(block, name, head + "\n".join(body) + "\n} finally {\n  await mcpd.close();\n}\n", head.count("\n"))


def remap(output: str, snippets: Dict[str, Snippet], pattern: re.Pattern[str]) -> Tuple[str, int]:
    """Rewrites the tool's file:line references to page:line; returns the
    text and the number of error lines."""
    out: List[str] = []
    errors = 0
    for line in output.splitlines():
        m = pattern.match(line)
        if m and m.group("file") in snippets:
            s = snippets[m.group("file")]
            n = int(m.group("line")) - s.offset
            where = (
                f"{s.block.page}:{s.block.line + n - 1}"
                if 1 <= n <= len(s.block.code)
                else f"{s.block.page}:{s.block.line - 1} (prelude line {int(m.group('line'))})"
            )
            line = f"{where}: {m.group('rest')}"
            if "error" in m.group("rest"):
                errors += 1
        out.append(line)
    return "\n".join(out), errors


MYPY_LINE = re.compile(r"^(?:.*/)?(?P<file>[^/:]+\.py):(?P<line>\d+):(?:\d+:)? (?P<rest>.*)$")
TSC_LINE = re.compile(r"^(?:.*/)?(?P<file>[^/(]+\.ts)\((?P<line>\d+),(?P<col>\d+)\): (?P<rest>.*)$")


@dataclass
class Daemon:
    grpc: str  # host:port
    http: str  # host:port


def write(d: Path, snippets: Dict[str, Snippet], daemon: Optional[Daemon]) -> None:
    d.mkdir(parents=True)
    for s in snippets.values():
        text = s.text
        if daemon is not None and s.block.run:
            text = text.replace(DOCS_GRPC_ADDR, daemon.grpc).replace(DOCS_HTTP_ADDR, daemon.http)
        (d / s.name).write_text(text, encoding="utf-8")


def report(what: str, count: int, res: subprocess.CompletedProcess[str], snippets: Dict[str, Snippet], pattern: re.Pattern[str]) -> int:
    text, errors = remap(res.stdout + res.stderr, snippets, pattern)
    print(f"doc snippets: {what} on {count} blocks: {'ok' if res.returncode == 0 else 'FAILED'}")
    if res.returncode != 0:
        print(text)
        return max(errors, 1)
    return 0


def run_blocks(snippets: Dict[str, Snippet], cmd: Sequence[str], files: Dict[str, Path], env: Dict[str, str], lang: str) -> int:
    """Runs the run blocks, each as `cmd FILE`, and reports those that fail."""
    failed = 0
    ran = 0
    for name, s in snippets.items():
        if not s.block.run:
            continue
        ran += 1
        where = f"{s.block.page}:{s.block.line - 1}"
        try:
            res = subprocess.run([*cmd, str(files[name])], env=env, cwd=files[name].parent, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print(f"{where}: did not end within {RUN_TIMEOUT_S} s")
            failed += 1
            continue
        if res.returncode != 0:
            print(f"{where}: exited with {res.returncode}:\n{textwrap.indent(res.stdout + res.stderr, '    ')}")
            failed += 1
    print(f"doc snippets: ran {ran} {lang} blocks against mcpd: {'ok' if not failed else 'FAILED'}")
    return failed


def check_python(mypy: str, work: Path, daemon: Optional[Daemon], env: Dict[str, str]) -> int:
    snippets = {s.name: s for s in (python_snippet(b) for b in all_blocks() if b.lang == PYTHON)}
    d = work / "python"
    write(d, snippets, daemon)
    # From clients/python, as make lint-python runs it: its pyproject.toml
    # is the config and mcpd_grpc the package the snippets import.
    cmd = [mypy, "--no-incremental", "--cache-dir=/dev/null", "--no-error-summary", *sorted(str(d / n) for n in snippets)]
    res = subprocess.run(cmd, cwd=ROOT / "clients" / "python", capture_output=True, text=True)
    failed = report("mypy --strict", len(snippets), res, snippets, MYPY_LINE)
    if failed or daemon is None:
        return failed
    env = {**env, "MCPD_ADDRESS": daemon.grpc, "PYTHONPATH": str(ROOT / "clients" / "python")}
    return run_blocks(snippets, [sys.executable], {n: d / n for n in snippets}, env, "Python")


def check_typescript(tsc: str, node: str, work: Path, daemon: Optional[Daemon], env: Dict[str, str]) -> int:
    snippets = {s.name: s for s in (ts_snippet(b) for b in all_blocks() if b.lang == TYPESCRIPT)}
    d = work / "typescript"
    write(d, snippets, daemon)
    ts = ROOT / "clients" / "typescript"
    out = work / "typescript-out"
    config = {
        "extends": str(ts / "tsconfig.json"),
        "compilerOptions": {
            "rootDir": str(ROOT),
            "outDir": str(out),
            "noEmit": daemon is None,
            "declaration": False,
            "sourceMap": False,
            "typeRoots": [str(ts / "node_modules" / "@types")],
            # The client from its source, and ai (the AI SDK example), which
            # its tests use, from its node_modules.
            "paths": {"mcpd-client": [str(ts / "src" / "index.ts")], "ai": [str(ts / "node_modules" / "ai" / "dist" / "index.d.ts")]},
        },
        "include": [str(d / "*.ts")],
    }
    (d / "package.json").write_text(json.dumps({"private": True, "type": "module"}), encoding="utf-8")
    (d / "tsconfig.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    res = subprocess.run([tsc, "-p", str(d / "tsconfig.json"), "--pretty", "false"], capture_output=True, text=True)
    failed = report("tsc (strict)", len(snippets), res, snippets, TSC_LINE)
    if failed or daemon is None:
        return failed
    # tsc wrote the snippets and the client's source (the program's files)
    # under out/, as ES modules; node finds the client's dependencies
    # through out/node_modules, and the blocks the client by a path.
    (out / "package.json").write_text(json.dumps({"private": True, "type": "module"}), encoding="utf-8")
    (out / "node_modules").symlink_to(ts / "node_modules")
    client = out / "clients" / "typescript" / "src" / "index.js"
    files: Dict[str, Path] = {}
    for name in snippets:
        js = out / d.relative_to(ROOT) / name.replace(".ts", ".js")
        js.write_text(js.read_text(encoding="utf-8").replace('from "mcpd-client"', f'from "{client}"'), encoding="utf-8")
        files[name] = js
    return run_blocks(snippets, [node], files, {**env, "MCPD_ADDRESS": daemon.http}, "TypeScript")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def start_daemon(mcpd: str, work: Path) -> Iterator[Daemon]:
    """Starts mcpd with the default config on loopback ports, with a home
    of its own (no user, project or managed config), and stops it."""
    home = work / "home"
    (home / "project").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPD_") and k != "HOME"}
    env.update(HOME=str(home), MCPD_PROJECT=str(home / "project"), MCPD_MANAGED_CONFIG=str(home / "managed-mcp.json"))
    daemon = Daemon(f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}")
    with open(work / "mcpd.log", "wb") as log:
        proc = subprocess.Popen([mcpd, "--listen", daemon.grpc, "--http-listen", daemon.http], env=env, cwd=home, stdout=log, stderr=subprocess.STDOUT)
    try:
        # Ready when the demo server is: mcpd's own health check, so that
        # a broken client fails its blocks, not the start.
        health = [mcpd, "health", "--listen", daemon.grpc, "--service", "mcpd.server/demo"]
        deadline = time.monotonic() + DAEMON_START_TIMEOUT_S
        while subprocess.run(health, env=env, capture_output=True).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                why = f"exited with {proc.returncode}" if proc.returncode is not None else f"had no ready demo server within {DAEMON_START_TIMEOUT_S} s"
                tail = (work / "mcpd.log").read_text(encoding="utf-8", errors="replace").splitlines()[-20:]
                raise RuntimeError(f"mcpd {why}; the end of its log:\n" + "\n".join(tail))
            time.sleep(0.05)
        yield daemon
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--mypy", help="the mypy to run (skip Python when not given)")
    ap.add_argument("--tsc", help="the tsc to run (skip TypeScript when not given)")
    ap.add_argument("--node", default="node", help="the node that runs TypeScript blocks")
    ap.add_argument("--mcpd", help="the mcpd binary the run blocks run against (none run when not given)")
    ap.add_argument("--keep", action="store_true", help="keep the generated files and print where they are")
    args = ap.parse_args(argv)
    # Under bin/ (git-ignored), next to the other build outputs.
    work = ROOT / "bin" / "doc-snippets"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    # The blocks that run see no MCPD_* variable but the address.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPD_")}
    try:
        failed = 0
        with start_daemon(os.path.abspath(args.mcpd), work) if args.mcpd else contextlib.nullcontext() as daemon:
            if args.mypy:
                failed += check_python(os.path.abspath(args.mypy), work, daemon, env)
            if args.tsc:
                node = args.node if os.sep not in args.node else os.path.abspath(args.node)
                failed += check_typescript(os.path.abspath(args.tsc), node, work, daemon, env)
        return 1 if failed else 0
    except RuntimeError as e:
        print(f"doc snippets: {e}")
        return 1
    finally:
        if args.keep:
            print(f"doc snippets: files in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
