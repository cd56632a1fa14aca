"""Sampling, elicitation and roots requests from server-everything,
answered by Python handlers over HandleServerRequests."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

from conftest import POLL_TIMEOUT, RPC_TIMEOUT, Daemon, FakeMcpd, poll, run_async
from mcpd_grpc import (
    ApprovalRequest,
    AsyncClient,
    Client,
    ElicitationRequest,
    ElicitationResult,
    MCPDError,
    PermissionDenied,
    Root,
    RootsRequest,
    SamplingRequest,
    SamplingResult,
    ServerRequestError,
)


def _handler_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "mcpd-server-requests" or t.name.startswith("mcpd-handler")]


def test_sync_handlers(daemon: Daemon, everything: str) -> None:
    seen: List[object] = []
    with daemon.client() as c:

        @c.on_sampling
        def sample(req: SamplingRequest) -> SamplingResult:
            seen.append(req)
            return SamplingResult("answer to: " + req.text, model="py-model")

        @c.on_elicitation()  # the decorator works with and without ()
        def elicit(req: ElicitationRequest) -> dict:
            seen.append(req)
            return {"name": "Ada Lovelace"}

        assert c.handlers_ready(RPC_TIMEOUT), "mcpd did not confirm the handlers"
        r = c.call_tool(f"mcp__{everything}__trigger-sampling-request", {"prompt": "a haiku", "maxTokens": 20})
        assert "py-model" in r.text and "answer to: Resource trigger-sampling-request context: a haiku" in r.text, r.text
        sampling = seen[0]
        assert isinstance(sampling, SamplingRequest) and sampling.server == everything
        assert sampling.max_tokens == 20 and sampling.messages[0].role == "user" and sampling.deadline is not None
        assert sampling.params.get("maxTokens") == 20

        r = c.call_tool(f"mcp__{everything}__trigger-elicitation-request")
        assert "Ada Lovelace" in r.text and '"action": "accept"' in r.text, r.text
        elicitation = seen[1]
        assert isinstance(elicitation, ElicitationRequest) and elicitation.mode == "form"
        assert "name" in elicitation.requested_schema["properties"]

        # Registering roots later adds the kind on the open stream.
        roots_asked = threading.Event()

        @c.on_roots
        def roots(req: RootsRequest) -> list:
            roots_asked.set()
            return [Root("file:///from/sync-handler", "handler"), "file:///second"]

        assert c.handlers_ready(RPC_TIMEOUT)
        # A change of mcpd's own roots makes the server ask again; the
        # handler answers instead of mcpd.
        c.set_roots(["file:///ignored/sync"], server=everything)
        text = poll(
            "the handler's roots",
            lambda: (lambda t: "from/sync-handler" in t and t)(c.call_tool(f"mcp__{everything}__get-roots-list").text),
        )
        assert "file:///second" in str(text) and roots_asked.is_set()
        assert _handler_threads(), "want the handler thread while the client is open"
    # close() stops the stream and its thread.
    assert not [t for t in _handler_threads() if t.name == "mcpd-server-requests" and t.is_alive()]


def test_a_new_kind_keeps_the_replies_under_way(daemon: Daemon, everything: str) -> None:
    """A handler registered while another one runs does not take the
    running one's stream away: its reply still reaches the server."""
    with daemon.client() as c:
        asked, release = threading.Event(), threading.Event()

        @c.on_sampling
        def sample(req: SamplingRequest) -> SamplingResult:
            asked.set()
            release.wait(RPC_TIMEOUT)
            return SamplingResult("late answer", model="py-model")

        assert c.handlers_ready(RPC_TIMEOUT)
        result: List[str] = []
        call = threading.Thread(target=lambda: result.append(c.call_tool(f"mcp__{everything}__trigger-sampling-request", {"prompt": "p", "maxTokens": 5}).text))
        call.start()
        assert asked.wait(RPC_TIMEOUT), "the sampling handler was not asked"
        c.on_roots(lambda req: ["file:///while-sampling"])
        assert c.handlers_ready(RPC_TIMEOUT), "mcpd did not confirm the new kind"
        release.set()
        call.join(RPC_TIMEOUT)
        assert result and "late answer" in result[0], result


