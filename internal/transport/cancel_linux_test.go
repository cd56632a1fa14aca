//go:build linux

package transport

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"golang.org/x/sys/unix"
)

// startNonReader starts a child that never reads its stdin, so that its
// pipe fills, and connects to it.
func startNonReader(t *testing.T) (*Process, *lineConn) {
	t.Helper()
	p, err := StartProcess(StdioSpec{Command: "sleep", Args: []string{"600"}}, &ProcessOptions{StopGrace: testStopGrace})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	conn, err := p.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p, conn.(*lineConn)
}

// pipeFull reports whether the pipe f writes to holds as much as it can.
func pipeFull(t *testing.T, f *os.File) bool {
	t.Helper()
	raw, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var queued, size int
	var ioErr error
	if err := raw.Control(func(fd uintptr) {
		if queued, ioErr = unix.IoctlGetInt(int(fd), unix.TIOCINQ); ioErr == nil {
			size, ioErr = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if ioErr != nil {
		t.Fatal(ioErr)
	}
	return queued >= size
}

// fillPipe fills the child's stdin, bypassing the connection, until not
// one more byte fits.
func fillPipe(t *testing.T, p *Process) {
	t.Helper()
	chunk := []byte(strings.Repeat("x", 64<<10))
	for {
		_ = p.stdin.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		n, err := p.stdin.Write(chunk)
		if err == nil || n > 0 {
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("filling the pipe: %v", err)
		}
		break
	}
	_ = p.stdin.SetWriteDeadline(time.Time{})
}

// awaitFull waits until the write whose result comes on done has filled
// the child's stdin.
func awaitFull(t *testing.T, ctx context.Context, p *Process, done <-chan error) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !pipeFull(t, p.stdin) {
		select {
		case err := <-done:
			t.Fatalf("big write: returned %v before the pipe was full", err)
		case <-ctx.Done():
			t.Fatal("the pipe never filled")
		case <-tick.C:
		}
	}
}

// bigRequest is a message larger than any pipe's buffer (64 KiB on most
// kernels, 1 MiB with 64 KiB pages).
func bigRequest() *jsonrpc.Request {
	params, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 4<<20)})
	return &jsonrpc.Request{Method: "notifications/pad", Params: params}
}

// watchedContext tells when Write asked for its deadline: Write is past its
// first checks then, and about to wait for the pipe.
type watchedContext struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func watch(ctx context.Context) *watchedContext {
	return &watchedContext{Context: ctx, asked: make(chan struct{})}
}

func (c *watchedContext) Deadline() (time.Time, bool) {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Deadline()
}

// startWrite writes msg in the background; its result comes on the channel.
func startWrite(ctx context.Context, conn *lineConn, msg jsonrpc.Message) <-chan error {
	done := make(chan error, 1)
	go func() { done <- conn.Write(ctx, msg) }()
	return done
}

func awaitWrite(t *testing.T, ctx context.Context, what string, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		t.Fatalf("%s: still blocked when the test's deadline came", what)
		return nil
	}
}

// TestCancelledWriteKeepsConnection: a write whose context has no deadline
// waits on a full pipe; cancelling it returns the cancellation at once, and
// as nothing went out the connection goes on.
func TestCancelledWriteKeepsConnection(t *testing.T) {
	testCtx := testContext(t)
	p, conn := startNonReader(t)
	fillPipe(t, p)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wctx := watch(ctx)
	done := startWrite(wctx, conn, &jsonrpc.Request{Method: "notifications/small"})
	select {
	case <-wctx.asked:
	case err := <-done:
		t.Fatalf("write to a full pipe: returned %v before cancel", err)
	case <-testCtx.Done():
		t.Fatal("the write never started")
	}
	cancel()
	err := awaitWrite(t, testCtx, "cancelled write", done)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled write: got %v, want context.Canceled", err)
	}
	if conn.readEnded.Load() {
		t.Errorf("cancelled write with nothing sent ended the connection: %v", conn.stickyErr())
	}
}

// TestWriteWaitingForLockEndsWithContext: a write that no deadline bounds
// is stuck on a full pipe. Writes queued behind it end at their own
// deadline or when cancelled, and keep the connection; cancelling the stuck
// write, whose line went out in part, ends the connection.
func TestWriteWaitingForLockEndsWithContext(t *testing.T) {
	testCtx := testContext(t)
	p, conn := startNonReader(t)
	readErr := make(chan error, 1)
	go func() {
		_, err := conn.Read(testCtx)
		readErr <- err
	}()

	stuckCtx, cancelStuck := context.WithCancel(context.Background())
	defer cancelStuck()
	stuck := startWrite(stuckCtx, conn, bigRequest())
	awaitFull(t, testCtx, p, stuck)

	// Queued behind the stuck write: its deadline ends it.
	shortCtx, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	err := awaitWrite(t, testCtx, "write with a deadline, queued", startWrite(shortCtx, conn, &jsonrpc.Request{Method: "notifications/small"}))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("queued write with a deadline: got %v, want context.DeadlineExceeded", err)
	}
	// Queued behind it, without a deadline: cancelling ends it.
	queuedCtx, cancelQueued := context.WithCancel(context.Background())
	defer cancelQueued()
	wctx := watch(queuedCtx)
	queued := startWrite(wctx, conn, &jsonrpc.Request{Method: "notifications/small"})
	select {
	case <-wctx.asked:
	case <-testCtx.Done():
		t.Fatal("the queued write never started")
	}
	cancelQueued()
	if err := awaitWrite(t, testCtx, "cancelled queued write", queued); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled queued write: got %v, want context.Canceled", err)
	}
	if conn.readEnded.Load() {
		t.Fatalf("queued writes that sent nothing ended the connection: %v", conn.stickyErr())
	}

	// The stuck write ends when cancelled; its line was cut short.
	cancelStuck()
	err = awaitWrite(t, testCtx, "cancelled stuck write", stuck)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("cancelled stuck write: got %v, want context.Canceled saying the line was cut short", err)
	}
	wantReadCut(testCtx, t, readErr)
}
