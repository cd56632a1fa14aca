package mcpclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/oauth"
	"github.com/mcpd-project/mcpd/internal/testpki"
)

// tlsOAuthUpstream is a Streamable HTTP server behind mutual TLS and
// bearer tokens, whose certificate comes from a private CA, and its
// authorization server on another loopback port, whose certificate comes
// from asCA. The authorization server asks every client for a
// certificate from the private CA, and its token endpoint refuses a
// client that presented none (RFC 8705 client authentication).
type tlsOAuthUpstream struct {
	resource, as *httptest.Server

	mu sync.Mutex
	// tokenCerts are the subjects of the client certificates the token
	// endpoint saw, one per token it issued.
	tokenCerts []string
}

const (
	tlsOAuthClientID     = "tls-client"
	tlsOAuthClientSecret = "tls-client-secret-5d1e"
	tlsOAuthToken        = "tls-access-token-7b20"
)

func newTLSOAuthUpstream(t *testing.T, privateCA, asCA *testpki.CA) *tlsOAuthUpstream {
	t.Helper()
	serve := func(h http.Handler, ca *testpki.CA, clientAuth tls.ClientAuthType) *httptest.Server {
		cert, key := ca.Issue(t, loopbackServer)
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewUnstartedServer(h)
		ts.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: clientAuth, ClientCAs: privateCA.Pool(), MinVersion: tls.VersionTLS12}
		ts.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes say why in the test's failure
		ts.StartTLS()
		t.Cleanup(func() {
			ts.CloseClientConnections()
			ts.Close()
		})
		return ts
	}
	u := &tlsOAuthUpstream{}
	asMux := http.NewServeMux()
	u.as = serve(asMux, asCA, tls.VerifyClientCertIfGiven)
	issuer := u.as.URL
	asMux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer": issuer, "authorization_endpoint": issuer + "/authorize", "token_endpoint": issuer + "/token",
			"response_types_supported": []string{"code"}, "grant_types_supported": []string{"client_credentials"},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic"},
		})
	})
	asMux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client", "error_description": "no client certificate"})
			return
		}
		if id, secret, ok := r.BasicAuth(); !ok || id != tlsOAuthClientID || secret != tlsOAuthClientSecret || r.PostFormValue("grant_type") != "client_credentials" {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client"})
			return
		}
		u.mu.Lock()
		u.tokenCerts = append(u.tokenCerts, r.TLS.PeerCertificates[0].Subject.CommonName)
		u.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"access_token": tlsOAuthToken, "token_type": "Bearer", "expires_in": 3600})
	})

	mux := http.NewServeMux()
	u.resource = serve(mux, privateCA, tls.RequireAndVerifyClientCert)
	prm := &oauthex.ProtectedResourceMetadata{Resource: u.resource.URL + "/mcp", AuthorizationServers: []string{issuer}}
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(prm))
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if token != tlsOAuthToken {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
	}
	srv := newRemoteMCPServer(nil)
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: u.resource.URL + "/.well-known/oauth-protected-resource/mcp",
	})(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
	return u
}

func (u *tlsOAuthUpstream) certsAtToken() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.tokenCerts...)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// TestRemoteTLSBlockOAuth: the OAuth requests of a server with a tls
// block use the block too. Those to the server's own origin (its
// protected resource metadata) trust the block's CA and present its
// client certificate, as the MCP endpoint's do; those to its
// authorization server trust the block's CA as well as the roots mcpd
// trusts otherwise (here the base transport's, standing in for the
// system's), and present the client certificate to a token endpoint that
// asks for one.
func TestRemoteTLSBlockOAuth(t *testing.T) {
	privateCA, publicCA := testpki.NewCA(t, "private CA"), testpki.NewCA(t, "public CA")
	dir := t.TempDir()
	caPath, certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	testpki.WriteFile(t, caPath, privateCA.PEM)
	clientCert, clientKey := privateCA.Issue(t, testpki.Spec{CN: "mcpd"})
	testpki.WriteFile(t, certPath, clientCert)
	testpki.WriteFile(t, keyPath, clientKey)
	block := &config.TLS{CA: caPath, Cert: certPath, Key: keyPath}

	for _, tc := range []struct {
		name string
		asCA *testpki.CA
	}{
		{"internal-as", privateCA}, // an authorization server behind the same private CA
		{"public-as", publicCA},    // one whose certificate chains to the usual roots
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			up := newTLSOAuthUpstream(t, privateCA, tc.asCA)
			om, err := oauth.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			hc := testHTTPClient(t)
			hc.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: publicCA.Pool(), MinVersion: tls.VersionTLS12}
			m, _, _ := remoteManager(t, &RemoteOptions{HTTPClient: hc, OAuth: om})
			cfg := config.Server{
				Name: tc.name, Kind: config.TransportHTTP, URL: up.resource.URL + "/mcp", TLS: block,
				OAuth: &config.OAuth{Grant: config.GrantClientCredentials, ClientID: tlsOAuthClientID, ClientSecret: tlsOAuthClientSecret},
			}
			st, err := m.Connect(ctx, cfg, false)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != StateReady {
				t.Fatalf("got %v (%s), want ready", st.State, st.LastError)
			}
			res, err := m.CallTool(ctx, "mcp__"+tc.name+"__echo", map[string]any{"message": "authorized"}, CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "authorized" {
				t.Errorf("echo: got %v, want the text authorized", res.Content)
			}
			if got := up.certsAtToken(); len(got) != 1 || got[0] != "mcpd" {
				t.Errorf("client certificates at the token endpoint: got %q, want [mcpd]", got)
			}
			_ = m.Disconnect(ctx, tc.name)
		})
	}
}

