package main

import (
	"testing"

	"google.golang.org/grpc/codes"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestSearchTools searches the tools of the demo server and
// server-everything together: each query names one tool plainly, and that
// tool must come first.
func TestSearchTools(t *testing.T) {
	t.Parallel()
	bin := everythingBinary(t)
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	if s := d.connect(ctx, t, "everything", bin, []string{"stdio"}, nil); s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("server-everything: %v (%s)", s.GetState(), s.GetLastError())
	}

	for _, tt := range []struct{ query, want string }{
		{"what is the weather in Paris", "mcp__demo__weather"},
		{"compress a file with gzip", "mcp__everything__gzip-file-as-resource"},
		{"print the environment variables", "mcp__everything__get-env"},
		{"sum of two numbers", "mcp__everything__get-sum"},
		{"add two numbers", "mcp__demo__add"},
		{"play an audio tone", "mcp__demo__audio"},
		{"a tiny logo image", "mcp__everything__get-tiny-image"},
		{"toggle simulated logging", "mcp__everything__toggle-simulated-logging"},
	} {
		resp, err := d.hub.SearchTools(ctx, &mcpdv1.SearchToolsRequest{Query: tt.query, Limit: 3})
		if err != nil {
			t.Fatalf("SearchTools %q: %v", tt.query, err)
		}
		var got []string
		for _, m := range resp.GetMatches() {
			got = append(got, m.GetTool().GetName())
		}
		if len(got) == 0 || got[0] != tt.want {
			t.Errorf("SearchTools %q: got %v, want %s first", tt.query, got, tt.want)
		}
		if len(got) > 3 {
			t.Errorf("SearchTools %q: got %d matches, want at most the limit 3", tt.query, len(got))
		}
	}

	t.Run("Servers", func(t *testing.T) {
		resp, err := d.hub.SearchTools(ctx, &mcpdv1.SearchToolsRequest{Query: "echo", Servers: []string{"everything"}})
		if err != nil {
			t.Fatalf("SearchTools: %v", err)
		}
		if len(resp.GetMatches()) == 0 {
			t.Fatal("SearchTools echo in everything: no match")
		}
		for _, m := range resp.GetMatches() {
			if m.GetTool().GetServer() != "everything" {
				t.Errorf("a match of server %q, want only everything", m.GetTool().GetServer())
			}
		}
		_, err = d.hub.SearchTools(ctx, &mcpdv1.SearchToolsRequest{Query: "echo", Servers: []string{"nope"}})
		wantCode(t, err, codes.NotFound)
		_, err = d.hub.SearchTools(ctx, &mcpdv1.SearchToolsRequest{Query: "  "})
		wantCode(t, err, codes.InvalidArgument)
	})
}
