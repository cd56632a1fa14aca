"""Tests that need no daemon: names, error decoding, conversions."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Union

import grpc
import pytest
from google.protobuf import struct_pb2

import mcpd_grpc
from conftest import REPO
from mcpd_grpc import _common, errors
from mcpd_grpc import _convert as cv
from mcpd_grpc.mcpd.v1 import mcpd_pb2 as pb
from mcpd_grpc.names import provider_names, tool_definitions
from mcpd_grpc.types import ServerConfig, Tool, Transport

SAFE = re.compile(r"[a-zA-Z0-9_-]{1,64}")


#: Tool-name cases shared with the TypeScript client, so the two never
#: disagree on the name a model calls.
NAME_CASES = json.loads((REPO / "clients" / "testdata" / "tool-names.json").read_text(encoding="utf-8"))["cases"]
#: Error cases shared with the TypeScript client: class, reason and
#: retryable by code and ErrorInfo.
ERROR_CASES = json.loads((REPO / "clients" / "testdata" / "errors.json").read_text(encoding="utf-8"))["cases"]
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"


class TestProviderNames:
    @pytest.mark.parametrize("case", NAME_CASES, ids=[c["description"] for c in NAME_CASES])
    def test_shared_cases(self, case: dict) -> None:
        for order in (case["qualified"], list(reversed(case["qualified"]))):
            got = provider_names(order)
            assert got == case["want"], f"{case['description']}: got {got}, want {case['want']}"
            assert all(SAFE.fullmatch(n) for n in got.values()), got

    def test_long_names_are_cut_with_a_hash(self) -> None:
        q = "mcp__" + "s" * 60 + "__tool"
        got = provider_names([q])[q]
        digest = hashlib.sha256(q.encode()).hexdigest()[:8]
        assert len(got) == 64, f"got length {len(got)}, want 64"
        assert got.endswith("_" + digest), f"got {got!r}, want suffix _{digest}"
        assert SAFE.fullmatch(got)

    def test_collisions_get_distinct_names(self) -> None:
        qs = ["mcp__a__x.y", "mcp__a__x_y", "mcp__a__x/y"]
        got = provider_names(qs)
        assert got["mcp__a__x_y"] == "mcp__a__x_y", "a safe name must be kept"
        assert len(set(got.values())) == 3, f"got {got}, want 3 distinct names"
        assert all(SAFE.fullmatch(n) for n in got.values()), got

    def test_deterministic_whatever_the_order(self) -> None:
        qs = ["mcp__a__x.y", "mcp__a__x/y", "mcp__" + "b" * 64 + "__t", "mcp__a__ok"]
        assert provider_names(qs) == provider_names(list(reversed(qs)))

    def test_definitions_and_reverse_map(self) -> None:
        tools = [
            Tool(
                name="mcp__fs__read.file",
                server="fs",
                tool_name="read.file",
                description="Reads.",
                input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
            ),
            Tool(name="mcp__fs__noschema", server="fs", tool_name="noschema", title="No schema"),
        ]
        defs, back = tool_definitions(tools, "openai")
        assert defs[0] == {
            "type": "function",
            "function": {"name": "mcp__fs__read_file", "description": "Reads.", "parameters": tools[0].input_schema},
        }
        assert defs[1]["function"]["parameters"] == {"type": "object", "properties": {}}
        assert defs[1]["function"]["description"] == "No schema"
        assert back == {"mcp__fs__read_file": "mcp__fs__read.file", "mcp__fs__noschema": "mcp__fs__noschema"}
        resp, _ = tool_definitions(tools, "openai", api="responses")
        assert resp[0]["name"] == "mcp__fs__read_file" and resp[0]["type"] == "function" and "function" not in resp[0]
        anth, _ = tool_definitions(tools, "anthropic")
        assert anth[0] == {"name": "mcp__fs__read_file", "description": "Reads.", "input_schema": tools[0].input_schema}
        with pytest.raises(ValueError):
            tool_definitions(tools, "openai", api="nope")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _error_info_bin(reason: str, domain: str, metadata: dict) -> bytes:
    info = _field(1, reason.encode()) + _field(2, domain.encode())
    for k, v in metadata.items():
        info += _field(3, _field(1, k.encode()) + _field(2, v.encode()))
    return info


def _status_bin(type_url: str, reason: str, domain: str, metadata: dict) -> bytes:
    info = _error_info_bin(reason, domain, metadata)
    anyv = _field(1, type_url.encode()) + _field(2, info)
    return _varint(1 << 3 | 0) + _varint(5) + _field(2, b"msg") + _field(3, anyv)


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str, trailing: tuple = ()) -> None:
        self._code, self._details, self._trailing = code, details, trailing

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple:
        return self._trailing


class TestErrors:
    @pytest.mark.parametrize(
        "code, cls, retryable",
        [
            (grpc.StatusCode.NOT_FOUND, errors.NotFound, False),
            (grpc.StatusCode.INVALID_ARGUMENT, errors.InvalidArgument, False),
            (grpc.StatusCode.UNAVAILABLE, errors.Unavailable, True),
            (grpc.StatusCode.DEADLINE_EXCEEDED, errors.DeadlineExceeded, False),
            (grpc.StatusCode.PERMISSION_DENIED, errors.PermissionDenied, False),
            (grpc.StatusCode.UNAUTHENTICATED, errors.Unauthenticated, False),
            (grpc.StatusCode.ALREADY_EXISTS, errors.AlreadyExists, False),
            (grpc.StatusCode.UNKNOWN, errors.UnknownError, False),
            (grpc.StatusCode.FAILED_PRECONDITION, errors.FailedPrecondition, False),
        ],
    )
    def test_class_by_code(self, code: grpc.StatusCode, cls: type, retryable: bool) -> None:
        e = errors.from_rpc_error(FakeRpcError(code, "boom"))
        assert type(e) is cls, f"got {type(e).__name__}, want {cls.__name__}"
        assert isinstance(e, mcpd_grpc.MCPDError)
        assert e.code == code and e.message == "boom" and e.retryable is retryable
        assert e.server is None and e.jsonrpc_code is None

    @pytest.mark.parametrize("case", ERROR_CASES, ids=[c["description"] for c in ERROR_CASES])
    def test_shared_cases(self, case: dict) -> None:
        info = case["error_info"]
        trailing: tuple = ()
        if info is not None:
            trailing = (("grpc-status-details-bin", _status_bin(ERROR_INFO_TYPE, info["reason"], info["domain"], info["metadata"])),)
        grpc_err = errors.from_rpc_error(FakeRpcError(grpc.StatusCode[case["code"]], "boom", trailing))
        # The HTTP wire: a Connect error's code and the ErrorInfo among its details.
        connect_code = "canceled" if case["code"] == "CANCELLED" else case["code"].lower()
        info_bin = None if info is None else _error_info_bin(info["reason"], info["domain"], info["metadata"])
        connect_err = errors.from_connect_error(connect_code, "boom", info_bin)
        for wire, e in (("grpc", grpc_err), ("http", connect_err)):
            assert type(e).__name__ == case["class"], f"{wire}: got {type(e).__name__}, want {case['class']}"
            assert e.reason == ("" if info is None else info["reason"]), f"{wire}: got reason {e.reason!r}"
            assert e.retryable is case["retryable"], f"{wire}: got retryable {e.retryable}, want {case['retryable']}"

    def test_retryable_of_a_class(self) -> None:
        # On a class, retryable answers for an error of its code without an
        # ErrorInfo reason.
        assert errors.Unavailable.retryable is True
        assert errors.ResourceExhausted.retryable is False and errors.MCPDError.retryable is False
        assert errors.Unavailable("x").retryable is True and errors.ResourceExhausted("x").retryable is False

    @pytest.mark.parametrize(
        "details, cut_off",
        [
            # grpcio's own, of a connection that broke during the call.
            ("Stream removed (Socket closed)", True),
            ("Socket closed", True),
            ("keepalive watchdog timeout", True),
            # grpcio's own, of a connection never made: nothing reached mcpd.
            ("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to remote host: Connection refused", False),
            ("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:9: Ssl handshake failed: SSL_ERROR_SSL", False),
            ("DNS resolution failed for nosuchhost.invalid:5: C-ares status is not ARES_SUCCESS", False),
            ("errors resolving nosuchhost.invalid:5: [field:hostname lookup error:address lookup failed]", False),
            # An older mcpd's own, without an ErrorInfo: a server not ready, a shutdown.
            ('server "rec" is failed: connect: server process exited: exit status 1', False),
            ('tools/call: server "rec" lost the session; mcpd is reconnecting', False),
            ("mcpd is shutting down", False),
        ],
    )
    def test_tool_call_cut_off(self, details: str, cut_off: bool) -> None:
        """A tool call's UNAVAILABLE that mcpd did not send, over a
        connection that was made, may have run: CALL_MAY_HAVE_RUN, not
        retryable. Any other call's is as grpcio gave it."""
        e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, details), tool_call=True)
        assert type(e) is errors.Unavailable
        if cut_off:
            assert (e.reason, e.domain, e.metadata, e.retryable) == ("CALL_MAY_HAVE_RUN", "mcpd.v1", {}, False), repr(e)
            assert e.message == details + "; the call may have run: the connection to mcpd broke while it was in flight", e.message
        else:
            assert (e.reason, e.message, e.retryable) == ("", details, True), repr(e)
        plain = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, details))
        assert (plain.reason, plain.message, plain.retryable) == ("", details, True), repr(plain)

    def test_tool_call_status_from_mcpd_is_kept(self) -> None:
        # mcpd's own UNAVAILABLE has a reason, whatever its message says.
        for reason in (errors.REASON_SERVER_UNAVAILABLE, errors.REASON_SHUTTING_DOWN):
            info = _status_bin(ERROR_INFO_TYPE, reason, "mcpd.v1", {})
            e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "not now", (("grpc-status-details-bin", info),)), tool_call=True)
            assert (e.message, e.reason, e.retryable) == ("not now", reason, True), repr(e)
        # mcpd's own CALL_MAY_HAVE_RUN, with its metadata; other codes.
        info = _status_bin(ERROR_INFO_TYPE, "CALL_MAY_HAVE_RUN", "mcpd.v1", {"server": "rec", "tool": "wait", "retried": "false"})
        e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "lost", (("grpc-status-details-bin", info),)), tool_call=True)
        assert (e.message, e.reason, e.metadata["tool"]) == ("lost", "CALL_MAY_HAVE_RUN", "wait"), repr(e)
        for code in (grpc.StatusCode.CANCELLED, grpc.StatusCode.INTERNAL, grpc.StatusCode.DEADLINE_EXCEEDED):
            e = errors.from_rpc_error(FakeRpcError(code, "Socket closed"), tool_call=True)
            assert e.code == code and e.reason == "" and e.message == "Socket closed", repr(e)

    @pytest.mark.parametrize("code", ["canceled", "cancelled"])
    def test_connect_cancelled(self, code: str) -> None:
        # Connect (and mcpd's HTTP wire) spell it with one L.
        e = errors.from_connect_error(code, "gone", None)
        assert type(e) is errors.Cancelled and e.code == grpc.StatusCode.CANCELLED, type(e).__name__

    def test_error_info(self) -> None:
        details = _status_bin("type.googleapis.com/google.rpc.ErrorInfo", "UPSTREAM_JSONRPC_ERROR", "mcpd.v1", {"server": "ev", "jsonrpc_code": "-32042"})
        e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.FAILED_PRECONDITION, "x", (("grpc-status-details-bin", details),)))
        assert (e.server, e.jsonrpc_code, e.reason, e.domain) == ("ev", -32042, "UPSTREAM_JSONRPC_ERROR", "mcpd.v1")
        assert "server ev" in str(e) and "JSON-RPC -32042" in str(e), str(e)

    @pytest.mark.parametrize(
        "trailing",
        [
            (("grpc-status-details-bin", b"\xff\xff"),),  # garbage
            (("grpc-status-details-bin", _status_bin("type.googleapis.com/other.Thing", "r", "d", {})),),
            (("x-other", "value"),),
        ],
    )
    def test_bad_or_foreign_details_are_ignored(self, trailing: tuple) -> None:
        e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.INTERNAL, "x", trailing))
        assert type(e) is errors.Internal and e.server is None and e.jsonrpc_code is None