def test_async_a_new_kind_keeps_the_replies_under_way(daemon: Daemon, everything: str) -> None:
    async def body() -> None:
        async with AsyncClient(daemon.target, timeout=RPC_TIMEOUT) as c:
            asked, release = asyncio.Event(), asyncio.Event()

            @c.on_sampling
            async def sample(req: SamplingRequest) -> SamplingResult:
                asked.set()
                await release.wait()
                return SamplingResult("late async answer", model="py-model")

            assert await c.handlers_ready(RPC_TIMEOUT)
            call = asyncio.ensure_future(c.call_tool(f"mcp__{everything}__trigger-sampling-request", {"prompt": "p", "maxTokens": 5}))
            await asyncio.wait_for(asked.wait(), RPC_TIMEOUT)
            c.on_roots(lambda req: ["file:///while-sampling"])
            assert await c.handlers_ready(RPC_TIMEOUT), "mcpd did not confirm the new kind"
            release.set()
            assert "late async answer" in (await call).text

    run_async(body())


def test_refusals_and_failing_handlers(daemon: Daemon, everything: str) -> None:
    with daemon.client() as c:

        def refuse(req: SamplingRequest) -> str:
            raise ServerRequestError("no model here", code=-1)

        c.on_sampling(refuse)

        @c.on_elicitation
        def decline(req: ElicitationRequest) -> None:
            return None  # decline

        assert c.handlers_ready(RPC_TIMEOUT)
        r = c.call_tool(f"mcp__{everything}__trigger-elicitation-request")
        assert "decline" in r.text, r.text
        # server-everything reports the refusal, with its code, as a tool error.
        r = c.call_tool(f"mcp__{everything}__trigger-sampling-request", {"prompt": "x", "maxTokens": 5})
        assert r.is_error and r.text == "MCP error -1: no model here", r

        c.on_sampling(lambda req: 1 / 0)  # replacing a handler keeps the stream
        r = c.call_tool(f"mcp__{everything}__trigger-sampling-request", {"prompt": "x", "maxTokens": 5})
        assert r.is_error and "MCP error -32603" in r.text and "ZeroDivisionError" in r.text, r


def test_async_handlers(daemon: Daemon, everything: str) -> None:
    async def body() -> None:
        async with AsyncClient(daemon.target, timeout=RPC_TIMEOUT) as c:

            @c.on_sampling
            async def sample(req: SamplingRequest) -> SamplingResult:
                await asyncio.sleep(0)
                return SamplingResult("async answer to: " + req.text, model="aio-model")

            assert await c.handlers_ready(RPC_TIMEOUT)
            r = await c.call_tool(f"mcp__{everything}__trigger-sampling-request", {"prompt": "p", "maxTokens": 9})
            assert "aio-model" in r.text and "async answer to: Resource trigger-sampling-request context: p" in r.text, r.text

            # More kinds on the open stream: it is opened again with all three.
            @c.on_elicitation
            def elicit(req: ElicitationRequest) -> ElicitationResult:  # a plain function runs in a thread
                return ElicitationResult("accept", {"name": "Grace Hopper"})

            @c.on_roots
            async def roots(req: RootsRequest) -> list:
                return [("file:///from/async-handler", "async")]

            assert await c.handlers_ready(RPC_TIMEOUT)
            r = await c.call_tool(f"mcp__{everything}__trigger-elicitation-request")
            assert "Grace Hopper" in r.text, r.text
            await c.set_roots(["file:///ignored/async"], server=everything)
            for _ in range(200):
                r = await c.call_tool(f"mcp__{everything}__get-roots-list")
                if "from/async-handler" in r.text:
                    break
                await asyncio.sleep(0.05)
            assert "from/async-handler" in r.text, r.text
            worker = c._worker
            assert worker is not None
        assert worker._task.done(), "close() must stop the handler task"

    run_async(body())


def test_handlers_registered_while_the_loop_is_not_running(daemon: Daemon, everything: str) -> None:
    # on_sampling from plain code between two runs of the loop: the handler
    # task starts when the client is entered.
    loop = asyncio.new_event_loop()
    try:

        async def make() -> AsyncClient:
            return AsyncClient(daemon.target, timeout=RPC_TIMEOUT)

        c = loop.run_until_complete(make())
        c.on_sampling(lambda req: "early answer")
        assert c._worker is None, "no loop runs: the task must wait"

        async def body() -> str:
            async with c:
                assert c._worker is not None
                assert await c.handlers_ready(RPC_TIMEOUT)
                r = await c.call_tool(f"mcp__{everything}__trigger-sampling-request", {"prompt": "q", "maxTokens": 3})
                return r.text

        text = loop.run_until_complete(asyncio.wait_for(body(), 60))
        assert "early answer" in text, text
    finally:
        loop.close()


