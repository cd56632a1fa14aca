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
	m := NewManager(&Options{ProbeTimeout: 20 * time.Second, StopGrace: 10 * time.Minute})
	ctx := testContext(t)
	st, err := m.Connect(ctx, fakeServer("stubborn", "stubborn"), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(st.Pid, syscall.SIGKILL) })

	closeCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := m.Close(closeCtx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close: got %v, want the deadline's error", err)
	}
	if !processGone(st.Pid) {
		t.Errorf("the server (pid %d) still runs after Close returned", st.Pid)
	}
}

// TestCloseHurriesAnOperationUnderWay: Close waits for an operation that
// holds the servers (here a restart, stopping a server that takes twice
// the stop grace, far longer than the test); once Close's deadline
// passes, that operation's stop is hurried too, and Close returns.
func TestCloseHurriesAnOperationUnderWay(t *testing.T) {
	m := NewManager(&Options{ProbeTimeout: 20 * time.Second, StopGrace: 10 * time.Minute})
	ctx := testContext(t)
	st, err := m.Connect(ctx, fakeServer("stubborn", "stubborn"), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(st.Pid, syscall.SIGKILL) })
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
	if !processGone(st.Pid) {
		t.Errorf("the server (pid %d) still runs after Close returned", st.Pid)
	}
}