class TestConvert:
    def test_json_round_trip(self) -> None:
        value = {"i": 5, "f": 2.5, "neg": -3, "big": 2**60, "s": "x", "b": True, "n": None, "l": [1, {"k": []}], "o": {}}
        s = cv.to_struct(value)
        got = cv.struct_to_py(s)
        want = dict(value, big=float(2**60))  # beyond 2**53 a double stays a float
        assert got == want, f"got {got}, want {want}"
        assert type(got["i"]) is int and type(got["f"]) is float

    def test_arguments_from_model_json(self) -> None:
        assert cv.struct_to_py(cv.arguments_struct('{"a": 1}')) == {"a": 1}
        assert cv.struct_to_py(cv.arguments_struct("")) == {}
        assert cv.arguments_struct(None) is None
        with pytest.raises(TypeError):
            cv.to_struct({"a": object()})

    @pytest.mark.parametrize("text", ["[1]", "5", '"a"', "null", "not json", '{"a": 1', b"\xff"])
    def test_model_json_that_is_no_object_is_invalid_argument(self, text: Union[str, bytes]) -> None:
        # A model's malformed arguments are data to feed back, caught with
        # the other MCPDErrors, not a crash of the agent loop.
        with pytest.raises(errors.InvalidArgument, match="tool arguments") as e:
            cv.arguments_struct(text)
        assert not e.value.retryable
        with pytest.raises(errors.InvalidArgument):
            cv.call_request(pb.CallToolRequest, "mcp__demo__add", text, None, None)

    def test_server_config(self) -> None:
        c = ServerConfig.stdio("fs", "npx", ["-y", "pkg"], env={"TOKEN": "s3cret"}, call_timeout=1.5, tools_deny=["rm*"], tools_ask=["write*"])
        assert "s3cret" not in repr(c) and "TOKEN" in repr(c)
        p = cv.server_config_to_proto(c)
        assert p.stdio.command == "npx" and list(p.stdio.args) == ["-y", "pkg"] and p.stdio.env["TOKEN"] == "s3cret"
        assert p.call_timeout.ToNanoseconds() == 1_500_000_000 and list(p.tools_deny) == ["rm*"] and list(p.tools_ask) == ["write*"]
        assert not p.trace and cv.server_config_to_proto(ServerConfig.stdio("fs", "npx", trace=True)).trace
        h = cv.server_config_to_proto(ServerConfig.from_mcp_json("web", {"type": "sse", "url": "http://127.0.0.1:1/sse", "headers": {"A": "b"}}))
        assert h.WhichOneof("transport") == "sse" and h.sse.headers["A"] == "b"
        j = ServerConfig.from_mcp_json("x", {"command": "srv", "args": ["a"]})
        assert j.transport is Transport.STDIO and j.args == ("a",)
        with pytest.raises(TypeError):
            ServerConfig.http("x", "http://h", bogus=1)
        # A lone string would become its characters: a deny list of "r"
        # and "m" instead of "rm".
        with pytest.raises(TypeError, match="tools_deny"):
            ServerConfig.stdio("fs", "npx", tools_deny="rm")
        with pytest.raises(TypeError, match="args"):
            ServerConfig.stdio("fs", "npx", "-y")

    def test_roots(self) -> None:
        # MCP's roots are file:// URIs: an absolute local path becomes one,
        # a URI goes as it is.
        roots = cv.roots_to_proto(["/srv/my app", ("/srv/b", "b"), {"uri": "file:///kept"}, mcpd_grpc.Root("https://example.com/x")])
        assert [r.uri for r in roots] == ["file:///srv/my%20app", "file:///srv/b", "file:///kept", "https://example.com/x"]
        assert roots[1].name == "b"

    def test_oauth_config(self) -> None:
        idp = mcpd_grpc.OAuthIdentityProvider(issuer="https://idp.example", client_id="mcpd", client_secret="idp-s3cret", id_token="id-t0ken")
        oauth = mcpd_grpc.OAuthConfig(
            client_id="app",
            client_secret="client-s3cret",
            scopes=["read", "write"],
            token_endpoint_auth_method="client_secret_post",
            grant="token_exchange",
            assertion="jwt-s3cret",
            idp=idp,
            dpop=True,
        )
        c = ServerConfig.http("api", "https://api.example/mcp", headers={"X-Key": "hdr-s3cret"}, oauth=oauth)
        for secret in ("client-s3cret", "idp-s3cret", "id-t0ken", "jwt-s3cret", "hdr-s3cret"):
            assert secret not in repr(c) and secret not in str(oauth), f"{secret} in {c!r}"
        assert "client_id='app'" in repr(c) and oauth.scopes == ("read", "write")
        p = cv.server_config_to_proto(c)
        assert p.oauth.client_id == "app" and p.oauth.client_secret == "client-s3cret" and list(p.oauth.scopes) == ["read", "write"]
        assert p.oauth.token_endpoint_auth_method == "client_secret_post" and p.oauth.grant == "token_exchange" and p.oauth.dpop
        assert p.oauth.assertion == "jwt-s3cret" and p.oauth.idp.issuer == "https://idp.example" and p.oauth.idp.id_token == "id-t0ken"
        assert not cv.server_config_to_proto(ServerConfig.http("api", "https://api.example/mcp")).HasField("oauth")

        block = {"clientId": "app", "tokenEndpointAuthMethod": "none", "idp": {"idTokenFile": "/t"}}
        entry = {"type": "http", "url": "https://api.example/mcp", "oauth": block}
        j = ServerConfig.from_mcp_json("api", entry)
        assert j.oauth == mcpd_grpc.OAuthConfig(client_id="app", token_endpoint_auth_method="none", idp=mcpd_grpc.OAuthIdentityProvider(id_token_file="/t"))
        with pytest.raises(ValueError, match="clientID"):
            ServerConfig.from_mcp_json("api", {"url": "https://api.example/mcp", "oauth": {"clientID": "app"}})
        with pytest.raises(TypeError):
            mcpd_grpc.OAuthConfig(scopes="read write")

    def test_enums(self) -> None:
        assert cv.server_state(pb.SERVER_STATE_READY) == "ready"
        # Every state mcpd's API has is known here, none becomes UNSPECIFIED.
        for name, number in pb.ServerState.items():
            assert cv.server_state(number).value == name[len("SERVER_STATE_") :].lower(), name
        assert cv.server_state(pb.SERVER_STATE_AUTHORIZATION_REQUIRED) is mcpd_grpc.ServerState.AUTHORIZATION_REQUIRED
        assert cv.server_state(99) == "unspecified"  # a state newer than this client
        assert cv.log_level_to_proto("warning") == pb.LOG_LEVEL_WARNING
        assert cv.log_level_to_proto(mcpd_grpc.LogLevel.DEBUG) == pb.LOG_LEVEL_DEBUG
        with pytest.raises(ValueError):
            cv.log_level_to_proto("loud")
        with pytest.raises(ValueError):
            cv.event_kind_to_proto("nope")

    def test_handler_results(self) -> None:
        r = cv.sampling_reply("1", "hi")
        assert r.sampling.content[0].text.text == "hi" and r.sampling.role == pb.ROLE_ASSISTANT
        r = cv.sampling_reply("1", mcpd_grpc.SamplingResult([mcpd_grpc.ImageContent(b"\x89PNG", "image/png")], model="m"))
        assert r.sampling.content[0].image.data == b"\x89PNG" and r.sampling.model == "m"
        assert cv.elicitation_reply("2", None).elicitation.action == pb.ELICITATION_ACTION_DECLINE
        e = cv.elicitation_reply("2", {"name": "Ada"})
        assert e.elicitation.action == pb.ELICITATION_ACTION_ACCEPT and e.elicitation.content["name"] == "Ada"
        roots = cv.roots_reply("3", ["file:///a", ("file:///b", "B"), mcpd_grpc.Root("file:///c", "C")])
        assert [(x.uri, x.name) for x in roots.roots.roots] == [("file:///a", ""), ("file:///b", "B"), ("file:///c", "C")]
        with pytest.raises(TypeError):
            cv.sampling_reply("1", 42)

    def test_authorization(self) -> None:
        msg = pb.ServerRequest(id="7", server="api", authorization=pb.AuthorizationRequest(authorization_url="https://as.example/authorize?x=1"))
        msg.authorization.expire_time.FromSeconds(1_900_000_000)
        req = cv.server_request(msg)
        assert isinstance(req, mcpd_grpc.AuthorizationRequest) and cv.kind_of(req) == "authorization"
        assert req.authorization_url == "https://as.example/authorize?x=1" and req.expire_time is not None and req.expire_time.year == 2030
        for result, want in ((None, ""), ("http://127.0.0.1:1/cb?code=c&state=s", "http://127.0.0.1:1/cb?code=c&state=s")):
            r = cv.reply_for(req, result)
            assert r.id == "7" and r.WhichOneof("result") == "authorization" and r.authorization.redirect_url == want
        assert cv.reply_for(req, mcpd_grpc.AuthorizationResult("u")).authorization.redirect_url == "u"
        with pytest.raises(TypeError):
            cv.reply_for(req, 1)
        assert cv.registration(["authorization", "roots"]).register.kinds == [pb.SERVER_REQUEST_KIND_AUTHORIZATION, pb.SERVER_REQUEST_KIND_ROOTS]
        s = cv.server(pb.Server(name="api", state=pb.SERVER_STATE_AUTHORIZATION_REQUIRED, authorization_url="https://as.example/a"))
        assert s.authorization_required and not s.ready and s.authorization_url == "https://as.example/a" and s.authorization_expire_time is None


