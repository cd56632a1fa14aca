package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestOAuthStateDirUnusable: a default state directory that cannot be made
// (no writable home, a read-only root file system) leaves tokens in memory
// and mcpd serving; a directory named with --oauth-state-dir that cannot
// be made stops mcpd at start.
func TestOAuthStateDirUnusable(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := shortTempDir(t)
	// A path under a regular file can never be made, not even by root.
	blocker := filepath.Join(dir, "not-a-dir")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("default", func(t *testing.T) {
		d := startDaemon(ctx, t, daemonOptions{env: []string{"XDG_STATE_HOME=" + blocker, "HOME=" + blocker}})
		d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
		if log := d.log.String(); !strings.Contains(log, "OAuth tokens are kept in memory only") {
			t.Errorf("mcpd's log says nothing about keeping tokens in memory:\n%s", log)
		}
	})
	t.Run("explicit", func(t *testing.T) {
		sock := filepath.Join(shortTempDir(t), "mcpd.sock")
		code, out := runMcpd(ctx, t, "--listen", "unix://"+sock, "--config", emptyConfig(t), "--oauth-state-dir", filepath.Join(blocker, "oauth"))
		if code != 1 || !strings.Contains(out, "oauth state directory") {
			t.Errorf("got exit code %d and output %q, want 1 and an oauth state directory error", code, out)
		}
	})
}

// oauthUpstream is an OAuth-protected MCP server on loopback: a go-sdk
// Streamable HTTP server behind the SDK's bearer token middleware at /mcp,
// with its Protected Resource Metadata, and an authorization server of its
// own on another loopback port (metadata, dynamic client registration,
// authorization endpoint, token endpoint with refresh). The test controls
// which tokens still work.
type oauthUpstream struct {
	resource *httptest.Server
	as       *httptest.Server
	// browser is the person's browser: it trusts the authorization
	// server's certificate and stops where it redirects (see approve).
	browser *http.Client

	mu sync.Mutex
	// access: valid access tokens; refresh: valid refresh tokens; codes:
	// unused codes with their PKCE challenge.
	access  map[string]bool
	refresh map[string]bool
	codes   map[string]string
	// expiresIn is the expires_in of the next tokens.
	expiresIn int
	// secrets are every secret the servers handed out: tokens, codes, the
	// client secret. None may reach mcpd's log or a Server.
	secrets []string
	grants  map[string]int // token requests by grant_type
	n       int
	// tokenDown makes the token endpoint drop connections, as a network
	// failure would.
	tokenDown bool
	// refreshHangs makes the token endpoint take a refresh and answer it
	// only once released ends (as the test does); refreshHung is closed
	// when it first took one.
	refreshHangs bool
	refreshHung  chan struct{}
	// refreshDelay holds back the answer to every refresh.
	refreshDelay time.Duration
	hungOnce     sync.Once
	released     context.Context
	release      context.CancelFunc
}

const (
	oauthClientID     = "e2e-client-4b1f"
	oauthClientSecret = "e2e-client-secret-8c2d"
)

// oauthUpstreamTLS puts both servers of an oauthUpstream behind TLS.
type oauthUpstreamTLS struct {
	// resourceCA and asCA issue the certificates of the resource server
	// and of the authorization server.
	resourceCA, asCA *testCA
	// clientCA issues the client certificates the servers take: the
	// resource server requires one; the authorization server asks every
	// client for one, and its token endpoint refuses a client that
	// presented none (RFC 8705 client authentication), while a browser
	// without one gets to its authorization endpoint.
	clientCA *testCA
}

