package oauth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestStoreLock: a server's lock in the state directory is held by one
// taker at a time, a second waits until the first lets go or its context
// ends, and other servers' locks are their own.
func TestStoreLock(t *testing.T) {
	s, err := openStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := s.lock(context.Background(), "srv")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*lockPoll)
	defer cancel()
	if _, err := s.lock(ctx, "srv"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second lock while the first is held: got %v, want the context's end", err)
	}
	other, err := s.lock(context.Background(), "other")
	if err != nil {
		t.Fatalf("another server's lock: %v", err)
	}
	other()
	if fi, err := os.Stat(filepath.Join(s.dir, "srv.lock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("lock file: got %v, %v, want mode 0600", fi, err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := s.lock(context.Background(), "srv")
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	if err := <-got; err != nil {
		t.Errorf("lock after the first let go: %v", err)
	}
}

// TestStoreLockGoesWithTheRecord: the lock file stays while the server
// has a record, and goes when the last holder lets go without one. A
// taker that waited for the lock on the file removed meanwhile locks the
// new one: a lock on the removed file would exclude nobody who opens the
// path afresh.
func TestStoreLockGoesWithTheRecord(t *testing.T) {
	s, err := openStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lockPath := filepath.Join(s.dir, "srv.lock")
	unlock, err := s.lock(context.Background(), "srv")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.save("srv", &record{Resource: "https://example.com/mcp"}); err != nil {
		t.Fatal(err)
	}
	unlock()
	if _, err := os.Stat(lockPath); err != nil {
		t.Errorf("lock file of a server with a record after its holder let go: %v, want it kept", err)
	}

	first, err := s.lock(context.Background(), "srv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first) // if the test ends early; closing twice does no harm
	waited := make(chan func(), 1)
	go func() {
		u, err := s.lock(context.Background(), "srv")
		if err != nil {
			t.Error(err)
			u = func() {}
		}
		waited <- u
	}()
	waitOpened(t, lockPath, 2) // the second waits on the file that will go
	if err := s.remove("srv"); err != nil {
		t.Fatal(err)
	}
	first() // no record: the lock file goes
	second := <-waited
	ctx, cancel := context.WithTimeout(context.Background(), 5*lockPoll)
	defer cancel()
	if third, err := s.lock(ctx, "srv"); err == nil {
		third()
		t.Error("a third taker got the lock while the second held it")
	}
	second()
	if _, err := os.Stat(lockPath); !os.IsNotExist(err) {
		t.Errorf("lock file after the last holder let go without a record: %v, want it gone", err)
	}
}

// waitOpened waits until this process has path open n times (Linux's
// /proc/self/fd); where that cannot be read, it waits a few lock polls.
func waitOpened(t *testing.T, path string, n int) {
	t.Helper()
	if _, err := os.ReadDir("/proc/self/fd"); err != nil {
		time.Sleep(5 * lockPoll)
		return
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		fds, _ := os.ReadDir("/proc/self/fd")
		open := 0
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == path {
				open++
			}
		}
		if open >= n {
			return
		}
	}
	t.Fatalf("%s is not open %d times", path, n)
}
