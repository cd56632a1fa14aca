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
