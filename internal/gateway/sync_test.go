package gateway

import (
	"slices"
	"testing"

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
