package gateway

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestApplyPublishesOnlyChanges: a sync whose listing brings the same
// definitions again, as new values, publishes nothing (each publication
// sends every host a list_changed), unless the server said the list
// changed; a changed, new or gone one is published.
func TestApplyPublishesOnlyChanges(t *testing.T) {
	old := map[string]*mcp.Prompt{
		"mcp__s__same":    {Name: "same", Description: "unchanged"},
		"mcp__s__changed": {Name: "changed", Description: "before"},
		"mcp__s__gone":    {Name: "gone"},
	}
	next := map[string]*mcp.Prompt{
		"mcp__s__same":    {Name: "same", Description: "unchanged"},
		"mcp__s__changed": {Name: "changed", Description: "after"},
		"mcp__s__new":     {Name: "new"},
	}
	for _, tc := range []struct {
		all  bool
		want []string
	}{
		{false, []string{"mcp__s__changed", "mcp__s__new"}},
		// The server said its prompts changed: its notice reaches the
		// hosts even where mcpd sees no difference.
		{true, []string{"mcp__s__changed", "mcp__s__new", "mcp__s__same"}},
	} {
		var added, removed []string
		apply(old, next, tc.all, func(names ...string) { removed = append(removed, names...) }, func(name string, _ *mcp.Prompt) { added = append(added, name) })
		if !slices.Equal(added, tc.want) {
			t.Errorf("all=%v: published %v, want %v", tc.all, added, tc.want)
		}
		if want := []string{"mcp__s__gone"}; !slices.Equal(removed, want) {
			t.Errorf("all=%v: removed %v, want %v", tc.all, removed, want)
		}
	}
}

// TestGoneServersLeaveNothing connects servers under names of their own,
// publishes and loads their tools, and disconnects them, as a caller of
// ConnectServer may for months: once a server is gone, the gateway keeps
// nothing of it (what it published, the tools search_tools loaded), and a
// server that stays keeps what it had.
func TestGoneServersLeaveNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	noTool := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	upstreams := map[string]*mcp.Server{}
	for _, name := range []string{"keep", "tmp-0", "tmp-1", "tmp-2"} {
		srv := mcp.NewServer(&mcp.Implementation{Name: name, Version: "0"}, nil)
		srv.AddTool(&mcp.Tool{Name: "t", InputSchema: map[string]any{"type": "object"}}, noTool)
		upstreams[name] = srv
	}
	m := inMemoryUpstreams(ctx, t, nil, "", upstreams)
	g := New(m, &Options{ToolSearch: true})
	runGateway(ctx, t, g)
	cs := connectHost(ctx, t, g)
	for _, name := range []string{"keep", "tmp-0", "tmp-1", "tmp-2"} {
		// A call by the qualified name loads the tool.
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: QualifiedName(name, "t")}); err != nil {
			t.Fatalf("call %s: %v", QualifiedName(name, "t"), err)
		}
	}
	waitListed(ctx, t, cs, "mcp__keep__t", "mcp__tmp-0__t", "mcp__tmp-1__t", "mcp__tmp-2__t", searchToolName)
	for _, name := range []string{"tmp-0", "tmp-1", "tmp-2"} {
		if err := m.Disconnect(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	waitListed(ctx, t, cs, "mcp__keep__t", searchToolName)
	kept := func() (published, loaded []string) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return slices.Sorted(maps.Keys(g.published)), slices.Sorted(maps.Keys(g.loaded))
	}
	for {
		published, loaded := kept()
		if slices.Equal(published, []string{"keep"}) && slices.Equal(loaded, []string{"mcp__keep__t"}) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after the tmp servers were disconnected: published items of %v, loaded %v; want only keep's", published, loaded)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
