package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
)

// testCA is a certificate authority made for one test; nothing is checked
// in. Its PEM certificate is at path.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	path string
	dir  string
}

// certSpec describes a certificate to issue.
type certSpec struct {
	cn       string
	dns      []string
	uris     []string
	ips      []net.IP
	notAfter time.Time // default: a day from now
	server   bool      // a server certificate (else a client one)
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// newCA makes a CA and writes its certificate into a new directory, where
// issue writes too.
func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	dir := shortTempDir(t)
	ca := &testCA{cert: cert, key: key, dir: dir, path: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, ca.path, "CERTIFICATE", der)
	return ca
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issueBytes returns a PEM certificate and key signed by the CA.
func (ca *testCA) issueBytes(t *testing.T, spec certSpec) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	notAfter := spec.notAfter
	if notAfter.IsZero() {
		notAfter = time.Now().Add(24 * time.Hour)
	}
	notBefore := time.Now().Add(-time.Hour)
	if notAfter.Before(notBefore) {
		notBefore = notAfter.Add(-time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: spec.cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     spec.dns,
		IPAddresses:  spec.ips,
	}
	for _, u := range spec.uris {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	if spec.server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// issue writes a certificate and key signed by the CA and returns their
// paths.
func (ca *testCA) issue(t *testing.T, name string, spec certSpec) (certPath, keyPath string) {
	t.Helper()
	c, k := ca.issueBytes(t, spec)
	certPath, keyPath = filepath.Join(ca.dir, name+".pem"), filepath.Join(ca.dir, name+"-key.pem")
	for path, b := range map[string][]byte{certPath: c, keyPath: k} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certPath, keyPath
}

// serverCert issues mcpd's certificate for loopback.
func (ca *testCA) serverCert(t *testing.T, cn string) (certPath, keyPath string) {
	t.Helper()
	return ca.issue(t, cn, certSpec{cn: cn, dns: []string{"localhost"}, ips: []net.IP{net.IPv4(127, 0, 0, 1)}, server: true})
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
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
	cfg := &tls.Config{RootCAs: serverCA.pool(), MinVersion: tls.VersionTLS12}
	if certPath != "" {
		pair, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}
