package config

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"path/filepath"

	"github.com/mcpd-project/mcpd/internal/localfile"
)

// TLS is the "tls" block of an HTTP or SSE server: the private CA its
// certificate must chain to and the client certificate mcpd presents when
// it asks for one (mutual TLS). The fields are paths of PEM files; they
// must be absolute, since a config may be inline JSON or move between
// scopes, and nothing says which directory a relative path would mean.
// The files are not secrets to this package: their paths are written in
// state files and shown in errors, their contents never.
type TLS struct {
	// CA holds the CA certificates the server's certificate must chain
	// to, instead of the system's roots. Optional.
	CA string `json:"ca,omitempty"`
	// Cert is the client certificate chain, leaf first, and Key its
	// private key. Both or neither.
	Cert string `json:"cert,omitempty"`
	Key  string `json:"key,omitempty"`
}

// TLSPEM is what a TLS block's files hold, as read at one moment; a
// field is nil when the block names no such file.
type TLSPEM struct {
	CA, Cert, Key []byte
}

// Equal reports whether p and q hold the same bytes.
func (p TLSPEM) Equal(q TLSPEM) bool {
	return bytes.Equal(p.CA, q.CA) && bytes.Equal(p.Cert, q.Cert) && bytes.Equal(p.Key, q.Key)
}

// problems lists what is wrong with the block's paths: the files
// themselves are read, and checked, at every connect (Read, ClientConfig).
func (t *TLS) problems() []string {
	var ps []string
	if t.CA == "" && t.Cert == "" && t.Key == "" {
		ps = append(ps, "tls: the block names no file (want ca, or cert and key, or all three)")
	}
	switch {
	case t.Cert != "" && t.Key == "":
		ps = append(ps, "tls: cert needs key (the client certificate's private key)")
	case t.Key != "" && t.Cert == "":
		ps = append(ps, "tls: key needs cert (the client certificate it belongs to)")
	}
	for _, f := range t.files(new(TLSPEM)) {
		if *f.path != "" && !filepath.IsAbs(*f.path) {
			ps = append(ps, fmt.Sprintf("tls.%s %s is a relative path: write it absolute (${HOME}/... expands)", f.name, *f.path))
		}
	}
	return ps
}

type tlsFile struct {
	name string
	path *string
	data *[]byte
}

// files are the block's fields by their JSON names, with where Read puts
// each one's content in dst.
func (t *TLS) files(dst *TLSPEM) []tlsFile {
	return []tlsFile{
		{"ca", &t.CA, &dst.CA},
		{"cert", &t.Cert, &dst.Cert},
		{"key", &t.Key, &dst.Key},
	}
}

// Read reads the block's files. An error names the field and the path,
// never the content.
func (t *TLS) Read() (TLSPEM, error) {
	var p TLSPEM
	for _, f := range t.files(&p) {
		if *f.path == "" {
			continue
		}
		b, err := localfile.Read(*f.path, localfile.CredentialLimit)
		if err != nil {
			return TLSPEM{}, fmt.Errorf("tls.%s %s cannot be read: %w", f.name, *f.path, errWithoutPath(err))
		}
		*f.data = b
	}
	return p, nil
}

// ClientConfig parses what Read returned into the configuration of a TLS
// client: TLS 1.2 or newer, p.CA as the only roots when the block names
// one (else the system's), and the client certificate, presented whenever
// a server asks for one, when it names one (GetClientCertificate).
// An error names the field and the path, never the content.
func (t *TLS) ClientConfig(p TLSPEM) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(p.CA) {
			return nil, fmt.Errorf("tls.ca %s: no PEM certificate in it", t.CA)
		}
		cfg.RootCAs = pool
	}
	if t.Cert != "" || t.Key != "" {
		// tls.X509KeyPair's errors describe the PEM blocks found, never
		// their bytes.
		pair, err := tls.X509KeyPair(p.Cert, p.Key)
		if err != nil {
			return nil, fmt.Errorf("tls.cert %s and tls.key %s: %w", t.Cert, t.Key, err)
		}
		// Presented whenever the server asks, as curl and OpenSSL do: Go
		// would otherwise send none when the server's list of acceptable
		// CAs does not name the chain's issuer, and the server would say
		// "certificate required" instead of why it refuses this one.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	return cfg, nil
}

// Clone returns a copy.
func (t *TLS) Clone() *TLS {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

// Equal reports whether two blocks name the same files.
func (t *TLS) Equal(u *TLS) bool {
	if t == nil || u == nil {
		return t == u
	}
	return *t == *u
}
