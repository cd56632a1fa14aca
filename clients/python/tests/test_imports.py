"""What `import mcpd_grpc` loads: a program that only uses the sync Client
does not pay for the asyncio client, json or hashlib at start-up."""

from __future__ import annotations

import subprocess

import mcpd_grpc
from conftest import PYTHON, example_env

#: Loaded on first use only (docs/performance.md, "Cold start").
LAZY = ["mcpd_grpc.aio", "json", "hashlib", "logging", "concurrent.futures", "queue", "dataclasses", "inspect"]


def test_import_leaves_the_lazy_modules_out() -> None:
    code = f"import sys, mcpd_grpc; print(' '.join(m for m in {LAZY!r} if m in sys.modules))"
    out = subprocess.run([PYTHON, "-c", code], env=example_env(""), capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == [], f"import mcpd_grpc loaded {out.stdout.split()}"


def test_the_asyncio_client_is_there_when_asked_for() -> None:
    from mcpd_grpc import AsyncClient, AsyncSubscription, AsyncToolCallStream, aio

    assert mcpd_grpc.AsyncClient is AsyncClient is aio.AsyncClient
    assert (AsyncSubscription, AsyncToolCallStream) == (aio.AsyncSubscription, aio.AsyncToolCallStream)
    assert {"AsyncClient", "aio"} <= set(dir(mcpd_grpc))
    assert set(mcpd_grpc.__all__) <= set(dir(mcpd_grpc))
