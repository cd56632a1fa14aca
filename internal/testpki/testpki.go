// Package testpki issues throwaway certificates for tests: a CA made for
// one test, and the server and client certificates it signs. Nothing is
// checked in, so nothing expires in the repository. Only tests import it.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	Cert *x509.Certificate
	// PEM is Cert, PEM-encoded.
	PEM []byte
	key *ecdsa.PrivateKey
}

// Spec describes a certificate to issue.
type Spec struct {
	CN       string
	DNS      []string
	URIs     []string
	IPs      []net.IP
	NotAfter time.Time // default: a day from now
	Server   bool      // a server certificate (else a client one)
}

// NewKey returns a new P-256 key.
func NewKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// NewCA makes a CA named name, valid from an hour ago for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := NewKey(t)
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
	return &CA{Cert: cert, PEM: EncodePEM("CERTIFICATE", der), key: key}
}

// Issue returns a PEM certificate signed by the CA and its PEM (PKCS #8)
// key.
func (ca *CA) Issue(t testing.TB, spec Spec) (certPEM, keyPEM []byte) {
	t.Helper()
	key := NewKey(t)
	notAfter := spec.NotAfter
	if notAfter.IsZero() {
		notAfter = time.Now().Add(24 * time.Hour)
	}
	notBefore := time.Now().Add(-time.Hour)
	if notAfter.Before(notBefore) {
		notBefore = notAfter.Add(-time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: spec.CN},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     spec.DNS,
		IPAddresses:  spec.IPs,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if spec.Server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	for _, u := range spec.URIs {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return EncodePEM("CERTIFICATE", der), KeyPEM(t, key)
}

// Pool returns a pool that holds only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// KeyPEM returns key PEM-encoded (PKCS #8).
func KeyPEM(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return EncodePEM("PRIVATE KEY", der)
}

// EncodePEM returns one PEM block of type typ.
func EncodePEM(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// WriteFile writes data to path, readable by its owner only.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
