"""Connecting to mcpd: each client its own connection, and a slow handshake."""

from __future__ import annotations

from conftest import RPC_TIMEOUT, UnixProxy, run_async
from mcpd_grpc import AsyncClient, Client

#: How long the proxy holds mcpd's first bytes (its HTTP/2 SETTINGS) on a
#: new connection: longer than the client's reconnect backoff (100 ms), far
#: shorter than gRPC's own connection timeout (20 s).
SLOW_HANDSHAKE = 1.0


def test_slow_handshake(proxy: UnixProxy) -> None:
    """A connection whose handshake takes a while (a loaded machine, TLS
    across a network) still carries the call instead of failing with
    UNAVAILABLE: a fast reconnect must not also cut each connection
    attempt short."""
    proxy.reply_delay = SLOW_HANDSHAKE
    with Client(proxy.target, timeout=RPC_TIMEOUT) as c:
        assert c.get_server("demo").ready


def test_slow_handshake_async(proxy: UnixProxy) -> None:
    proxy.reply_delay = SLOW_HANDSHAKE

    async def call() -> bool:
        async with AsyncClient(proxy.target, timeout=RPC_TIMEOUT) as c:
            return (await c.get_server("demo")).ready

    assert run_async(call())


def test_each_client_its_own_connection(proxy: UnixProxy) -> None:
    """Two clients open at once do not share a connection (grpcio's
    default shares one between channels of equal settings): a new client
    after mcpd restarted must not start on a connection an older one had
    to the mcpd that went away, where its first call would fail as one
    that may have run instead of one never sent."""
    with Client(proxy.target, timeout=RPC_TIMEOUT) as a, Client(proxy.target, timeout=RPC_TIMEOUT) as b:
        assert a.get_server("demo").ready and b.get_server("demo").ready
    assert proxy.accepted == 2

    async def calls() -> None:
        async with AsyncClient(proxy.target, timeout=RPC_TIMEOUT) as a, AsyncClient(proxy.target, timeout=RPC_TIMEOUT) as b:
            assert (await a.get_server("demo")).ready and (await b.get_server("demo")).ready

    run_async(calls())
    assert proxy.accepted == 4
