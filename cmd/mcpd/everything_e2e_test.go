package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// everythingBinary returns MCPD_EVERYTHING_BIN, skipping the test when it
// is unset unless MCPD_E2E_REQUIRED=1.
func everythingBinary(t *testing.T) string {
	t.Helper()
	return externalBinary(t, everythingEnv, "mcp-server-everything", " (install @modelcontextprotocol/server-everything@2026.8.31 and point it at the mcp-server-everything bin)")
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

// TestServersDoNotInheritCredentials asks server-everything for the
// environment it was started with: mcpd's own variables (its API token,
// the state file's references to other servers' secrets) and the callers
// file's token variables are kept from it, unless its config passes one
// on; the rest of mcpd's environment reaches it.
func TestServersDoNotInheritCredentials(t *testing.T) {
	t.Parallel()
	bin := everythingBinary(t)
	ctx := testContext(t)
	config := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": bin, "args": []string{"stdio"}, "env": map[string]string{"MCPD_E2E_PASSED": "${MCPD_E2E_PASSED}"}},
	}}))
	d := startDaemon(ctx, t, daemonOptions{
		config: config,
		args:   []string{"--callers", permissionCallers(t)},
		env: []string{
			"MCPD_API_TOKEN=" + apiTokenBesideCallers,
			"E2E_OUTSIDER_TOKEN=" + outsiderToken,
			"MCPD_DOCS_AUTHORIZATION=Bearer docs-secret",
			"MCPD_E2E_PASSED=passed",
			"E2E_ORDINARY=kept",
		},
	})
	resp := d.mustCall(bearer(ctx, adminToken), t, "mcp__everything__get-env", nil)
	var env map[string]string
	if err := json.Unmarshal([]byte(text(resp)), &env); err != nil {
		t.Fatalf("get-env: %v (got %q)", err, text(resp))
	}
	for _, name := range []string{"MCPD_API_TOKEN", "E2E_OUTSIDER_TOKEN", "MCPD_DOCS_AUTHORIZATION"} {
		if _, ok := env[name]; ok {
			t.Errorf("the server inherited %s", name)
		}
	}
	for name, want := range map[string]string{"E2E_ORDINARY": "kept", "MCPD_E2E_PASSED": "passed"} {
		if env[name] != want {
			t.Errorf("server's %s = %q, want %q", name, env[name], want)
		}
	}
}
