package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// TestOwnEndpointNotConnected: the endpoint names its mcpd's instance in
// its capabilities, in both eras, and a server that is that same endpoint
// fails at once, saying so, instead of listing mcpd's tools again under
// ever longer names.
func TestOwnEndpointNotConnected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(hc.CloseIdleConnections)
	bus := events.NewBus(nil)
	t.Cleanup(bus.Close)
	m := mcpclient.NewManager(&mcpclient.Options{Events: bus, Dialer: mcpclient.NewRemoteDialer(&mcpclient.RemoteOptions{HTTPClient: hc})})
	g := New(m, nil)
	hs := httptest.NewServer(g.Handler())
	t.Cleanup(hs.Close)
	runGateway(ctx, t, g)
	// First of all (cleanups run last first): a session of the Manager
	// to the endpoint would keep hs.Close waiting.
	t.Cleanup(func() { _ = m.Close(ctx) })

	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("connect at %s: %v", version, err)
		}
		instance, _ := cs.InitializeResult().Capabilities.Experimental[mcpclient.InstanceCapability].(map[string]any)
		if instance["id"] != m.InstanceID() {
			t.Errorf("%s: capabilities.experimental: got %v, want %s {id: %s}", version, cs.InitializeResult().Capabilities.Experimental, mcpclient.InstanceCapability, m.InstanceID())
		}
		if cs.InitializeResult().Capabilities.Logging == nil {
			t.Errorf("%s: the logging capability is gone", version)
		}
		_ = cs.Close()
	}

	st, err := m.Connect(ctx, config.Server{Name: "self", Kind: config.TransportHTTP, URL: hs.URL}, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != mcpclient.StateFailed || !strings.Contains(st.LastError, "mcpd's own MCP endpoint") {
		t.Errorf("self: got %v, last error %q; want failed, saying it is mcpd's own endpoint", st.State, st.LastError)
	}
}
