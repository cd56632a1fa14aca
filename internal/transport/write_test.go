package transport

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestWriteHonoursDeadline: a child that never reads its stdin fills the
// pipe; a write then ends at the request's deadline instead of blocking
// forever.
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
	params, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 64<<10)})
	msg := &jsonrpc.Request{Method: "notifications/pad", Params: params}
	testCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; ; i++ {
		ctx, cancelWrite := context.WithTimeout(testCtx, 100*time.Millisecond)
		err := conn.Write(ctx, msg)
		cancelWrite()
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("write %d: got %v, want a deadline error", i, err)
			}
			return
		}
		if testCtx.Err() != nil {
			t.Fatal("the pipe never filled")
		}
	}
}
