package gateway

import (
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestApplyPublishesOnlyChanges: a sync whose listing brings the same
// definitions again, as new values, publishes nothing (each publication
// sends every host a list_changed); a changed, new or gone one is
// published.
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
	var added, removed []string
	apply(old, next, func(names ...string) { removed = append(removed, names...) }, func(name string, _ *mcp.Prompt) { added = append(added, name) })
	if want := []string{"mcp__s__changed", "mcp__s__new"}; !slices.Equal(added, want) {
		t.Errorf("published %v, want %v", added, want)
	}
	if want := []string{"mcp__s__gone"}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
}
