package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

func TestClientSession(t *testing.T) {
	ctx := testContext(t)
	var logs syncBuffer
	p := startFake(t, "mcp", map[string]string{fakeNoiseEnv: "1"},
		&ProcessOptions{Logger: zerolog.New(&logs), StopGrace: gracefulStopGrace})

	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0.0.1"}, nil)
	cs, err := client.Connect(ctx, p, nil)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
		t.Errorf("ListTools: got %d tools, want just echo", len(tools.Tools))
	}

	// Concurrent calls exercise concurrent Writes and response routing.
	const calls = 8
	results := make([]string, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{
				Name:      "echo",
				Arguments: map[string]any{"text": fmt.Sprint("hello ", i)},
			})
			if err != nil {
				errs[i] = err
				return
			}
			if len(res.Content) != 1 {
				errs[i] = fmt.Errorf("got %d content items, want 1", len(res.Content))
				return
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				results[i] = tc.Text
			}
		})
	}
	wg.Wait()
	for i := range calls {
		if errs[i] != nil {
			t.Errorf("CallTool %d: %v", i, errs[i])
		} else if want := fmt.Sprint("hello ", i); results[i] != want {
			t.Errorf("CallTool %d: got %q, want %q", i, results[i], want)
		}
	}

	if err := cs.Close(); err != nil {
		t.Errorf("session Close: %v", err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after the session closed")
	}
	if err := p.ExitError(); err != nil {
		t.Errorf("ExitError: got %v, want nil (the server exits on stdin EOF)", err)
	}

	entries := logs.entries(t)
	if !hasEntry(entries, map[string]string{"level": "info", "stream": "stderr", "message": "echo server: listening on stdio"}) {
		t.Errorf("logs: no stderr entry for the server's stderr line; got %v", entries)
	}
	if !hasEntry(entries, map[string]string{"level": "warn", "line": "Starting echo server..."}) {
		t.Errorf("logs: no warning for the skipped stdout banner; got %v", entries)
	}
}

func TestReadSkipsNonJSONRPC(t *testing.T) {
	ctx := testContext(t)
	var logs syncBuffer
	stdout := "Starting...\n" +
		"\n" +
		"   \r\n" +
		"{garbage\n" +
		`{"jsonrpc":"1.0","method":"wrong-version"}` + "\n" +
		"42\n" +
		`{"jsonrpc":"2.0","method":"first"}` + "\r\n" +
		"INFO " + strings.Repeat("y", 1000) + "\n" +
		`{"jsonrpc":"2.0","method":"last-without-newline"}`
	p := startFake(t, "script", map[string]string{fakeStdoutEnv: stdout, fakeExitEnv: "0"},
		&ProcessOptions{Logger: zerolog.New(&logs)})
	conn := connectProcess(t, ctx, p)

	var got []string
	for range 2 {
		got = append(got, readMethod(t, ctx, conn))
	}
	if diff := cmp.Diff([]string{"first", "last-without-newline"}, got); diff != "" {
		t.Errorf("methods (-want +got):\n%s", diff)
	}
	if _, err := conn.Read(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("Read after the last message: got %v, want io.EOF", err)
	}

	var warned int
	for _, e := range logs.entries(t) {
		if e["level"] != "warn" {
			continue
		}
		warned++
		line, _ := e["line"].(string)
		if len(line) > maxSkippedLogBytes {
			t.Errorf("warning line: got %d bytes, want at most %d", len(line), maxSkippedLogBytes)
		}
		// A line that looks like JSON may be a message in all but a
		// detail: its content is not logged.
		if strings.HasPrefix(line, "{") || strings.HasPrefix(line, "[") {
			t.Errorf("warning quotes a JSON line: %q", line)
		}
	}
	if want := 5; warned != want {
		t.Errorf("warnings: got %d, want %d", warned, want)
	}
	// The status of a server that never answers quotes the last of them,
	// cut as in the log.
	if n, last := p.SkippedOutput(); n != 5 || last != ("INFO " + strings.Repeat("y", 1000))[:maxSkippedLogBytes] {
		t.Errorf("SkippedOutput: got %d, %q; want 5 and the head of the INFO line", n, last)
	}
}

