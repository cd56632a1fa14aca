"""ServerConfig.from_mcp_json: a .mcp.json server entry read as mcpd's
config file reader reads it, or refused by name where ConnectServer cannot
carry what the entry says."""

from __future__ import annotations

import json
import math
from typing import Any, Dict

import pytest

import mcpd_grpc
from conftest import REPO
from mcpd_grpc import Client, OAuthConfig, ServerConfig, TLSConfig, types
from mcpd_grpc import _convert as cv
from mcpd_grpc.types import Transport

#: The keys mcpd's config reader knows, shared with internal/config's tests.
KEYS = json.loads((REPO / "clients" / "testdata" / "mcp-json-keys.json").read_text(encoding="utf-8"))


def read(entry: Dict[str, Any], **options: Any) -> ServerConfig:
    return ServerConfig.from_mcp_json("x", entry, **options)


def refused(entry: Any, match: str, **options: Any) -> str:
    with pytest.raises(ValueError, match=match) as info:
        ServerConfig.from_mcp_json("x", entry, **options)
    message = str(info.value)
    assert message.startswith("server 'x': "), message
    return message


def test_every_key_mcpd_knows_is_read_refused_or_ignored() -> None:
    read_keys, refused_keys, ignored_keys = set(types._ENTRY_READ), set(types._ENTRY_REFUSED), set(types._ENTRY_IGNORED)
    assert not read_keys & refused_keys and not read_keys & ignored_keys and not refused_keys & ignored_keys
    assert read_keys | refused_keys | ignored_keys == set(KEYS["entry"])
    assert set(types._OAUTH_JSON) == set(KEYS["oauth"])
    assert set(types._IDP_JSON) == set(KEYS["oauth.idp"])
    assert set(types._TLS_JSON) == set(KEYS["tls"])


def test_options() -> None:
    c = read({"command": "npx", "toolsDeny": ["delete_*"], "toolsAllow": ["get_*"], "toolsAsk": ["put_*"], "timeout": 30, "connectTimeout": 2.5})
    assert (c.tools_deny, c.tools_allow, c.tools_ask) == (("delete_*",), ("get_*",), ("put_*",))
    assert (c.call_timeout, c.connect_timeout) == (30, 2.5)
    c = read({"command": "npx", "protocolVersion": "2025-06-18", "strictCapabilities": True, "trace": True})
    assert c.protocol_version == "2025-06-18" and c.strict_capabilities and c.trace
    p = cv.server_config_to_proto(read({"command": "npx", "toolsDeny": ["delete_*"], "timeout": 30, "connectTimeout": 2.5, "trace": True}))
    assert list(p.tools_deny) == ["delete_*"] and p.trace
    assert p.call_timeout.ToNanoseconds() == 30_000_000_000 and p.connect_timeout.ToNanoseconds() == 2_500_000_000
    # Unset, null and empty mean the daemon's defaults, as in a config file.
    c = read({"command": "npx", "timeout": 0, "connectTimeout": None, "toolsDeny": None, "toolsAllow": [], "protocolVersion": "", "trace": False})
    assert c == ServerConfig.stdio("x", "npx")
    assert c.call_timeout is None and c.connect_timeout is None


@pytest.mark.parametrize("key", ["timeout", "connectTimeout"])
def test_timeouts_are_seconds_within_the_daemons_bound(key: str) -> None:
    assert "negative" in refused({"command": "npx", key: -1}, key)
    assert "31536000 seconds" in refused({"command": "npx", key: 365 * 24 * 3600 + 1}, key)
    for bad in ("30", True, math.nan, math.inf):
        refused({"command": "npx", key: bad}, key)


