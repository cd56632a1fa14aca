"""OAuth consent over gRPC: a real bin/mcpd reaches an MCP server that the
MCP authorization spec protects, and the Python client gives the consent.

The protected server and its authorization server are written here with the
standard library only, on one loopback port: a 401 with
``WWW-Authenticate: Bearer resource_metadata=...``, Protected Resource
Metadata (RFC 9728), authorization server metadata (RFC 8414), Dynamic
Client Registration (RFC 7591), an /authorize endpoint that redirects at
once (the person's consent) with ``code``, ``state`` and ``iss`` (RFC 9207),
and a token endpoint that checks PKCE S256 and the resource indicator (RFC
8707). With a valid token, /mcp answers stateless Streamable HTTP with JSON
responses (protocol 2025-06-18) and one tool, ``whoami``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import secrets
import stat
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from conftest import RPC_TIMEOUT, Daemon, poll, run_async
from mcpd_grpc import (
    AsyncClient,
    AuthorizationRequest,
    FailedPrecondition,
    InvalidArgument,
    OAuthConfig,
    Server,
    ServerConfig,
    ServerState,
)
from mcpd_grpc.errors import REASON_AUTHORIZATION_REQUIRED

PROTOCOL_VERSION = "2025-06-18"
SCOPE = "mcp:tools"


class ProtectedServer:
    """An OAuth-protected MCP server and its authorization server on
    127.0.0.1; it records what it issued and what it was asked, so tests see
    what mcpd sent."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clients: Dict[str, List[str]] = {}  # client_id -> redirect_uris
        self.codes: Dict[str, Dict[str, str]] = {}  # code -> what /authorize got
        self.tokens: Dict[str, str] = {}  # access token -> client_id
        self.refresh_tokens: Dict[str, str] = {}
        self.authorize_queries: List[Dict[str, str]] = []
        self.tool_calls: List[str] = []  # the access token of each tools/call
        self.secrets: List[str] = []  # every code and token issued
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.mcp_url = self.base + "/mcp"
        self.resource_metadata_url = self.base + "/.well-known/oauth-protected-resource/mcp"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="protected-server", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=10)

    def _secret(self) -> str:
        """A new code or token, recorded (call with the lock held)."""
        secret = secrets.token_urlsafe(24)
        self.secrets.append(secret)
        return secret

    # -- the HTTP side -----------------------------------------------------

    def _handler(self) -> type:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: pytest shows failures, not access logs

            def send(self, code: int, body: Any = None, headers: Optional[Dict[str, str]] = None) -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(code)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Cache-Control", "no-store")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/.well-known/oauth-protected-resource/mcp":
                    self.send(200, server.resource_metadata())
                elif url.path == "/.well-known/oauth-authorization-server":
                    self.send(200, server.auth_server_metadata())
                elif url.path == "/authorize":
                    code, location = server.authorize(dict(urllib.parse.parse_qsl(url.query)))
                    self.send(code, {"error": location} if code != 302 else None, {"Location": location} if code == 302 else None)
                elif url.path == "/mcp":
                    self.send(405, headers={"Allow": "POST"})  # no standalone SSE stream
                else:
                    self.send(404, {"error": "not_found"})

            def do_POST(self) -> None:
                path = urllib.parse.urlsplit(self.path).path
                if path == "/register":
                    self.send(*server.register(json.loads(self.body())))
                elif path == "/token":
                    form = dict(urllib.parse.parse_qsl(self.body().decode()))
                    self.send(*server.token(form))
                elif path == "/mcp":
                    auth = self.headers.get("Authorization", "")
                    token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
                    with server.lock:
                        valid = token in server.tokens
                    body = self.body()
                    if not valid:
                        challenge = f'Bearer resource_metadata="{server.resource_metadata_url}", scope="{SCOPE}"'
                        self.send(401, {"error": "invalid_token"}, {"WWW-Authenticate": challenge})
                        return
                    self.send(*server.mcp(json.loads(body), token))
                else:
                    self.send(404, {"error": "not_found"})

            def do_DELETE(self) -> None:
                self.send(405, headers={"Allow": "POST"})

        return Handler

    # -- metadata, registration, consent, tokens ---------------------------

    def resource_metadata(self) -> Dict[str, Any]:
        return {"resource": self.mcp_url, "authorization_servers": [self.base], "scopes_supported": [SCOPE], "bearer_methods_supported": ["header"]}

    def auth_server_metadata(self) -> Dict[str, Any]:
        return {
            "issuer": self.base,
            "authorization_endpoint": self.base + "/authorize",
            "token_endpoint": self.base + "/token",
            "registration_endpoint": self.base + "/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "scopes_supported": [SCOPE],
            "authorization_response_iss_parameter_supported": True,
        }

    def register(self, meta: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
        uris = meta.get("redirect_uris") or []
        if not uris or meta.get("token_endpoint_auth_method") != "none":
            return 400, {"error": "invalid_client_metadata"}
        client_id = "client-" + secrets.token_hex(4)
        with self.lock:
            self.clients[client_id] = list(uris)
        return 201, {"client_id": client_id, "redirect_uris": uris, "token_endpoint_auth_method": "none", "grant_types": meta.get("grant_types", [])}

    def authorize(self, q: Dict[str, str]) -> Tuple[int, str]:
        """The person's consent, given at once: (302, redirect) or (400, why)."""
        with self.lock:
            self.authorize_queries.append(q)
            uris = self.clients.get(q.get("client_id", ""))
        if uris is None or q.get("redirect_uri") not in uris:
            return 400, "unknown client or redirect_uri"
        if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return 400, "PKCE S256 is required"
        if q.get("resource") != self.mcp_url:
            return 400, "wrong resource indicator"
        if not q.get("state"):
            return 400, "no state"
        with self.lock:
            code = self._secret()
            self.codes[code] = q
        params = urllib.parse.urlencode({"code": code, "state": q["state"], "iss": self.base})
        return 302, f"{q['redirect_uri']}?{params}"

    def token(self, form: Dict[str, str]) -> Tuple[int, Dict[str, Any]]:
        grant = form.get("grant_type")
        with self.lock:
            if grant == "authorization_code":
                q = self.codes.pop(form.get("code", ""), None)
                if q is None:
                    return 400, {"error": "invalid_grant"}
                verifier = form.get("code_verifier", "").encode()
                challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
                if challenge != q["code_challenge"] or form.get("redirect_uri") != q["redirect_uri"] or form.get("client_id") != q["client_id"]:
                    return 400, {"error": "invalid_grant"}
                if form.get("resource") != self.mcp_url:
                    return 400, {"error": "invalid_target"}
                client_id = q["client_id"]
            elif grant == "refresh_token":
                client_id = self.refresh_tokens.pop(form.get("refresh_token", ""), "")
                if not client_id:
                    return 400, {"error": "invalid_grant"}
            else:
                return 400, {"error": "unsupported_grant_type"}
            access, refresh = self._secret(), self._secret()
            self.tokens[access] = self.refresh_tokens[refresh] = client_id
        return 200, {"access_token": access, "token_type": "Bearer", "expires_in": 3600, "refresh_token": refresh, "scope": SCOPE}

    # -- MCP ---------------------------------------------------------------

    def mcp(self, msg: Dict[str, Any], token: str) -> Tuple[int, Any]:
        method, msg_id = msg.get("method"), msg.get("id")
        if msg_id is None:
            return (202, None)  # a notification (notifications/initialized, ...)

        def result(r: Dict[str, Any]) -> Tuple[int, Any]:
            return 200, {"jsonrpc": "2.0", "id": msg_id, "result": r}

        if method == "initialize":
            return result(
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "protected", "version": "1.0.0"},
                }
            )
        if method == "ping":
            return result({})
        if method == "tools/list":
            tool = {"name": "whoami", "description": "Says which OAuth client called.", "inputSchema": {"type": "object", "properties": {}}}
            return result({"tools": [tool]})
        if method == "tools/call" and (msg.get("params") or {}).get("name") == "whoami":
            with self.lock:
                self.tool_calls.append(token)
                client_id = self.tokens[token]
            return result({"content": [{"type": "text", "text": f"called by {client_id}"}], "isError": False})
        return 200, {"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": f"method not found: {method}"}}


