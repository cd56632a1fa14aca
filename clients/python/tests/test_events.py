"""Subscriptions that survive dropped streams: the client reconnects with
after_sequence and loses nothing mcpd still buffers."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

import pytest

import mcpd_grpc
from conftest import CLOCK, RPC_TIMEOUT, WIRES, Daemon, UnixProxy, run_async, until_live
from mcpd_grpc import AsyncClient, Client, EventKind, ServerState


def _ticks(sub: Iterator[mcpd_grpc.Event], n: int) -> List[int]:
    out = []
    for ev in sub:
        assert ev.kind is EventKind.RESOURCE_UPDATED, f"got {ev}"
        out.append(ev.sequence)
        if len(out) == n:
            return out
    pytest.fail(f"stream ended after {out}")


def test_subscription_survives_a_dropped_connection(daemon: Daemon, proxy: UnixProxy) -> None:
    # The reference stream goes straight to mcpd and keeps the upstream
    # subscription of demo://clock alive while the proxied one is cut off,
    # so ticks keep landing in mcpd's buffer during the outage.
    with daemon.client() as direct, Client(proxy.target, timeout=RPC_TIMEOUT) as via_proxy:
        ref = direct.subscribe(resources=[CLOCK], kinds=["resource_updated"])
        until_live(ref)
        sub = via_proxy.subscribe(resources=[CLOCK], kinds=["resource_updated"])
        before = _ticks(sub, 1)[0]
        # Line the reference up with the proxied stream.
        for ev in ref:
            if ev.sequence >= before:
                break

        proxy.cut()  # every connection dropped, new ones refused
        during = _ticks(ref, 2)  # published while the proxied client is cut off
        assert during[0] > before
        proxy.allow()

        after = _ticks(sub, 3)
        want = during + _ticks(ref, 1)
        assert after == want, f"got {after} after the outage, want {want} (nothing lost, nothing twice)"
        assert sub.reconnects >= 1, "the stream never reconnected"
        assert sub.last_sequence == after[-1]
        sub.close()
        ref.close()


def test_async_subscription_survives_a_dropped_connection(daemon: Daemon, proxy: UnixProxy) -> None:
    async def body() -> None:
        async with AsyncClient(daemon.target, timeout=RPC_TIMEOUT) as direct, AsyncClient(proxy.target, timeout=RPC_TIMEOUT) as via_proxy:
            ref = direct.subscribe(resources=[CLOCK], kinds=["resource_updated"])
            first_ref = await ref.__anext__()
            sub = via_proxy.subscribe(resources=[CLOCK], kinds=["resource_updated"])
            before = (await sub.__anext__()).sequence
            seq = first_ref.sequence
            while seq < before:
                seq = (await ref.__anext__()).sequence
            proxy.cut()
            during = [(await ref.__anext__()).sequence for _ in range(2)]
            proxy.allow()
            after = [(await sub.__anext__()).sequence for _ in range(3)]
            want = during + [(await ref.__anext__()).sequence]
            assert after == want, f"got {after}, want {want}"
            assert sub.reconnects >= 1
            await sub.aclose()
            ref.close()

    run_async(body())


@pytest.fixture
def own_daemon(mcpd_bin: str, tmp_path: Path) -> Iterator[Daemon]:
    """A daemon of this test's own, with a tiny event buffer, on both wires."""
    d = Daemon(mcpd_bin, tmp_path, "own", ["--event-buffer", "4"], http=True).start()
    try:
        yield d
    finally:
        d.stop()


def _wait_ready(c: Client) -> None:
    """Waits for demo to be ready, through a client that may have tried
    mcpd while it was down: its channel then fails calls fast
    (UNAVAILABLE) until its reconnect backoff ends."""
    from conftest import poll

    def ready() -> bool:
        try:
            return c.get_server("demo").ready
        except mcpd_grpc.Unavailable:
            return False

    poll("demo to be ready", ready)


def test_subscription_survives_a_daemon_restart(own_daemon: Daemon) -> None:
    with own_daemon.client() as c:
        _wait_ready(c)
        sub = c.subscribe(servers=["demo"], resources=[CLOCK], kinds=["resource_updated"], reconnect_timeout=RPC_TIMEOUT)
        _ticks(sub, 1)  # live before the restart
        own_daemon.stop()  # mcpd ends the stream: UNAVAILABLE "shutting down"
        own_daemon.start()  # same socket; its sequences are all larger
        _wait_ready(c)
        # The client resumes after the last run's sequence: the new run
        # says with a gap that what happened in between is unknown.
        gap = next(sub)
        assert gap.kind is EventKind.GAP, f"got {gap}, want a gap first"
        assert _ticks(sub, 1), "no event from the restarted daemon"
        assert sub.reconnects >= 1
        sub.close()


