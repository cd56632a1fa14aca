package fastserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testTimeout = 10 * time.Second

// connect runs Serve on in-process pipes and connects a go-sdk client to it
// asking for version ("" means the SDK's latest, which probes
// server/discover first). Cleanup closes the session and checks that Serve
// ended cleanly.
func connect(t *testing.T, ctx context.Context, version string) *mcp.ClientSession {
	t.Helper()
	toServerR, toServerW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		err := Serve(ctx, toServerR, toClientW)
		// Unblock a client still reading, as a process exit would.
		toClientW.CloseWithError(io.EOF)
		served <- err
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "fastserver-test", Version: "v0.0.1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: toClientR, Writer: toServerW},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		toServerW.Close()
		<-served
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: got %v, want nil after the client closed", err)
		}
	})
	return cs
}

func TestSDKClient(t *testing.T) {
	tests := []struct {
		name    string
		version string
		want    string
	}{
		{"latest falls back from server/discover", "", "2025-11-25"},
		{"2025-11-25", "2025-11-25", "2025-11-25"},
		{"2025-06-18", "2025-06-18", "2025-06-18"},
		{"2025-03-26", "2025-03-26", "2025-03-26"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			cs := connect(t, ctx, tt.version)

			init := cs.InitializeResult()
			if got := init.ProtocolVersion; got != tt.want {
				t.Errorf("protocol version: got %q, want %q", got, tt.want)
			}
			if init.ServerInfo == nil || init.ServerInfo.Name != Name {
				t.Errorf("server info: got %+v, want name %q", init.ServerInfo, Name)
			}
			if init.Capabilities == nil || init.Capabilities.Tools == nil {
				t.Errorf("capabilities: got %+v, want tools", init.Capabilities)
			}
			if err := cs.Ping(ctx, nil); err != nil {
				t.Errorf("Ping: %v", err)
			}

			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			if diff := cmp.Diff([]string{ToolName}, names); diff != "" {
				t.Errorf("tool names (-want +got):\n%s", diff)
			}

			msg := "héllo \"quoted\" \\ \n\t\x01 ✓"
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolName, Arguments: map[string]any{"message": msg}})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if res.IsError {
				t.Errorf("IsError: got true, want false")
			}
			if got := resultText(res); got != msg {
				t.Errorf("echo: got %q, want %q", got, msg)
			}
		})
	}
}

func TestCallToolErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs := connect(t, ctx, "2025-11-25")

	tests := []struct {
		name        string
		tool        string
		args        any
		wantIsError bool
		wantCode    int64 // JSON-RPC error code, 0 for none
	}{
		{"missing message", ToolName, map[string]any{}, true, 0},
		{"no arguments", ToolName, nil, true, 0},
		{"message not a string", ToolName, map[string]any{"message": 42}, true, 0},
		{"unknown tool", "nope", map[string]any{"message": "x"}, false, codeInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
			if tt.wantCode != 0 {
				var werr *jsonrpc.Error
				if !errors.As(err, &werr) {
					t.Fatalf("CallTool: got %v, want a JSON-RPC error %d", err, tt.wantCode)
				}
				if werr.Code != tt.wantCode {
					t.Errorf("code: got %d, want %d", werr.Code, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if res.IsError != tt.wantIsError {
				t.Errorf("IsError: got %v, want %v (text %q)", res.IsError, tt.wantIsError, resultText(res))
			}
		})
	}
}

// TestConcurrentCalls pipelines calls from many goroutines over one session
// and checks that every caller gets its own answer.
func TestConcurrentCalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs := connect(t, ctx, "")

	const workers, calls = 8, 25
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				msg := fmt.Sprintf("w%d-c%d", w, i)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolName, Arguments: map[string]any{"message": msg}})
				if err != nil {
					errs <- fmt.Errorf("CallTool %s: %w", msg, err)
					return
				}
				if got := resultText(res); got != msg {
					errs <- fmt.Errorf("echo: got %q, want %q", got, msg)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestWire feeds raw lines and compares the decoded response lines.
func TestWire(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // one JSON value per response line
	}{
		{
			name: "server/discover is method not found",
			in:   `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`,
			want: []string{`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found: server/discover"}}`},
		},
		{
			name: "notifications get no answer",
			in: `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
				`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}` + "\n" +
				`{"jsonrpc":"2.0","id":"a","method":"ping"}`,
			want: []string{`{"jsonrpc":"2.0","id":"a","result":{}}`},
		},
		{
			name: "initialize echoes a known version",
			in:   `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
			want: []string{`{"jsonrpc":"2.0","id":7,"result":{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"` + Name + `","version":"` + Version + `"}}}`},
		},
		{
			name: "initialize offers its own version for an unknown one",
			in:   `{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}`,
			want: []string{`{"jsonrpc":"2.0","id":8,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"` + Name + `","version":"` + Version + `"}}}`},
		},
		{
			name: "echo with blank lines, CRLF and a final line without newline",
			in:   "\n\r\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"a\"b\u0002"}}}` + "\r\n" + `{"jsonrpc":"2.0","id":3,"method":"ping"}`,
			want: []string{
				`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"a\"b\u0002"}]}}`,
				`{"jsonrpc":"2.0","id":3,"result":{}}`,
			},
		},
		{
			name: "parse error",
			in:   `{"jsonrpc":`,
			want: []string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`},
		},
		{
			name: "batch is an invalid request",
			in:   `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
			want: []string{`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: want one JSON object a line"}}`},
		},
		{
			name: "wrongly typed params",
			in:   `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":[1]}`,
			want: []string{`{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"invalid request: params has the wrong type"}}`},
		},
		{
			name: "unknown method",
			in:   `{"jsonrpc":"2.0","id":5,"method":"resources/list"}`,
			want: []string{`{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"method not found: resources/list"}}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var out bytes.Buffer
			if err := Serve(ctx, strings.NewReader(tt.in), &out); err != nil {
				t.Fatalf("Serve: got %v, want nil at EOF", err)
			}
			got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if out.Len() == 0 {
				got = nil
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d response lines %q, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				var g, w any
				if err := json.Unmarshal([]byte(got[i]), &g); err != nil {
					t.Fatalf("line %d %q is not JSON: %v", i, got[i], err)
				}
				if err := json.Unmarshal([]byte(tt.want[i]), &w); err != nil {
					t.Fatalf("want line %d: %v", i, err)
				}
				if diff := cmp.Diff(w, g); diff != "" {
					t.Errorf("line %d (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestServeStops(t *testing.T) {
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := Serve(ctx, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"), io.Discard)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	})
	t.Run("line too long", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		in := `{"x":"` + strings.Repeat("a", maxLineBytes) + `"}` + "\n"
		err := Serve(ctx, strings.NewReader(in), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "exceeds") {
			t.Errorf("got %v, want a line-too-long error", err)
		}
	})
	t.Run("long line within the limit", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		msg := strings.Repeat("b", 3*bufferSize)
		in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + msg + `"}}}`
		var out bytes.Buffer
		if err := Serve(ctx, strings.NewReader(in), &out); err != nil {
			t.Fatalf("Serve: %v", err)
		}
		var resp struct {
			Result mcp.CallToolResult `json:"result"`
		}
		if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
			t.Fatalf("response: %v", err)
		}
		if got := resultText(&resp.Result); got != msg {
			t.Errorf("echo: got %d bytes, want %d", len(got), len(msg))
		}
	})
}

func TestAppendString(t *testing.T) {
	tests := []string{"", "plain", "quote\" back\\slash", "ctl \x00\x1f\x7f", "utf8 é ✓ 🙂", "bad \xff\xfe utf8", "\u2028"}
	for _, s := range tests {
		t.Run(fmt.Sprintf("%q", s), func(t *testing.T) {
			want, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			got := appendString(nil, s)
			var gotS, wantS string
			if err := json.Unmarshal(got, &gotS); err != nil {
				t.Fatalf("appendString(%q) = %s, not a JSON string: %v", s, got, err)
			}
			_ = json.Unmarshal(want, &wantS)
			if gotS != wantS {
				t.Errorf("decoded: got %q, want %q", gotS, wantS)
			}
		})
	}
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// BenchmarkServe measures the server alone: one echo call a line, in
// memory.
func BenchmarkServe(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello, mcpd"}}}` + "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	in := bytes.Repeat(line, b.N)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	b.ResetTimer()
	if err := Serve(ctx, bytes.NewReader(in), io.Discard); err != nil {
		b.Fatal(err)
	}
}
