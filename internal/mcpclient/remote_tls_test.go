package mcpclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
)

// testCA issues certificates for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a PEM certificate for loopback (server) or a client
// certificate, and its PEM key.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRemoteMutualTLS: a Streamable HTTP server behind mutual TLS, with a
// certificate from a private CA, is reached only with a tls block naming
// that CA and a client certificate its clients' CA issued; the files are
// read again for a new session, so a rotated client certificate is used
// without a new Manager.
func TestRemoteMutualTLS(t *testing.T) {
	ctx := testContext(t)
	serverCA, clientCA, rogueCA := newTestCA(t, "server CA"), newTestCA(t, "client CA"), newTestCA(t, "rogue CA")
	serverCert, serverKey := serverCA.issue(t, "mcp.internal", true)
	pair, err := tls.X509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	clientPool := x509.NewCertPool()
	clientPool.AddCert(clientCA.cert)

	srv := newRemoteMCPServer(nil)
	ts := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientPool, MinVersion: tls.VersionTLS12}
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	ts.StartTLS()
	t.Cleanup(ts.Close)

	dir := t.TempDir()
	caPath, certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	writeFile(t, caPath, serverCA.pem)
	goodCert, goodKey := clientCA.issue(t, "mcpd", false)
	rogueCert, rogueKey := rogueCA.issue(t, "mcpd", false)

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
	writeFile(t, certPath, rogueCert)
	writeFile(t, keyPath, rogueKey)
	block := &config.TLS{CA: caPath, Cert: certPath, Key: keyPath}
	wantFailed("mtls", connect("mtls", block), "unknown certificate authority", "bad certificate")

	// The files rotated to a good certificate: the next session uses it.
	writeFile(t, certPath, goodCert)
	writeFile(t, keyPath, goodKey)
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
	ca := newTestCA(t, "server CA")
	dir := t.TempDir()
	caPath := filepath.Join(dir, "ca.pem")
	writeFile(t, caPath, ca.pem)
	cfg := config.Server{Name: "gone", Kind: config.TransportHTTP, URL: "https://127.0.0.1:1/mcp", TLS: &config.TLS{CA: caPath}}
	m, _ := retryingManager(t)
	if _, err := m.Connect(ctx, cfg, false); err != nil {
		t.Fatal(err) // nothing listens there: failed, but a valid config
	}
	writeFile(t, caPath, []byte("rotated badly\n"))
	want := `server "gone": tls.ca ` + caPath + ": no PEM certificate in it"
	eventually(ctx, t, "a retry to fail on the CA file", func() bool {
		st, err := m.Get("gone")
		return err == nil && st.State != StateReady && strings.Contains(st.LastError, want)
	})
}
