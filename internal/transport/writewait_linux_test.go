//go:build linux

package transport

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestWriteWithoutDeadlineIsBounded: the SDK writes its answers to a
// server's own requests with a context that never ends. On a server that
// reads none of it, such a write, and one queued behind it, give up after
// the connection's bound (shortened here) and end the connection, so the
// session is rebuilt instead of refusing every request for good.
func TestWriteWithoutDeadlineIsBounded(t *testing.T) {
	testCtx := testContext(t)
	p, conn := startNonReader(t)
	conn.maxWriteWait = 200 * time.Millisecond
	readErr := make(chan error, 1)
	go func() {
		_, err := conn.Read(testCtx)
		readErr <- err
	}()
	fillPipe(t, p)

	first := startWrite(context.Background(), conn, &jsonrpc.Response{Result: []byte(`{}`)})
	queued := startWrite(context.Background(), conn, &jsonrpc.Response{Result: []byte(`{}`)})
	for _, w := range []struct {
		name string
		done <-chan error
	}{{"first answer", first}, {"queued answer", queued}} {
		err := awaitWrite(t, testCtx, w.name, w.done)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: got %v, want os.ErrDeadlineExceeded", w.name, err)
		}
	}
	select {
	case err := <-readErr:
		if !errors.Is(err, ErrWriteFailed) || !strings.Contains(err.Error(), "200ms") {
			t.Errorf("pending read: got %v, want ErrWriteFailed naming the bound", err)
		}
	case <-testCtx.Done():
		t.Fatal("pending read: still blocked after the write gave up")
	}
}
