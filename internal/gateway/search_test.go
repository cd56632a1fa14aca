package gateway

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
	"github.com/mcpd-project/mcpd/internal/toolsearch"
)

// agentTools are the tools of the in-process server the tests search.
var agentTools = []*mcp.Tool{
	{Name: "weather", Description: "Returns the weather forecast for a city.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}},
	{Name: "add", Description: "Adds two numbers.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}}}},
}

// serveAgent serves agentTools as the server "app" of m.
func serveAgent(ctx context.Context, t *testing.T, m *mcpclient.Manager) *mcpclient.AgentLink {
	t.Helper()
	link, _, err := m.ServeTools(ctx, mcpclient.AgentDeclaration{Server: "app", Tools: agentTools}, false)
	if err != nil {
		t.Fatalf("ServeTools: %v", err)
	}
	return link
}

// newTestManager is a Manager with an event bus, closed when the test ends.
func newTestManager(t *testing.T) *mcpclient.Manager {
	t.Helper()
	bus := events.NewBus(nil)
	m := mcpclient.NewManager(&mcpclient.Options{Events: bus})
	t.Cleanup(func() {
		_ = m.Close(context.Background())
		bus.Close()
	})
	return m
}

// connectHost serves g over HTTP and connects a host to it, for the test.
func connectHost(ctx context.Context, t *testing.T, g *Gateway) *mcp.ClientSession {
	t.Helper()
	hs := httptest.NewServer(g.Handler())
	t.Cleanup(hs.Close)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// listed returns the names tools/list gives, sorted.
func listed(ctx context.Context, t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// waitListed polls tools/list until it is want: the gateway follows the
// Manager's events on a goroutine of its own.
func waitListed(ctx context.Context, t *testing.T, cs *mcp.ClientSession, want ...string) {
	t.Helper()
	var got []string
	for ctx.Err() == nil {
		if got = listed(ctx, t, cs); slices.Equal(got, want) {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("tools/list: got %v, want %v", got, want)
}

// TestToolSearch: under ToolSearch the gateway lists search_tools only; a
// search loads what it finds; a loaded tool is hidden while its server is
// not ready and listed again, without a search, when it is.
func TestToolSearch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := newTestManager(t)
	link := serveAgent(ctx, t, m)

	g := New(m, &Options{ToolSearch: true})
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); g.Run(runCtx) }()
	defer func() { stop(); <-ran; g.Close() }()
	cs := connectHost(ctx, t, g)

	if got := listed(ctx, t, cs); !slices.Equal(got, []string{searchToolName}) {
		t.Fatalf("tools/list: got %v, want only %s", got, searchToolName)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: searchToolName, Arguments: map[string]any{"query": "forecast for a city"}})
	if err != nil || res.IsError {
		t.Fatalf("search_tools: %v, %+v", err, res)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	found, _ := sc["tools"].([]any)
	if len(found) != 1 || found[0].(map[string]any)["name"] != "mcp__app__weather" {
		t.Fatalf("search_tools: got %v, want mcp__app__weather alone", sc)
	}
	waitListed(ctx, t, cs, "mcp__app__weather", searchToolName)

	link.Close() // the server stops: its loaded tool goes
	waitListed(ctx, t, cs, searchToolName)
	link = serveAgent(ctx, t, m) // and comes back with it
	defer link.Close()
	waitListed(ctx, t, cs, "mcp__app__weather", searchToolName)

	tooLong := strings.Repeat("weather ", toolsearch.MaxQueryBytes/8+1)
	for _, args := range []map[string]any{{}, {"query": "weather", "servers": []string{"nope"}}, {"query": 3}, {"query": tooLong}} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: searchToolName, Arguments: args}); err == nil {
			t.Errorf("search_tools %.80v: got no error, want invalid params", args)
		}
	}
}

// TestToolSearchForgetsGoneTools: a loaded tool that its server no
// longer has is forgotten, not only when the server goes: a server that
// stays for months while its tools come and go (an agent declaring new
// ones, a server naming tools after what it holds) must not leave every
// name that was ever loaded behind. Its name, listed again, is loaded as
// a new one is.
func TestToolSearchForgetsGoneTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := newTestManager(t)
	link := serveAgent(ctx, t, m)
	defer func() { link.Close() }()

	g := New(m, &Options{ToolSearch: true})
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); g.Run(runCtx) }()
	defer func() { stop(); <-ran; g.Close() }()
	cs := connectHost(ctx, t, g)

	for round := range 3 {
		tool := &mcp.Tool{Name: fmt.Sprintf("report_%d", round), Description: "Writes the report.", InputSchema: map[string]any{"type": "object"}}
		next, _, err := m.ServeTools(ctx, mcpclient.AgentDeclaration{Server: "app", Tools: []*mcp.Tool{tool}}, true)
		if err != nil {
			t.Fatalf("ServeTools: %v", err)
		}
		link.Close()
		link = next
		name := "mcp__app__" + tool.Name
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: searchToolName, Arguments: map[string]any{"query": "report"}}); err != nil {
			t.Fatalf("search_tools: %v", err)
		}
		waitListed(ctx, t, cs, name, searchToolName)
		waitFor(ctx, t, "the tools of the server's earlier declarations forgotten", func() bool {
			g.mu.Lock()
			defer g.mu.Unlock()
			return len(g.loaded) == 1
		})
	}
}

// TestGapResyncs: when events went by unseen (a gap), the gateway syncs
// every server, so that what it lists does not stay stale for good.
func TestGapResyncs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := newTestManager(t)
	// Not running: no event reaches the gateway but the ones handed here.
	g := New(m, nil)
	defer g.Close()
	syncs := g.newSyncer(ctx)
	defer syncs.stop()
	cs := connectHost(ctx, t, g)

	link := serveAgent(ctx, t, m)
	g.handle(ctx, syncs, events.Event{Kind: events.KindGap})
	syncs.wait()
	if got := listed(ctx, t, cs); !slices.Equal(got, []string{"mcp__app__add", "mcp__app__weather"}) {
		t.Errorf("tools/list after a gap: got %v, want the tools of app, which no event announced", got)
	}
	link.Close()
	for g.ready("app") && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond) // the Manager notes the agent's leaving on its own goroutine
	}
	g.handle(ctx, syncs, events.Event{Kind: events.KindGap})
	syncs.wait()
	if got := listed(ctx, t, cs); len(got) != 0 {
		t.Errorf("tools/list after a gap: got %v, want none: app is gone", got)
	}
}
