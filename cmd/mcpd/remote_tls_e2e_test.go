package main

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestRemoteServerMutualTLS: a config file's tls block lets mcpd reach a
// Streamable HTTP server behind mutual TLS whose certificate comes from a
// private CA; without the block the same server is unreachable, a tls
// block on a stdio server is refused with an error naming the field, and
// a rotated client certificate is used on the server's next connect
// without a restart of mcpd.
func TestRemoteServerMutualTLS(t *testing.T) {
	ctx := testContext(t)
	serverCA, clientCA, rogueCA := newCA(t, "upstream"), newCA(t, "clients"), newCA(t, "rogue")
	serverCert, serverKey := serverCA.serverCert(t, "upstream")
	pair, err := tls.LoadX509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}

	srv := mcp.NewServer(&mcp.Implementation{Name: "internal", Version: "0.0.1"}, nil)
	type in struct {
		Message string `json:"message"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Message}}}, nil, nil
	})
	up := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCA.Pool(), MinVersion: tls.VersionTLS12}
	up.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	up.StartTLS()
	t.Cleanup(func() {
		up.CloseClientConnections()
		up.Close()
	})

	// The client's files, in a directory the config names through a
	// variable.
	certs := shortTempDir(t)
	copyFile := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(certs, to), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(serverCA.path, "ca.pem")
	goodCert, goodKey := clientCA.issue(t, "mcpd", certSpec{CN: "mcpd"})
	copyFile(goodCert, "client.pem")
	copyFile(goodKey, "client-key.pem")

	cfg := writeConfig(t, `{"mcpServers": {
  "internal": {"type": "http", "url": "`+up.URL+`",
    "tls": {"ca": "${UPSTREAM_CERTS}/ca.pem", "cert": "${UPSTREAM_CERTS}/client.pem", "key": "${UPSTREAM_CERTS}/client-key.pem"}},
  "plain": {"type": "http", "url": "`+up.URL+`"},
  "stdio": {"command": "cat", "tls": {"ca": "${UPSTREAM_CERTS}/ca.pem"}}
}}`)
	d := startDaemon(ctx, t, daemonOptions{config: cfg, env: []string{"UPSTREAM_CERTS=" + certs}})

	d.waitServer(ctx, t, "internal", mcpdv1.ServerState_SERVER_STATE_READY)
	if got := text(d.mustCall(ctx, t, "mcp__internal__echo", map[string]any{"message": "through mTLS"})); got != "through mTLS" {
		t.Errorf("echo: got %q, want %q", got, "through mTLS")
	}
	if s := d.waitServer(ctx, t, "plain", mcpdv1.ServerState_SERVER_STATE_FAILED); !strings.Contains(s.GetLastError(), "unknown authority") {
		t.Errorf("plain: got last error %q, want the unknown authority", s.GetLastError())
	}
	if s := d.waitServer(ctx, t, "stdio", mcpdv1.ServerState_SERVER_STATE_FAILED); !strings.Contains(s.GetLastError(), "stdio server takes no tls block") {
		t.Errorf("stdio: got last error %q, want the tls block refused", s.GetLastError())
	}

	// Rotation: a client certificate the server does not accept, then a
	// good one again; each takes effect at the next connect.
	restart := func() {
		t.Helper()
		if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "internal"}); err != nil {
			t.Logf("RestartServer: %v", err) // the state below says how it went
		}
	}
	rogueCert, rogueKey := rogueCA.issue(t, "rogue", certSpec{CN: "mcpd"})
	copyFile(rogueCert, "client.pem")
	copyFile(rogueKey, "client-key.pem")
	restart()
	s := d.waitServer(ctx, t, "internal", mcpdv1.ServerState_SERVER_STATE_FAILED, mcpdv1.ServerState_SERVER_STATE_RECONNECTING)
	if e := s.GetLastError(); !strings.Contains(e, "bad certificate") && !strings.Contains(e, "unknown certificate authority") {
		t.Errorf("internal with a rogue client certificate: got last error %q, want the server's refusal", e)
	}
	newCert, newKey := clientCA.issue(t, "mcpd-rotated", certSpec{CN: "mcpd"})
	copyFile(newCert, "client.pem")
	copyFile(newKey, "client-key.pem")
	restart()
	d.waitServer(ctx, t, "internal", mcpdv1.ServerState_SERVER_STATE_READY)
	if got := text(d.mustCall(ctx, t, "mcp__internal__echo", map[string]any{"message": "rotated"})); got != "rotated" {
		t.Errorf("echo after rotation: got %q, want %q", got, "rotated")
	}

	// The same through ConnectServer, whose tls names the files as the
	// block does (absolute paths; no variables).
	api := &mcpdv1.TlsConfig{CaFile: filepath.Join(certs, "ca.pem"), CertFile: filepath.Join(certs, "client.pem"), KeyFile: filepath.Join(certs, "client-key.pem")}
	resp, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{
		Name: "api", Transport: &mcpdv1.ServerConfig_Remote{Remote: &mcpdv1.HttpConfig{Url: up.URL, Tls: api}},
	}})
	if err != nil || resp.GetServer().GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("ConnectServer with tls: got %v, %v, want READY", resp.GetServer(), err)
	}
	if got := text(d.mustCall(ctx, t, "mcp__api__echo", map[string]any{"message": "through the API"})); got != "through the API" {
		t.Errorf("echo of the API's server: got %q, want %q", got, "through the API")
	}
	for name, bad := range map[string]*mcpdv1.TlsConfig{
		"empty":    {},
		"relative": {CaFile: "ca.pem"},
		"key only": {KeyFile: api.KeyFile},
	} {
		_, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{
			Name: "bad", Transport: &mcpdv1.ServerConfig_Http{Http: &mcpdv1.HttpConfig{Url: up.URL, Tls: bad}},
		}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "tls") {
			t.Errorf("ConnectServer with a %s tls: got %v, want INVALID_ARGUMENT naming tls", name, err)
		}
	}

	for _, k := range []string{goodKey, rogueKey, newKey} {
		b, err := os.ReadFile(k)
		if err != nil {
			t.Fatal(err)
		}
		if body := strings.Split(string(b), "\n")[1]; strings.Contains(d.log.String(), body) {
			t.Errorf("mcpd's log holds the client key %s", k)
		}
	}
}

// TestOAuthTLSBlock: the OAuth requests of a server with a tls block use
// the block too. The server is behind mutual TLS with a private CA, and
// so is its protected resource metadata; its authorization server, whose
// token endpoint refuses a client without a certificate from that CA, is
// behind the same CA ("internal"), or has a certificate that chains to
// the system's roots (here SSL_CERT_FILE; "public"). Each server reaches
// READY after consent, a tool call works, and the refresh of an expired
// token goes the same way.
func TestOAuthTLSBlock(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	privateCA, publicCA := newCA(t, "private"), newCA(t, "public")
	ups := map[string]*oauthUpstream{
		"internal": newOAuthUpstream(t, &oauthUpstreamTLS{resourceCA: privateCA, asCA: privateCA, clientCA: privateCA}),
		"public":   newOAuthUpstream(t, &oauthUpstreamTLS{resourceCA: privateCA, asCA: publicCA, clientCA: privateCA}),
	}
	clientCert, clientKey := privateCA.issue(t, "mcpd", certSpec{CN: "mcpd"})
	block := mustJSON(t, map[string]string{"ca": privateCA.path, "cert": clientCert, "key": clientKey})
	cfg := writeConfig(t, `{"mcpServers": {
  "internal": {"type": "http", "url": "`+ups["internal"].url()+`", "tls": `+block+`},
  "public": {"type": "http", "url": "`+ups["public"].url()+`", "tls": `+block+`}
}}`)
	d := startDaemon(ctx, t, daemonOptions{
		config: cfg,
		args:   []string{"--oauth-state-dir", filepath.Join(shortTempDir(t), "oauth")},
		env:    []string{"SSL_CERT_FILE=" + publicCA.path},
	})

	for _, name := range []string{"internal", "public"} {
		up := ups[name]
		s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED, mcpdv1.ServerState_SERVER_STATE_FAILED)
		if s.GetState() != mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED || !strings.HasPrefix(s.GetAuthorizationUrl(), up.as.URL+"/authorize?") {
			t.Fatalf("%s: got %v (last error %q) at %q, want AUTHORIZATION_REQUIRED at its authorization server", name, s.GetState(), s.GetLastError(), s.GetAuthorizationUrl())
		}
		redirect := approveIn(ctx, t, up.browser, s.GetAuthorizationUrl())
		if r := httpGet(ctx, t, http.DefaultClient, redirect); r.StatusCode != http.StatusOK {
			t.Fatalf("%s: the redirect listener: got HTTP %d, want 200", name, r.StatusCode)
		}
		if s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY, mcpdv1.ServerState_SERVER_STATE_FAILED); s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
			t.Fatalf("%s: after consent: got %v (last error %q), want READY", name, s.GetState(), s.GetLastError())
		}
		tool := "mcp__" + name + "__echo"
		if got := text(d.mustCall(ctx, t, tool, map[string]any{"message": "hello"})); got != "echo: hello" {
			t.Errorf("%s: CallTool: got %q, want %q", name, got, "echo: hello")
		}
		up.expireAccess()
		if got := text(d.mustCall(ctx, t, tool, map[string]any{"message": "refreshed"})); got != "echo: refreshed" {
			t.Errorf("%s: CallTool after the token expired: got %q", name, got)
		}
		if n, m := up.grantCount("authorization_code"), up.grantCount("refresh_token"); n != 1 || m != 1 {
			t.Errorf("%s: %d code exchanges and %d refreshes, want 1 and 1", name, n, m)
		}
		checkNoSecrets(t, "mcpd's log", d.log.String(), up.allSecrets())
	}
	key, err := os.ReadFile(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	if body := strings.Split(string(key), "\n")[1]; strings.Contains(d.log.String(), body) {
		t.Error("mcpd's log holds the client key")
	}
}