def test_types_are_read_as_mcpd_spells_them() -> None:
    """docs/remote-and-resilience.md's table; in any case, as mcpd reads them."""
    remote = {
        "http": Transport.HTTP,
        "HTTP": Transport.HTTP,
        "streamable-http": Transport.HTTP,
        "streamable_http": Transport.HTTP,
        "streamableHttp": Transport.HTTP,
        "StreamableHTTP": Transport.HTTP,
        "sse": Transport.SSE,
        "SSE": Transport.SSE,
        "auto": Transport.AUTO,
        "Auto": Transport.AUTO,
    }
    for kind, want in remote.items():
        c = read({"type": kind, "url": "https://h.example/mcp", "headers": {"Authorization": "Bearer t"}})
        assert c.transport is want and c.url == "https://h.example/mcp" and c.headers == {"Authorization": "Bearer t"}, kind
    for stdio in ("stdio", "STDIO", "", None):
        c = read({"type": stdio, "command": "srv", "args": ["a"], "env": {"A": "b"}, "cwd": "/w"})
        assert c == ServerConfig.stdio("x", "srv", ["a"], env={"A": "b"}, cwd="/w"), stdio


def test_a_url_without_type_is_detected() -> None:
    c = read({"url": "https://h.example/mcp"})
    assert c.transport is Transport.AUTO
    assert cv.server_config_to_proto(c).WhichOneof("transport") == "remote"


def test_server_url() -> None:
    assert read({"serverUrl": "https://h.example/mcp"}) == ServerConfig.remote("x", "https://h.example/mcp")
    assert read({"type": "sse", "serverUrl": "https://h.example/sse"}).url == "https://h.example/sse"
    # As in mcpd, url wins when both are set.
    assert read({"url": "https://a.example/mcp", "serverUrl": "https://b.example/mcp"}).url == "https://a.example/mcp"


def test_types_without_a_transport() -> None:
    refused({"type": "websocket", "url": "wss://h.example"}, "unknown type 'websocket'")
    for kind in ("sdk", "agent", "SDK"):
        refused({"type": kind}, "serve_tools")
    refused({"command": "srv", "url": "https://h.example/mcp"}, "both command and url")
    refused({}, "needs a command")
    refused({"type": "stdio"}, "needs a command")
    refused({"type": "http"}, "need a url")


def test_fields_of_the_other_transport_are_refused() -> None:
    refused({"type": "stdio", "command": "srv", "url": "https://h.example/mcp"}, "takes no url")
    refused({"command": "srv", "headers": {"A": "b"}}, "takes no headers")
    refused({"command": "srv", "oauth": {"clientId": "app"}}, "takes no oauth")
    for key, value in (("command", "srv"), ("args", ["a"]), ("env", {"A": "b"}), ("cwd", "/w")):
        refused({"type": "http", "url": "https://h.example/mcp", key: value}, "takes no command, args, env or cwd")


def test_tls_block() -> None:
    block = {"ca": "/etc/mcpd/ca.pem", "cert": "/etc/mcpd/client.pem", "key": "/run/creds/client-key.pem"}
    want = TLSConfig(ca_file="/etc/mcpd/ca.pem", cert_file="/etc/mcpd/client.pem", key_file="/run/creds/client-key.pem")
    c = read({"url": "https://h.example/mcp", "tls": block})
    assert c.tls == want and c == ServerConfig.remote("x", "https://h.example/mcp", tls=want)
    assert "client-key.pem" in repr(c)  # paths, not secrets
    p = cv.server_config_to_proto(c)
    assert (p.remote.tls.ca_file, p.remote.tls.cert_file, p.remote.tls.key_file) == (want.ca_file, want.cert_file, want.key_file)
    p = cv.server_config_to_proto(read({"type": "sse", "url": "https://h.example/sse", "tls": {"ca": "/ca.pem", "cert": None}}))
    assert p.sse.tls.ca_file == "/ca.pem" and not p.sse.tls.cert_file
    assert read({"url": "https://h.example/mcp", "tls": None}).tls is None
    refused({"url": "https://h.example/mcp", "tls": {}}, "tls: the block names no file")
    refused({"url": "https://h.example/mcp", "tls": {"ca": "/ca.pem", "crt": "/c.pem"}}, "unknown tls keys: crt")
    refused({"url": "https://h.example/mcp", "tls": {"ca": 1}}, "tls.ca is a number, want a string")
    refused({"url": "https://h.example/mcp", "tls": "/ca.pem"}, "field 'tls' is a string, want an object")
    refused({"command": "srv", "tls": {"ca": "/ca.pem"}}, "takes no tls")
    with pytest.raises(ValueError, match="takes no tls"):
        cv.server_config_to_proto(ServerConfig("x", Transport.STDIO, command="srv", tls=want))