def test_environment_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpd_grpc import _common

    monkeypatch.delenv("MCPD_ADDRESS", raising=False)
    monkeypatch.delenv("MCPD_API_TOKEN", raising=False)
    assert _common.resolve_target(None) == "127.0.0.1:50051"
    assert _common.resolve_metadata(None) == ()
    monkeypatch.setenv("MCPD_ADDRESS", "unix:///run/mcpd.sock")
    monkeypatch.setenv("MCPD_API_TOKEN", "tok")
    assert _common.resolve_target(None) == "unix:///run/mcpd.sock"
    assert _common.resolve_target("127.0.0.1:1") == "127.0.0.1:1"
    assert _common.resolve_metadata(None) == (("authorization", "Bearer tok"),)
    assert _common.resolve_metadata("other") == (("authorization", "Bearer other"),)
    # A token gRPC cannot send is refused without echoing it.
    for bad in ("se\rcret", "sécret"):
        with pytest.raises(ValueError) as info:
            _common.resolve_metadata(bad)
        assert "cret" not in str(info.value)


def test_generated_stubs_live_inside_the_package() -> None:
    # protoc writes `from mcpd.v1 import mcpd_pb2`; make generate rewrites it
    # so that no top-level `mcpd` package is needed or shadowed.
    import sys

    from mcpd_grpc.mcpd.v1 import mcpd_pb2_grpc

    assert "mcpd" not in sys.modules, "the stubs imported a top-level mcpd package"
    assert mcpd_pb2_grpc.mcpd_dot_v1_dot_mcpd__pb2 is pb
    assert pb.Tool.__module__ == "mcpd_grpc.mcpd.v1.mcpd_pb2"


