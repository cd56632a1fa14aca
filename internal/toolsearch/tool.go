package toolsearch

import (
	"encoding/json"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolDocument is what the search reads of an MCP tool: its server's name
// for it, its title (or its annotations' title), its description and the
// top-level names of its input schema's properties. id is the tool's
// qualified name, which breaks ties.
func ToolDocument(id string, t *mcp.Tool) Document {
	d := Document{ID: id, Name: t.Name, Title: t.Title, Description: t.Description}
	if d.Title == "" && t.Annotations != nil {
		d.Title = t.Annotations.Title
	}
	// The schema is open-ended JSON; only its top-level property names
	// matter here, and a schema without them adds none.
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if raw, err := json.Marshal(t.InputSchema); err == nil && json.Unmarshal(raw, &schema) == nil {
		for name := range schema.Properties {
			d.Parameters = append(d.Parameters, name)
		}
		slices.Sort(d.Parameters)
	}
	return d
}