class _OlderMcpd(FakeMcpd):
    """An mcpd before registrations could be sent again on the stream: it
    refuses a second register with INVALID_ARGUMENT, as those did."""

    def __init__(self, path: str) -> None:
        import grpc

        from mcpd_grpc.mcpd.v1 import mcpd_pb2 as pb
        from mcpd_grpc.mcpd.v1 import mcpd_pb2_grpc

        self.registrations: List[List[int]] = []
        older = self

        class Hub(mcpd_pb2_grpc.MCPHubServicer):  # type: ignore[misc]
            def HandleServerRequests(self, requests: object, context: grpc.ServicerContext) -> object:
                first = True
                for msg in requests:  # type: ignore[attr-defined]
                    if msg.WhichOneof("message") != "register":
                        continue
                    if not first:
                        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "after register, only reply messages are accepted")
                    first = False
                    older.registrations.append(list(msg.register.kinds))
                    yield pb.HandleServerRequestsResponse(registered=msg.register)

        super().__init__(Hub(), path)


def test_an_older_mcpd_gets_a_new_stream_for_a_new_kind(tmp_path: Path) -> None:
    """Against an mcpd that refuses a registration sent again, both clients
    open a new stream with every kind, as they did before."""
    older = _OlderMcpd(str(tmp_path / "older.sock"))
    try:
        with Client(f"unix://{tmp_path / 'older.sock'}", timeout=RPC_TIMEOUT) as c:
            c.on_sampling(lambda req: "x")
            assert c.handlers_ready(RPC_TIMEOUT)
            c.on_roots(lambda req: [])
            assert c.handlers_ready(RPC_TIMEOUT), f"no stream with the new kind: {older.registrations}"

        async def body() -> None:
            async with AsyncClient(f"unix://{tmp_path / 'older.sock'}", timeout=RPC_TIMEOUT) as c:
                c.on_sampling(lambda req: "x")
                assert await c.handlers_ready(RPC_TIMEOUT)
                c.on_roots(lambda req: [])
                assert await c.handlers_ready(RPC_TIMEOUT), f"no stream with the new kind: {older.registrations}"

        run_async(body())
    finally:
        older.stop()
    sampling_roots = sorted([1, 3])
    assert [sorted(k) for k in older.registrations] == [[1], sampling_roots, [1], sampling_roots]


def _refusal_logged(caplog: pytest.LogCaptureFixture) -> str:
    for r in caplog.records:
        if r.name == "mcpd_grpc" and "refused the reply" in r.getMessage():
            return r.getMessage()
    return ""


def test_a_refused_reply_is_logged(daemon: Daemon, everything: str, caplog: pytest.LogCaptureFixture) -> None:
    """mcpd refuses a roots reply with a root that is not a file:// URI,
    and says so on the stream: both clients log it, naming the request and
    what was wrong, and go on answering."""
    caplog.set_level(logging.WARNING, logger="mcpd_grpc")
    with daemon.client() as c:
        c.on_roots(lambda req: ["https://example.com/not-a-root"])
        assert c.handlers_ready(RPC_TIMEOUT)
        # A change of mcpd's own roots makes the server ask the handler.
        c.set_roots(["file:///ignored/refused"], server=everything)
        logged = poll("the refusal in the log", lambda: _refusal_logged(caplog))
        assert re.search(r"request \S+", logged) and "roots[0] is not a file:// URI" in logged, logged
        assert "example.com" not in logged, logged
        r = c.call_tool(f"mcp__{everything}__echo", {"message": "still here"})
        assert "still here" in r.text
    caplog.clear()

    async def body() -> None:
        async with AsyncClient(daemon.target, timeout=RPC_TIMEOUT) as c:
            c.on_roots(lambda req: ["https://example.com/not-a-root"])
            assert await c.handlers_ready(RPC_TIMEOUT)
            await c.set_roots(["file:///ignored/refused-async"], server=everything)
            for _ in range(400):
                if _refusal_logged(caplog):
                    break
                await asyncio.sleep(0.05)
            logged = _refusal_logged(caplog)
            assert "roots[0] is not a file:// URI" in logged, [r.getMessage() for r in caplog.records]

    run_async(body())