@pytest.mark.parametrize("wire", WIRES)
def test_async_subscription_survives_a_daemon_restart(own_daemon: Daemon, wire: str) -> None:
    async def body() -> None:
        async with AsyncClient(own_daemon.target_of(wire), timeout=RPC_TIMEOUT) as c:
            sub = c.subscribe(servers=["demo"], resources=[CLOCK], kinds=["resource_updated"], reconnect_timeout=RPC_TIMEOUT)
            assert (await sub.__anext__()).kind is EventKind.RESOURCE_UPDATED  # live before the restart
            await asyncio.to_thread(own_daemon.stop)  # the stream ends: UNAVAILABLE, or the connection's end
            await asyncio.to_thread(own_daemon.start)  # the same addresses
            assert (await sub.__anext__()).kind is EventKind.GAP  # what happened in between is unknown
            assert (await sub.__anext__()).kind is EventKind.RESOURCE_UPDATED
            assert sub.reconnects >= 1
            await sub.aclose()

    run_async(body())


def _subscribers(metrics_port: int) -> float:
    """mcpd's mcpd_event_subscribers gauge."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("mcpd_event_subscribers "):
                return float(line.split()[1])
    return 0.0


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_stream_lost_before_its_first_event_resumes_where_it_started(mcpd_bin: str, tmp_path: Path, wire: str, flavour: str) -> None:
    """Before any event, a reconnect resumes from the sequence the stream
    started after (mcpd's mcpd-after-sequence header), not from a later
    "now": across a daemon restart that means a gap first, where "from now"
    would say nothing of what was missed."""
    from conftest import free_port, poll

    metrics = free_port()
    d = Daemon(mcpd_bin, tmp_path, "first", ["--metrics-listen", f"127.0.0.1:{metrics}"], http=True).start()
    try:
        target = d.target_of(wire)

        def restart_and_provoke(c: Client) -> None:
            poll("the stream to be open at mcpd", lambda: _subscribers(metrics) == 1)
            d.stop()
            d.start()
            _wait_ready(c)
            poll("the stream to be open again", lambda: _subscribers(metrics) == 1)
            c.restart_server("demo")  # events after the reconnect, either way

        if flavour == "sync":
            import threading

            with Client(target, timeout=RPC_TIMEOUT) as c:
                sub = c.subscribe(servers=["demo"], kinds=["server_state"], reconnect_timeout=RPC_TIMEOUT)
                got: List[mcpd_grpc.Event] = []
                # The reader reconnects; the restart happens meanwhile.
                reader = threading.Thread(target=lambda: got.append(next(sub)))
                reader.start()
                restart_and_provoke(c)
                reader.join(RPC_TIMEOUT)
                sub.close()
                assert got, "no event after the restart"
                first = got[0]
        else:

            async def body() -> mcpd_grpc.Event:
                async with AsyncClient(target, timeout=RPC_TIMEOUT) as ac:
                    sub = ac.subscribe(servers=["demo"], kinds=["server_state"], reconnect_timeout=RPC_TIMEOUT)
                    reading = asyncio.ensure_future(sub.__anext__())
                    with Client(d.target, timeout=RPC_TIMEOUT) as c:
                        await asyncio.to_thread(restart_and_provoke, c)
                    ev = await reading
                    await sub.aclose()
                    return ev

            first = run_async(body())  # type: ignore[assignment]
        assert first.kind is EventKind.GAP, f"got {first}, want a gap first"
    finally:
        d.stop()


def test_gap_events_reach_the_caller(own_daemon: Daemon) -> None:
    with own_daemon.client() as c:
        _wait_ready(c)
        # Ten server-state events through a buffer of four.
        for _ in range(3):
            c.restart_server("demo")
        with c.subscribe(servers=["demo"], kinds=["server_state"], after_sequence=0) as sub:
            gap = next(sub)
            assert gap.kind is EventKind.GAP, f"got {gap}, want a gap first"
            assert gap.gap_first is not None and gap.gap_last is not None and gap.gap_last >= gap.gap_first
            assert gap.sequence == gap.gap_last and gap.server == ""
            nxt = next(sub)
            assert nxt.kind is EventKind.SERVER_STATE and nxt.sequence == gap.gap_last + 1, f"got {nxt} after {gap}"


def test_unreachable_daemon_gives_up(tmp_path: Path) -> None:
    with Client(f"unix://{tmp_path}/nothing.sock", timeout=5) as c:
        sub = c.subscribe(kinds=["log"], reconnect_timeout=0.5)
        with pytest.raises(mcpd_grpc.Unavailable) as info:
            next(sub)
        assert info.value.retryable
        sub = c.subscribe(kinds=["log"], reconnect=False)
        with pytest.raises(mcpd_grpc.Unavailable):
            next(sub)


def test_async_subscribe_and_gap(own_daemon: Daemon) -> None:
    async def body() -> None:
        async with AsyncClient(own_daemon.target, timeout=RPC_TIMEOUT) as c:
            for _ in range(3):
                await c.restart_server("demo")
            sub = c.subscribe(servers=["demo"], kinds=["server_state"], after_sequence=0)
            events = []
            async for ev in sub:
                events.append(ev)
                if len(events) == 2:
                    break
            assert events[0].kind is EventKind.GAP and events[1].kind is EventKind.SERVER_STATE
            assert isinstance(events[1].state, ServerState)
            # close() ends a pending iteration (what is still buffered may
            # come first).
            asyncio.get_running_loop().call_later(0.1, sub.close)

            async def drain() -> None:
                async for _ in sub:
                    pass

            await asyncio.wait_for(drain(), 5)

    run_async(body())


@pytest.mark.parametrize("wire", WIRES)
def test_async_timed_reads_still_give_up(tmp_path: Path, wire: str) -> None:
    # Reads bounded by a timeout (README: "A read that times out does not
    # end an AsyncClient subscription") must not restart the reconnect
    # budget each time: without mcpd, the subscription gives up with
    # Unavailable after reconnect_timeout all the same.
    target = f"unix://{tmp_path}/nothing.sock" if wire == "grpc" else f"http+unix://{tmp_path}/nothing.sock"

    async def body() -> None:
        async with AsyncClient(target, timeout=5) as c:
            sub = c.subscribe(kinds=["log"], reconnect_timeout=0.5)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    await asyncio.wait_for(sub.__anext__(), 0.2)
                except asyncio.TimeoutError:
                    continue
                except mcpd_grpc.Unavailable:
                    return
            sub.close()
            pytest.fail(f"no Unavailable within 10s of reconnect_timeout=0.5 ({sub.reconnects} reconnects)")

    run_async(body())


#: How long the keepalive tests wait for the client to give up on a frozen
#: mcpd before they fail instead of hanging. With keepalive=5 it takes
#: about 10 s to find the connection dead, and about 10 s more to give up
#: on the connection that the subscription opens again.
FROZEN_GUARD = 60.0


def _daemon_to_freeze(mcpd_bin: str, tmp_path: Path) -> Tuple[Daemon, int]:
    """A daemon of the test's own, and the port of its metrics, which say
    when a subscription is open at mcpd."""
    from conftest import free_port

    metrics = free_port()
    return Daemon(mcpd_bin, tmp_path, "frozen", ["--metrics-listen", f"127.0.0.1:{metrics}"]).start(), metrics


def _subscription_open(metrics_port: int) -> None:
    from conftest import poll

    poll("the subscription to be open at mcpd", lambda: _subscribers(metrics_port) == 1)


def test_keepalive_finds_a_frozen_daemon(mcpd_bin: str, tmp_path: Path) -> None:
    """A quiet subscription and a call without a deadline to an mcpd that
    answers nothing any more (stopped here; a deadlock, or a host or
    network path gone without closing the connection, look the same to
    the client) end with Unavailable once keepalive pings go unanswered:
    the subscription gives up after its reconnect_timeout, as it does when
    mcpd is gone, instead of waiting for ever."""
    import threading

    d, metrics = _daemon_to_freeze(mcpd_bin, tmp_path)
    try:
        with Client(d.target, keepalive=5) as c:  # no timeout: the call below has no deadline
            # Nothing happens to the tools of demo: no event comes.
            sub = c.subscribe(servers=["demo"], kinds=["tools_changed"], reconnect_timeout=1)
            _subscription_open(metrics)
            outcomes: Dict[str, object] = {}

            def outcome(name: str, fn: Callable[[], object]) -> None:
                try:
                    outcomes[name] = fn()
                except Exception as e:
                    outcomes[name] = e

            with d.frozen():
                threads = [
                    threading.Thread(target=outcome, args=("subscription", lambda: list(sub)), daemon=True),
                    threading.Thread(target=outcome, args=("call", lambda: c.get_server("demo")), daemon=True),
                ]
                for th in threads:
                    th.start()
                deadline = time.monotonic() + FROZEN_GUARD
                for th in threads:
                    th.join(max(0.0, deadline - time.monotonic()))
                waiting = sorted({"subscription", "call"} - set(outcomes))
            sub.close()
            assert not waiting, f"{waiting} still waited on the frozen mcpd after {FROZEN_GUARD}s"
            for name, got in sorted(outcomes.items()):
                assert isinstance(got, mcpd_grpc.Unavailable), f"{name}: got {got!r}, want Unavailable"
    finally:
        d.stop()


def test_keepalive_finds_a_frozen_daemon_async(mcpd_bin: str, tmp_path: Path) -> None:
    d, metrics = _daemon_to_freeze(mcpd_bin, tmp_path)

    async def body() -> None:
        async with AsyncClient(d.target, keepalive=5) as c:
            sub = c.subscribe(servers=["demo"], kinds=["tools_changed"], reconnect_timeout=1)
            await asyncio.to_thread(_subscription_open, metrics)

            async def drain() -> List[mcpd_grpc.Event]:
                return [ev async for ev in sub]

            with d.frozen():
                try:
                    got = await asyncio.wait_for(asyncio.gather(drain(), c.get_server("demo"), return_exceptions=True), FROZEN_GUARD)
                except asyncio.TimeoutError:
                    pytest.fail(f"still waiting on the frozen mcpd after {FROZEN_GUARD}s")
            for name, outcome in zip(("subscription", "call"), got):
                assert isinstance(outcome, mcpd_grpc.Unavailable), f"{name}: got {outcome!r}, want Unavailable"

    try:
        run_async(body(), FROZEN_GUARD + RPC_TIMEOUT)
    finally:
        d.stop()
