package main

import (
	"slices"
	"strings"
	"testing"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestServerWithoutToolsCapability connects a hand-made server that
// declares no capabilities but answers tools/list: its tools are listed
// and called, with a note in its status. strictCapabilities turns this
// off.
func TestServerWithoutToolsCapability(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	handMade := map[string]any{"command": testBinary(t), "env": map[string]any{fakeServerEnv: fakeNoCapabilities}}
	strict := map[string]any{"command": testBinary(t), "env": map[string]any{fakeServerEnv: fakeNoCapabilities}, "strictCapabilities": true}
	config := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{"quick": handMade, "strict": strict}}))
	d := startDaemon(ctx, t, daemonOptions{config: config})

	st := d.waitServer(ctx, t, "quick", mcpdv1.ServerState_SERVER_STATE_READY)
	if st.GetToolCount() != 1 || len(st.GetNotes()) != 1 || !strings.Contains(st.GetNotes()[0], "declared no tools capability") {
		t.Errorf("quick: got %d tools and notes %q, want 1 tool and a note saying why", st.GetToolCount(), st.GetNotes())
	}
	if got := toolNames(ctx, t, d.hub); !slices.Contains(got, "mcp__quick__shout") || slices.Contains(got, "mcp__strict__shout") {
		t.Errorf("ListTools: got %v, want quick's shout and not strict's", got)
	}
	resp := d.mustCall(ctx, t, "mcp__quick__shout", map[string]any{"text": "hello"})
	if got := resp.GetContent()[0].GetText().GetText(); got != "HELLO" {
		t.Errorf("shout: got %q, want HELLO", got)
	}

	st = d.waitServer(ctx, t, "strict", mcpdv1.ServerState_SERVER_STATE_READY)
	if st.GetToolCount() != 0 || len(st.GetNotes()) != 0 {
		t.Errorf("strict: got %d tools and notes %q, want none", st.GetToolCount(), st.GetNotes())
	}
}
