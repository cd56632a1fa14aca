package main

import (
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/credentials"

	"github.com/mcpd-project/mcpd/internal/testpki"
)

// testCA is a certificate authority made for one test, its PEM
// certificate written at path, in dir, where issue writes too.
type testCA struct {
	*testpki.CA
	path string
	dir  string
}

// certSpec describes a certificate to issue.
type certSpec = testpki.Spec

// newCA makes a CA and writes its certificate into a new directory, where
// issue writes too.
func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	dir := shortTempDir(t)
	ca := &testCA{CA: testpki.NewCA(t, name), dir: dir, path: filepath.Join(dir, name+"-ca.pem")}
	testpki.WriteFile(t, ca.path, ca.PEM)
	return ca
}

// issue writes a certificate and key signed by the CA and returns their
// paths.
func (ca *testCA) issue(t *testing.T, name string, spec certSpec) (certPath, keyPath string) {
	t.Helper()
	c, k := ca.Issue(t, spec)
	certPath, keyPath = filepath.Join(ca.dir, name+".pem"), filepath.Join(ca.dir, name+"-key.pem")
	testpki.WriteFile(t, certPath, c)
	testpki.WriteFile(t, keyPath, k)
	return certPath, keyPath
}

// serverCert issues mcpd's certificate for loopback.
func (ca *testCA) serverCert(t *testing.T, cn string) (certPath, keyPath string) {
	t.Helper()
	return ca.issue(t, cn, certSpec{CN: cn, DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
}

// clientTLS returns transport credentials that trust serverCA and, with
// certPath, present that client certificate.
func clientTLS(t *testing.T, serverCA *testCA, certPath, keyPath string) credentials.TransportCredentials {
	t.Helper()
	return credentials.NewTLS(clientTLSConfig(t, serverCA, certPath, keyPath))
}

// clientTLSConfig is clientTLS's configuration, for HTTP clients.
func clientTLSConfig(t *testing.T, serverCA *testCA, certPath, keyPath string) *tls.Config {
	t.Helper()
	cfg := &tls.Config{RootCAs: serverCA.Pool(), MinVersion: tls.VersionTLS12}
	if certPath != "" {
		pair, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}
