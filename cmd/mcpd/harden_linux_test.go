//go:build linux

package main

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestKeepFromSameUser: the daemon marks itself not dumpable, which keeps
// /proc/PID/environ and ptrace from processes of its user.
func TestKeepFromSameUser(t *testing.T) {
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0) })
	if err := keepFromSameUser(); err != nil {
		t.Fatal(err)
	}
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		t.Errorf("PR_GET_DUMPABLE: got %d, %v; want 0", d, err)
	}
}
