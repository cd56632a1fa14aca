package toolsearch

import (
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestToolDocument(t *testing.T) {
	d := ToolDocument("mcp__s__get-sum", &mcp.Tool{
		Name:        "get-sum",
		Description: "Adds numbers.",
		Annotations: &mcp.ToolAnnotations{Title: "Sum"},
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"b": map[string]any{}, "a": map[string]any{}}},
	})
	if d.ID != "mcp__s__get-sum" || d.Name != "get-sum" || d.Title != "Sum" || d.Description != "Adds numbers." ||
		!slices.Equal(d.Parameters, []string{"a", "b"}) {
		t.Errorf("got %+v, want the annotations' title and the sorted parameter names", d)
	}
	if d := ToolDocument("x", &mcp.Tool{Name: "x", Title: "Own", InputSchema: true}); d.Title != "Own" || d.Parameters != nil {
		t.Errorf("got %+v, want the tool's own title and no parameters", d)
	}
}