@pytest.mark.parametrize(
    ("key", "value", "empty"),
    [
        ("permissions", {"deny": ["delete_*"]}, {}),
        ("alwaysAllow", ["read_file"], []),
        ("autoApprove", ["read_file"], []),
        ("traceRedact", ["query"], []),
    ],
)
def test_settings_connect_server_cannot_carry_are_refused(key: str, value: Any, empty: Any) -> None:
    url = {"url": "https://h.example/mcp"}
    message = refused({**url, key: value}, f"'{key}' cannot be sent with ConnectServer")
    assert "config file" in message
    # One that says nothing is read as absent (Cline writes "autoApprove": []).
    assert read({**url, key: empty}) == ServerConfig.remote("x", url["url"])


def test_a_disabled_entry_is_refused() -> None:
    entry = {"command": "npx", "toolsDeny": ["delete_*"], "toolsAllow": ["get_*"], "timeout": 30, "disabled": True}
    message = refused(entry, "disabled")
    assert "set_server_enabled" in message
    refused({"command": "srv", "disabled": "yes"}, "'disabled' is a string, want true or false")
    assert read({"command": "srv", "disabled": False, "toolsDeny": ["rm"]}).tools_deny == ("rm",)


def test_unknown_keys_are_refused() -> None:
    message = refused({"command": "npx", "toolDeny": ["delete_*"], "envFile": ".env"}, "'envFile', 'toolDeny'")
    assert "not understood" in message
    # Keys are read as spelled, as mcpd reads them.
    refused({"command": "npx", "ToolsDeny": ["delete_*"]}, "'ToolsDeny'")
    refused({"Command": "npx"}, "'Command'")
    refused({"url": "https://h.example/mcp", "oauth": {"clientID": "app"}}, "clientID")
    # An agent SDK's name for the server is read and left, as by mcpd.
    assert read({"command": "srv", "name": "other"}) == ServerConfig.stdio("x", "srv")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("command", ["npx"], "'command' is an array, want a string"),
        ("args", "-y pkg", "'args' is a string, want an array of strings"),
        ("args", ["-y", 1], "'args\\[1\\]' is a number, want a string"),
        ("toolsDeny", "delete_*", "'toolsDeny' is a string, want an array of strings"),
        ("toolsAllow", "get_*", "'toolsAllow' is a string, want an array of strings"),
        ("toolsAsk", "put_*", "'toolsAsk' is a string, want an array of strings"),
        ("env", ["A=b"], "'env' is an array, want an object with string values"),
        ("env", {"A": 1}, "'env.A' is a number, want a string"),
        ("cwd", 1, "'cwd' is a number, want a string"),
        ("protocolVersion", 20250618, "'protocolVersion' is a number, want a string"),
        ("strictCapabilities", "yes", "'strictCapabilities' is a string, want true or false"),
        ("trace", 1, "'trace' is a number, want true or false"),
        ("type", 1, "'type' is a number, want a string"),
    ],
)
def test_wrong_types_are_refused(key: str, value: Any, message: str) -> None:
    refused({"command": "srv", key: value}, message)


