//go:build linux

package transport

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reapBlockedRetry is how soon the reaper looks again when a Process's
// exited child stood first in line (waitid shows one exited child at a
// time): that child's Process is waiting for it and reaps it at once.
const reapBlockedRetry = 20 * time.Millisecond

// Run reaps orphans now and whenever a child of mcpd changes state
// (SIGCHLD), until stop, which waits for it to end. Call it once.
func (r *Reaper) Run() (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGCHLD)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		// At once: orphans may have come before Run.
		retry := time.NewTimer(0)
		defer retry.Stop()
		for {
			select {
			case <-quit:
				return
			case <-sigs:
			case <-retry.C:
			}
			if r.reapOrphans() {
				retry.Reset(reapBlockedRetry)
			}
		}
	}()
	return sync.OnceFunc(func() {
		signal.Stop(sigs)
		close(quit)
		<-done
	})
}

// reapOrphans reaps every exited child that is no Process's, and reports
// whether a Process's exited child kept it from seeing the others.
func (r *Reaper) reapOrphans() (blocked bool) {
	r.starting.Lock()
	defer r.starting.Unlock()
	for {
		// WNOWAIT: look first, leaving the child to its Process if it
		// is one's.
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		pid := siginfoPid(&info)
		if err != nil || pid == 0 {
			return false // no child at all (ECHILD), or none has exited
		}
		if r.owns(pid) {
			return true
		}
		var status unix.WaitStatus
		reaped, err := unix.Wait4(pid, &status, unix.WNOHANG, nil)
		if err != nil {
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ECHILD) {
				continue // look again
			}
			return false
		}
		if reaped != pid {
			return false // not reapable after all: the next SIGCHLD looks again, rather than a spin
		}
		r.log.Debug().Int("pid", pid).Int("status", status.ExitStatus()).Str("signal", signalName(status)).Msg("reaped an orphaned process")
	}
}

// signalName names the signal that ended a process, "" for none.
func signalName(status unix.WaitStatus) string {
	if !status.Signaled() {
		return ""
	}
	return unix.SignalName(status.Signal())
}

// siginfoPid is si_pid of a SIGCHLD's siginfo, which x/sys keeps opaque:
// after si_signo, si_errno and si_code (three ints), the union of fields
// begins at the next pointer-aligned offset, and si_pid is its first.
func siginfoPid(info *unix.Siginfo) int {
	off := 3 * unsafe.Sizeof(int32(0))
	if a := unsafe.Alignof(uintptr(0)); off%a != 0 {
		off += a - off%a
	}
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off)))
}
