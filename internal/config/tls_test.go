package config

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpd-project/mcpd/internal/testpki"
)

// tlsFiles are PEM files made for one test: a CA, a client certificate
// it issued with its key, another key, and a file that holds no PEM.
type tlsFiles struct {
	dir, ca, cert, key, otherKey, garbage string
	large                                 string // more than a certificate file may hold
	keyPEM                                []byte
}

func writeTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		testpki.WriteFile(t, path, b)
		return path
	}
	ca := testpki.NewCA(t, "test CA")
	cert, key := ca.Issue(t, testpki.Spec{CN: "mcpd"})
	return tlsFiles{
		dir:      dir,
		ca:       write("ca.pem", ca.PEM),
		cert:     write("client.pem", cert),
		key:      write("client-key.pem", key),
		keyPEM:   key,
		otherKey: write("other-key.pem", testpki.KeyPEM(t, testpki.NewKey(t))),
		garbage:  write("garbage.pem", []byte("not a certificate\n")),
		large:    write("large.pem", append(bytes.Repeat([]byte("#"), 1<<20), ca.PEM...)),
	}
}

// tlsEntry is a .mcp.json with one server, name, whose entry is entry.
func tlsEntry(name, entry string) []byte {
	return []byte(`{"mcpServers": {"` + name + `": ` + entry + `}}`)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestParseTLS: a tls block with ${VAR} in its paths is read, expanded
// and checked; a field it does not know is a warning.
func TestParseTLS(t *testing.T) {
	files := writeTLSFiles(t)
	env := map[string]string{"CERTS": files.dir}
	data := tlsEntry("internal", `{"type": "http", "url": "https://mcp.internal.example:8443/mcp",
		"tls": {"ca": "${CERTS}/ca.pem", "cert": "${CERTS}/client.pem", "key": "${CERTS}/client-key.pem", "crt": "x"}}`)
	f, err := Parse(data, mapLookup(env))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Invalid) > 0 || len(f.Servers) != 1 {
		t.Fatalf("got servers %v, invalid %v; want internal valid", f.Servers, f.Invalid)
	}
	s := f.Servers[0]
	want := &TLS{CA: files.ca, Cert: files.cert, Key: files.key}
	if !s.TLS.Equal(want) {
		t.Errorf("tls: got %+v, want %+v", s.TLS, want)
	}
	if got := s.Warnings; len(got) != 1 || !strings.Contains(got[0], `tls field "crt" is not understood`) {
		t.Errorf("warnings: got %q, want the unknown tls field", got)
	}
	c := s.Clone()
	if c.TLS == s.TLS || !c.Equal(&s) {
		t.Errorf("Clone: got %+v sharing %v, want an equal copy", c.TLS, c.TLS == s.TLS)
	}
	c.TLS.CA = ""
	if c.Equal(&s) {
		t.Error("Equal: a server without the ca is equal to one with it")
	}

	// A CA alone, or a client certificate alone, is a block too.
	for _, block := range []string{`{"ca": ` + quote(files.ca) + `}`, `{"cert": ` + quote(files.cert) + `, "key": ` + quote(files.key) + `}`} {
		f, err := Parse(tlsEntry("s", `{"url": "https://h.example/mcp", "tls": `+block+`}`), mapLookup(nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Invalid) > 0 {
			t.Errorf("tls %s: %v", block, f.Invalid[0])
		}
	}
}

// TestParseTLSErrors: an unusable tls block makes its entry invalid, with
// an error that names the server and the field, and never shows what a
// key file holds.
func TestParseTLSErrors(t *testing.T) {
	files := writeTLSFiles(t)
	remote := func(block string) string {
		return `{"type": "http", "url": "https://h.example/mcp", "tls": ` + block + `}`
	}
	tests := []struct {
		name, entry string
		want        []string
	}{
		{"stdio", `{"command": "srv", "tls": {"ca": ` + quote(files.ca) + `}}`,
			[]string{"stdio server takes no tls block"}},
		{"sdk", `{"type": "sdk", "tls": {"ca": ` + quote(files.ca) + `}}`,
			[]string{"sdk server takes no", "tls"}},
		{"empty", remote(`{}`), []string{"tls: the block names no file"}},
		{"cert-without-key", remote(`{"cert": ` + quote(files.cert) + `}`), []string{"tls: cert needs key"}},
		{"key-without-cert", remote(`{"key": ` + quote(files.key) + `}`), []string{"tls: key needs cert"}},
		{"relative", remote(`{"ca": "certs/ca.pem"}`), []string{"tls.ca certs/ca.pem is a relative path"}},
		{"unset-variable", remote(`{"ca": "${NO_SUCH_DIR}/ca.pem"}`), []string{"tls.ca:", "NO_SUCH_DIR"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse(tlsEntry(tt.name, tt.entry), mapLookup(nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Invalid) != 1 {
				t.Fatalf("got servers %v, invalid %v; want %s invalid", f.Servers, f.Invalid, tt.name)
			}
			msg := f.Invalid[0].Error()
			for _, w := range append([]string{`server "` + tt.name + `"`}, tt.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("error: got %q, want it to contain %q", msg, w)
				}
			}
			keyBody := strings.Split(string(files.keyPEM), "\n")[1]
			if strings.Contains(msg, keyBody) {
				t.Errorf("error %q holds the key file's content", msg)
			}
		})
	}
}

// TestMarshalEntryKeepsTLS: a server written to the state file keeps its
// tls block, paths as they are, and reads back the same.
func TestMarshalEntryKeepsTLS(t *testing.T) {
	files := writeTLSFiles(t)
	s := Server{Name: "internal", Kind: TransportHTTP, URL: "https://h.example/mcp",
		TLS: &TLS{CA: files.ca, Cert: files.cert, Key: files.key}}
	data, _, err := MarshalEntry(&s, reservedForTest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadLayers([]Layer{{Scope: ScopeAPI, Path: "state.json", Inline: tlsEntry(s.Name, string(data)), State: true, Reserved: reservedForTest}}, mapLookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) != 1 || m.Entries[0].Err != nil {
		t.Fatalf("entries: got %+v, want internal valid", m.Entries)
	}
	if got := m.Entries[0].Server.TLS; !got.Equal(s.TLS) {
		t.Errorf("tls read back: got %+v, want %+v (written %s)", got, s.TLS, data)
	}
}

// TestTLSFilesReadAtConnect: the entry's check looks at the paths only: a
// file that does not exist yet leaves the entry valid (it fails the
// connect instead, which is retried).
func TestTLSFilesReadAtConnect(t *testing.T) {
	f, err := Parse(tlsEntry("later", `{"type": "http", "url": "https://h.example/mcp", "tls": {"ca": "/nonexistent/ca.pem"}}`), mapLookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Invalid) != 0 || len(f.Servers) != 1 {
		t.Fatalf("got servers %v, invalid %v; want the entry valid", f.Servers, f.Invalid)
	}
}

// load reads the block's files and parses them, as a connect does.
func load(b *TLS) (*tls.Config, error) {
	p, err := b.Read()
	if err != nil {
		return nil, err
	}
	return b.ClientConfig(p)
}

// TestTLSLoadErrors: files that cannot be read or do not load give an
// error that names the field and the path, and never shows what a key
// file holds.
func TestTLSLoadErrors(t *testing.T) {
	files := writeTLSFiles(t)
	tests := []struct {
		name  string
		block TLS
		want  []string
	}{
		{"missing", TLS{CA: files.dir + "/missing.pem"}, []string{"tls.ca " + files.dir + "/missing.pem cannot be read", "no such file"}},
		{"device", TLS{Key: "/dev/zero", Cert: files.cert}, []string{"tls.key /dev/zero cannot be read: is a character device, not a regular file"}},
		{"too large", TLS{CA: files.large}, []string{"tls.ca " + files.large + " cannot be read: too large: more than 1 MiB"}},
		{"ca-not-pem", TLS{CA: files.garbage}, []string{"tls.ca " + files.garbage + ": no PEM certificate"}},
		{"cert-not-pem", TLS{Cert: files.garbage, Key: files.key}, []string{"tls.cert " + files.garbage + " and tls.key " + files.key}},
		{"key-mismatch", TLS{Cert: files.cert, Key: files.otherKey}, []string{"tls.cert " + files.cert + " and tls.key " + files.otherKey, "private key does not match public key"}},
		{"key-as-cert", TLS{Cert: files.key, Key: files.key}, []string{"tls.cert " + files.key}},
	}
	keyBody := strings.Split(string(files.keyPEM), "\n")[1]
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(&tt.block)
			if err == nil {
				t.Fatal("Load: got no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error: got %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), keyBody) {
				t.Errorf("error %q holds the key file's content", err)
			}
		})
	}
}

// TestTLSLoad: the files make a client configuration with the CA as the only
// roots and the client certificate.
func TestTLSLoad(t *testing.T) {
	files := writeTLSFiles(t)
	cfg, err := load(&TLS{CA: files.ca, Cert: files.cert, Key: files.key})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootCAs == nil || cfg.GetClientCertificate == nil {
		t.Fatalf("got roots %v and a client certificate %v, want both", cfg.RootCAs, cfg.GetClientCertificate != nil)
	}
	if c, err := cfg.GetClientCertificate(&tls.CertificateRequestInfo{}); err != nil || len(c.Certificate) != 1 {
		t.Errorf("client certificate: got %v, %v; want the one issued", c, err)
	}
	cfg, err = load(&TLS{Cert: files.cert, Key: files.key})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootCAs != nil {
		t.Error("without ca: got roots, want the system's (nil)")
	}
}