def test_reconnect_policy_backs_off_without_a_budget() -> None:
    # No budget must still back off: 0.1 s doubling to 2 s, never 0.1 s forever.
    p = _common.ReconnectPolicy(None)
    waits = [p.next_wait(now=100.0 + i, answered_at=100.0 + i) for i in range(7)]
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0], waits


def test_reconnect_policy_budget_and_stable_stream() -> None:
    p = _common.ReconnectPolicy(1.0)
    assert p.next_wait(now=10.0, answered_at=10.0) == 0.1
    assert p.next_wait(now=10.5, answered_at=10.2) == 0.2
    # The last wait is cut to what is left of the budget, then it is spent.
    assert p.next_wait(now=10.9, answered_at=10.8) == pytest.approx(0.1)
    assert p.next_wait(now=11.0, answered_at=10.95) is None
    # A stream that mcpd answered STABLE_STREAM seconds before it dropped
    # starts a fresh outage.
    assert p.next_wait(now=30.0, answered_at=30.0 - _common.STABLE_STREAM) == 0.1


def test_reconnect_policy_a_stream_never_answered_is_the_same_outage() -> None:
    # A reconnect to an mcpd that stopped answering waits on a connection
    # that never completes, for longer than STABLE_STREAM: that must not
    # start a fresh budget, or the subscription never gives up.
    p = _common.ReconnectPolicy(1.0)
    assert p.next_wait(now=10.0, answered_at=0.0) == 0.1
    assert p.next_wait(now=30.0, answered_at=None) is None
    assert _common.answered_at((), 10.0) is None
    assert _common.answered_at((("mcpd-after-sequence", "7"),), 10.0) == 10.0


