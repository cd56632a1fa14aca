#!/usr/bin/env python3
"""Type-checks the Python and TypeScript examples of mcpd's documentation.

`make check-doc-snippets` (part of `make test`) runs this with the pinned
tools `make lint-python` and `make build-typescript` use: every ```python
block of PY_PAGES goes through `mypy --strict` (the client package's own
config, against clients/python/mcpd_grpc), and every ```ts or
```typescript block of TS_PAGES through `tsc --noEmit` (the client's
strict tsconfig, against clients/typescript/src). All blocks of one
language are checked in one run of the tool, so the whole check takes a
few seconds. An error is reported at the page and line of the block.

The rules a block follows (its info string is the text after the fence):

  - "python", "ts", "typescript": a complete program, checked as written.
  - "python fragment", "ts fragment": a fragment that relies on what the
    surrounding text set up. It is checked after a prelude:
      Python: PY_PRELUDE (typing's names, os, asyncio, mcpd_grpc and its
        ServerConfig, and a Client `mcpd`), then the fragment indented
        into the body of an `async def`, so that it may `await` and
        `async with`, and may rebind `mcpd` (to an AsyncClient, say).
      TypeScript: the fragment's own import lines, an import of
        TS_PRELUDE_NAMES from mcpd-client (less those the fragment imports
        itself), `declare const mcpd: Client`, then the rest of the
        fragment inside a block `{ ... }`: top-level await works in it,
        and a `const mcpd` of its own shadows the prelude's.
  - An HTML comment "<!-- prelude ... -->" on the line right before the
    fence is added after the standard prelude (at module level): the
    stand-ins of the reader's own code a block calls (a model, say), as
    declarations with types, or a mypy inline config ("# mypy:
    allow-untyped-calls" for the untyped generated gRPC stubs). Readers
    of the rendered page do not see it.
  - Blocks with any other info string are not checked.

Run it by hand with `make check-doc-snippets`, or as
`bin/python/build/bin/python tools/doc_snippets.py --mypy MYPY --tsc TSC`
from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent

# The pages whose blocks are checked, relative to ROOT.
PY_PAGES = [
    "README.md",
    "docs/*.md",
    "clients/python/README.md",
]
TS_PAGES = [
    "README.md",
    "docs/*.md",
    "clients/typescript/README.md",
]

PY_INFOS = {"python": False, "python fragment": True}
TS_INFOS = {"ts": False, "typescript": False, "ts fragment": True, "typescript fragment": True}

PY_PRELUDE = """\
import asyncio
import os
from typing import Any, Dict, List, Optional, Union

import mcpd_grpc
from mcpd_grpc import ServerConfig

mcpd = mcpd_grpc.Client()
"""

# The names the TypeScript prelude imports from mcpd-client, unless the
# fragment imports them itself.
TS_PRELUDE_NAMES = ["Client", "ServerConfig", "ServerRequestError", "Unavailable", "Cancelled", "DeadlineExceeded", "MCPDError"]
TS_PRELUDE_REST = "declare const mcpd: Client;\n"


@dataclass
class Block:
    page: str  # relative to ROOT
    line: int  # of the first line of code, 1-based
    info: str
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


def read_blocks(page: str) -> List[Block]:
    """Returns the fenced blocks of a page, with their info strings."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    blocks: List[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
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
        blocks.append(Block(page, start + 1, info, lines[start:i], prelude))
        i += 1
    return blocks


def pages(patterns: Sequence[str]) -> List[str]:
    out: List[str] = []
    for p in patterns:
        for path in sorted(ROOT.glob(p)):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in out:
                out.append(rel)
    return out


def file_name(block: Block, ext: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9]+", "_", block.page.removesuffix(".md")).strip("_").lower()
    return f"{stem}_L{block.line}.{ext}"


def python_snippet(block: Block) -> Snippet:
    name = file_name(block, "py")
    if not PY_INFOS[block.info]:
        head = "".join(f"{p}\n" for p in block.prelude)
        return Snippet(block, name, head + "\n".join(block.code) + "\n", head.count("\n"))
    head = PY_PRELUDE + "".join(f"{p}\n" for p in block.prelude) + "\n\nasync def _fragment() -> None:\n"
    body = textwrap.indent("\n".join(block.code), "    ") + "\n"
    return Snippet(block, name, head + body, head.count("\n"))


TS_IMPORT = re.compile(r'^import\s+(type\s+)?\{([^}]*)\}\s+from\s+"([^"]+)";?\s*$')


