package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestWriteHonoursDeadline: a child that never reads its stdin fills the
// pipe; a write then ends at the request's deadline instead of blocking
// forever. The line it cut short ends the connection: the pending Read
// returns and says why, and no later message follows the half line.
func TestWriteHonoursDeadline(t *testing.T) {
	p, err := StartProcess(StdioSpec{Command: "sleep", Args: []string{"60"}}, &ProcessOptions{StopGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	conn, err := p.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	testCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	readErr := make(chan error, 1)
	go func() {
		_, err := conn.Read(testCtx)
		readErr <- err
	}()

	// One message larger than the pipe's buffer (64 KiB on most kernels,
	// 1 MiB with 64 KiB pages) is cut short by its deadline.
	params, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 2<<20)})
	big := &jsonrpc.Request{Method: "notifications/pad", Params: params}
	ctx, cancelWrite := context.WithTimeout(testCtx, time.Second)
	err = conn.Write(ctx, big)
	cancelWrite()
	if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("write: got %v, want a deadline error saying the line was cut short", err)
	}
	wantReadCut(testCtx, t, readErr)
	small := &jsonrpc.Request{Method: "notifications/small"}
	if err := conn.Write(testCtx, small); err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Errorf("write after a cut line: got %v, want the cut write's error", err)
	}
}

// lateContext is a context whose deadline has passed but whose timer has
// not fired yet: Done stays open until fire is called. A loaded machine
// makes real contexts look like this for a moment, which is when a write
// that waited for the pipe finds its deadline gone.
type lateContext struct {
	context.Context
	done  chan struct{}
	fired atomic.Bool
}

func newLateContext() *lateContext {
	return &lateContext{Context: context.Background(), done: make(chan struct{})}
}

func (c *lateContext) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }
func (c *lateContext) Done() <-chan struct{}       { return c.done }
func (c *lateContext) fire()                       { c.fired.Store(true); close(c.done) }

func (c *lateContext) Err() error {
	if c.fired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// TestWriteAtDeadlineKeepsConnection: a write whose deadline passed before
// any byte went out reports the deadline only once its context does (the
// SDK would otherwise take the connection for broken and refuse every later
// request), and the connection goes on working.
func TestWriteAtDeadlineKeepsConnection(t *testing.T) {
	ctx := testContext(t)
	p := startFake(t, "echo", nil, nil)
	conn := connectProcess(t, ctx, p)

	late := newLateContext()
	result := make(chan error, 1)
	go func() {
		err := conn.Write(late, &jsonrpc.Request{Method: "notifications/late"})
		if late.Err() == nil {
			err = fmt.Errorf("returned %v while the context was still live", err)
		}
		result <- err
	}()
	// Let the write find its deadline gone; not a timing assertion (an
	// early fire only weakens the check).
	time.Sleep(50 * time.Millisecond)
	late.fire()
	if err := <-result; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("late write: got %v, want context.DeadlineExceeded once the context fired", err)
	}

	if err := conn.Write(ctx, &jsonrpc.Request{Method: "notifications/after"}); err != nil {
		t.Fatalf("write after the late one: %v", err)
	}
	if got := readMethod(t, ctx, conn); got != "notifications/after" {
		t.Errorf("echoed: got %q, want notifications/after (the late message never went out)", got)
	}
}

// TestWriteToExitedServerReportsExit: a write that finds the server gone
// (a closed pipe) ends the connection, but Read reports how the server
// ended, not the write that noticed.
func TestWriteToExitedServerReportsExit(t *testing.T) {
	ctx := testContext(t)
	p := startFake(t, "script", map[string]string{fakeExitEnv: "3"}, &ProcessOptions{StopGrace: gracefulStopGrace})
	conn := connectProcess(t, ctx, p)
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatal("the fake did not exit")
	}
	err := conn.Write(ctx, &jsonrpc.Request{Method: "notifications/late"})
	if !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write to an exited server: got %v, want EPIPE", err)
	}
	_, err = conn.Read(ctx)
	if errors.Is(err, ErrWriteFailed) || !errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("read after the failed write: got %v, want the exit status (io.EOF), not ErrWriteFailed", err)
	}
}

// wantReadCut waits for the pending Read of a connection a cut write
// ended, and checks that it says so.
func wantReadCut(ctx context.Context, t *testing.T, readErr <-chan error) {
	t.Helper()
	select {
	case err := <-readErr:
		if !errors.Is(err, ErrWriteFailed) || !strings.Contains(err.Error(), "cut short") {
			t.Errorf("pending read: got %v, want ErrWriteFailed saying the line was cut short", err)
		}
	case <-ctx.Done():
		t.Fatal("pending read: still blocked after the cut write")
	}
}