// newOAuthUpstream starts an oauthUpstream, on plain HTTP when tlsOpts is
// nil.
func newOAuthUpstream(t *testing.T, tlsOpts *oauthUpstreamTLS) *oauthUpstream {
	u := &oauthUpstream{access: map[string]bool{}, refresh: map[string]bool{}, codes: map[string]string{}, expiresIn: 3600,
		secrets: []string{oauthClientSecret}, grants: map[string]int{}, browser: noRedirects,
		refreshHung: make(chan struct{})}
	u.released, u.release = context.WithCancel(context.Background())
	// start starts ts, behind TLS with a certificate from ca if set.
	var resourceCA, asCA *testCA
	start := func(ts *httptest.Server, ca *testCA, clientAuth tls.ClientAuthType) {
		if ca == nil {
			ts.Start()
			return
		}
		cert, key := ca.serverCert(t, "upstream")
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		ts.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: clientAuth, ClientCAs: tlsOpts.clientCA.Pool(), MinVersion: tls.VersionTLS12}
		ts.Config.ErrorLog = log.New(io.Discard, "", 0) // a refused handshake shows in mcpd's last_error
		ts.StartTLS()
	}
	if tlsOpts != nil {
		resourceCA, asCA = tlsOpts.resourceCA, tlsOpts.asCA
		u.browser = &http.Client{
			Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: tlsOpts.asCA.Pool(), MinVersion: tls.VersionTLS12}},
			CheckRedirect: noRedirects.CheckRedirect,
		}
		t.Cleanup(u.browser.CloseIdleConnections)
	}

	srv := mcp.NewServer(&mcp.Implementation{Name: "oauth-e2e", Version: "1.0.0"}, nil)
	type echoIn struct {
		Message string `json:"message"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Message}}}, nil, nil
	})
	prm := &oauthex.ProtectedResourceMetadata{}
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		u.mu.Lock()
		defer u.mu.Unlock()
		if !u.access[token] {
			return nil, auth.ErrInvalidToken
		}
		// Whether a token still works is the test's decision, not the
		// clock's: the expiry the resource checks is far away.
		return &auth.TokenInfo{Scopes: []string{"echo"}, Expiration: time.Now().Add(time.Hour)}, nil
	}
	mux := http.NewServeMux()
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(prm))
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	u.resource = httptest.NewUnstartedServer(mux)
	start(u.resource, resourceCA, tls.RequireAndVerifyClientCert)
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: u.resource.URL + "/.well-known/oauth-protected-resource/mcp",
	})(handler))

	asMux := http.NewServeMux()
	u.as = httptest.NewUnstartedServer(asMux)
	start(u.as, asCA, tls.VerifyClientCertIfGiven)
	issuer := u.as.URL
	prm.Resource = u.resource.URL + "/mcp"
	prm.AuthorizationServers = []string{issuer}
	prm.ScopesSupported = []string{"echo"}
	t.Cleanup(func() {
		u.release() // Close waits for the refreshes held
		u.resource.CloseClientConnections()
		u.resource.Close()
		u.as.Close()
		// Sessions whose client went away without ending them (a revoked
		// token cannot end its session) hold a goroutine each.
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
	})

	asMux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeTestJSON(w, http.StatusOK, map[string]any{
			"issuer": issuer, "authorization_endpoint": issuer + "/authorize", "token_endpoint": issuer + "/token",
			"registration_endpoint": issuer + "/register", "response_types_supported": []string{"code"},
			"grant_types_supported":            []string{"authorization_code", "refresh_token"},
			"code_challenge_methods_supported": []string{"S256"}, "authorization_response_iss_parameter_supported": true,
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic"},
			"scopes_supported":                      []string{"echo", "offline_access"},
		})
	})
	asMux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		writeTestJSON(w, http.StatusCreated, map[string]any{
			"client_id": oauthClientID, "client_secret": oauthClientSecret, "token_endpoint_auth_method": "client_secret_basic",
		})
	})
	asMux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != oauthClientID || q.Get("code_challenge_method") != "S256" || q.Get("resource") != prm.Resource || q.Get("state") == "" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		u.mu.Lock()
		u.n++
		code := fmt.Sprintf("e2e-code-%d-9a7e", u.n)
		u.codes[code] = q.Get("code_challenge")
		u.secrets = append(u.secrets, code)
		u.mu.Unlock()
		to, err := url.Parse(q.Get("redirect_uri"))
		if err != nil {
			http.Error(w, "bad redirect_uri", http.StatusBadRequest)
			return
		}
		to.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {issuer}}.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	})
	asMux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		down := u.tokenDown
		u.mu.Unlock()
		if down {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		if id, secret, ok := r.BasicAuth(); !ok || id != oauthClientID || secret != oauthClientSecret {
			writeTestJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client"})
			return
		}
		if tlsOpts != nil && len(r.TLS.PeerCertificates) == 0 {
			writeTestJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client", "error_description": "no client certificate"})
			return
		}
		_ = r.ParseForm()
		u.mu.Lock()
		hang := u.refreshHangs && r.PostForm.Get("grant_type") == "refresh_token"
		if r.PostForm.Get("grant_type") == "refresh_token" {
			u.grants["refresh_token taken"]++
			delay := u.refreshDelay
			u.mu.Unlock()
			time.Sleep(delay)
			u.mu.Lock()
		}
		u.mu.Unlock()
		if hang {
			u.hungOnce.Do(func() { close(u.refreshHung) })
			select {
			case <-u.released.Done():
			case <-r.Context().Done():
			}
			return
		}
		u.mu.Lock()
		defer u.mu.Unlock()
		gt := r.PostForm.Get("grant_type")
		u.grants[gt]++
		switch gt {
		case "authorization_code":
			challenge, ok := u.codes[r.PostForm.Get("code")]
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != challenge || r.PostForm.Get("resource") != prm.Resource {
				writeTestJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant"})
				return
			}
			delete(u.codes, r.PostForm.Get("code"))
		case "refresh_token":
			if !u.refresh[r.PostForm.Get("refresh_token")] {
				writeTestJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant"})
				return
			}
			delete(u.refresh, r.PostForm.Get("refresh_token"))
		default:
			writeTestJSON(w, http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type"})
			return
		}
		u.n++
		access, refresh := fmt.Sprintf("e2e-access-%d-31f0", u.n), fmt.Sprintf("e2e-refresh-%d-77c5", u.n)
		u.access[access], u.refresh[refresh] = true, true
		u.secrets = append(u.secrets, access, refresh)
		writeTestJSON(w, http.StatusOK, map[string]any{
			"access_token": access, "token_type": "Bearer", "expires_in": u.expiresIn, "refresh_token": refresh, "scope": "echo offline_access",
		})
	})
	return u
}

func writeTestJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (u *oauthUpstream) url() string { return u.resource.URL + "/mcp" }

// expireAccess makes every access token issued so far fail at the
// resource, as expired tokens do.
func (u *oauthUpstream) expireAccess() {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.access)
}

// revoke makes every token issued so far fail: access and refresh.
func (u *oauthUpstream) revoke() {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.access)
	clear(u.refresh)
}

func (u *oauthUpstream) setTokenDown(down bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.tokenDown = down
}

// hangRefresh makes the token endpoint take every refresh from now on and
// never answer it (until the test ends).
func (u *oauthUpstream) hangRefresh() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.refreshHangs = true
}

// tookRefreshHung reports whether the token endpoint took a refresh that
// it holds.
func (u *oauthUpstream) tookRefreshHung() bool {
	select {
	case <-u.refreshHung:
		return true
	default:
		return false
	}
}

func (u *oauthUpstream) setExpiresIn(s int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.expiresIn = s
}

func (u *oauthUpstream) grantCount(gt string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.grants[gt]
}

func (u *oauthUpstream) allSecrets() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.secrets)
}

// authorizationAgent registers for SERVER_REQUEST_KIND_AUTHORIZATION and
// hands each request to the test, which replies.
type authorizationAgent struct {
	stream   mcpdv1.MCPHub_HandleServerRequestsClient
	requests chan *mcpdv1.ServerRequest
}

func startAuthorizationAgent(ctx context.Context, t *testing.T, d *daemon) *authorizationAgent {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	stream := registerAgent(ctx, t, d, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_AUTHORIZATION)
	a := &authorizationAgent{stream: stream, requests: make(chan *mcpdv1.ServerRequest, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			if req := m.GetRequest(); req != nil {
				a.requests <- req
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return a
}

// next returns the next request the agent got.
func (a *authorizationAgent) next(ctx context.Context, t *testing.T) *mcpdv1.ServerRequest {
	t.Helper()
	select {
	case req := <-a.requests:
		return req
	case <-ctx.Done():
		t.Fatal("the agent got no authorization request")
		return nil
	}
}

// reply answers a request with an empty authorization result: the URL was
// shown to a person, and the redirect reaches mcpd's listener.
func (a *authorizationAgent) reply(t *testing.T, req *mcpdv1.ServerRequest) {
	t.Helper()
	err := a.stream.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: &mcpdv1.ServerRequestReply{
		Id: req.GetId(), Result: &mcpdv1.ServerRequestReply_Authorization{Authorization: &mcpdv1.AuthorizationResult{}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
}

// noRedirects is a browser that stops where the authorization server sends
// it, so that the test sees the redirect URL.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// approve plays the person at the browser: it opens authURL and returns
// the URL the authorization server redirects to (mcpd's redirect
// listener, with code, state and iss), without following it.
func approve(ctx context.Context, t *testing.T, authURL string) string {
	t.Helper()
	return approveIn(ctx, t, noRedirects, authURL)
}

// approveIn is approve with browser, a client that does not follow
// redirects.
func approveIn(ctx context.Context, t *testing.T, browser *http.Client, authURL string) string {
	t.Helper()
	resp := httpGet(ctx, t, browser, authURL)
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorization endpoint: got HTTP %d, want a redirect", resp.StatusCode)
	}
	return resp.Header.Get("Location")
}

// httpGet gets u and returns the response with its body read and closed.
func httpGet(ctx context.Context, t *testing.T, c *http.Client, u string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func httpServerConfig(name, u string, o *mcpdv1.OAuthConfig) *mcpdv1.ServerConfig {
	return &mcpdv1.ServerConfig{Name: name, Transport: &mcpdv1.ServerConfig_Http{Http: &mcpdv1.HttpConfig{Url: u}}, Oauth: o}
}

// checkNoSecrets fails the test when any secret the upstream handed out
// is in text.
func checkNoSecrets(t *testing.T, what, text string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s holds the secret %q", what, s)
		}
	}
}

// serversText is every Server mcpd returns, from ListServers and GetServer,
// as JSON.
func serversText(ctx context.Context, t *testing.T, d *daemon) string {
	t.Helper()
	list, err := d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range list.GetServers() {
		b.WriteString(protojson.Format(s))
		got, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: s.GetName()})
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(protojson.Format(got.GetServer()))
	}
	return b.String()
}

// TestOAuthUpstream authorizes mcpd for an OAuth-protected server end to
// end: the first connect needs a person's consent, which an agent gets
// over HandleServerRequests and the browser's redirect completes; the
// token persists across a restart, is refreshed without anyone, and a
// revoked one asks for consent again, completed headless with
// CompleteAuthorization. No token, code or secret reaches the log or a
// Server; bad input changes nothing.
func TestOAuthUpstream(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	up := newOAuthUpstream(t, nil)
	stateDir := filepath.Join(shortTempDir(t), "oauth")
	opts := daemonOptions{config: emptyConfig(t), args: []string{"--oauth-state-dir", stateDir}}
	const (
		name = "protected"
		tool = "mcp__protected__echo"
	)
	var logs []string

	d := startDaemon(ctx, t, opts)
	agent := startAuthorizationAgent(ctx, t, d)
	events := d.subscribe(ctx, t, name, mcpdv1.EventKind_EVENT_KIND_SERVER_STATE)

	// The first connect needs consent: ConnectServer returns at once.
	resp, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: httpServerConfig(name, up.url(), nil)})
	if err != nil {
		t.Fatalf("ConnectServer: %v", err)
	}
	srv := resp.GetServer()
	if srv.GetState() != mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED || srv.GetAuthorizationUrl() == "" || srv.GetAuthorizationExpireTime() == nil {
		t.Fatalf("ConnectServer: got state %v, authorization_url %q, expire time %v; want AUTHORIZATION_REQUIRED with both",
			srv.GetState(), srv.GetAuthorizationUrl(), srv.GetAuthorizationExpireTime())
	}
	authURL := srv.GetAuthorizationUrl()
	if !strings.HasPrefix(authURL, up.as.URL+"/authorize?") {
		t.Errorf("authorization_url %q is not the authorization server's endpoint", authURL)
	}
	for {
		m, err := events.Recv()
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		if m.GetEvent().GetServerState().GetState() == mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED {
			break
		}
	}
	req := agent.next(ctx, t)
	if req.GetServer() != name || req.GetAuthorization().GetAuthorizationUrl() != authURL || req.GetAuthorization().GetExpireTime() == nil {
		t.Fatalf("the agent got %v, want the authorization of %q at %s", req, name, authURL)
	}
	_, err = d.call(ctx, t, tool, map[string]any{"message": "too early"}, 0)
	if st := wantCode(t, err, codes.FailedPrecondition); !strings.Contains(st.Message(), "CompleteAuthorization") {
		t.Errorf("a call waiting for consent: got %q, want a message that says what to do", st.Message())
	}

	// The person consents; the browser goes to mcpd's redirect listener.
	redirect := approve(ctx, t, authURL)
	callback, err := url.Parse(redirect)
	if err != nil || callback.Hostname() != "127.0.0.1" || callback.Path != "/oauth/callback" {
		t.Fatalf("the authorization server redirects to %q, want mcpd's loopback redirect listener", redirect)
	}
	// A redirect with a wrong state is refused and changes nothing: the
	// code it carries stays unused.
	forged := *callback
	q := forged.Query()
	q.Set("state", "not-the-state")
	forged.RawQuery = q.Encode()
	if r := httpGet(ctx, t, http.DefaultClient, forged.String()); r.StatusCode != http.StatusBadRequest {
		t.Errorf("a redirect with a wrong state: got HTTP %d, want 400", r.StatusCode)
	}
	if n := up.grantCount("authorization_code"); n != 0 {
		t.Errorf("a redirect with a wrong state reached the token endpoint (%d code exchanges)", n)
	}
	if got := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED); got.GetAuthorizationUrl() != authURL {
		t.Errorf("after a wrong state: authorization_url %q, want %q unchanged", got.GetAuthorizationUrl(), authURL)
	}
	if r := httpGet(ctx, t, http.DefaultClient, redirect); r.StatusCode != http.StatusOK {
		t.Fatalf("the redirect listener: got HTTP %d, want 200", r.StatusCode)
	}
	agent.reply(t, req)
	d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
	if got := text(d.mustCall(ctx, t, tool, map[string]any{"message": "hello"})); got != "echo: hello" {
		t.Errorf("CallTool: got %q, want %q", got, "echo: hello")
	}

	// Tokens persist: a 0700 directory of 0600 files.
	checkMode(t, stateDir, 0o700)
	files, err := os.ReadDir(stateDir)
	if err != nil || len(files) == 0 {
		t.Fatalf("state directory: %v, %d files; want the server's record", err, len(files))
	}
	for _, f := range files {
		checkMode(t, filepath.Join(stateDir, f.Name()), 0o600)
	}

	// An access token that no longer works (as an expired one) is
	// refreshed without the agent; so is one about to expire (a lifetime
	// shorter than mcpd's renewal margin), before it is sent.
	up.setExpiresIn(1)
	up.expireAccess()
	if got := text(d.mustCall(ctx, t, tool, map[string]any{"message": "after expiry"})); got != "echo: after expiry" {
		t.Errorf("CallTool after the token expired: got %q", got)
	}
	if n := up.grantCount("refresh_token"); n != 1 {
		t.Errorf("after a 401: %d refreshes, want 1", n)
	}
	up.setExpiresIn(3600)
	if got := text(d.mustCall(ctx, t, tool, map[string]any{"message": "before expiry"})); got != "echo: before expiry" {
		t.Errorf("CallTool with a token about to expire: got %q", got)
	}
	if n := up.grantCount("refresh_token"); n != 2 {
		t.Errorf("with a token about to expire: %d refreshes in all, want 2", n)
	}
	if got := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY); got.GetAuthorizationUrl() != "" {
		t.Errorf("after refreshes: authorization_url %q, want none", got.GetAuthorizationUrl())
	}
	if n := up.grantCount("authorization_code"); n != 1 {
		t.Errorf("%d code exchanges, want 1: refreshing asked for consent", n)
	}

	checkNoSecrets(t, "a Server", serversText(ctx, t, d), up.allSecrets())
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("mcpd exited with %d", code)
	}
	logs = append(logs, d.log.String())

	// A restarted mcpd reuses the stored token: no second consent.
	d = startDaemon(ctx, t, opts)
	resp, err = d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: httpServerConfig(name, up.url(), nil)})
	if err != nil {
		t.Fatalf("ConnectServer after a restart: %v", err)
	}
	if s := resp.GetServer(); s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("ConnectServer after a restart: got %v (%s), want READY with the stored token", s.GetState(), s.GetLastError())
	}
	if got := text(d.mustCall(ctx, t, tool, map[string]any{"message": "again"})); got != "echo: again" {
		t.Errorf("CallTool after a restart: got %q", got)
	}

	// Bad input is refused and changes nothing: the server stays as it is.
	before := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
	keyFile := filepath.Join(shortTempDir(t), "missing-key.pem")
	for _, tc := range []struct {
		what string
		cfg  *mcpdv1.ServerConfig
		want string
	}{
		{"an oauth block on a stdio server", &mcpdv1.ServerConfig{
			Name: name, Transport: &mcpdv1.ServerConfig_Stdio{Stdio: &mcpdv1.StdioConfig{Command: mcpdBinary(t), Args: []string{"demo-server"}}},
			Oauth: &mcpdv1.OAuthConfig{ClientId: "x"},
		}, "stdio server takes no oauth block"},
		{"an unknown auth method", httpServerConfig(name, up.url(), &mcpdv1.OAuthConfig{TokenEndpointAuthMethod: "client_secret_jwt_magic"}), "tokenEndpointAuthMethod"},
		{"a missing key file", httpServerConfig(name, up.url(), &mcpdv1.OAuthConfig{
			ClientId: "x", TokenEndpointAuthMethod: "private_key_jwt", PrivateKeyFile: keyFile,
		}), "privateKeyFile"},
	} {
		for _, replace := range []bool{false, true} {
			_, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: tc.cfg, Replace: replace})
			if st := wantCode(t, err, codes.InvalidArgument); !strings.Contains(st.Message(), tc.want) {
				t.Errorf("%s: got %q, want a message about %s", tc.what, st.Message(), tc.want)
			}
		}
		_, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{
			Name: "other", Transport: tc.cfg.GetTransport(), Oauth: tc.cfg.GetOauth(),
		}})
		wantCode(t, err, codes.InvalidArgument)
		if _, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "other"}); status.Code(err) != codes.NotFound {
			t.Errorf("%s: a refused server was added: %v", tc.what, err)
		}
	}
	after := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
	if !proto.Equal(before, after) {
		t.Errorf("refused requests changed the server:\nbefore %v\nafter  %v", before, after)
	}

	// A revoked refresh token brings the consent back; a headless host
	// completes it with CompleteAuthorization.
	up.revoke()
	_, err = d.call(ctx, t, tool, map[string]any{"message": "revoked"}, 0)
	wantCode(t, err, codes.FailedPrecondition)
	srv = d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED)
	staleURL := srv.GetAuthorizationUrl()
	if staleURL == "" {
		t.Fatal("AUTHORIZATION_REQUIRED without an authorization_url")
	}
	staleRedirect := approve(ctx, t, staleURL)
	// Replacing the server ends the consent it waited for, as
	// DisconnectServer does: the new one asks afresh.
	resp, err = d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: httpServerConfig(name, up.url(), nil), Replace: true})
	if err != nil {
		t.Fatalf("ConnectServer replace: %v", err)
	}
	authURL = resp.GetServer().GetAuthorizationUrl()
	if resp.GetServer().GetState() != mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED || authURL == "" || authURL == staleURL {
		t.Fatalf("ConnectServer replace: got %v at %q, want AUTHORIZATION_REQUIRED with a new authorization_url", resp.GetServer().GetState(), authURL)
	}
	if r := httpGet(ctx, t, http.DefaultClient, staleRedirect); r.StatusCode != http.StatusBadRequest {
		t.Errorf("the redirect of the replaced server's consent: got HTTP %d, want 400", r.StatusCode)
	}
	redirect = approve(ctx, t, authURL)
	for _, bad := range []string{"::not a url", "http://127.0.0.1:1/oauth/callback", strings.Replace(redirect, "state=", "state=x", 1)} {
		_, err := d.hub.CompleteAuthorization(ctx, &mcpdv1.CompleteAuthorizationRequest{Server: name, RedirectUrl: bad})
		wantCode(t, err, codes.InvalidArgument)
	}
	if got := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED); got.GetAuthorizationUrl() != authURL {
		t.Errorf("after bad redirect URLs: authorization_url %q, want %q unchanged", got.GetAuthorizationUrl(), authURL)
	}
	// A token endpoint out of reach is UNAVAILABLE, and the consent stays
	// pending: the same redirect URL completes it once it is back.
	up.setTokenDown(true)
	_, err = d.hub.CompleteAuthorization(ctx, &mcpdv1.CompleteAuthorizationRequest{Server: name, RedirectUrl: redirect})
	wantCode(t, err, codes.Unavailable)
	if got := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED); got.GetAuthorizationUrl() != authURL {
		t.Errorf("after a network failure: authorization_url %q, want %q unchanged", got.GetAuthorizationUrl(), authURL)
	}
	up.setTokenDown(false)
	done, err := d.hub.CompleteAuthorization(ctx, &mcpdv1.CompleteAuthorizationRequest{Server: name, RedirectUrl: redirect})
	if err != nil {
		t.Fatalf("CompleteAuthorization: %v", err)
	}
	if done.GetServer().GetName() != name {
		t.Errorf("CompleteAuthorization returned %v", done.GetServer())
	}
	checkNoSecrets(t, "CompleteAuthorization's Server", protojson.Format(done.GetServer()), up.allSecrets())
	d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
	if got := text(d.mustCall(ctx, t, tool, map[string]any{"message": "headless"})); got != "echo: headless" {
		t.Errorf("CallTool after CompleteAuthorization: got %q", got)
	}
	_, err = d.hub.CompleteAuthorization(ctx, &mcpdv1.CompleteAuthorizationRequest{Server: name, RedirectUrl: redirect})
	wantCode(t, err, codes.FailedPrecondition)

	checkNoSecrets(t, "a Server", serversText(ctx, t, d), up.allSecrets())

	// ForgetAuthorization: a state directory it cannot change is
	// FAILED_PRECONDITION, naming no path; then it forgets, and the server
	// needs consent again.
	record := filepath.Join(stateDir, name+".json")
	if err := os.Remove(record); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(record, "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = d.hub.ForgetAuthorization(ctx, &mcpdv1.ForgetAuthorizationRequest{Server: name})
	if st := wantCode(t, err, codes.FailedPrecondition); strings.Contains(st.Message(), stateDir) {
		t.Errorf("ForgetAuthorization: %q names the state directory", st.Message())
	}
	if err := os.RemoveAll(record); err != nil {
		t.Fatal(err)
	}
	if _, err := d.hub.ForgetAuthorization(ctx, &mcpdv1.ForgetAuthorizationRequest{Server: name}); err != nil {
		t.Fatalf("ForgetAuthorization: %v", err)
	}
	_, err = d.call(ctx, t, tool, map[string]any{"message": "forgotten"}, 0)
	wantCode(t, err, codes.FailedPrecondition)
	d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED)

	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("mcpd exited with %d", code)
	}
	logs = append(logs, d.log.String())
	for i, log := range logs {
		checkNoSecrets(t, fmt.Sprintf("mcpd's log (daemon %d)", i+1), log, up.allSecrets())
	}
	if n := up.grantCount("authorization_code"); n != 2 {
		t.Errorf("%d code exchanges in all, want 2", n)
	}
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %o, want %o", path, got, want)
	}
}

// TestOAuthURLOnlyForWhoMayComplete: a server's authorization_url, which
// binds the server to whoever consents at it, is shown by GetServer and
// ListServers only to callers who may complete the flow anyway: those who
// may manage the server or answer its authorization requests. A caller who
// may only see the server sees its state and the expiry, not the URL.
func TestOAuthURLOnlyForWhoMayComplete(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	up := newOAuthUpstream(t, nil)
	const (
		name          = "protected"
		viewerToken   = "viewer-token-64b1"
		approverToken = "approver-token-90c3"
	)
	callers := writeConfig(t, mustJSON(t, map[string]any{"callers": []any{
		map[string]any{"name": "admin", "token_sha256": sha256Hex(adminToken), "permissions": map[string]any{"servers": []string{"*"}, "manage": true}},
		map[string]any{"name": "viewer", "token_sha256": sha256Hex(viewerToken), "permissions": map[string]any{"servers": []string{"*"}}},
		map[string]any{"name": "approver", "token_sha256": sha256Hex(approverToken), "permissions": map[string]any{
			"servers": []string{name}, "server_requests": []string{"authorization"}}},
	}}))
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{
		"--oauth-state-dir", filepath.Join(shortTempDir(t), "oauth"), "--callers", callers}})
	resp, err := d.hub.ConnectServer(bearer(ctx, adminToken), &mcpdv1.ConnectServerRequest{Server: httpServerConfig(name, up.url(), nil)})
	if err != nil {
		t.Fatalf("ConnectServer: %v", err)
	}
	authURL := resp.GetServer().GetAuthorizationUrl()
	if resp.GetServer().GetState() != mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED || authURL == "" {
		t.Fatalf("ConnectServer: got state %v, authorization_url %q; want AUTHORIZATION_REQUIRED with a URL", resp.GetServer().GetState(), authURL)
	}
	for _, tc := range []struct {
		caller, token, want string
	}{
		{"admin", adminToken, authURL},
		{"approver", approverToken, authURL},
		{"viewer", viewerToken, ""},
	} {
		ctx := bearer(ctx, tc.token)
		got, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: name})
		if err != nil {
			t.Fatalf("%s: GetServer: %v", tc.caller, err)
		}
		list, err := d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{})
		if err != nil || len(list.GetServers()) != 1 {
			t.Fatalf("%s: ListServers: %v, %v", tc.caller, list, err)
		}
		for rpc, srv := range map[string]*mcpdv1.Server{"GetServer": got.GetServer(), "ListServers": list.GetServers()[0]} {
			if srv.GetAuthorizationUrl() != tc.want || srv.GetState() != mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED || srv.GetAuthorizationExpireTime() == nil {
				t.Errorf("%s: %s: got state %v, authorization_url %q, expiry %v; want AUTHORIZATION_REQUIRED, %q, an expiry",
					tc.caller, rpc, srv.GetState(), srv.GetAuthorizationUrl(), srv.GetAuthorizationExpireTime(), tc.want)
			}
		}
	}
}

// TestForgetAuthorizationOfAGoneServer: the tokens a server no longer
// connected left in the OAuth state directory are deleted by
// ForgetAuthorization with its name; a name with nothing stored is
// NOT_FOUND.
func TestForgetAuthorizationOfAGoneServer(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	stateDir := filepath.Join(shortTempDir(t), "oauth")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(stateDir, "gone.json")
	if err := os.WriteFile(record, []byte(`{"resource": "https://gone.example/mcp"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--oauth-state-dir", stateDir}})
	if _, err := d.hub.ForgetAuthorization(ctx, &mcpdv1.ForgetAuthorizationRequest{Server: "gone"}); err != nil {
		t.Fatalf("ForgetAuthorization of a gone server's stored tokens: %v", err)
	}
	if _, err := os.Stat(record); !os.IsNotExist(err) {
		t.Errorf("its record: %v, want it deleted", err)
	}
	_, err := d.hub.ForgetAuthorization(ctx, &mcpdv1.ForgetAuthorizationRequest{Server: "never"})
	wantCode(t, err, codes.NotFound)
}

// TestOAuthConsentThroughAnotherInstance: two mcpd sharing the OAuth state
// directory (the per-user default) wait for a person's consent to the same
// server; the person consents through the first. The second takes the
// token the first saved and becomes READY without asking anyone again.
// When the token expires, both renew it at once: one spends the refresh
// token, the other takes what it saved.
func TestOAuthConsentThroughAnotherInstance(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	up := newOAuthUpstream(t, nil)
	stateDir := filepath.Join(shortTempDir(t), "oauth")
	opts := daemonOptions{config: emptyConfig(t), args: []string{"--oauth-state-dir", stateDir}}
	const name = "protected"
	daemons := []*daemon{startDaemon(ctx, t, opts), startDaemon(ctx, t, opts)}
	var authURLs []string
	for _, d := range daemons {
		resp, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: httpServerConfig(name, up.url(), nil)})
		if err != nil {
			t.Fatalf("ConnectServer: %v", err)
		}
		if srv := resp.GetServer(); srv.GetState() != mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED {
			t.Fatalf("ConnectServer: got state %v, want AUTHORIZATION_REQUIRED", srv.GetState())
		}
		authURLs = append(authURLs, resp.GetServer().GetAuthorizationUrl())
	}
	redirect := approve(ctx, t, authURLs[0])
	if r := httpGet(ctx, t, http.DefaultClient, redirect); r.StatusCode != http.StatusOK {
		t.Fatalf("the first instance's redirect listener: got HTTP %d, want 200", r.StatusCode)
	}
	for i, d := range daemons {
		d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
		if got := text(d.mustCall(ctx, t, "mcp__protected__echo", map[string]any{"message": "hi"})); got != "echo: hi" {
			t.Errorf("instance %d: CallTool got %q, want %q", i+1, got, "echo: hi")
		}
	}
	if n := up.grantCount("authorization_code"); n != 1 {
		t.Errorf("the authorization server exchanged %d codes, want 1: one consent for both instances", n)
	}

	up.expireAccess()
	up.mu.Lock()
	up.refreshDelay = 500 * time.Millisecond // both renewals overlap without the lock
	up.mu.Unlock()
	got := make(chan string, len(daemons))
	args := mustStruct(t, map[string]any{"message": "again"})
	for _, d := range daemons {
		go func() {
			res, err := d.hub.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__protected__echo", Arguments: args})
			if err != nil {
				got <- err.Error()
				return
			}
			got <- text(res)
		}()
	}
	for range daemons {
		if g := <-got; g != "echo: again" {
			t.Errorf("CallTool with an expired token: got %q, want %q", g, "echo: again")
		}
	}
	if n := up.grantCount("refresh_token taken"); n != 1 {
		t.Errorf("the authorization server took %d refreshes, want 1: the second instance takes the renewed token", n)
	}
}