def test_wrong_remote_types_are_refused() -> None:
    refused({"url": 1}, "'url' is a number, want a string")
    refused({"serverUrl": ["https://h.example"]}, "'serverUrl' is an array, want a string")
    message = refused({"url": "https://h.example/mcp", "headers": {"Authorization": ["Bearer s3cret"]}}, "'headers.Authorization' is an array, want a string")
    assert "s3cret" not in message
    refused({"url": "https://h.example/mcp", "oauth": "client"}, "'oauth' is a string, want an object")
    # The block's values are checked as mcpd decodes them, never quoted.
    refused({"url": "https://h.example/mcp", "oauth": {"idp": "https://idp.example"}}, "oauth.idp is a string, want an object")
    refused({"url": "https://h.example/mcp", "oauth": {"scopes": "read write"}}, "oauth.scopes is a string, want an array of strings")
    refused({"url": "https://h.example/mcp", "oauth": {"dpop": "yes"}}, "oauth.dpop is a string, want true or false")
    refused({"url": "https://h.example/mcp", "oauth": {"clientSecret": 12345}}, "oauth.clientSecret is a number, want a string")
    refused({"url": "https://h.example/mcp", "oauth": {"idp": {"idToken": ["t0k3n"]}}}, "oauth.idp.idToken is an array, want a string")
    assert read({"url": "https://h.example/mcp", "oauth": {"clientId": "app", "scopes": None, "idp": None}}).oauth == OAuthConfig(client_id="app")
    refused("command", "entry is a string, want an object")


def test_variables_are_not_expanded() -> None:
    """As documented before: ConnectServer's values are used as given."""
    c = read({"command": "${BIN}", "args": ["${DIR:-/srv}"], "env": {"TOKEN": "${TOKEN}"}, "cwd": "${HOME}"})
    assert c == ServerConfig.stdio("x", "${BIN}", ["${DIR:-/srv}"], env={"TOKEN": "${TOKEN}"}, cwd="${HOME}")
    c = read({"url": "https://${HOST}/mcp", "headers": {"Authorization": "Bearer ${KEY}"}})
    assert c == ServerConfig.remote("x", "https://${HOST}/mcp", headers={"Authorization": "Bearer ${KEY}"})


def test_options_beside_the_entry() -> None:
    c = read({"command": "srv", "toolsDeny": ["delete_*"]}, call_timeout=5, tools_ask=["put_*"])
    assert (c.tools_deny, c.call_timeout, c.tools_ask) == (("delete_*",), 5, ("put_*",))
    # An option the entry sets too would replace it: say so instead.
    refused({"command": "srv", "toolsDeny": ["delete_*"]}, "'toolsDeny'.*tools_deny", tools_deny=[])
    refused({"command": "srv", "timeout": 30}, "'timeout'.*call_timeout", call_timeout=5)
    with pytest.raises(TypeError):
        read({"command": "srv"}, bogus=1)


def test_connect_server_from_an_entry_hides_denied_tools(client: Client, mcpd_bin: str) -> None:
    entry = {"command": mcpd_bin, "args": ["demo-server"], "toolsAllow": ["ech*", "fail"], "toolsDeny": ["fail"], "timeout": 30}
    s = client.connect_server(ServerConfig.from_mcp_json("fromjson", entry), replace=True)
    try:
        assert s.ready, f"got {s.state} {s.last_error}"
        assert {t.tool_name for t in client.list_tools("fromjson")} == {"echo"}
        with pytest.raises(mcpd_grpc.PermissionDenied):
            client.call_tool("mcp__fromjson__fail")
    finally:
        client.disconnect_server("fromjson")


def test_disabled_tools_add_to_tools_deny() -> None:
    """Windsurf, Roo Code and Kiro keep tools from the model with
    "disabledTools": mcpd reads it as more toolsDeny, and so does
    from_mcp_json, rather than refuse a file written for them."""
    c = read({"command": "srv", "toolsDeny": ["rm_*"], "disabledTools": ["delete_repo", "push"]})
    assert c.tools_deny == ("rm_*", "delete_repo", "push")
    assert read({"command": "srv", "disabledTools": ["push"]}).tools_deny == ("push",)
    refused({"command": "srv", "disabledTools": ["push"]}, "'disabledTools'.*tools_deny", tools_deny=["rm"])
    refused({"command": "srv", "disabledTools": "push"}, "'disabledTools' is a string, want an array of strings")
