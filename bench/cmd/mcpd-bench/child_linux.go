package main

import (
	"os/exec"
	"syscall"
)

// dieWithBench makes the kernel send cmd SIGTERM if the bench dies without
// cleaning up (SIGKILL, SIGPIPE on a closed output pipe, a crash), so that no
// mcpd or server outlives it. mcpd stops its own servers on SIGTERM.
func dieWithBench(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}
