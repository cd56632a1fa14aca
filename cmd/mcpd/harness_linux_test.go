package main

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// dieWithTest makes the kernel send cmd SIGTERM if the test binary dies
// without its cleanups (killed, or ended by go test -timeout), so that no
// mcpd, and through mcpd's own shutdown no server, outlives it.
func dieWithTest(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}

// inNewPIDNamespace makes cmd PID 1 of a PID namespace of its own, as a
// container's first process is; that takes root, without which the test
// is skipped, unless MCPD_E2E_REQUIRED=1.
func inNewPIDNamespace(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv(requiredEnv) == "1" {
			t.Fatalf("a PID namespace takes root, and %s=1", requiredEnv)
		}
		t.Skip("a PID namespace takes root")
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWPID
}
