package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// The MCP endpoint's tool search (--mcp-tool-search) through bin/mcpd,
// with go-sdk clients in both eras.

// listToolNames returns the names tools/list gives, sorted.
func listToolNames(ctx context.Context, t *testing.T, cs *mcp.ClientSession) []string {
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

// foundTools calls search_tools and returns the names of its matches, best
// first, as its structured content lists them, and its text.
func foundTools(ctx context.Context, t *testing.T, cs *mcp.ClientSession, args map[string]any) ([]string, string) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: args})
	if err != nil {
		t.Fatalf("search_tools %v: %v", args, err)
	}
	if res.IsError {
		t.Fatalf("search_tools %v: a tool error: %s", args, toolText(t, res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var sc struct {
		Tools []struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &sc); err != nil {
		t.Fatalf("search_tools structured content %s: %v", raw, err)
	}
	var names []string
	for _, f := range sc.Tools {
		if f.Description == "" || f.InputSchema["type"] != "object" {
			t.Errorf("search_tools match %s: got description %q and input schema %v, want both", f.Name, f.Description, f.InputSchema)
		}
		names = append(names, f.Name)
	}
	return names, toolText(t, res)
}

// TestMCPEndpointToolSearch: with --mcp-tool-search (here by its
// environment variable) the endpoint lists only search_tools; a search
// ranks the obvious tool first, describes it, and loads it, so the host
// hears list_changed, lists it and calls it; a tool called by its
// qualified name without a search is loaded too. Without the flag there
// is no search_tools (TestMCPEndpointGoClient).
func TestMCPEndpointToolSearch(t *testing.T) {
	t.Parallel()
	everything := everythingBinary(t)
	ctx := testContext(t)
	d, url := startGateway(ctx, t, gatewayConfig(t, everything), "MCPD_MCP_TOOL_SEARCH=true")
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	d.waitServer(ctx, t, "ev", mcpdv1.ServerState_SERVER_STATE_READY)
	if got := listToolNames(ctx, t, connectMCP(ctx, t, url, "", "", nil)); !slices.Equal(got, []string{"search_tools"}) {
		t.Fatalf("tools/list before any search: got %v, want only search_tools", got)
	}

	cases := []struct {
		version string
		args    map[string]any
		want    string
		call    map[string]any
		wantOut string
		direct  string // called by name without a search
	}{
		{mcpEras[0], map[string]any{"query": "weather for a city"}, "mcp__demo__weather",
			map[string]any{"city": "Oslo"}, "Oslo", "mcp__ev__get-sum"},
		{mcpEras[1], map[string]any{"query": "add two numbers", "servers": []string{"demo"}, "limit": 2}, "mcp__demo__add",
			map[string]any{"a": 2, "b": 40}, "42", "mcp__ev__echo"},
	}
	for _, tc := range cases {
		t.Run(tc.version, func(t *testing.T) {
			changed := make(chan struct{}, 16)
			cs := connectMCP(ctx, t, url, tc.version, "", &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
					select {
					case changed <- struct{}{}:
					default:
					}
				},
			})
			if got := listToolNames(ctx, t, cs); slices.Contains(got, tc.want) || slices.Contains(got, tc.direct) {
				t.Fatalf("tools/list before the search: got %v, want neither %s nor %s", got, tc.want, tc.direct)
			}
			found, text := foundTools(ctx, t, cs, tc.args)
			if len(found) == 0 || found[0] != tc.want {
				t.Fatalf("search_tools %v: got %v, want %s first", tc.args, found, tc.want)
			}
			if limit, ok := tc.args["limit"].(int); ok && len(found) > limit {
				t.Errorf("search_tools %v: got %d matches, want at most %d", tc.args, len(found), limit)
			}
			for _, name := range found {
				if servers, ok := tc.args["servers"].([]string); ok && !strings.HasPrefix(name, "mcp__"+servers[0]+"__") {
					t.Errorf("search_tools %v: got %s, want only tools of %v", tc.args, name, servers)
				}
			}
			if !strings.Contains(text, tc.want) || !strings.Contains(text, "Input schema") {
				t.Errorf("search_tools text: got %q, want %s and its input schema in it", text, tc.want)
			}
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("no tools list_changed after the search loaded %s", tc.want)
			}
			if got := listToolNames(ctx, t, cs); !slices.Contains(got, tc.want) || !slices.Contains(got, "search_tools") {
				t.Errorf("tools/list after the search: got %v, want %s and search_tools", got, tc.want)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.want, Arguments: tc.call})
			if err != nil || res.IsError || !strings.Contains(toolText(t, res), tc.wantOut) {
				t.Fatalf("call %s: got %v, %+v, want %s in the text", tc.want, err, res, tc.wantOut)
			}

			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.direct, Arguments: map[string]any{"a": 1, "b": 2, "message": "direct"}})
			if err != nil || res.IsError {
				t.Fatalf("call %s by name, not loaded: got %v, %+v, want a result", tc.direct, err, res)
			}
			if got := listToolNames(ctx, t, cs); !slices.Contains(got, tc.direct) {
				t.Errorf("tools/list after calling %s: got %v, want it listed", tc.direct, got)
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": " "}}); err == nil {
				t.Errorf("search_tools without a query: got no error, want one")
			}
		})
	}
}

// TestMCPEndpointToolSearchPermissions: a caller finds only the tools it
// may call.
func TestMCPEndpointToolSearchPermissions(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startDaemon(ctx, t, daemonOptions{
		config: twoDemoServers(t),
		args:   []string{"--callers", permissionCallers(t), "--mcp-listen", addr, "--mcp-tool-search"},
		env:    []string{"E2E_OUTSIDER_TOKEN=" + outsiderToken},
	})
	url := "http://" + addr + "/mcp"
	query := map[string]any{"query": "add two numbers or echo a message", "limit": 20}
	admin := connectMCP(ctx, t, url, "", adminToken, nil)
	// Both servers are ready when the admin finds both add tools.
	poll(ctx, t, "the admin's search to find both add tools", func() (bool, error) {
		found, _ := foundTools(ctx, t, admin, query)
		if !slices.Contains(found, "mcp__demo__add") || !slices.Contains(found, "mcp__other__add") {
			return false, fmt.Errorf("got %v", found)
		}
		return true, nil
	})

	reader := connectMCP(ctx, t, url, "", readerToken, nil)
	found, _ := foundTools(ctx, t, reader, query)
	if !slices.Contains(found, "mcp__demo__echo") {
		t.Errorf("reader's search: got %v, want mcp__demo__echo among them", found)
	}
	for _, name := range found {
		if name != "mcp__demo__echo" && name != "mcp__demo__weather" {
			t.Errorf("reader's search: got %v, want only tools it may call", found)
			break
		}
	}
	// What the admin loaded, the reader still may not list.
	if got := listToolNames(ctx, t, reader); slices.Contains(got, "mcp__demo__add") {
		t.Errorf("reader's tools/list after the admin's search: got %v, want no mcp__demo__add", got)
	}
}
