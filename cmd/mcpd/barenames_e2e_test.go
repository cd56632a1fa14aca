package main

import (
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestBareToolNames calls tools by the server's own name: a name that one
// ready server has resolves to it (on CallTool and CallToolStream, under
// the caller's permissions), a name that several have is INVALID_ARGUMENT
// listing the qualified candidates the caller may call, and an unknown one,
// or one the caller's ListTools leaves out, is NOT_FOUND.
func TestBareToolNames(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	demo := map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}}
	config := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"demo":  demo,
		"other": demo,
		"slow":  map[string]any{"command": testBinary(t), "env": map[string]any{fakeServerEnv: fakeSlow}},
	}}))
	d := startDaemon(ctx, t, daemonOptions{
		config: config,
		args:   []string{"--callers", permissionCallers(t)},
		env:    []string{"E2E_OUTSIDER_TOKEN=" + outsiderToken},
	})
	admin, reader := bearer(ctx, adminToken), bearer(ctx, readerToken)
	for _, name := range []string{"demo", "other", "slow"} {
		d.waitServer(admin, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
	}

	resp, err := d.hub.CallTool(admin, &mcpdv1.CallToolRequest{Name: "sleep", Arguments: mustStruct(t, map[string]any{"ms": 1, "tag": "bare"})})
	if err != nil || resp.GetIsError() {
		t.Fatalf("CallTool sleep (only slow has it): got %v, %v", resp, err)
	}
	stream, err := d.hub.CallToolStream(admin, &mcpdv1.CallToolStreamRequest{Name: "sleep", Arguments: mustStruct(t, map[string]any{"ms": 1, "tag": "bare-stream"})})
	if err != nil {
		t.Fatal(err)
	}
	var result *mcpdv1.CallToolResponse
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("CallToolStream sleep: %v", err)
		}
		if msg.GetResult() != nil {
			result = msg.GetResult()
		}
	}
	if result == nil || result.GetIsError() {
		t.Errorf("CallToolStream sleep: got result %v", result)
	}

	_, err = d.hub.CallTool(admin, &mcpdv1.CallToolRequest{Name: "echo", Arguments: mustStruct(t, map[string]any{"message": "hi"})})
	st := wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(st.Message(), "mcp__demo__echo, mcp__other__echo, mcp__slow__echo") {
		t.Errorf("ambiguous name: got %q, want the qualified candidates", st.Message())
	}
	_, err = d.hub.CallTool(admin, &mcpdv1.CallToolRequest{Name: "no_such_tool"})
	wantCode(t, err, codes.NotFound)

	// The reader sees only demo: echo is demo's. Its tool permissions do
	// not cover add, which its ListTools leaves out: by its bare name add
	// is no tool of the reader's (NOT_FOUND, naming none); by its
	// qualified name the call is denied.
	resp, err = d.hub.CallTool(reader, &mcpdv1.CallToolRequest{Name: "echo", Arguments: mustStruct(t, map[string]any{"message": "hi"})})
	if err != nil || !strings.Contains(resp.GetContent()[0].GetText().GetText(), "hi") {
		t.Errorf("reader calls echo: got %v, %v", resp, err)
	}
	_, err = d.hub.CallTool(reader, &mcpdv1.CallToolRequest{Name: "add", Arguments: mustStruct(t, map[string]any{"a": 1, "b": 2})})
	st = wantCode(t, err, codes.NotFound)
	if strings.Contains(st.Message(), "mcp__demo__add") {
		t.Errorf("reader's not-found %q names a tool its ListTools hides", st.Message())
	}
	_, err = d.hub.CallTool(reader, &mcpdv1.CallToolRequest{Name: "mcp__demo__add", Arguments: mustStruct(t, map[string]any{"a": 1, "b": 2})})
	st = wantCode(t, err, codes.PermissionDenied)
	if !strings.Contains(st.Message(), "mcp__demo__add") {
		t.Errorf("denial %q: want it to name the qualified tool", st.Message())
	}
	_, err = d.hub.CallTool(reader, &mcpdv1.CallToolRequest{Name: "sleep"})
	st = wantCode(t, err, codes.NotFound)
	if strings.Contains(st.Message(), "slow") {
		t.Errorf("reader's not-found %q names a server it may not see", st.Message())
	}
	lines := auditLines(t, d)
	if findAudit(lines, map[string]any{"caller": "admin", "method": "CallTool", "tool": "mcp__slow__sleep", "code": "OK"}) == nil {
		t.Errorf("no audit line of the bare call under its qualified name in:\n%v", lines)
	}
}
