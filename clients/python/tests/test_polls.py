"""Polls and tool search against the real daemon's demo server."""

from __future__ import annotations

import pytest

from conftest import RPC_TIMEOUT, Daemon, run_async
from mcpd_grpc import AsyncClient, EventKind, InvalidArgument, NotFound


def test_poll_baseline_then_changes(daemon: Daemon) -> None:
    with daemon.client() as c:
        p = c.start_poll("demo", resource_uri="demo://clock", interval=1)
        try:
            assert p.id and p.server == "demo" and p.resource_uri == "demo://clock" and p.interval == 1.0
            assert p.id in [x.id for x in c.list_polls()]
            with c.subscribe(poll_ids=[p.id], after_sequence=0, kinds=[EventKind.POLL_RESULT]) as sub:
                events = []
                for ev in sub:
                    assert ev.kind is EventKind.POLL_RESULT and ev.poll is not None, f"got {ev}"
                    events.append(ev.poll)
                    if len(events) == 2:
                        break
            first, second = events
            assert first.poll_id == p.id and first.baseline and first.contents[0].text
            assert not second.baseline and second.contents[0].text != first.contents[0].text
        finally:
            c.stop_poll(p.id)
        assert p.id not in [x.id for x in c.list_polls()]
        with pytest.raises(NotFound):
            c.stop_poll(p.id)


def test_tool_poll_and_interval_floor(daemon: Daemon) -> None:
    with daemon.client() as c:
        with pytest.raises(InvalidArgument):
            c.start_poll("demo", resource_uri="demo://clock", interval=0.5)
        with pytest.raises(ValueError):
            c.start_poll("demo")
        p = c.start_poll("demo", tool="echo", arguments={"message": "hi"}, interval=1)
        try:
            assert p.tool == "echo" and p.arguments == {"message": "hi"}
            with c.subscribe(poll_ids=[p.id], after_sequence=0, kinds=[EventKind.POLL_RESULT]) as sub:
                ev = next(iter(sub))
            assert ev.poll is not None and ev.poll.baseline and ev.poll.tool == "mcp__demo__echo"
            assert ev.poll.tool_result is not None and ev.poll.tool_result.text == "hi"
        finally:
            c.stop_poll(p.id)


def test_search_tools(daemon: Daemon) -> None:
    with daemon.client() as c:
        matches = c.search_tools("weather for a city", limit=2)
        assert matches and matches[0].tool.name == "mcp__demo__weather" and matches[0].score > 0
        assert len(matches) <= 2


def test_async_polls_and_search(daemon: Daemon) -> None:
    async def go() -> None:
        async with AsyncClient(daemon.target, timeout=RPC_TIMEOUT) as c:
            p = await c.start_poll("demo", resource_uri="demo://readme", interval=1)
            try:
                assert p.id in [x.id for x in await c.list_polls()]
            finally:
                await c.stop_poll(p.id)
            matches = await c.search_tools("add two numbers", servers=["demo"])
            assert matches[0].tool.name == "mcp__demo__add"

    run_async(go())
