//go:build linux

package transport

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// TestReaperReapsOrphansOnly makes this test process a child subreaper, so
// that it inherits orphans as an init process does, and starts processes
// that each leave a child behind (sh's background sleep) and exit with a
// status of their own; the Process kills what is left of the group, the
// orphan, once sh has exited. The reaper must reap every orphan, and the
// Processes still report their exit statuses.
func TestReaperReapsOrphansOnly(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	ctx := testContext(t)
	r := NewReaper(zerolog.Nop())
	stop := r.Run()
	defer stop()

	const n = 24
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		orphan []int
	)
	for i := range n {
		wg.Go(func() {
			status := 10 + i%5
			p, err := StartProcess(StdioSpec{
				Command: "/bin/sh",
				Args:    []string{"-c", fmt.Sprintf("sleep 30 & echo $! >&2; exit %d", status)},
			}, &ProcessOptions{Logger: zerolog.Nop(), Reaper: r})
			if err != nil {
				t.Errorf("start: %v", err)
				return
			}
			defer p.Stop(ctx)
			select {
			case <-p.Done():
			case <-ctx.Done():
				t.Errorf("process %d did not exit", i)
				return
			}
			var exit *exec.ExitError
			if err := p.ExitError(); !errors.As(err, &exit) || exit.ExitCode() != status {
				t.Errorf("process %d: exit %v, want exit status %d (its own child reaped by its Process)", i, err, status)
			}
			// The orphan's pid, once sh's stderr is read to the end.
			if err := p.Stop(ctx); err != nil {
				t.Errorf("stop: %v", err)
			}
			tail := p.StderrTail()
			if len(tail) == 0 {
				t.Errorf("process %d wrote no pid", i)
				return
			}
			pid, err := strconv.Atoi(strings.TrimSpace(tail[len(tail)-1]))
			if err != nil {
				t.Errorf("process %d: pid %q: %v", i, tail, err)
				return
			}
			mu.Lock()
			orphan = append(orphan, pid)
			mu.Unlock()
		})
	}
	wg.Wait()
	// Every orphan was killed as this process's child: gone once reaped
	// (or its pid reused by a process of another parent).
	for _, pid := range orphan {
		for parentOf(pid) == os.Getpid() {
			select {
			case <-ctx.Done():
				t.Fatalf("orphan %d was never reaped", pid)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// TestReaperLeavesProcessChildren: an exited child started through the
// reaper is its starter's to wait for until released, however often the
// reaper looks meanwhile; and the reaper says that it stood in the way.
func TestReaperLeavesProcessChildren(t *testing.T) {
	ctx := testContext(t)
	r := NewReaper(zerolog.Nop())
	cmd := exec.Command("/bin/sh", "-c", "exit 7")
	err := r.startChild(func() (int, error) {
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	for !isZombie(pid) {
		select {
		case <-ctx.Done():
			t.Fatal("the child never exited")
		case <-time.After(10 * time.Millisecond):
		}
	}
	for range 3 {
		if blocked := r.reapOrphans(); !blocked {
			t.Error("reapOrphans: the exited child did not stand in the way")
		}
	}
	err = cmd.Wait()
	r.release(pid)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("Wait: %v, want exit status 7", err)
	}
	if blocked := r.reapOrphans(); blocked {
		t.Error("reapOrphans: blocked with no child left")
	}
}

// parentOf returns the parent pid of pid, 0 when there is no such process.
func parentOf(pid int) int {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// isZombie reports whether pid has exited and awaits its reap.
func isZombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// TestReaperRunStops: stop ends Run's goroutine (goleak in TestMain
// checks) and may be called again.
func TestReaperRunStops(t *testing.T) {
	stop := NewReaper(zerolog.Nop()).Run()
	stop()
	stop()
}
