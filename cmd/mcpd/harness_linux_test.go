package main

import (
	"os/exec"
	"syscall"
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
