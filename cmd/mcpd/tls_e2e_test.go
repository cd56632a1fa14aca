package main

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// client opens another connection to the daemon with creds; it closes
// when the test ends.
func (d *daemon) client(t *testing.T, creds credentials.TransportCredentials) mcpdv1.MCPHubClient {
	t.Helper()
	target := "unix://" + d.sock
	if d.net == "tcp" {
		target = "passthrough:///" + d.dialTo
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatalf("grpc.NewClient(%q): %v", target, err)
	}
	t.Cleanup(func() { conn.Close() })
	return mcpdv1.NewMCPHubClient(conn)
}

// bearer returns ctx sending token as the bearer token.
func bearer(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// toolNames lists the qualified names ListTools returns.
func toolNames(ctx context.Context, t *testing.T, hub mcpdv1.MCPHubClient) []string {
	t.Helper()
	resp, err := hub.ListTools(ctx, &mcpdv1.ListToolsRequest{})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tool := range resp.GetTools() {
		names = append(names, tool.GetName())
	}
	return names
}

// TestTLSWithToken serves TLS plus an API token beyond loopback: a TLS
// client with the token gets in, one without it is UNAUTHENTICATED, and a
// plaintext client does not get through the handshake.
func TestTLSWithToken(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const token = "tls-e2e-token-91c2"
	ca := newCA(t, "server")
	cert, key := ca.serverCert(t, "mcpd")
	d := startDaemon(ctx, t, daemonOptions{
		listen: "127.0.0.1:" + strconv.Itoa(freePort(t)), // beyond loopback too (TestGuards)
		config: emptyConfig(t),
		args:   []string{"--tls-cert", cert, "--tls-key", key},
		env:    []string{"MCPD_API_TOKEN=" + token},
		creds:  clientTLS(t, ca, "", ""),
	})
	if _, err := d.hub.ListServers(bearer(ctx, token), &mcpdv1.ListServersRequest{}); err != nil {
		t.Fatalf("ListServers over TLS with the token: %v", err)
	}
	_, err := d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{})
	wantCode(t, err, codes.Unauthenticated)

	plain := d.client(t, insecure.NewCredentials())
	_, err = plain.ListServers(bearer(ctx, token), &mcpdv1.ListServersRequest{})
	wantCode(t, err, codes.Unavailable)

	// A client that does not trust mcpd's CA refuses mcpd.
	other := newCA(t, "other")
	_, err = d.client(t, clientTLS(t, other, "", "")).ListServers(bearer(ctx, token), &mcpdv1.ListServersRequest{})
	wantCode(t, err, codes.Unavailable)
	if strings.Contains(d.log.String(), token) {
		t.Errorf("mcpd log contains the API token")
	}
}

// TestNonLoopbackNeedsTLS checks what guards a listener beyond loopback:
// a token or callers file alone (plaintext) is refused, so is TLS with no
// credential; TLS with a token and mutual TLS start (TestTLSWithToken,
// TestMutualTLSCallers).
func TestNonLoopbackNeedsTLS(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ca := newCA(t, "server")
	cert, key := ca.serverCert(t, "mcpd")
	callers := writeCallers(t, `{"callers": []}`)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"callers without TLS", []string{"--callers", callers}},
		{"TLS without a credential", []string{"--tls-cert", cert, "--tls-key", key}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listen := "0.0.0.0:" + strconv.Itoa(freePort(t))
			args := append([]string{"--listen", listen, "--config", emptyConfig(t)}, tc.args...)
			code, out := runMcpd(ctx, t, args...)
			if code == 0 || !strings.Contains(out, "not a loopback address") || !strings.Contains(out, "--tls-client-ca") {
				t.Errorf("mcpd %q: got exit code %d and output %q, want a refusal that says how to serve beyond loopback", args, code, out)
			}
		})
	}
	t.Run("token without TLS", func(t *testing.T) {
		listen := "0.0.0.0:" + strconv.Itoa(freePort(t))
		code, out := runMcpdEnv(ctx, t, []string{"MCPD_API_TOKEN=plain-token-5d1e"}, "--listen", listen, "--config", emptyConfig(t))
		if code == 0 || !strings.Contains(out, "not a loopback address") {
			t.Errorf("token without TLS: got exit code %d and output %q, want a refusal", code, out)
		}
		if strings.Contains(out, "plain-token-5d1e") {
			t.Errorf("output quotes the token: %q", out)
		}
	})
	t.Run("client CA without a certificate", func(t *testing.T) {
		code, out := runMcpd(ctx, t, "--listen", "127.0.0.1:0", "--config", emptyConfig(t), "--tls-client-ca", ca.path)
		if code != 2 || !strings.Contains(out, "--tls-client-ca needs --tls-cert") {
			t.Errorf("got exit code %d and output %q, want 2 and a usage error", code, out)
		}
	})
}