func TestReadBatch(t *testing.T) {
	ctx := testContext(t)
	stdout := `[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":1,"result":{}},{"bogus":true},{"jsonrpc":"2.0","method":"b","params":{}}]` + "\n" +
		"[]\n" +
		"[not json]\n" +
		`{"jsonrpc":"2.0","method":"c"}` + "\n"
	p := startFake(t, "script", map[string]string{fakeStdoutEnv: stdout}, nil)
	conn := connectProcess(t, ctx, p)

	var got []string
	for range 4 {
		msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		switch m := msg.(type) {
		case *jsonrpc.Request:
			got = append(got, "request "+m.Method)
		case *jsonrpc.Response:
			got = append(got, fmt.Sprint("response ", m.ID.Raw()))
		}
	}
	want := []string{"request a", "response 1", "request b", "request c"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

func TestReadLineLimit(t *testing.T) {
	overhead := len(bigLine(0)) - 1 // bytes around the payload, without '\n'
	tests := []struct {
		name    string
		max     int
		size    int
		wantErr bool
	}{
		{name: "fits the reader buffer", max: 1 << 20, size: 1000},
		{name: "spans reader buffers", max: 1 << 20, size: 3*readBufferSize + 17},
		{name: "longer than the buffer kept", max: 4 << 20, size: keepLongLineBytes + 17},
		{name: "exactly the limit", max: overhead + 500, size: 500},
		{name: "one byte over the limit", max: overhead + 500, size: 501, wantErr: true},
		{name: "over a small limit", max: 1024, size: 2000, wantErr: true},
		{name: "over a limit beyond the reader buffer", max: 2 * readBufferSize, size: 5 * readBufferSize, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			p := startFake(t, "script", map[string]string{fakeBigEnv: fmt.Sprint(tt.size)},
				&ProcessOptions{MaxLineBytes: tt.max})
			conn := connectProcess(t, ctx, p)
			msg, err := conn.Read(ctx)
			if tt.wantErr {
				if !errors.Is(err, ErrMessageTooLarge) {
					t.Fatalf("Read: got %v, want ErrMessageTooLarge", err)
				}
				if want := fmt.Sprintf("upstream message exceeds %d bytes", tt.max); !strings.Contains(err.Error(), want) {
					t.Errorf("Read error: got %q, want it to contain %q", err, want)
				}
				if _, again := conn.Read(ctx); !errors.Is(again, ErrMessageTooLarge) {
					t.Errorf("second Read: got %v, want the same error (the connection is over)", again)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			req, ok := msg.(*jsonrpc.Request)
			if !ok {
				t.Fatalf("Read: got %T, want *jsonrpc.Request", msg)
			}
			var params struct{ S string }
			if err := json.Unmarshal(req.Params, &params); err != nil {
				t.Fatalf("params: %v", err)
			}
			if len(params.S) != tt.size {
				t.Errorf("payload: got %d bytes, want %d", len(params.S), tt.size)
			}
			// The line is decoded: a buffer over keepLongLineBytes is not held.
			if lc, ok := conn.(*lineConn); !ok {
				t.Errorf("connection: got %T, want *lineConn", conn)
			} else if cap(lc.long) > keepLongLineBytes {
				t.Errorf("after the line: holding a %d-byte buffer, want at most %d", cap(lc.long), keepLongLineBytes)
			}
		})
	}
}

func TestReadEOFReportsExitStatus(t *testing.T) {
	tests := []struct {
		code       string
		wantStatus string
	}{
		{code: "3", wantStatus: "exit status 3"},
		{code: "0", wantStatus: "exit status 0"},
	}
	for _, tt := range tests {
		t.Run(tt.wantStatus, func(t *testing.T) {
			ctx := testContext(t)
			// Read waits up to the grace for the reap to learn the status.
			p := startFake(t, "script", map[string]string{fakeStdoutEnv: readyLine, fakeExitEnv: tt.code},
				&ProcessOptions{StopGrace: gracefulStopGrace})
			conn := connectProcess(t, ctx, p)
			if got := readMethod(t, ctx, conn); got != "ready" {
				t.Fatalf("first message: got %q, want ready", got)
			}
			_, err := conn.Read(ctx)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("Read after exit: got %v, want an error wrapping io.EOF", err)
			}
			if !strings.Contains(err.Error(), tt.wantStatus) {
				t.Errorf("Read after exit: got %q, want it to mention %q", err, tt.wantStatus)
			}
			var exitErr *exec.ExitError
			if tt.code != "0" && !errors.As(err, &exitErr) {
				t.Errorf("Read after exit: got %v, want it to wrap *exec.ExitError", err)
			}
		})
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	ctx := testContext(t)
	// Exits when stdin closes.
	p := startFake(t, "script", map[string]string{fakeStdoutEnv: readyLine},
		&ProcessOptions{StopGrace: gracefulStopGrace})
	conn := connectProcess(t, ctx, p)
	if got := readMethod(t, ctx, conn); got != "ready" {
		t.Fatalf("first message: got %q, want ready", got)
	}

	readErr := make(chan error, 1)
	go func() {
		_, err := conn.Read(ctx)
		readErr <- err
	}()
	if err := conn.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-readErr:
		if !errors.Is(err, mcp.ErrConnectionClosed) {
			t.Errorf("Read: got %v, want ErrConnectionClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("Read still blocked after Close")
	}
	notification := &jsonrpc.Request{Method: "notifications/initialized"}
	if err := conn.Write(ctx, notification); !errors.Is(err, mcp.ErrConnectionClosed) {
		t.Errorf("Write after Close: got %v, want ErrConnectionClosed", err)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := p.ExitError(); err != nil {
		t.Errorf("ExitError: got %v, want nil (exited on stdin EOF)", err)
	}
	if _, err := p.Connect(ctx); err == nil {
		t.Error("Connect after Close: got nil error, want one")
	}
}

func TestConnectTwice(t *testing.T) {
	ctx := testContext(t)
	p := startFake(t, "script", nil, nil)
	connectProcess(t, ctx, p)
	if _, err := p.Connect(ctx); err == nil {
		t.Error("second Connect: got nil error, want one")
	}
}

func TestConcurrentWrites(t *testing.T) {
	ctx := testContext(t)
	p := startFake(t, "echo", nil, nil)
	conn := connectProcess(t, ctx, p)

	const writers, perWriter = 4, 100
	// A payload beyond the pipe's atomic-write size would interleave if
	// writes were not serialized.
	pad := strings.Repeat("p", 8<<10)
	writeErrs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for n := range perWriter {
				params, _ := json.Marshal(map[string]any{"key": fmt.Sprint(w, "/", n), "pad": pad})
				if err := conn.Write(ctx, &jsonrpc.Request{Method: "m", Params: params}); err != nil {
					writeErrs <- err
					return
				}
			}
		})
	}
	seen := make(map[string]bool)
	for range writers * perWriter {
		msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		var params struct{ Key, Pad string }
		if err := json.Unmarshal(msg.(*jsonrpc.Request).Params, &params); err != nil {
			t.Fatalf("params: %v", err)
		}
		if seen[params.Key] || params.Pad != pad {
			t.Fatalf("message %q: duplicate or corrupt", params.Key)
		}
		seen[params.Key] = true
	}
	wg.Wait()
	close(writeErrs)
	for err := range writeErrs {
		t.Errorf("Write: %v", err)
	}
}

// TestDecodeMessageCopies guards the reuse of read buffers: a decoded message
// must not alias the line it came from.
func TestDecodeMessageCopies(t *testing.T) {
	for _, line := range [][]byte{
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"k":"v"}}`),
		[]byte(`{"jsonrpc":"2.0","id":1,"result":{"k":"v"}}`),
	} {
		msg, err := decodeMessage(line)
		if err != nil {
			t.Fatalf("decodeMessage: %v", err)
		}
		for i := range line {
			line[i] = 'z'
		}
		var raw []byte
		switch m := msg.(type) {
		case *jsonrpc.Request:
			raw = m.Params
		case *jsonrpc.Response:
			raw = m.Result
		}
		if got, want := string(raw), `{"k":"v"}`; got != want {
			t.Errorf("payload after overwriting the line: got %s, want %s", got, want)
		}
	}
}
