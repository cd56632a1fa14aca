package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestMalformedServer connects a hand-made server that breaks the
// protocol, through the real binary. Results it answers that no MCP
// client can read (image data that is not base64, a number beyond
// float64) fail with DATA_LOSS, a plain message and no retry: the server
// stays READY, and the tool ran once. Its tools under names no request
// can use (empty, far too long), and a name it lists twice, are left out
// over gRPC and the MCP endpoint; a name off MCP's rule (a space) is kept;
// its status notes both.
func TestMalformedServer(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	broken := map[string]any{"command": testBinary(t), "env": map[string]any{fakeServerEnv: fakeMalformed}}
	d, url := startGateway(ctx, t, writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{"broken": broken}})))
	d.waitServer(ctx, t, "broken", mcpdv1.ServerState_SERVER_STATE_READY)
	valid := []string{"mcp__broken__bad_image", "mcp__broken__huge_number", "mcp__broken__shout", "mcp__broken__sp ace"}

	t.Run("results", func(t *testing.T) {
		for name, request := range map[string]func() error{
			"bad_image": func() error {
				_, err := d.call(ctx, t, "mcp__broken__bad_image", nil, 0)
				return err
			},
			"huge_number": func() error {
				_, err := d.call(ctx, t, "mcp__broken__huge_number", nil, 0)
				return err
			},
			"ReadResource": func() error {
				_, err := d.hub.ReadResource(ctx, &mcpdv1.ReadResourceRequest{Server: "broken", Uri: "fake://bad"})
				return err
			},
			"GetPrompt": func() error {
				_, err := d.hub.GetPrompt(ctx, &mcpdv1.GetPromptRequest{Server: "broken", Name: "p"})
				return err
			},
		} {
			st := wantCode(t, request(), codes.DataLoss)
			if msg := st.Message(); !strings.Contains(msg, `server "broken" answered a result mcpd cannot read`) ||
				strings.Contains(msg, "mcp.") || strings.Contains(msg, "struct {") {
				t.Errorf("%s: message %q, want what the server answered wrong, without Go's types", name, msg)
			}
		}
		st := d.waitServer(ctx, t, "broken", mcpdv1.ServerState_SERVER_STATE_READY)
		if st.GetRestarts() != 0 {
			t.Errorf("restarts: got %d, want 0", st.GetRestarts())
		}
		ran := 0
		for _, line := range st.GetStderrTail() {
			if line == "fake: ran bad_image" {
				ran++
			}
		}
		if ran != 1 {
			t.Errorf("bad_image ran %d times, want once: %q", ran, st.GetStderrTail())
		}
		if got := text(d.mustCall(ctx, t, "mcp__broken__shout", map[string]any{"text": "still"})); got != "STILL" {
			t.Errorf("shout after the malformed results: got %q, want STILL", got)
		}
	})

	t.Run("names", func(t *testing.T) {
		if got := toolNames(ctx, t, d.hub); !slices.Equal(got, valid) {
			t.Errorf("ListTools: got %.200q, want %q", got, valid)
		}
		st := d.waitServer(ctx, t, "broken", mcpdv1.ServerState_SERVER_STATE_READY)
		notes := strings.Join(st.GetNotes(), "\n")
		if st.GetToolCount() != int32(len(valid)) || len(st.GetNotes()) != 4 ||
			!strings.Contains(notes, `tool name "sp ace"`) || !strings.Contains(notes, `tool name "shout" is listed twice`) ||
			strings.Contains(notes, fakeLongToolName[:200]) {
			t.Errorf("status: %d tools, notes %q; want %d, a note per skipped tool and one for sp ace, the long name cut short", st.GetToolCount(), st.GetNotes(), len(valid))
		}
	})

	for _, version := range mcpEras {
		t.Run("endpoint "+version, func(t *testing.T) {
			cs := connectMCP(ctx, t, url, version, "", nil)
			if got := waitTools(ctx, t, cs, valid...); len(got) != len(valid) {
				t.Errorf("tools/list: got %.200q, want %q", got, valid)
			}
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__broken__huge_number"})
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError || !strings.Contains(je.Message, "answered a result mcpd cannot read") {
				t.Errorf("tools/call huge_number: got %v, want error -32603 saying the result cannot be read", err)
			}
		})
	}
}
