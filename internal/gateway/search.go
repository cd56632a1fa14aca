package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
	"github.com/mcpd-project/mcpd/internal/toolsearch"
)

// With Options.ToolSearch the endpoint lists one tool, search_tools,
// instead of every server's tools: a host whose model chokes on hundreds
// of tools searches, and the tools a search returns are then published
// (loaded) under their qualified names, so the host gets list_changed and
// calls them directly. The SDK server holds one tool set for every host,
// so a loaded tool is loaded for all of them, until its server is gone
// (see forgetGone) or, READY, no longer lists it (forgetUnlistedLocked);
// like any published tool it is hidden while its server is not READY. A
// call of a tool not loaded yet, by its qualified name, loads it first.

// searchToolName is the one tool the endpoint lists under tool search.
const searchToolName = "search_tools"

// Match counts of search_tools.
const (
	defaultSearchLimit = 5
	maxSearchLimit     = 20
)

var searchTool = &mcp.Tool{
	Name:  searchToolName,
	Title: "Search tools",
	Description: "Find the tools for a task among the tools of every MCP server behind this endpoint, which are not listed until found. " +
		"Describe the task in plain words (for example \"read a file\" or \"weather forecast for a city\"); the best matches are returned " +
		"with their names, descriptions and input schemas, and are then available to call by those names (mcp__<server>__<tool>). " +
		"Search again with other words when none fits.",
	InputSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"query": map[string]any{"type": "string", "description": "what the tool should do, in plain words"},
			"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": maxSearchLimit, "default": defaultSearchLimit,
				"description": "how many tools to return at most"},
			"servers": map[string]any{"type": "array", "items": map[string]any{"type": "string"},
				"description": "search only the tools of these servers; default all"},
		},
		"required": []any{"query"},
	},
	Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
}

// searchArgs are search_tools' arguments.
type searchArgs struct {
	Query   string   `json:"query"`
	Limit   *int     `json:"limit"`
	Servers []string `json:"servers"`
}

// foundTool is one match of search_tools, as its structured content lists
// it.
type foundTool struct {
	Name        string  `json:"name"`
	Title       string  `json:"title,omitempty"`
	Description string  `json:"description,omitempty"`
	InputSchema any     `json:"inputSchema"`
	Score       float64 `json:"score"`
}

// searchTools answers search_tools: it ranks the tools the caller may call
// as SearchTools does, loads the matches, and lists them. Bad arguments
// are protocol errors, as for every tool of the endpoint.
func (g *Gateway) searchTools(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args searchArgs
	if len(req.Params.Arguments) > 0 {
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, invalidParams("arguments must be an object with a query string, an optional limit integer and an optional servers array of strings")
		}
	}
	if strings.TrimSpace(args.Query) == "" {
		return nil, invalidParams("query is required: describe the task in plain words")
	}
	if n := len(args.Query); n > toolsearch.MaxQueryBytes {
		return nil, invalidParams(fmt.Sprintf("query is %d bytes, more than %d: describe the task in fewer words", n, toolsearch.MaxQueryBytes))
	}
	limit := defaultSearchLimit
	if args.Limit != nil {
		limit = min(max(*args.Limit, 1), maxSearchLimit)
	}
	caller := g.callerOf(req)
	visible := g.visibleTo(caller)
	for _, s := range args.Servers {
		// A server the caller may not see is as unknown as one that does
		// not exist.
		if _, err := g.mgr.Get(s); err != nil || !visible(s) {
			return nil, invalidParams(fmt.Sprintf("unknown server %q", s))
		}
	}
	found := g.rankTools(caller, args.Query, args.Servers, limit)
	g.loadTools(found)

	out := make([]foundTool, 0, len(found))
	var text strings.Builder
	if len(found) == 0 {
		text.WriteString("No tool matches. Search again with other words.")
	} else {
		noun := "tools"
		if len(found) == 1 {
			noun = "tool"
		}
		fmt.Fprintf(&text, "Found %d %s, now available; call by these names:\n", len(found), noun)
	}
	for i, t := range found {
		f := foundTool{Name: t.Name, Title: t.def().Title, Description: t.def().Description,
			InputSchema: publishedTool(t.Name, t.def()).InputSchema, Score: t.score}
		if f.Title == "" && t.def().Annotations != nil {
			f.Title = t.def().Annotations.Title
		}
		out = append(out, f)
		fmt.Fprintf(&text, "\n%d. %s", i+1, f.Name)
		if f.Title != "" {
			fmt.Fprintf(&text, " (%s)", f.Title)
		}
		if f.Description != "" {
			fmt.Fprintf(&text, "\n   %s", strings.ReplaceAll(f.Description, "\n", "\n   "))
		}
		if schema, err := json.Marshal(f.InputSchema); err == nil {
			fmt.Fprintf(&text, "\n   Input schema: %s", schema)
		}
		text.WriteString("\n")
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text.String()}},
		StructuredContent: map[string]any{"tools": out},
	}, nil
}

// rankedTool is a tool search_tools found, with its score.
type rankedTool struct {
	mcpclient.Tool
	score float64
}

// def is the server's definition of the tool.
func (t rankedTool) def() *mcp.Tool { return t.Tool.Tool }

// rankTools ranks the tools of the READY servers (of servers, if any)
// that caller may call, by the ranking of SearchTools.
func (g *Gateway) rankTools(caller access.Caller, query string, servers []string, limit int) []rankedTool {
	tools, _ := g.mgr.Tools("")
	tools = slices.DeleteFunc(tools, func(t mcpclient.Tool) bool {
		if len(servers) > 0 && !slices.Contains(servers, t.Server) {
			return true
		}
		return !g.allowed(caller, access.Action{Verb: access.CallTool, Server: t.Server, Tool: t.Name})
	})
	docs := make([]toolsearch.Document, len(tools))
	for i, t := range tools {
		docs[i] = toolsearch.ToolDocument(t.Name, t.Tool)
	}
	var out []rankedTool
	for _, m := range toolsearch.Rank(docs, query, limit) {
		out = append(out, rankedTool{Tool: tools[m.Index], score: m.Score})
	}
	return out
}

// loadTools publishes tools for good (see above).
func (g *Gateway) loadTools(tools []rankedTool) {
	var servers []string
	g.mu.Lock()
	for _, t := range tools {
		if _, ok := g.loaded[t.Name]; !ok {
			g.loaded[t.Name] = t.Server
			if !slices.Contains(servers, t.Server) {
				servers = append(servers, t.Server)
			}
		}
	}
	g.mu.Unlock()
	for _, s := range servers {
		g.syncServer(context.Background(), s, syncTools)
	}
}

// loadCalled loads the tool a host calls by its qualified name, if a READY
// server has it: a host may call a tool it knows without searching.
func (g *Gateway) loadCalled(name string) {
	server, _, ok := SplitQualifiedName(name)
	if !ok {
		return
	}
	g.mu.Lock()
	_, loaded := g.loaded[name]
	g.mu.Unlock()
	if loaded {
		return
	}
	tools, _ := g.mgr.Tools(server)
	for _, t := range tools {
		if t.Name == name {
			g.loadTools([]rankedTool{{Tool: t}})
			return
		}
	}
}
