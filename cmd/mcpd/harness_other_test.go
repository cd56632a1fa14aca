//go:build !linux

package main

import (
	"os/exec"
	"testing"
)

// dieWithTest has no portable form outside Linux; the test's cleanups stop
// mcpd.
func dieWithTest(*exec.Cmd) {}

// inNewPIDNamespace skips the test: PID namespaces are Linux's.
func inNewPIDNamespace(t *testing.T, _ *exec.Cmd) {
	t.Helper()
	t.Skip("PID namespaces are Linux's")
}