def test_a_sync_client_refuses_an_async_handler(tmp_path: Path) -> None:
    """A Client runs handlers on threads: an async def would return a
    coroutine nobody awaits, so it is refused when registered."""

    async def sample(req: SamplingRequest) -> str:
        return "never"

    with Client(f"unix://{tmp_path / 'nobody.sock'}", timeout=RPC_TIMEOUT) as c:
        for register in (c.on_sampling, c.on_elicitation, c.on_roots, c.on_authorization, c.on_approval):
            with pytest.raises(TypeError, match="async def.*AsyncClient"):
                register(sample)  # type: ignore[arg-type]
        assert c._worker is None, "a refused handler must not open the stream"


@pytest.fixture(scope="module")
def asking(mcpd_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """mcpd whose ask rule holds each call of mcp__demo__echo for an
    approval handler."""
    d = Daemon(mcpd_bin, tmp_path_factory.mktemp("asking"), "asking", ["--ask-tool", "mcp__demo__echo"]).start()
    try:
        with d.client() as c:
            poll("demo to be ready", lambda: c.get_server("demo").ready)
        yield d
    finally:
        d.stop()


def _late_replies(d: Daemon) -> List[str]:
    return [line for line in d.log.read_text(errors="replace").splitlines() if "server request reply ignored" in line]


@pytest.mark.parametrize("ending", ["answers", "raises"])
def test_a_cancel_reaches_the_sync_handler(asking: Daemon, ending: str, caplog: pytest.LogCaptureFixture) -> None:
    """When the call an approval belongs to ends, mcpd cancels the request:
    the handler sees it on its request, and its answer after that is not
    sent (mcpd would log it as ignored), nor its failure logged."""
    caplog.set_level(logging.ERROR, logger="mcpd_grpc")
    with asking.client() as c:
        seen: List[ApprovalRequest] = []
        woke: List[bool] = []
        asked, answered = threading.Event(), threading.Event()

        @c.on_approval
        def approve(req: ApprovalRequest) -> bool:
            if req.arguments.get("message") != "slow":
                return True
            seen.append(req)
            asked.set()
            woke.append(req.wait_cancelled(RPC_TIMEOUT))
            answered.set()
            if ending == "raises":
                raise RuntimeError("the model call stopped")
            return True

        assert c.handlers_ready(RPC_TIMEOUT)
        before = len(_late_replies(asking))
        stream = c.call_tool_stream("mcp__demo__echo", {"message": "slow"})
        assert asked.wait(RPC_TIMEOUT), "the handler was not asked"
        stream.cancel()
        assert answered.wait(RPC_TIMEOUT), "the handler did not return"
        assert woke == [True] and seen[0].cancelled, "the handler did not learn of the cancel"
        assert seen[0].cancel_reason, "a cancel names its reason"
        # The next reply goes out after the late one would have: mcpd has
        # read both once the call returns.
        assert c.call_tool("mcp__demo__echo", {"message": "next"}).text == "next"
        assert len(_late_replies(asking)) == before, _late_replies(asking)
    assert not [r for r in caplog.records if "handler failed" in r.getMessage()], caplog.records


def test_a_cancel_cancels_the_async_handler(asking: Daemon) -> None:
    async def body() -> None:
        async with AsyncClient(asking.target, timeout=RPC_TIMEOUT) as c:
            asked = asyncio.Event()
            outcome: List[str] = []

            @c.on_approval
            async def approve(req: ApprovalRequest) -> bool:
                if req.arguments.get("message") != "slow":
                    return True
                asked.set()
                try:
                    await asyncio.sleep(RPC_TIMEOUT)
                except asyncio.CancelledError:
                    outcome.append("cancelled: " + req.cancel_reason)
                    return True  # caught and answered anyway: not sent
                outcome.append("slept")
                return False

            assert await c.handlers_ready(RPC_TIMEOUT)
            before = len(_late_replies(asking))
            call = asyncio.ensure_future(c.call_tool("mcp__demo__echo", {"message": "slow"}))
            await asyncio.wait_for(asked.wait(), RPC_TIMEOUT)
            call.cancel()
            for _ in range(int(POLL_TIMEOUT / 0.05)):
                if outcome:
                    break
                await asyncio.sleep(0.05)
            assert outcome and outcome[0].startswith("cancelled: ") and len(outcome[0]) > len("cancelled: "), outcome
            assert (await c.call_tool("mcp__demo__echo", {"message": "next"})).text == "next"
            assert len(_late_replies(asking)) == before, _late_replies(asking)

    run_async(body())


def test_close_cancels_the_handlers_still_running(asking: Daemon) -> None:
    c = asking.client()
    asked = threading.Event()
    reasons: List[str] = []

    @c.on_approval
    def approve(req: ApprovalRequest) -> bool:
        asked.set()
        if req.wait_cancelled(RPC_TIMEOUT):
            reasons.append(req.cancel_reason)
        return True

    assert c.handlers_ready(RPC_TIMEOUT)
    call = threading.Thread(target=lambda: pytest.raises(MCPDError, c.call_tool, "mcp__demo__echo", {"message": "x"}))
    call.start()
    try:
        assert asked.wait(RPC_TIMEOUT), "the handler was not asked"
        c.close()
        poll("the handler to see the cancel", lambda: reasons)
        assert reasons == ["the client closed"], reasons
    finally:
        c.close()
        call.join(RPC_TIMEOUT)


#: More requests at once than a small pool (or the loop's default
#: executor, at most 32 threads) would run, fewer than the 64 mcpd hands one
#: agent.
_SIDE_BY_SIDE = 40


def _waits_for_all() -> Callable[[ApprovalRequest], bool]:
    """An approval handler that approves a call of "together" only once
    all _SIDE_BY_SIDE of them have come."""
    everyone_asked = threading.Barrier(_SIDE_BY_SIDE, timeout=RPC_TIMEOUT)

    def approve(req: ApprovalRequest) -> bool:
        if req.arguments.get("message") != "together":
            return True
        try:
            everyone_asked.wait()
        except threading.BrokenBarrierError:
            return False
        return True

    return approve


def test_sync_handlers_run_side_by_side(asking: Daemon) -> None:
    """Handlers that wait (on a person, on a model) do not hold up the
    requests behind them: every request mcpd hands the agent (up to 64)
    gets a thread."""
    calls = _SIDE_BY_SIDE
    with asking.client() as c:
        c.on_approval(_waits_for_all())
        assert c.handlers_ready(RPC_TIMEOUT)
        results: List[str] = []
        errors: List[BaseException] = []

        def call() -> None:
            try:
                results.append(c.call_tool("mcp__demo__echo", {"message": "together"}).text)
            except MCPDError as e:
                errors.append(e)

        threads = [threading.Thread(target=call) for _ in range(calls)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(2 * RPC_TIMEOUT)
        assert not errors and results == ["together"] * calls, (results, errors)


def test_async_client_runs_sync_handlers_side_by_side(asking: Daemon) -> None:
    async def body() -> None:
        async with AsyncClient(asking.target, timeout=RPC_TIMEOUT) as c:
            c.on_approval(_waits_for_all())
            assert await c.handlers_ready(RPC_TIMEOUT)
            calls = [c.call_tool("mcp__demo__echo", {"message": "together"}) for _ in range(_SIDE_BY_SIDE)]
            results = await asyncio.gather(*calls, return_exceptions=True)
            assert [getattr(r, "text", r) for r in results] == ["together"] * _SIDE_BY_SIDE, results

    run_async(body())


def test_a_sync_client_refuses_an_awaitable_answer(asking: Daemon, caplog: pytest.LogCaptureFixture) -> None:
    """A plain function that returns a coroutine is an async handler the
    registration could not see: the call is denied, and the log says why
    (rather than a type error about a coroutine and a "never awaited"
    warning)."""
    caplog.set_level(logging.ERROR, logger="mcpd_grpc")

    async def later(req: ApprovalRequest) -> bool:
        return True

    with asking.client() as c:
        c.on_approval(lambda req: later(req))  # type: ignore[arg-type,return-value]
        assert c.handlers_ready(RPC_TIMEOUT)
        with pytest.raises(PermissionDenied, match="approval handler failed: TypeError"):
            c.call_tool("mcp__demo__echo", {"message": "x"})
    logged = [r for r in caplog.records if r.name == "mcpd_grpc" and "approval handler failed" in r.getMessage()]
    assert logged and logged[0].exc_info is not None, caplog.records
    assert "returned an awaitable" in str(logged[0].exc_info[1]) and "AsyncClient" in str(logged[0].exc_info[1])