def test_resumable() -> None:
    class Err(grpc.RpcError):
        def __init__(self, code: grpc.StatusCode) -> None:
            self._code = code

        def code(self) -> grpc.StatusCode:
            return self._code

    assert _common.resumable(None)
    assert _common.resumable(Err(grpc.StatusCode.UNAVAILABLE))
    assert not _common.resumable(Err(grpc.StatusCode.PERMISSION_DENIED))


def test_subscribe_racing_close_says_closed() -> None:
    # close() on another thread can land between subscribe()'s check and its
    # stream opening: subscribe() must then say the client is closed, not
    # leak the StopIteration that ends an iteration. The stub opens the
    # stream (no daemon needed: gRPC connects lazily), then closes the client
    # exactly in that window.
    client = mcpd_grpc.Client("127.0.0.1:1")
    real = client._stub

    class ClosingStub:
        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        def Subscribe(self, *args: object, **kwargs: object) -> object:
            call = real.Subscribe(*args, **kwargs)
            client.close()
            return call

    client._stub = ClosingStub()
    with pytest.raises(ValueError, match="closed"):
        client.subscribe()


@pytest.mark.parametrize("target", ["127.0.0.1:1", "http://127.0.0.1:1"])
def test_a_closed_client_says_so_on_either_wire(target: str) -> None:
    # The README promises ValueError after close(); the gRPC wire raised
    # grpcio's own "Cannot invoke RPC on closed channel!" instead of
    # saying that the client is closed. No daemon needed: nothing is sent.
    client = mcpd_grpc.Client(target)
    client.close()
    for call in (
        lambda: client.call_tool("mcp__demo__add", {"a": 1, "b": 2}),
        lambda: client.call_tool_stream("mcp__demo__slow"),
        client.list_tools,
        client.servers,
        lambda: client.get_server("demo"),
        client.tools_for_openai,
        client.subscribe,
        lambda: client.handlers_ready(0),
    ):
        with pytest.raises(ValueError, match="^the client is closed$"):
            call()


