package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// everythingBinary returns MCPD_EVERYTHING_BIN, skipping the test when it
// is unset unless MCPD_E2E_REQUIRED=1.
func everythingBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(everythingEnv)
	if bin == "" {
		if os.Getenv(requiredEnv) == "1" {
			t.Fatalf("%s is not set and %s=1: run `make tools` or point it at mcp-server-everything", everythingEnv, requiredEnv)
		}
		t.Skipf("%s is not set (install @modelcontextprotocol/server-everything@2026.8.31 and point it at the mcp-server-everything bin)", everythingEnv)
	}
	return bin
}

// TestEverythingServer connects the reference server
// @modelcontextprotocol/server-everything over stdio and calls its tools
// through mcpd.
func TestEverythingServer(t *testing.T) {
	t.Parallel()
	bin := everythingBinary(t)
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})

	s := d.connect(ctx, t, "everything", bin, []string{"stdio"}, nil)
	if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("state: got %v (%s; stderr %q), want READY", s.GetState(), s.GetLastError(), s.GetStderrTail())
	}
	t.Logf("server-everything negotiated protocol_version %s, server_info %s %s",
		s.GetProtocolVersion(), s.GetServerInfo().GetName(), s.GetServerInfo().GetVersion())
	if s.GetProtocolVersion() == "" || s.GetServerInfo().GetName() == "" {
		t.Errorf("got protocol_version %q and server_info %v, want both set", s.GetProtocolVersion(), s.GetServerInfo())
	}

	tools, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "everything"})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tool := range tools.GetTools() {
		names = append(names, tool.GetToolName())
	}
	for _, want := range []string{"echo", "get-sum", "get-tiny-image", "get-structured-content"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools: got %v, want %s among them", names, want)
		}
	}
	// The server may add tools after initialization (and say so with
	// list_changed), so the count is only checked to be set.
	if s.GetToolCount() == 0 {
		t.Errorf("tool_count: got 0, want the tools the server listed at connect")
	}

	t.Run("echo", func(t *testing.T) {
		resp := d.mustCall(ctx, t, "mcp__everything__echo", map[string]any{"message": "hi there"})
		if got := text(resp); got != "Echo: hi there" {
			t.Errorf("got %q, want %q", got, "Echo: hi there")
		}
	})

	t.Run("get-sum", func(t *testing.T) {
		resp := d.mustCall(ctx, t, "mcp__everything__get-sum", map[string]any{"a": 2, "b": 40})
		if got := text(resp); !strings.Contains(got, "42") {
			t.Errorf("got %q, want the sum 42", got)
		}
	})

	t.Run("get-tiny-image", func(t *testing.T) {
		resp := d.mustCall(ctx, t, "mcp__everything__get-tiny-image", nil)
		img := firstMedia(resp, func(c *mcpdv1.Content) *mcpdv1.MediaContent { return c.GetImage() })
		if img == nil {
			t.Fatalf("got content %v, want an image block", resp.GetContent())
		}
		if img.GetMimeType() != "image/png" || !bytes.HasPrefix(img.GetData(), []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("got %s starting %q, want image/png bytes (decoded, not base64)", img.GetMimeType(), head(img.GetData()))
		}
		if len(resp.GetContent()) != 3 {
			t.Errorf("got %d content blocks, want 3 (text, image, text)", len(resp.GetContent()))
		}
	})

	t.Run("get-structured-content", func(t *testing.T) {
		resp := d.mustCall(ctx, t, "mcp__everything__get-structured-content", map[string]any{"location": "Chicago"})
		got := resp.GetStructuredContent().GetStructValue().GetFields()
		if got["temperature"].GetNumberValue() != 36 || got["conditions"].GetStringValue() == "" || got["humidity"] == nil {
			t.Errorf("structured_content: got %v, want {temperature: 36, conditions, humidity}", resp.GetStructuredContent())
		}
	})
}
