package oauth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCredentialFilesNotAFile: a key, assertion or ID token file that is a
// device is refused before it is read, and one larger than a credential
// can be is refused too; the errors say why without the path, as the
// other errors of these files do.
func TestCredentialFilesNotAFile(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("k", 1<<20+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{"/dev/zero", "is a character device, not a regular file"},
		{big, "too large: more than 1 MiB"},
	} {
		_, err := clientAuth{id: "c", keyFile: tc.file}.assertion("https://as.example")
		if err == nil || !strings.Contains(err.Error(), "read privateKeyFile: "+tc.want) {
			t.Errorf("privateKeyFile %s: got %v, want %q", tc.file, err, tc.want)
		}
		_, err = secretOrFile("", tc.file, "assertionFile")
		if err == nil || !strings.Contains(err.Error(), "read assertionFile: "+tc.want) {
			t.Errorf("assertionFile %s: got %v, want %q", tc.file, err, tc.want)
		}
	}
}

// TestStoreRecordNotAFile: a record in the state directory that is a
// device is an error, not a read without end.
func TestStoreRecordNotAFile(t *testing.T) {
	dir := t.TempDir()
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", s.path("gh")); err != nil {
		t.Fatal(err)
	}
	_, err = s.load("gh")
	if err == nil || !strings.Contains(err.Error(), "is a character device, not a regular file") {
		t.Errorf("got %v, want the device refused", err)
	}
}