def ts_snippet(block: Block) -> Snippet:
    name = file_name(block, "ts")
    extra = "".join(f"{p}\n" for p in block.prelude)
    if not TS_INFOS[block.info]:
        # export {}: a module even without imports, so its names stay its own.
        head = "export {};\n" + extra
        return Snippet(block, name, head + "\n".join(block.code) + "\n", head.count("\n"))
    # The fragment's import lines go first, each on the line of its own: to
    # keep line numbers simple they are blanked in the body, not removed.
    imports: List[str] = []
    own: set[str] = set()
    body: List[str] = []
    for line in block.code:
        m = TS_IMPORT.match(line)
        if m:
            imports.append(line)
            if m.group(3) == "mcpd-client":
                own.update(n.strip().split(" as ")[-1] for n in m.group(2).split(",") if n.strip())
            body.append("")
        elif line.startswith("import "):
            imports.append(line)
            body.append("")
        else:
            body.append(line)
    names = [n for n in TS_PRELUDE_NAMES if n not in own]
    head = "".join(f"{i}\n" for i in imports)
    if names:
        head += "import { " + ", ".join(names) + ' } from "mcpd-client";\n'
    head += TS_PRELUDE_REST + extra + "{\n"
    return Snippet(block, name, head + "\n".join(body) + "\n}\n", head.count("\n"))


def collect(patterns: Sequence[str], infos: Dict[str, bool]) -> List[Block]:
    out: List[Block] = []
    for page in pages(patterns):
        out.extend(b for b in read_blocks(page) if b.info in infos)
    return out


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


def check_python(mypy: str, work: Path) -> int:
    blocks = collect(PY_PAGES, PY_INFOS)
    snippets = {s.name: s for s in map(python_snippet, blocks)}
    d = work / "python"
    d.mkdir()
    for s in snippets.values():
        (d / s.name).write_text(s.text, encoding="utf-8")
    # From clients/python, as make lint-python runs it: its pyproject.toml
    # is the config and mcpd_grpc the package the snippets import.
    cmd = [mypy, "--no-incremental", "--cache-dir=/dev/null", "--no-error-summary", *sorted(str(d / n) for n in snippets)]
    res = subprocess.run(cmd, cwd=ROOT / "clients" / "python", capture_output=True, text=True)
    text, errors = remap(res.stdout + res.stderr, snippets, MYPY_LINE)
    print(f"doc snippets: mypy --strict on {len(snippets)} Python blocks: {'ok' if res.returncode == 0 else 'FAILED'}")
    if res.returncode != 0:
        print(text)
        return max(errors, 1)
    return 0


def check_typescript(tsc: str, work: Path) -> int:
    blocks = collect(TS_PAGES, TS_INFOS)
    snippets = {s.name: s for s in map(ts_snippet, blocks)}
    d = work / "typescript"
    d.mkdir()
    ts = ROOT / "clients" / "typescript"
    for s in snippets.values():
        (d / s.name).write_text(s.text, encoding="utf-8")
    (d / "package.json").write_text(json.dumps({"private": True, "type": "module"}), encoding="utf-8")
    config = {
        "extends": str(ts / "tsconfig.json"),
        "compilerOptions": {
            "rootDir": str(ROOT),
            "noEmit": True,
            "declaration": False,
            "sourceMap": False,
            "noUnusedLocals": False,
            "typeRoots": [str(ts / "node_modules" / "@types")],
            # The client from its source, and ai (the AI SDK example), which
            # its tests use, from its node_modules.
            "paths": {"mcpd-client": [str(ts / "src" / "index.ts")], "ai": [str(ts / "node_modules" / "ai" / "dist" / "index.d.ts")]},
        },
        "include": [str(d / "*.ts")],
    }
    (d / "tsconfig.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    res = subprocess.run([tsc, "-p", str(d / "tsconfig.json"), "--pretty", "false"], capture_output=True, text=True)
    text, errors = remap(res.stdout + res.stderr, snippets, TSC_LINE)
    print(f"doc snippets: tsc --noEmit on {len(snippets)} TypeScript blocks: {'ok' if res.returncode == 0 else 'FAILED'}")
    if res.returncode != 0:
        print(text)
        return max(errors, 1)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--mypy", help="the mypy to run (skip Python when not given)")
    ap.add_argument("--tsc", help="the tsc to run (skip TypeScript when not given)")
    ap.add_argument("--keep", action="store_true", help="keep the generated files and print where they are")
    args = ap.parse_args(argv)
    # Under bin/ (git-ignored), next to the other build outputs.
    work = ROOT / "bin" / "doc-snippets"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        failed = 0
        if args.mypy:
            failed += check_python(os.path.abspath(args.mypy), work)
        if args.tsc:
            failed += check_typescript(os.path.abspath(args.tsc), work)
        return 1 if failed else 0
    finally:
        if args.keep:
            print(f"doc snippets: files in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
