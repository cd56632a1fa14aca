//go:build linux

package transport

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// setParentDeathSignal has the kernel SIGKILL the child when the thread
// that forked it ends (see Process.supervise), which happens when the
// daemon dies in any way, SIGKILL and crashes included. It covers the
// direct child only: its own children (npx's node, uvx's python, the
// command of an sh -c wrapper) get no such signal, and the kernel drops it
// when the child executes a set-user-ID or set-group-ID program.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// pendingBytes is how many bytes wait in the pipe f reads from; 0 when it
// cannot tell.
func pendingBytes(f *os.File) int {
	raw, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = raw.Control(func(fd uintptr) {
		n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
	})
	if err != nil {
		return 0
	}
	return n
}
