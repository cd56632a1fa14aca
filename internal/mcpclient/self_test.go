package mcpclient

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
)

// instanceServer is a server whose capabilities name the mcpd instance id,
// as mcpd's MCP endpoint names its own.
func instanceServer(id string) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpd", Version: "dev"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Experimental: map[string]any{InstanceCapability: map[string]any{"id": id}}},
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "mcp__self__echo"}, okTool)
	return srv
}

// TestOwnEndpointRefused: a server that names this Manager's instance id
// in its capabilities is mcpd's own MCP endpoint, reached again: each
// session would list mcpd's tools once more under longer names. It fails
// at once, saying so, and is not tried again, in either era; a server
// naming another instance (another mcpd) is used.
func TestOwnEndpointRefused(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			ctx := testContext(t)
			var dials atomic.Int32
			var m *Manager
			dial := func(ctx context.Context, cfg config.Server) (mcp.Transport, error) {
				dials.Add(1)
				id := m.InstanceID()
				if cfg.Name == "other" {
					id = "another-mcpd"
				}
				ct, st := mcp.NewInMemoryTransports()
				ss, err := instanceServer(id).Connect(ctx, st, nil)
				if err != nil {
					return nil, err
				}
				t.Cleanup(func() { _ = ss.Close() })
				return ct, nil
			}
			m, _ = busManager(t, &Options{ProbeTimeout: 20 * time.Second, Dialer: dial, RestartBackoff: time.Millisecond})
			if m.InstanceID() == "" {
				t.Fatal("no instance id")
			}
			self := config.Server{Name: "self", Kind: config.TransportHTTP, URL: "http://in-memory/self", ProtocolVersion: version}
			st, err := m.Connect(ctx, self, false)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != StateFailed || !strings.Contains(st.LastError, "mcpd's own MCP endpoint") || st.ToolCount != 0 {
				t.Errorf("self: got %v with %d tools, last error %q; want failed, saying it is mcpd's own endpoint", st.State, st.ToolCount, st.LastError)
			}
			u, err := m.lookup("self")
			if err != nil {
				t.Fatal(err)
			}
			u.mu.Lock()
			r := u.run
			u.mu.Unlock()
			select {
			case <-r.done: // no retry: the run is over
			case <-ctx.Done():
				t.Fatalf("the server is tried again (%d dials)", dials.Load())
			}
			other := config.Server{Name: "other", Kind: config.TransportHTTP, URL: "http://in-memory/other", ProtocolVersion: version}
			if st, err := m.Connect(ctx, other, false); err != nil || st.State != StateReady {
				t.Errorf("another mcpd: got %v, %v (%s); want ready", st.State, err, st.LastError)
			}
		})
	}
}