def test_icons_and_server_info_survive_conversion() -> None:
    icon = pb.Icon(src="https://example.com/a.png", mime_type="image/png", sizes=["48x48"], theme="dark")
    want = (mcpd_grpc.Icon("https://example.com/a.png", "image/png", ("48x48",), "dark"),)
    assert cv.tool(pb.Tool(name="mcp__s__t", icons=[icon])).icons == want
    assert cv.resource(pb.Resource(uri="u", icons=[icon])).icons == want
    assert cv.resource_template(pb.ResourceTemplate(uri_template="u/{x}", icons=[icon])).icons == want
    assert cv.prompt(pb.Prompt(name="p", icons=[icon])).icons == want
    link = cv.content(pb.Content(resource_link=pb.ResourceLink(uri="u", icons=[icon])))
    assert link.icons == want
    assert cv.content_to_proto(link).resource_link.icons == [icon]
    info = cv.implementation(pb.Server(server_info=pb.Implementation(name="n", description="d", website_url="https://example.com", icons=[icon])))
    assert (info.description, info.website_url, info.icons) == ("d", "https://example.com", want)


@pytest.mark.parametrize(
    "content, problem",
    [
        (mcpd_grpc.ResourceLink("file:///x", "x"), "ResourceLink"),
        (mcpd_grpc.EmbeddedResource(mcpd_grpc.ResourceContents("file:///x", text="x")), "EmbeddedResource"),
        (["one", "two"], "2 content blocks"),
        ([], "no content"),
        ([mcpd_grpc.ResourceLink("file:///x", "x")], "ResourceLink"),
    ],
)
def test_sampling_reply_holds_one_text_image_or_audio_block(content: Any, problem: str) -> None:
    """mcpd refuses any other sampling result (an MCP sampling result holds
    one such block): the client says so where the handler returned it."""
    with pytest.raises(ValueError, match=problem):
        cv.sampling_reply("7", mcpd_grpc.SamplingResult(content))