// runMcpdEnv is runMcpd with more environment.
func runMcpdEnv(ctx context.Context, t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	return runMcpdWith(ctx, t, daemonEnv(env...), args...)
}

// writeCallers writes a callers file and returns its path.
func writeCallers(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(shortTempDir(t), "callers.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMutualTLSCallers serves mutual TLS with a callers file naming two
// clients by certificate identity (a SPIFFE ID and a DNS name), who see
// and may call different tools. A certificate of another CA, an expired
// one, a certificate naming no caller, and no certificate are refused.
func TestMutualTLSCallers(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	serverCA := newCA(t, "server")
	clientCA := newCA(t, "clients")
	cert, key := serverCA.serverCert(t, "mcpd")
	callers := writeCallers(t, `{"callers": [
	  {"name": "alpha", "spiffe_id": "spiffe://e2e.test/agent/alpha",
	   "permissions": {"servers": ["demo"], "tools": ["mcp__demo__echo"]}},
	  {"name": "beta", "dns_name": "beta.e2e.test",
	   "permissions": {"servers": ["demo"], "tools": ["mcp__demo__a*"]}}
	]}`)
	alphaCert, alphaKey := clientCA.issue(t, "alpha", certSpec{CN: "ignored", URIs: []string{"spiffe://e2e.test/agent/alpha"}})
	betaCert, betaKey := clientCA.issue(t, "beta", certSpec{CN: "beta", DNS: []string{"beta.e2e.test"}})
	d := startDaemon(ctx, t, daemonOptions{
		listen: "127.0.0.1:" + strconv.Itoa(freePort(t)), // beyond loopback too (TestGuards)
		args:   []string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", clientCA.path, "--callers", callers},
		creds:  clientTLS(t, serverCA, alphaCert, alphaKey),
	})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	alpha := d.hub
	beta := d.client(t, clientTLS(t, serverCA, betaCert, betaKey))

	if got := strings.Join(toolNames(ctx, t, alpha), ","); got != "mcp__demo__echo" {
		t.Errorf("alpha's tools: got %s, want mcp__demo__echo", got)
	}
	if got := strings.Join(toolNames(ctx, t, beta), ","); got != "mcp__demo__add,mcp__demo__audio" {
		t.Errorf("beta's tools: got %s, want mcp__demo__add,mcp__demo__audio", got)
	}
	if _, err := d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "hi"}, 0); err != nil {
		t.Errorf("alpha calls echo: %v", err)
	}
	_, err := d.call(ctx, t, "mcp__demo__add", map[string]any{"a": 1, "b": 2}, 0)
	st := wantCode(t, err, codes.PermissionDenied)
	if !strings.Contains(st.Message(), `"alpha"`) || !strings.Contains(st.Message(), `"tools"`) {
		t.Errorf("denial %q: want it to name the caller and the permission", st.Message())
	}
	if _, err := beta.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__demo__add", Arguments: mustStruct(t, map[string]any{"a": 1, "b": 2})}); err != nil {
		t.Errorf("beta calls add: %v", err)
	}

	stranger, strangerKey := clientCA.issue(t, "stranger", certSpec{CN: "stranger"})
	otherCA := newCA(t, "other")
	foreign, foreignKey := otherCA.issue(t, "foreign", certSpec{URIs: []string{"spiffe://e2e.test/agent/alpha"}})
	expired, expiredKey := clientCA.issue(t, "expired", certSpec{URIs: []string{"spiffe://e2e.test/agent/alpha"}, NotAfter: time.Now().Add(-time.Minute)})
	for _, tc := range []struct {
		name string
		cert string
		key  string
		want codes.Code
	}{
		{"certificate of another CA", foreign, foreignKey, codes.Unavailable},
		{"expired certificate", expired, expiredKey, codes.Unavailable},
		{"no certificate", "", "", codes.Unavailable},
		{"certificate naming no caller", stranger, strangerKey, codes.Unauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hub := d.client(t, clientTLS(t, serverCA, tc.cert, tc.key))
			_, err := hub.ListTools(ctx, &mcpdv1.ListToolsRequest{})
			wantCode(t, err, tc.want)
		})
	}
}

