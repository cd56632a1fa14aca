package mcpclient

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"
)

// TestCloseKillsWhenOutOfTime: a server that ignores the end of its stdin
// and SIGTERM would take twice the stop grace (here far longer than the
// test) to stop. When Close's deadline comes first, Close kills it rather
// than return with it still running.
func TestCloseKillsWhenOutOfTime(t *testing.T) {
	ctx := testContext(t)
	m, pid := stubbornServer(ctx, t)

	closeCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := m.Close(closeCtx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close: got %v, want the deadline's error", err)
	}
	if !processGone(pid) {
		t.Errorf("the server (pid %d) still runs after Close returned", pid)
	}
}

// TestCloseHurriesAnOperationUnderWay: Close waits for an operation that
// holds the servers (here a restart, stopping a server that takes twice
// the stop grace, far longer than the test); once Close's deadline
// passes, that operation's stop is hurried too, and Close returns.
func TestCloseHurriesAnOperationUnderWay(t *testing.T) {
	ctx := testContext(t)
	m, pid := stubbornServer(ctx, t)
	restarted := make(chan error, 1)
	go func() {
		_, err := m.Restart(ctx, "stubborn")
		restarted <- err
	}()
	eventually(ctx, t, "the restart to begin stopping the server", func() bool {
		now, _ := m.Get("stubborn")
		return now.State != StateReady
	})

	closeCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- m.Close(closeCtx) }()
	awaitOp(t, ctx, "Close", closed)
	awaitOp(t, ctx, "the restart", restarted)
	if !processGone(pid) {
		t.Errorf("the server (pid %d) still runs after Close returned", pid)
	}
}

// stubbornServer returns a Manager, not closed by the test, with the
// server "stubborn": it ignores the end of its stdin and SIGTERM, so with
// the Manager's stop grace of ten minutes only a hurried stop ends it in
// the test. The process is killed when the test ends, whatever happened.
func stubbornServer(ctx context.Context, t *testing.T) (*Manager, int) {
	t.Helper()
	m := NewManager(&Options{ProbeTimeout: 20 * time.Second, StopGrace: 10 * time.Minute})
	st, err := m.Connect(ctx, fakeServer("stubborn", "stubborn"), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(st.Pid, syscall.SIGKILL) })
	return m, st.Pid
}
