package main

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestHostileInputKeepsServerUp sends the demo server's echo tool
// arguments nested a thousand levels deep, over gRPC and over the HTTP
// listener, again and again: each call is INVALID_ARGUMENT and none
// reaches the server, whose JSON decoder would give up on it and end the
// session (mcpd would send a read-only tool's call again, and restart the
// server until it counted as FAILED, for every caller). The server stays
// READY, the same process. A NaN argument, which JSON has no form for, is
// refused the same way instead of reaching the tool as a string; and a
// megabyte server name is refused without being copied into the answer
// or the log.
func TestHostileInputKeepsServerUp(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--http-listen", addr}})
	before := d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	api := newHTTPAPI(t, addr)

	deep := &structpb.Struct{Fields: map[string]*structpb.Value{"message": structpb.NewStringValue("hi")}}
	deepJSON := `{"message": "hi"}`
	for range 1000 {
		deep = &structpb.Struct{Fields: map[string]*structpb.Value{"message": structpb.NewStructValue(deep)}}
		deepJSON = `{"message": ` + deepJSON + `}`
	}
	for i := range 3 {
		_, err := d.hub.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__demo__echo", Arguments: deep})
		if st := wantCode(t, err, codes.InvalidArgument); !strings.Contains(st.Message(), "arguments") {
			t.Errorf("gRPC call %d: message %q, want it to name the arguments", i, st.Message())
		}
		code, body := api.postJSON(ctx, t, "CallTool", `{"name": "mcp__demo__echo", "arguments": `+deepJSON+`}`, nil)
		if code != http.StatusBadRequest || !strings.Contains(body, `"code":"invalid_argument"`) {
			t.Errorf("HTTP call %d: got %d %.200s, want 400 invalid_argument", i, code, body)
		}
	}
	nan := &structpb.Struct{Fields: map[string]*structpb.Value{"message": structpb.NewNumberValue(math.NaN())}}
	_, err := d.hub.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__demo__echo", Arguments: nan})
	if st := wantCode(t, err, codes.InvalidArgument); !strings.Contains(st.Message(), "arguments.message") {
		t.Errorf("NaN argument: message %q, want it to name arguments.message", st.Message())
	}

	after := d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	if after.GetPid() != before.GetPid() || after.GetRestarts() != before.GetRestarts() {
		t.Errorf("demo server after the refused calls: pid %d, %d restarts; want pid %d, %d restarts",
			after.GetPid(), after.GetRestarts(), before.GetPid(), before.GetRestarts())
	}
	if got := text(d.mustCall(ctx, t, "mcp__demo__echo", map[string]any{"message": "still here"})); got != "still here" {
		t.Errorf("echo after the refused calls: got %q", got)
	}

	long := strings.Repeat("a", 1<<20)
	_, err = d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: long})
	if st := wantCode(t, err, codes.InvalidArgument); len(st.Message()) > 200 {
		t.Errorf("GetServer of a 1 MiB name over gRPC: a message of %d bytes, want one quoting only the name's start", len(st.Message()))
	}
	code, body := api.postJSON(ctx, t, "GetServer", `{"name": "`+long+`"}`, nil)
	if code != http.StatusBadRequest || len(body) > 300 {
		t.Errorf("GetServer of a 1 MiB name over HTTP: got %d and %d bytes (%.100s...), want 400 quoting only the name's start", code, len(body), body)
	}
	if strings.Contains(d.log.String(), long[:1000]) {
		t.Error("mcpd's log copies the name")
	}
}