def follow_consent(authorization_url: str) -> str:
    """Opens the authorization URL as a browser would, without following the
    redirect: returns the URL the browser is sent to (mcpd's redirect
    listener, with code and state)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect())
    with pytest.raises(urllib.error.HTTPError) as e:
        opener.open(authorization_url, timeout=RPC_TIMEOUT)
    assert e.value.code == 302, f"/authorize answered {e.value.code}: {e.value.read()!r}"
    location = e.value.headers["Location"]
    e.value.close()
    assert location, "no Location in the consent's redirect"
    return str(location)


def browser_get(url: str) -> Tuple[int, str]:
    """GETs url on loopback, as the browser lands on the redirect."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=RPC_TIMEOUT) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.read().decode()


@pytest.fixture(scope="module")
def oauth_daemon(mcpd_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """mcpd with a state directory of its own and a redirect listener on a
    free loopback port."""
    workdir = tmp_path_factory.mktemp("oauth")
    d = Daemon(mcpd_bin, workdir, "oauth", args=["--oauth-state-dir", str(workdir / "state"), "--oauth-redirect-addr", "127.0.0.1:0"])
    d.start()
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture
def protected() -> Iterator[ProtectedServer]:
    s = ProtectedServer()
    try:
        yield s
    finally:
        s.close()


def assert_kept_secret(daemon: Daemon, protected: ProtectedServer, *texts: str) -> None:
    """No code or token the authorization server issued is in mcpd's log
    or in what the client got."""
    log = daemon.log.read_text(errors="replace")
    with protected.lock:
        issued = list(protected.secrets)
    assert issued, "the authorization server issued nothing"
    for secret in issued:
        assert secret not in log, "an OAuth code or token is in mcpd's log"
        for text in texts:
            assert secret not in text, "an OAuth code or token reached the client"


def test_consent_through_the_handler(oauth_daemon: Daemon, protected: ProtectedServer) -> None:
    """A desktop agent: on_authorization opens the URL in the browser, whose
    redirect reaches mcpd's listener. ForgetAuthorization brings it back."""
    asked: List[AuthorizationRequest] = []
    landed: List[Tuple[int, str]] = []
    # The second consent waits for the test, so that a request mcpd makes
    # on its own (a keep-alive ping) cannot complete it before the test
    # sees the refusal.
    second_consent = threading.Event()

    with oauth_daemon.client() as c:

        @c.on_authorization
        def open_browser(req: AuthorizationRequest) -> None:
            asked.append(req)
            if len(asked) > 1:
                assert second_consent.wait(RPC_TIMEOUT)
            landed.append(browser_get(follow_consent(req.authorization_url)))

        assert c.handlers_ready(RPC_TIMEOUT), "mcpd did not confirm the authorization handler"
        s = c.connect_server(ServerConfig.http("guarded", protected.mcp_url), replace=True)
        # The consent may already be under way: the handler runs as soon as
        # mcpd asks, maybe before connect_server returns.
        assert s.state in (ServerState.AUTHORIZATION_REQUIRED, ServerState.CONNECTING, ServerState.READY), s
        if s.state is ServerState.AUTHORIZATION_REQUIRED:
            assert s.authorization_required and s.authorization_url.startswith(protected.base + "/authorize?")
            assert s.authorization_expire_time is not None

        poll("the server to be ready after the consent", lambda: c.get_server("guarded").ready)
        assert len(asked) == 1, asked
        req = asked[0]
        assert req.server == "guarded" and req.authorization_url.startswith(protected.base + "/authorize?")
        assert req.expire_time is not None and req.deadline is not None
        assert landed == [(200, landed[0][1])] and "Authorized" in landed[0][1], landed
        q = protected.authorize_queries[0]
        assert q["scope"] == SCOPE and q["resource"] == protected.mcp_url, q

        r = c.call_tool("mcp__guarded__whoami")
        assert not r.is_error and r.text == f"called by {q['client_id']}", r
        ready = c.get_server("guarded")
        assert ready.authorization_url == "" and ready.authorization_expire_time is None, ready

        # Forgetting the tokens (and the registration): the next request is
        # refused, and the consent is asked for again, of a new client.
        c.forget_authorization("guarded")
        with pytest.raises(FailedPrecondition) as e:
            c.call_tool("mcp__guarded__whoami")
        assert e.value.reason == REASON_AUTHORIZATION_REQUIRED, e.value
        again = poll("the consent asked for again", lambda: (lambda s: s.authorization_required and s)(c.get_server("guarded")))
        assert isinstance(again, Server) and again.authorization_url != s.authorization_url, again
        second_consent.set()
        poll("a second consent", lambda: len(asked) == 2 and c.get_server("guarded").ready)
        assert landed[1][0] == 200, landed
        r = c.call_tool("mcp__guarded__whoami")
        second = protected.authorize_queries[-1]["client_id"]
        assert second != q["client_id"] and r.text == f"called by {second}", r
        assert len(protected.tool_calls) == 2 and protected.tool_calls[0] != protected.tool_calls[1]
        c.disconnect_server("guarded")
    assert_kept_secret(oauth_daemon, protected, repr(s), repr(ready), repr(asked))


def test_headless_complete_authorization(oauth_daemon: Daemon, protected: ProtectedServer) -> None:
    """A headless host: no handler; the person's browser ends on a URL that
    the agent hands to complete_authorization. The oauth block's scopes
    replace the ones mcpd would choose."""
    with oauth_daemon.client() as c:
        config = ServerConfig.http("headless", protected.mcp_url, oauth=OAuthConfig(scopes=[SCOPE, "profile"]))
        s = c.connect_server(config, replace=True)
        assert s.state is ServerState.AUTHORIZATION_REQUIRED, s
        assert s.authorization_url.startswith(protected.base + "/authorize?") and s.authorization_expire_time is not None, s
        with pytest.raises(FailedPrecondition) as e:
            c.call_tool("mcp__headless__whoami")
        assert e.value.reason == REASON_AUTHORIZATION_REQUIRED, e.value

        redirect = follow_consent(s.authorization_url)
        assert protected.authorize_queries[0]["scope"] == f"{SCOPE} profile", protected.authorize_queries
        # A URL that does not belong to the pending consent changes nothing.
        wrong_state = redirect.replace("state=", "state=x", 1)
        for bad in ("not a url", wrong_state):
            with pytest.raises(InvalidArgument):
                c.complete_authorization("headless", bad)
        assert c.get_server("headless").state is ServerState.AUTHORIZATION_REQUIRED

        done = c.complete_authorization("headless", redirect)
        # The consent is no longer pending; the server connects right after
        # (mcpd may report it before its state has moved on).
        assert done.name == "headless" and done.authorization_url == "", done
        poll("the server to be ready", lambda: c.get_server("headless").ready)
        assert c.call_tool("mcp__headless__whoami").text.startswith("called by client-")
        # Nothing is pending any more.
        with pytest.raises(FailedPrecondition):
            c.complete_authorization("headless", redirect)
        c.disconnect_server("headless")

    # Tokens persist in the state directory, readable by mcpd's user only.
    state = oauth_daemon.workdir / "state"
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    files = [p for p in Path(state).iterdir() if p.is_file()]
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files), files
    assert_kept_secret(oauth_daemon, protected, repr(s), repr(done))