def test_sampling_reply_takes_one_block_or_a_sequence_of_one() -> None:
    image = mcpd_grpc.ImageContent(b"png", "image/png")
    for content, kind in [("hi", "text"), (mcpd_grpc.TextContent("hi"), "text"), (image, "image"), ([image], "image"), (("hi",), "text")]:
        reply = cv.sampling_reply("7", mcpd_grpc.SamplingResult(content))
        assert [b.WhichOneof("kind") for b in reply.sampling.content] == [kind], content


def test_elicitation_request_keeps_params() -> None:
    params = struct_pb2.Struct()
    params.update({"message": "name?", "_meta": {"trace": "t-7"}})
    req = cv.server_request(pb.ServerRequest(id="e1", server="s", elicitation=pb.ElicitationRequest(mode="form", message="name?", params=params)))
    assert isinstance(req, mcpd_grpc.ElicitationRequest)
    assert req.params == {"message": "name?", "_meta": {"trace": "t-7"}}


class TestKeepalive:
    @pytest.mark.parametrize("bad", [0, 4.9, -30, float("nan"), float("inf")])
    def test_below_mcpds_limit_is_refused(self, bad: float) -> None:
        for target in ("127.0.0.1:1", "http://127.0.0.1:1"):
            with pytest.raises(ValueError, match="at least 5 seconds.*too_many_pings"):
                mcpd_grpc.Client(target, keepalive=bad)
            with pytest.raises(ValueError, match="at least 5 seconds"):
                mcpd_grpc.AsyncClient(target, keepalive=bad)

    @pytest.mark.parametrize("bad", ["30", True])
    def test_a_number_or_none(self, bad: object) -> None:
        with pytest.raises(TypeError, match="keepalive"):
            mcpd_grpc.Client("127.0.0.1:1", keepalive=bad)  # type: ignore[arg-type]

    def test_channel_options(self) -> None:
        got = dict(_common.channel_options(None, 30.0))
        assert got["grpc.keepalive_time_ms"] == 30_000
        # Both: grpc-core 1.51 waits keepalive_timeout_ms for the answer,
        # newer ones ping_timeout_ms.
        assert got["grpc.keepalive_timeout_ms"] == got["grpc.http2.ping_timeout_ms"] == 20_000
        # gRPC stops pinging a stream that sends nothing after two pings
        # unless this is 0.
        assert got["grpc.http2.max_pings_without_data"] == 0
        assert got["grpc.keepalive_permit_without_calls"] == 1
        # The answer may take as long as the quiet before the ping, 20 s at most.
        assert dict(_common.channel_options(None, 5.0))["grpc.keepalive_timeout_ms"] == 5_000
        assert not [k for k in dict(_common.channel_options(None, None)) if "keepalive" in k or "ping" in k]
        # The caller's options win.
        assert dict(_common.channel_options([("grpc.keepalive_time_ms", 60_000)], 30.0))["grpc.keepalive_time_ms"] == 60_000

    def test_clients_ping_by_default(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import asyncio

        import grpc.aio

        seen: list = []

        def spy(real: Any) -> Any:
            def channel(target: str, options: Any = None, *args: Any, **kwargs: Any) -> Any:
                seen.append(dict(options).get("grpc.keepalive_time_ms"))
                return real(target, options, *args, **kwargs)

            return channel

        monkeypatch.setattr(grpc, "insecure_channel", spy(grpc.insecure_channel))
        monkeypatch.setattr(grpc.aio, "insecure_channel", spy(grpc.aio.insecure_channel))

        async def async_clients() -> None:
            await mcpd_grpc.AsyncClient("127.0.0.1:1").close()
            await mcpd_grpc.AsyncClient("127.0.0.1:1", keepalive=None).close()

        mcpd_grpc.Client("127.0.0.1:1").close()
        mcpd_grpc.Client("127.0.0.1:1", keepalive=None).close()
        asyncio.run(async_clients())
        assert seen == [30_000, None, 30_000, None]


TARGET_CASES = json.loads((REPO / "clients" / "testdata" / "targets.json").read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", TARGET_CASES, ids=[repr(c["target"]) for c in TARGET_CASES])
def test_targets(case: Any) -> None:
    for cls in (mcpd_grpc.Client, mcpd_grpc.AsyncClient):
        if "error" in case:
            with pytest.raises(ValueError, match=re.escape(case["error"])):
                cls(case["target"])
            continue
        c = cls(case["target"])
        assert c.target == case["want"]
        if isinstance(c, mcpd_grpc.Client):
            c.close()


def test_target_from_the_environment_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPD_ADDRESS", "localhost")
    with pytest.raises(ValueError, match=r"\$MCPD_ADDRESS.*has no port"):
        mcpd_grpc.Client()


@pytest.mark.parametrize("target", ["dns:///localhost:50051", "ipv4:127.0.0.1:50051", "ipv6:[::1]:50051", "unix-abstract:mcpd", "unix:mcpd.sock"])
def test_grpc_scheme_targets_go_to_grpc_as_they_are(target: str) -> None:
    with mcpd_grpc.Client(target) as c:
        assert c.target == target


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_a_timeout_must_be_finite_and_not_negative(bad: float) -> None:
    from mcpd_grpc import _convert

    with pytest.raises(ValueError, match="finite"):
        _convert.duration(bad)
    d = _convert.duration(1.5)
    assert d is not None and (d.seconds, d.nanos) == (1, 500_000_000)
