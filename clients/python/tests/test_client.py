"""The sync Client, on each wire (gRPC and HTTP), against a real mcpd
serving the demo server (and server-everything for what the demo server
lacks)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import mcpd_grpc
from conftest import CLOCK, WIRES, Daemon, FakeMcpd, poll, run_async, until_live
from mcpd_grpc import (
    AsyncClient,
    AudioContent,
    Client,
    ConfigScope,
    DeadlineExceeded,
    EmbeddedResource,
    EventKind,
    ImageContent,
    LogMessage,
    Progress,
    ResourceLink,
    Root,
    ServerConfig,
    ServerState,
    ToolResult,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def client(wire_client: Client) -> Client:
    """Every test here runs on both wires."""
    return wire_client


def test_servers(client: Client) -> None:
    servers = {s.name: s for s in client.servers()}
    demo = servers.get("demo")
    assert demo is not None, f"got servers {sorted(servers)}, want demo"
    assert demo.state is ServerState.READY and demo.ready
    assert demo.transport == "stdio" and demo.tool_count == 8 and demo.pid > 0
    assert demo.server_info is not None and demo.server_info.name == "mcpd-demo"
    assert "tools" in demo.capabilities
    assert client.get_server("demo").name == "demo"


def test_connect_restart_disconnect(client: Client, mcpd_bin: str) -> None:
    cfg = ServerConfig.stdio("demo2", mcpd_bin, ["demo-server"], env={"DEMO_SECRET": "hidden"}, tools_allow=["echo", "add"])
    s = client.connect_server(cfg)
    try:
        assert s.ready, f"got {s.state} {s.last_error}"
        assert s.env_names == ("DEMO_SECRET",) and "hidden" not in repr(s)
        assert s.tool_count == 2, f"got tool_count {s.tool_count}, want 2 (tools_allow)"
        assert {t.tool_name for t in client.list_tools("demo2")} == {"echo", "add"}
        with pytest.raises(mcpd_grpc.AlreadyExists):
            client.connect_server(cfg)
        s = client.connect_server(cfg, replace=True)
        assert s.ready
        pid = s.pid
        r = client.restart_server("demo2")
        assert r.ready and r.pid != pid, f"got pid {r.pid}, want a new process (old {pid})"
    finally:
        client.disconnect_server("demo2")
    with pytest.raises(mcpd_grpc.NotFound):
        client.get_server("demo2")


def test_set_server_enabled(client: Client, mcpd_bin: str) -> None:
    s = client.connect_server(ServerConfig.stdio("toggled", mcpd_bin, ["demo-server"]))
    try:
        assert s.ready and s.scope is ConfigScope.API, f"got {s.state} {s.scope}"
        off = client.set_server_enabled("toggled", False)
        assert off.state is ServerState.DISABLED and off.pid == 0 and off.command == mcpd_bin
        with pytest.raises(mcpd_grpc.FailedPrecondition):
            client.call_tool("mcp__toggled__echo", {"message": "x"})
        on = client.set_server_enabled("toggled", True)
        assert on.ready, f"got {on.state} {on.last_error}"
    finally:
        client.disconnect_server("toggled")


def test_list_tools_follows_pages(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpd_grpc.mcpd.v1 import mcpd_pb2 as pb

    # Pages of 3 make the client follow next_page_token twice for 8 tools.
    orig = pb.ListToolsRequest
    monkeypatch.setattr(pb, "ListToolsRequest", lambda **kw: orig(page_size=3, **kw))
    tools = client.list_tools("demo")
    names = [t.name for t in tools]
    assert names == sorted(names) and len(names) == 8, f"got {names}"
    add = next(t for t in tools if t.tool_name == "add")
    assert add.server == "demo" and add.name == "mcp__demo__add"
    assert add.input_schema["properties"]["a"]["type"] == "number"
    weather = next(t for t in tools if t.tool_name == "weather")
    assert weather.output_schema is not None and weather.output_schema["type"] == "object"


def test_a_listing_has_one_deadline(tmp_path: Path) -> None:
    """The pages of one listing share the client's timeout: four pages of
    0.3 s each do not fit in 0.7 s, on either client."""
    import grpc

    from mcpd_grpc.mcpd.v1 import mcpd_pb2 as pb
    from mcpd_grpc.mcpd.v1 import mcpd_pb2_grpc

    class Hub(mcpd_pb2_grpc.MCPHubServicer):  # type: ignore[misc]
        def ListTools(self, request: pb.ListToolsRequest, context: grpc.ServicerContext) -> pb.ListToolsResponse:
            time.sleep(0.3)
            page = int(request.page_token or "0")
            return pb.ListToolsResponse(tools=[pb.Tool(name=f"mcp__s__t{page}")], next_page_token=str(page + 1) if page < 3 else "")

    fake = FakeMcpd(Hub(), str(tmp_path / "fake.sock"))
    try:
        with Client(fake.target, timeout=10) as c:
            assert len(c.list_tools()) == 4
        with Client(fake.target, timeout=0.7) as c, pytest.raises(DeadlineExceeded):
            c.list_tools()

        async def listing() -> None:
            async with AsyncClient(fake.target, timeout=0.7) as c:
                await c.list_tools()

        with pytest.raises(DeadlineExceeded):
            run_async(listing())
    finally:
        fake.stop()


@pytest.mark.parametrize(
    "tool, args, check",
    [
        ("echo", {"message": "héllo"}, lambda r: r.text == "héllo"),
        ("add", {"a": 2, "b": 3}, lambda r: r.text == "5" and r.structured == {"sum": 5}),
        ("add", '{"a": 1.5, "b": 1}', lambda r: r.structured == {"sum": 2.5}),  # a model's JSON string
        ("weather", {"city": "Lisbon"}, lambda r: r.structured["city"] == "Lisbon" and isinstance(r.structured["temperature_c"], int)),
        ("image", None, lambda r: isinstance(r.content[0], ImageContent) and r.content[0].data.startswith(PNG_MAGIC) and r.content[0].mime_type == "image/png"),
        ("audio", None, lambda r: isinstance(r.content[0], AudioContent) and r.content[0].data[:4] == b"RIFF"),
        (
            "resource_link",
            None,
            lambda r: (
                isinstance(r.content[0], ResourceLink)
                and r.content[0].uri == "demo://clock"
                and isinstance(r.content[1], EmbeddedResource)
                and r.content[1].text.startswith("# mcpd demo server")
            ),
        ),
        ("fail", None, lambda r: r.is_error and "fails" in r.text),
    ],
)
def test_call_tool(client: Client, tool: str, args: object, check: object) -> None:
    r = client.call_tool(f"mcp__demo__{tool}", args)
    assert isinstance(r, ToolResult)
    assert check(r), f"{tool}: got {r}"  # type: ignore[operator]


def test_call_tool_stream(client: Client) -> None:
    stream = client.call_tool_stream("mcp__demo__slow", {"steps": 3, "delay_ms": 10})
    items = list(stream)
    progress = [i for i in items if isinstance(i, Progress)]
    assert [p.progress for p in progress] == [1, 2, 3], f"got {items}"
    assert all(p.total == 3 for p in progress)
    assert isinstance(items[-1], ToolResult) and items[-1] is stream.result
    assert "3 steps" in stream.result.text


def test_call_tool_stream_cancel(client: Client) -> None:
    with client.call_tool_stream("mcp__demo__slow", {"steps": 100, "delay_ms": 50}) as stream:
        first = next(stream)
        assert isinstance(first, Progress)
    with pytest.raises(mcpd_grpc.Cancelled):
        next(stream)


@pytest.mark.parametrize("wire", WIRES)
def test_close_cancels_open_streams(daemon: Daemon, wire: str) -> None:
    c = daemon.client(wire)
    stream = c.call_tool_stream("mcp__demo__slow", {"steps": 100, "delay_ms": 50})
    assert isinstance(next(stream), Progress)
    c.close()
    with pytest.raises(mcpd_grpc.Cancelled):
        next(stream)


def test_resources(client: Client) -> None:
    uris = {r.uri for r in client.list_resources("demo")}
    assert {"demo://clock", "demo://readme", "demo://logo.png"} <= uris, f"got {uris}"
    templates = client.list_resource_templates("demo")
    assert [t.uri_template for t in templates] == ["demo://greeting/{name}"]
    readme = client.read_resource("demo", "demo://readme")
    assert readme.text.startswith("# mcpd demo server") and readme.contents[0].mime_type == "text/markdown"
    logo = client.read_resource("demo", "demo://logo.png")
    assert logo.blob is not None and logo.blob.startswith(PNG_MAGIC) and logo.text == ""
    greeting = client.read_resource("demo", "demo://greeting/Ada")
    assert greeting.text == "Hello, Ada!"


def test_prompts_and_completion(client: Client) -> None:
    prompts = client.list_prompts("demo")
    greet = next(p for p in prompts if p.name == "greet")
    assert [(a.name, a.required) for a in greet.arguments] == [("name", True), ("style", False)]
    p = client.get_prompt("demo", "greet", {"name": "Ada", "style": "pirate"})
    assert p.messages and p.messages[0].role == "user" and "Ada" in p.text, f"got {p}"
    c = client.complete("demo", "style", "pi", prompt="greet")
    assert c.values == ("pirate",), f"got {c}"
    c = client.complete("demo", "name", "", resource_template="demo://greeting/{name}")
    assert "Ada" in c.values and "Grace" in c.values, f"got {c}"
    with pytest.raises(ValueError):
        client.complete("demo", "style", "")


def test_set_log_level(client: Client) -> None:
    client.set_log_level("demo", "debug")
    client.set_log_level("demo", mcpd_grpc.LogLevel.INFO)
    with pytest.raises(ValueError):
        client.set_log_level("demo", "loudest")
    with pytest.raises(mcpd_grpc.NotFound):
        client.set_log_level("no-such-server", "info")


def test_set_roots_and_log_events(client: Client, everything: str) -> None:
    # SetRoots makes server-everything fetch the roots again and log them.
    client.set_log_level(everything, "debug")
    with client.subscribe(servers=[everything, "demo"], resources=[CLOCK], kinds=[EventKind.LOG, "resource_updated"]) as sub:
        until_live(sub)
        client.set_roots([Root("file:///srv/sync-project", "project")], server=everything)
        for ev in sub:
            if ev.kind is EventKind.LOG and "Roots updated" in str(ev.log.data):
                assert isinstance(ev.log, LogMessage) and ev.log.level == "info" and ev.server == everything
                break
    text = poll("get-roots-list to show the roots", lambda: (lambda t: "sync-project" in t and t)(client.call_tool(f"mcp__{everything}__get-roots-list").text))
    assert "file:///srv/sync-project" in str(text)


def test_everything_progress(client: Client, everything: str) -> None:
    items = list(client.call_tool_stream(f"mcp__{everything}__trigger-long-running-operation", {"duration": 0.2, "steps": 2}))
    assert [i.progress for i in items if isinstance(i, Progress)] == [1, 2], f"got {items}"
    assert "completed" in items[-1].text


def test_resource_updates(client: Client) -> None:
    # demo://clock ticks every second and notifies subscribers.
    with client.subscribe(resources=[("demo", "demo://clock")], kinds=["resource_updated"]) as sub:
        ev = next(sub)
        assert (ev.kind, ev.server, ev.uri) == (EventKind.RESOURCE_UPDATED, "demo", "demo://clock")
        assert ev.time is not None and ev.sequence > 0 and sub.last_sequence == ev.sequence
        ev2 = next(sub)
        assert ev2.sequence > ev.sequence


def test_events_resume_after_sequence(client: Client) -> None:
    # The server state changes of a restart, then the same read again with
    # after_sequence.
    with client.subscribe(servers=["demo"], resources=[CLOCK], kinds=["server_state", "resource_updated"]) as sub:
        until_live(sub)
        client.restart_server("demo")
        seen = []
        for ev in sub:
            if ev.kind is EventKind.SERVER_STATE:
                assert isinstance(ev.state, ServerState)
                seen.append(ev)
                if ev.state is ServerState.READY:
                    break
    with client.subscribe(servers=["demo"], kinds=["server_state"], after_sequence=seen[0].sequence - 1) as again:
        replay = [next(again) for _ in seen]
    assert [(e.sequence, e.state) for e in replay] == [(e.sequence, e.state) for e in seen]


def test_subscribe_closes_from_another_thread(client: Client) -> None:
    import threading

    sub = client.subscribe(servers=["nobody"])
    timer = threading.Timer(0.2, sub.close)
    timer.start()
    try:
        assert list(sub) == []
    finally:
        timer.cancel()


def test_tools_for_openai_and_anthropic(client: Client) -> None:
    openai = client.tools_for_openai("demo")
    names = [t["function"]["name"] for t in openai]
    assert "mcp__demo__add" in names and all(t["type"] == "function" for t in openai)
    add = next(t for t in openai if t["function"]["name"] == "mcp__demo__add")
    assert add["function"]["parameters"]["required"] == ["a", "b"]
    anthropic = client.tools_for_anthropic("demo")
    assert {t["name"] for t in anthropic} == set(names)
    assert all("input_schema" in t for t in anthropic)
    # A model's tool call goes straight back in.
    call = {"name": "mcp__demo__add", "arguments": json.dumps({"a": 40, "b": 2})}
    assert client.call_tool(call["name"], call["arguments"]).structured == {"sum": 42}


def test_provider_safe_names_round_trip(client: Client, daemon: Daemon, mcpd_bin: str) -> None:
    # A 60-character server name makes every qualified name longer than 64.
    long_name = "a-very-long-server-name-" + "x" * 36
    assert len(long_name) == 60
    client.connect_server(ServerConfig.stdio(long_name, mcpd_bin, ["demo-server"]), replace=True)
    try:
        tools = client.tools_for_openai(long_name)
        names = [t["function"]["name"] for t in tools]
        assert len(names) == 8 and all(mcpd_grpc.is_provider_safe(n) for n in names), names
        assert not any(n.startswith(f"mcp__{long_name}__") for n in names), "want shortened names"
        echo = next(t["function"]["name"] for t in tools if "Returns the given message" in t["function"]["description"])
        assert client.call_tool(echo, {"message": "round trip"}).text == "round trip"
        # Another client, which never listed the tools, maps the name too.
        with daemon.client() as fresh:
            assert fresh.call_tool(echo, '{"message": "fresh"}').text == "fresh"
            anthropic = {t["name"] for t in fresh.tools_for_anthropic(long_name)}
            assert anthropic == set(names), "both formats use the same names"
    finally:
        client.disconnect_server(long_name)
