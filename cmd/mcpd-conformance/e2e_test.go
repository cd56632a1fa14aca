package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// syncBuffer collects mcpd's log, written from exec's copying goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// scenarioServer is a go-sdk MCP server with the tools of two suite
// scenarios; it records what their calls received.
type scenarioServer struct {
	mu     sync.Mutex
	got    []string
	server *mcp.Server
}

func newScenarioServer() *scenarioServer {
	s := &scenarioServer{server: mcp.NewServer(&mcp.Implementation{Name: "scenario", Version: "1.0.0"}, nil)}
	type addIn struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	mcp.AddTool(s.server, &mcp.Tool{Name: "add_numbers"}, func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, any, error) {
		s.record(map[string]any{"a": in.A, "b": in.B})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	mcp.AddTool(s.server, &mcp.Tool{Name: "test_client_elicitation_defaults"}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
			Message: "accept with defaults",
			RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"name": map[string]any{"type": "string", "default": "John Doe"},
					"age":  map[string]any{"type": "integer", "default": 30},
				},
			},
		})
		if err != nil {
			return nil, nil, err
		}
		s.record(map[string]any{"action": res.Action, "content": res.Content})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	return s
}

func (s *scenarioServer) record(v any) {
	b, _ := json.Marshal(v)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, string(b))
}

// TestRunEndToEnd runs scenarios through the real mcpd against go-sdk
// servers of both protocol eras.
func TestRunEndToEnd(t *testing.T) {
	tests := []struct {
		name      string
		scenario  string
		version   string
		stateless bool
		want      string
	}{
		{"tools_call 2025-11-25", "tools_call", "2025-11-25", false, `{"a":5,"b":3}`},
		{"tools_call 2026-07-28", "tools_call", "2026-07-28", true, `{"a":5,"b":3}`},
		{"elicitation defaults 2025-11-25", "elicitation-sep1034-client-defaults", "2025-11-25", false,
			`{"action":"accept","content":{"age":30,"name":"John Doe"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScenarioServer()
			ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.server },
				&mcp.StreamableHTTPOptions{Stateless: tt.stateless}))
			t.Cleanup(ts.Close)
			log := &syncBuffer{}
			cfg := &config{
				mcpd:            os.Getenv(envMCPD),
				url:             ts.URL,
				scenario:        tt.scenario,
				protocolVersion: tt.version,
				transport:       "http",
				timeout:         testTimeout / 2,
				logLevel:        "debug",
			}
			if err := run(testContext(t), cfg, log); err != nil {
				t.Fatalf("run: %v\nmcpd log:\n%s", err, log.String())
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if len(srv.got) != 1 || srv.got[0] != tt.want {
				t.Errorf("the server's tool got %q, want [%s]\nmcpd log:\n%s", srv.got, tt.want, log.String())
			}
		})
	}
}