// TestTLSRotation replaces mcpd's certificate on disk: the next
// connection gets the new one, without a restart. A certificate written
// without its key yet keeps the old pair in use.
func TestTLSRotation(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ca := newCA(t, "server")
	cert, key := ca.serverCert(t, "mcpd-one")
	d := startDaemon(ctx, t, daemonOptions{
		listen: "127.0.0.1:" + strconv.Itoa(freePort(t)),
		config: emptyConfig(t),
		args:   []string{"--tls-cert", cert, "--tls-key", key},
		creds:  clientTLS(t, ca, "", ""),
	})
	served := func() string {
		t.Helper()
		dialer := &tls.Dialer{Config: &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", NextProtos: []string{"h2"}}}
		conn, err := dialer.DialContext(ctx, "tcp", d.dialTo)
		if err != nil {
			t.Fatalf("TLS dial: %v", err)
		}
		defer conn.Close()
		return conn.(*tls.Conn).ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "mcpd-one" {
		t.Fatalf("served certificate: got CN %q, want mcpd-one", got)
	}
	newCert, newKey := ca.Issue(t, certSpec{CN: "mcpd-two", DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
	replaceFile(t, cert, string(newCert))
	if got := served(); got != "mcpd-one" {
		t.Errorf("with a new certificate but the old key: got CN %q, want mcpd-one still served", got)
	}
	replaceFile(t, key, string(newKey))
	if got := served(); got != "mcpd-two" {
		t.Errorf("after rotation: got CN %q, want mcpd-two", got)
	}
	if _, err := d.client(t, clientTLS(t, ca, "", "")).ListServers(ctx, &mcpdv1.ListServersRequest{}); err != nil {
		t.Errorf("ListServers on a new connection after rotation: %v", err)
	}
	if !strings.Contains(d.log.String(), "serving the new certificate") {
		t.Errorf("log does not report the rotation")
	}
}

// TestTLSClientCARotation serves mutual TLS and rotates the client CA file:
// a client of the new CA, refused before, gets in on its next connection,
// and one of the old CA no longer does. A client that offers nothing newer
// than TLS 1.1 is refused throughout.
func TestTLSClientCARotation(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	serverCA := newCA(t, "server")
	oldCA, newClientCA := newCA(t, "old-clients"), newCA(t, "new-clients")
	cert, key := serverCA.serverCert(t, "mcpd")
	clientCA := filepath.Join(shortTempDir(t), "clients-ca.pem")
	copyFile(t, oldCA.path, clientCA)
	oldCert, oldKey := oldCA.issue(t, "agent", certSpec{CN: "agent"})
	newCert, newKey := newClientCA.issue(t, "agent", certSpec{CN: "agent"})
	d := startDaemon(ctx, t, daemonOptions{
		listen: "127.0.0.1:" + strconv.Itoa(freePort(t)),
		config: emptyConfig(t),
		args:   []string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", clientCA},
		creds:  clientTLS(t, serverCA, oldCert, oldKey),
	})
	// Each check dials anew: a rotated CA applies to new connections.
	admitted := func(certPath, keyPath string) error {
		_, err := d.client(t, clientTLS(t, serverCA, certPath, keyPath)).ListServers(ctx, &mcpdv1.ListServersRequest{})
		return err
	}
	if err := admitted(oldCert, oldKey); err != nil {
		t.Fatalf("client of the configured CA: %v", err)
	}
	wantCode(t, admitted(newCert, newKey), codes.Unavailable)

	pair, err := tls.LoadX509KeyPair(oldCert, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	old := &tls.Dialer{Config: &tls.Config{
		RootCAs: serverCA.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{pair},
		MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11, NextProtos: []string{"h2"},
	}}
	if conn, err := old.DialContext(ctx, "tcp", d.dialTo); err == nil {
		conn.Close()
		t.Errorf("a TLS 1.1 client got through the handshake, want it refused")
	}

	copyFile(t, newClientCA.path, clientCA)
	if err := admitted(newCert, newKey); err != nil {
		t.Errorf("client of the rotated-in CA: %v", err)
	}
	wantCode(t, admitted(oldCert, oldKey), codes.Unavailable)
	if !strings.Contains(d.log.String(), "serving the new certificate") {
		t.Errorf("log does not report the rotation")
	}
}

// copyFile replaces dst with src's content, atomically.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	replaceFile(t, dst, string(b))
}
