package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTLSFlagFilesNotAFile: the client commands' --tls-* files are read
// as mcpd's own are: a device or a file larger than a certificate can be
// is refused, naming the flag and the path.
func TestTLSFlagFilesNotAFile(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.pem")
	if err := os.WriteFile(big, []byte(strings.Repeat("#", 1<<20+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flags tlsFlags
		want  string
	}{
		{tlsFlags{caFile: "/dev/zero"}, "--tls-ca: read /dev/zero: is a character device, not a regular file"},
		{tlsFlags{caFile: big}, "--tls-ca: read " + big + ": too large: more than 1 MiB"},
		{tlsFlags{certFile: "/dev/zero", keyFile: big}, "--tls-client-cert: read /dev/zero: is a character device, not a regular file"},
		{tlsFlags{certFile: big, keyFile: "/dev/zero"}, "--tls-client-cert: read " + big + ": too large"},
	} {
		if _, err := tc.flags.config(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error containing %q", tc.flags, err, tc.want)
		}
	}
}