// TestTLSBlockElsewhereTransport: the transport of a tls block's OAuth
// requests to other origins trusts the block's CA and the base's roots
// (the endpoint's, only the CA), presents the same client certificate,
// and follows the files when they change; a block without a CA needs no
// second transport.
func TestTLSBlockElsewhereTransport(t *testing.T) {
	privateCA, publicCA, rotatedCA := testpki.NewCA(t, "private CA"), testpki.NewCA(t, "public CA"), testpki.NewCA(t, "rotated CA")
	leaf := func(ca *testpki.CA) *x509.Certificate {
		t.Helper()
		certPEM, _ := ca.Issue(t, loopbackServer)
		b, _ := pem.Decode(certPEM)
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	privateLeaf, publicLeaf, rotatedLeaf := leaf(privateCA), leaf(publicCA), leaf(rotatedCA)
	trusts := func(tr *http.Transport, c *x509.Certificate) bool {
		_, err := c.Verify(x509.VerifyOptions{Roots: tr.TLSClientConfig.RootCAs})
		return err == nil
	}

	dir := t.TempDir()
	caPath, certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	testpki.WriteFile(t, caPath, privateCA.PEM)
	clientCert, clientKey := privateCA.Issue(t, testpki.Spec{CN: "mcpd"})
	testpki.WriteFile(t, certPath, clientCert)
	testpki.WriteFile(t, keyPath, clientKey)
	base := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: publicCA.Pool(), MinVersion: tls.VersionTLS12}}
	ts := &tlsTransports{byBlock: make(map[config.TLS]*tlsBlock)}

	endpoint, elsewhere, err := ts.get(&config.TLS{CA: caPath, Cert: certPath, Key: keyPath}, base)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		tr   *http.Transport
		c    *x509.Certificate
		want bool
	}{
		{"the endpoint, the block's CA", endpoint, privateLeaf, true},
		{"the endpoint, the base's roots", endpoint, publicLeaf, false},
		{"elsewhere, the block's CA", elsewhere, privateLeaf, true},
		{"elsewhere, the base's roots", elsewhere, publicLeaf, true},
	} {
		if got := trusts(tc.tr, tc.c); got != tc.want {
			t.Errorf("%s: trusted %v, want %v", tc.what, got, tc.want)
		}
	}
	if trusts(base, privateLeaf) {
		t.Error("the base's roots were changed: they trust the block's CA")
	}
	for what, tr := range map[string]*http.Transport{"endpoint": endpoint, "elsewhere": elsewhere} {
		if tr.TLSClientConfig.GetClientCertificate == nil {
			t.Errorf("%s: no client certificate", what)
			continue
		}
		got, err := tr.TLSClientConfig.GetClientCertificate(&tls.CertificateRequestInfo{})
		if err != nil || got.Leaf == nil || got.Leaf.Subject.CommonName != "mcpd" {
			t.Errorf("%s: presents %v (%v), want the block's certificate", what, got, err)
		}
	}

	// Rotated: the next session's transports trust the new CA only, with
	// the base's roots.
	testpki.WriteFile(t, caPath, rotatedCA.PEM)
	_, elsewhere2, err := ts.get(&config.TLS{CA: caPath, Cert: certPath, Key: keyPath}, base)
	if err != nil {
		t.Fatal(err)
	}
	if !trusts(elsewhere2, rotatedLeaf) || trusts(elsewhere2, privateLeaf) || !trusts(elsewhere2, publicLeaf) {
		t.Errorf("after rotation: trusts the new CA %v, the old %v, the base's roots %v; want true, false, true",
			trusts(elsewhere2, rotatedLeaf), trusts(elsewhere2, privateLeaf), trusts(elsewhere2, publicLeaf))
	}

	// No CA: both go by the base's roots, through one transport.
	endpoint, elsewhere, err = ts.get(&config.TLS{Cert: certPath, Key: keyPath}, base)
	if err != nil {
		t.Fatal(err)
	}
	if endpoint != elsewhere || !trusts(elsewhere, publicLeaf) {
		t.Errorf("a block without ca: two transports %v, trusts the base's roots %v; want one that does", endpoint != elsewhere, trusts(elsewhere, publicLeaf))
	}

	// A base without roots of its own: elsewhere is the system's roots and
	// the CA.
	_, elsewhere, err = ts.get(&config.TLS{CA: caPath}, &http.Transport{})
	if err != nil {
		t.Fatal(err)
	}
	if !trusts(elsewhere, rotatedLeaf) {
		t.Error("with the system's roots: the block's CA is not trusted")
	}
}
