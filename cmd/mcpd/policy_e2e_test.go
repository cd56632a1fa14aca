package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// tokenEndpointSpy is an HTTP MCP server that wants OAuth, with its own
// authorization server, whose token endpoint records the form values it
// is sent (the assertions and ID tokens of the grants without a person)
// and refuses every request; with echo, its error_description quotes
// them, as careless authorization servers do.
type tokenEndpointSpy struct {
	srv  *httptest.Server
	echo bool
	mu   sync.Mutex
	sent []string
}

func newTokenEndpointSpy(t *testing.T, echo bool) *tokenEndpointSpy {
	t.Helper()
	s := &tokenEndpointSpy{echo: echo}
	mux := http.NewServeMux()
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	base := s.srv.URL
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+base+`/.well-known/oauth-protected-resource/mcp"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		writeTestJSON(w, http.StatusOK, map[string]any{"resource": base + "/mcp", "authorization_servers": []string{base}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		writeTestJSON(w, http.StatusOK, map[string]any{
			"issuer": base, "token_endpoint": base + "/token", "response_types_supported": []string{"code"},
			"grant_types_supported":            []string{"client_credentials", "urn:ietf:params:oauth:grant-type:jwt-bearer"},
			"code_challenge_methods_supported": []string{"S256"},
		})
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		s.mu.Lock()
		for _, vs := range r.PostForm {
			s.sent = append(s.sent, vs...)
		}
		s.mu.Unlock()
		answer := map[string]any{"error": "invalid_grant"}
		if s.echo {
			answer["error_description"] = "refused: " + r.PostForm.Encode()
		}
		writeTestJSON(w, http.StatusBadRequest, answer)
	})
	return s
}

// received reports whether the token endpoint was sent a value holding
// text.
func (s *tokenEndpointSpy) received(text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.sent {
		if strings.Contains(v, text) {
			return true
		}
	}
	return false
}

// TestAllowCommandKeepsLocalFiles: with --allow-command in force, a
// ConnectServer request cannot have mcpd read a file of its choosing for
// an OAuth grant (an assertion, an ID token, a signing key) and send it,
// or a signature made with it, to an authorization server the request
// names: that would read (or sign with) any file of mcpd's user, its API
// token file and the servers' keys among them; nor name the files of a
// tls block.
func TestAllowCommandKeepsLocalFiles(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	secret := filepath.Join(t.TempDir(), "secret")
	const secretText = "file-secret-5d1e2b"
	if err := os.WriteFile(secret, []byte(secretText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spy := newTokenEndpointSpy(t, false)
	requests := map[string]*mcpdv1.OAuthConfig{
		"assertion-file": {Grant: "jwt_bearer", AssertionFile: secret},
		"id-token-file": {Grant: "token_exchange", ClientId: "mcpd", Idp: &mcpdv1.OAuthIdentityProvider{
			Issuer: spy.srv.URL, TokenEndpoint: spy.srv.URL + "/token", IdTokenFile: secret,
		}},
		"private-key-file": {Grant: "client_credentials", ClientId: "mcpd", PrivateKeyFile: secret},
	}
	for _, allow := range []string{"none", "/bin/true"} {
		d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--allow-command", allow}})
		for name, o := range requests {
			_, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: httpServerConfig(name, spy.srv.URL+"/mcp", o)})
			if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "--allow-command") {
				t.Errorf("--allow-command %s: ConnectServer with oauth %v: got %v, want PERMISSION_DENIED naming --allow-command", allow, o, err)
			}
		}
		// A tls block names files too: a client key mcpd would prove its
		// identity with, a CA it would trust with the server's headers.
		_, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{
			Name: "tls", Transport: &mcpdv1.ServerConfig_Http{Http: &mcpdv1.HttpConfig{Url: spy.srv.URL + "/mcp", Tls: &mcpdv1.TlsConfig{CaFile: secret}}},
		}})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "--allow-command") {
			t.Errorf("--allow-command %s: ConnectServer with tls: got %v, want PERMISSION_DENIED naming --allow-command", allow, err)
		}
		if spy.received(secretText) {
			t.Errorf("--allow-command %s: the token endpoint a request named was sent the contents of a local file", allow)
		}
	}
}

// TestTokenEndpointEchoNotShown: an authorization server that quotes the
// request in its error_description does not get mcpd to show the client
// secret or the assertion it sent, in last_error or in the log.
func TestTokenEndpointEchoNotShown(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	spy := newTokenEndpointSpy(t, true)
	const clientSecret, assertion = "client-secret-91be0c", "inline-assertion-7c2a9f"
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	o := &mcpdv1.OAuthConfig{Grant: "jwt_bearer", Assertion: assertion, ClientId: "mcpd",
		ClientSecret: clientSecret, TokenEndpointAuthMethod: "client_secret_post"}
	resp, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: httpServerConfig("echoing", spy.srv.URL+"/mcp", o)})
	if err != nil {
		t.Fatalf("ConnectServer: %v", err)
	}
	if !spy.received(assertion) {
		t.Fatalf("the token endpoint was not asked for a token (server %v)", resp.GetServer())
	}
	if !strings.Contains(resp.GetServer().GetLastError(), "invalid_grant") {
		t.Errorf("last_error %q: want the token endpoint's refusal", resp.GetServer().GetLastError())
	}
	secrets := []string{clientSecret, assertion}
	checkNoSecrets(t, "ConnectServer's answer", resp.GetServer().GetLastError(), secrets)
	checkNoSecrets(t, "ListServers and GetServer", serversText(ctx, t, d), secrets)
	checkNoSecrets(t, "mcpd's log", d.log.String(), secrets)
}

// TestAllowCommandRefusesLoaderEnv: an allowed program does not start with
// the dynamic loader's variables from the request (LD_PRELOAD and the
// like), which would load code of the request's choosing into it, whatever
// the program.
func TestAllowCommandRefusesLoaderEnv(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--allow-command", "/bin/true"}})
	for _, name := range []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES"} {
		env := map[string]string{name: filepath.Join(t.TempDir(), "inject.so")}
		_, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: stdioConfig(strings.ToLower(strings.ReplaceAll(name, "_", "-")), "/bin/true", nil, env)})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), name) {
			t.Errorf("ConnectServer /bin/true with %s in env: got %v, want PERMISSION_DENIED naming it", name, err)
		}
	}
	// Other variables reach the program as before.
	_, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: stdioConfig("plain", "/bin/true", nil, map[string]string{"LOG_LEVEL": "debug"})})
	if err != nil {
		t.Errorf("ConnectServer /bin/true with LOG_LEVEL in env: %v", err)
	}
}
