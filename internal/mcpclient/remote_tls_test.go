package mcpclient

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/testpki"
)

// loopbackServer describes a server certificate for 127.0.0.1.
var loopbackServer = testpki.Spec{CN: "mcp.internal", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true}

// TestRemoteMutualTLS: a Streamable HTTP server behind mutual TLS, with a
// certificate from a private CA, is reached only with a tls block naming
// that CA and a client certificate its clients' CA issued; the files are
// read again for a new session, so a rotated client certificate is used
// without a new Manager.
func TestRemoteMutualTLS(t *testing.T) {
	ctx := testContext(t)
	serverCA, clientCA, rogueCA := testpki.NewCA(t, "server CA"), testpki.NewCA(t, "client CA"), testpki.NewCA(t, "rogue CA")
	serverCert, serverKey := serverCA.Issue(t, loopbackServer)
	pair, err := tls.X509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}

	srv := newRemoteMCPServer(nil)
	ts := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCA.Pool(), MinVersion: tls.VersionTLS12}
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	ts.StartTLS()
	t.Cleanup(ts.Close)

	dir := t.TempDir()
	caPath, certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	testpki.WriteFile(t, caPath, serverCA.PEM)
	goodCert, goodKey := clientCA.Issue(t, testpki.Spec{CN: "mcpd"})
	rogueCert, rogueKey := rogueCA.Issue(t, testpki.Spec{CN: "mcpd"})

	m, _, logs := remoteManager(t, nil)
	connect := func(name string, tlsBlock *config.TLS) Status {
		t.Helper()
		st, _ := m.Connect(ctx, config.Server{Name: name, Kind: config.TransportHTTP, URL: ts.URL, TLS: tlsBlock}, false)
		return st
	}
	wantFailed := func(name string, st Status, why ...string) {
		t.Helper()
		if st.State == StateReady {
			t.Fatalf("%s: got ready, want a failed connect", name)
		}
		for _, w := range why {
			if strings.Contains(st.LastError, w) {
				return
			}
		}
		t.Errorf("%s: got last error %q, want one of %q", name, st.LastError, why)
	}

	// No tls block: the system's roots do not know the private CA.
	wantFailed("plain", connect("plain", nil), "unknown authority")
	// The CA but no client certificate: the server refuses the handshake.
	wantFailed("ca-only", connect("ca-only", &config.TLS{CA: caPath}), "certificate required", "bad certificate", "handshake")

	// A client certificate the server's CA for clients did not issue.
	testpki.WriteFile(t, certPath, rogueCert)
	testpki.WriteFile(t, keyPath, rogueKey)
	block := &config.TLS{CA: caPath, Cert: certPath, Key: keyPath}
	wantFailed("mtls", connect("mtls", block), "unknown certificate authority", "bad certificate")

	// The files rotated to a good certificate: the next session uses it.
	testpki.WriteFile(t, certPath, goodCert)
	testpki.WriteFile(t, keyPath, goodKey)
	st, err := m.Restart(ctx, "mtls")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateReady {
		t.Fatalf("mtls after rotation: got %v (%s), want ready", st.State, st.LastError)
	}
	res, err := m.CallTool(ctx, "mcp__mtls__echo", map[string]any{"message": "hello"}, CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "hello" {
		t.Errorf("echo: got %v, want the text hello", res.Content)
	}

	// A fresh server with the good files from the start.
	if st := connect("fresh", block); st.State != StateReady {
		t.Fatalf("fresh: got %v (%s), want ready", st.State, st.LastError)
	}
	for _, n := range []string{"plain", "ca-only", "mtls", "fresh"} {
		_ = m.Disconnect(ctx, n)
	}
	for _, key := range [][]byte{goodKey, rogueKey} {
		if body := strings.Split(string(key), "\n")[1]; strings.Contains(logs.String(), body) {
			t.Errorf("a client key appears in the log")
		}
	}
}

// TestRemoteTLSFilesGoneAtConnect: a tls file that no longer loads when
// mcpd opens a session (a retry in the background here) fails that
// connect, with an error that names the field and the path.
func TestRemoteTLSFilesGoneAtConnect(t *testing.T) {
	ctx := testContext(t)
	ca := testpki.NewCA(t, "server CA")
	dir := t.TempDir()
	caPath := filepath.Join(dir, "ca.pem")
	testpki.WriteFile(t, caPath, ca.PEM)
	cfg := config.Server{Name: "gone", Kind: config.TransportHTTP, URL: "https://127.0.0.1:1/mcp", TLS: &config.TLS{CA: caPath}}
	m, _ := retryingManager(t)
	if _, err := m.Connect(ctx, cfg, false); err != nil {
		t.Fatal(err) // nothing listens there: failed, but a valid config
	}
	testpki.WriteFile(t, caPath, []byte("rotated badly\n"))
	want := `server "gone": tls.ca ` + caPath + ": no PEM certificate in it"
	eventually(ctx, t, "a retry to fail on the CA file", func() bool {
		st, err := m.Get("gone")
		return err == nil && st.State != StateReady && strings.Contains(st.LastError, want)
	})
	// The config is still valid: a restart (or an enable) is an attempt
	// like the others, not a refused request.
	if st, err := m.Restart(ctx, "gone"); err != nil || !strings.Contains(st.LastError, want) {
		t.Errorf("restart with the CA file bad: got %v (last error %q), want the attempt failing on the file", err, st.LastError)
	}
	if err := m.SetEnabled("gone", false); err != nil {
		t.Fatal(err)
	}
	if err := m.SetEnabled("gone", true); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the enabled server to fail on the CA file", func() bool {
		st, err := m.Get("gone")
		return err == nil && st.State == StateFailed && strings.Contains(st.LastError, want)
	})
}
