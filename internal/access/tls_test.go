package access

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestNewServerTLSErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := writeFile(t, dir, "not.pem", "not a certificate")
	for _, tc := range []struct {
		name  string
		files TLSFiles
		want  string
	}{
		{"no key", TLSFiles{Cert: notPEM}, "both"},
		{"missing file", TLSFiles{Cert: filepath.Join(dir, "nope.pem"), Key: notPEM}, "nope.pem"},
		{"not PEM", TLSFiles{Cert: notPEM, Key: notPEM}, "not.pem"},
		{"device", TLSFiles{Cert: notPEM, Key: "/dev/zero"}, "read /dev/zero: is a character device, not a regular file"},
		{"client CA a device", TLSFiles{Cert: notPEM, Key: notPEM, ClientCA: "/dev/zero"}, "read /dev/zero: is a character device, not a regular file"},
		{"too large", TLSFiles{Cert: writeFile(t, dir, "big.pem", strings.Repeat("x", 1<<20+1)), Key: notPEM}, "big.pem: too large: more than 1 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewServerTLS(tc.files, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
