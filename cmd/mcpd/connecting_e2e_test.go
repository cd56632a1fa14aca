package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestRequestsToAConnectingServer checks, for each kind of request, what
// docs/servers.md says happens while a server is CONNECTING: requests
// that need its session wait for it (so a short deadline passes, and the
// answer is DEADLINE_EXCEEDED, not UNAVAILABLE), ListTools of that server
// is UNAVAILABLE at once, and listings of all servers leave it out. Once
// the server is READY the same requests succeed.
func TestRequestsToAConnectingServer(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()
	cfg := map[string]any{"mcpServers": map[string]any{
		"demo": map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}},
		"gated": map[string]any{
			"command": testBinary(t),
			"env": map[string]any{
				fakeServerEnv:     fakeRendezvous,
				fakeNameEnv:       "gated",
				fakePeersEnv:      "gate",
				fakeRendezvousEnv: dir,
			},
		},
	}}
	d := startDaemon(ctx, t, daemonOptions{config: writeConfig(t, mustJSON(t, cfg)), unready: true})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	poll(ctx, t, "the gated server to start", func() (bool, error) {
		_, err := os.Stat(filepath.Join(dir, "gated"))
		return err == nil, err
	})
	d.waitServer(ctx, t, "gated", mcpdv1.ServerState_SERVER_STATE_CONNECTING)

	// The gate stays shut throughout: a request that waits can only end at
	// its deadline, however long the machine takes.
	const wait = 300 * time.Millisecond
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, wait) }
	waits := map[string]func(context.Context) error{
		"CallTool": func(ctx context.Context) error {
			_, err := d.call(ctx, t, "mcp__gated__echo", map[string]any{"message": "hi"}, 0)
			return err
		},
		"ReadResource": func(ctx context.Context) error {
			_, err := d.hub.ReadResource(ctx, &mcpdv1.ReadResourceRequest{Server: "gated", Uri: "file:///x"})
			return err
		},
		"GetPrompt": func(ctx context.Context) error {
			_, err := d.hub.GetPrompt(ctx, &mcpdv1.GetPromptRequest{Server: "gated", Name: "p"})
			return err
		},
		"Complete": func(ctx context.Context) error {
			_, err := d.hub.Complete(ctx, &mcpdv1.CompleteRequest{Server: "gated", Ref: &mcpdv1.CompleteRequest_Prompt{Prompt: "p"}, Argument: &mcpdv1.CompleteArgument{Name: "a"}})
			return err
		},
		"ListPrompts of the server": func(ctx context.Context) error {
			_, err := d.hub.ListPrompts(ctx, &mcpdv1.ListPromptsRequest{Server: "gated"})
			return err
		},
		"ListResources of the server": func(ctx context.Context) error {
			_, err := d.hub.ListResources(ctx, &mcpdv1.ListResourcesRequest{Server: "gated"})
			return err
		},
		"ListResourceTemplates of the server": func(ctx context.Context) error {
			_, err := d.hub.ListResourceTemplates(ctx, &mcpdv1.ListResourceTemplatesRequest{Server: "gated"})
			return err
		},
	}
	for name, do := range waits {
		rctx, cancel := short()
		wantCode(t, do(rctx), codes.DeadlineExceeded)
		cancel()
		if t.Failed() {
			t.Fatalf("%s to a connecting server did not wait for it", name)
		}
	}

	_, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "gated"})
	wantCode(t, err, codes.Unavailable)
	all := toolNames(ctx, t, d.hub)
	if !slices.Contains(all, "mcp__demo__echo") || slices.Contains(all, "mcp__gated__echo") {
		t.Errorf("ListTools of all servers: got %v, want demo's tools and none of gated's", all)
	}
	servers, err := d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{})
	if err != nil || len(servers.GetServers()) != 2 {
		t.Errorf("ListServers: got %v, %v; want both servers", servers, err)
	}

	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d.waitServer(ctx, t, "gated", mcpdv1.ServerState_SERVER_STATE_READY)
	if _, err := d.call(ctx, t, "mcp__gated__echo", map[string]any{"message": "hi"}, 0); err != nil {
		t.Errorf("CallTool once ready: %v", err)
	}
	for _, name := range []string{"ListPrompts of the server", "ListResources of the server"} {
		if err := waits[name](ctx); err != nil {
			t.Errorf("%s once ready: %v", name, err)
		}
	}
	if _, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "gated"}); err != nil {
		t.Errorf("ListTools of the server once ready: %v", err)
	}
}