def test_async_handler_returns_the_redirect(oauth_daemon: Daemon, protected: ProtectedServer) -> None:
    """An agent that catches the redirect itself (an embedded browser)
    answers with the URL; mcpd completes the consent with it."""

    async def body() -> None:
        async with AsyncClient(oauth_daemon.target, timeout=RPC_TIMEOUT) as c:

            @c.on_authorization
            async def embedded_browser(req: AuthorizationRequest) -> str:
                return await asyncio.get_running_loop().run_in_executor(None, follow_consent, req.authorization_url)

            assert await c.handlers_ready(RPC_TIMEOUT)
            await c.connect_server(ServerConfig.http("caught", protected.mcp_url), replace=True)
            for _ in range(400):
                if (await c.get_server("caught")).ready:
                    break
                await asyncio.sleep(0.05)
            s = await c.get_server("caught")
            assert s.ready, s
            r = await c.call_tool("mcp__caught__whoami")
            assert r.text.startswith("called by client-"), r
            # The handler's answer alone completed it: the listener saw no
            # redirect (a second use of the code would fail at /token).
            assert len(protected.authorize_queries) == 1
            await c.forget_authorization("caught")
            await c.disconnect_server("caught")

    run_async(body())


def test_bad_oauth_config_is_refused(oauth_daemon: Daemon) -> None:
    with oauth_daemon.client() as c:
        stdio = ServerConfig("nope", ServerConfig.stdio("x", "true").transport, command="true", oauth=OAuthConfig(client_id="app"))
        with pytest.raises(InvalidArgument):
            c.connect_server(stdio)
        bad_method = ServerConfig.http("nope", "http://127.0.0.1:1/mcp", oauth=OAuthConfig(token_endpoint_auth_method="magic"))
        with pytest.raises(InvalidArgument):
            c.connect_server(bad_method)
        assert "nope" not in {s.name for s in c.servers()}


def test_restarted_daemon_reuses_the_token(mcpd_bin: str, tmp_path: Path, protected: ProtectedServer) -> None:
    state = tmp_path / "state"
    args = ["--oauth-state-dir", str(state), "--oauth-redirect-addr", "127.0.0.1:0"]
    first = Daemon(mcpd_bin, tmp_path, "first", args=args).start()
    try:
        with first.client() as c:
            s = c.connect_server(ServerConfig.http("kept", protected.mcp_url))
            assert s.authorization_required, s
            c.complete_authorization("kept", follow_consent(s.authorization_url))
            poll("the server to be ready", lambda: c.get_server("kept").ready)
    finally:
        first.stop()
    second = Daemon(mcpd_bin, tmp_path, "second", args=args).start()
    try:
        with second.client() as c:
            s = c.connect_server(ServerConfig.http("kept", protected.mcp_url))
            assert s.ready, s
            assert c.call_tool("mcp__kept__whoami").text.startswith("called by client-")
    finally:
        second.stop()
    assert len(protected.authorize_queries) == 1, "the restarted mcpd asked for consent again"
