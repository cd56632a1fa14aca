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
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewServerTLS(tc.files, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
