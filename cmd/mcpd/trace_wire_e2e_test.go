package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// Secrets the wire-trace test gives mcpd; none may reach its log.
const (
	traceEnvSecret    = "env-secret-4b1c9e"
	traceHeaderSecret = "header-secret-77a0d2"
	traceArgSecret    = "arg-secret-90f3aa"
	traceFieldSecret  = "field-secret-c05e11"
)

// startLeakyHTTPServer serves a Streamable HTTP server on loopback whose
// tool "leak" answers with the value of the X-Secret header it received,
// as a careless server might.
func startLeakyHTTPServer(t *testing.T) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "leaky", Version: "0.0.1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "leak", Description: "echoes the X-Secret header"},
		func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "got " + req.Extra.Header.Get("X-Secret")}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}

// traceLines returns the wire-trace lines of server in mcpd's JSON log.
func traceLines(t *testing.T, log, server string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m["logger"] == "trace" && m["server"] == server && m["level"] == "debug" {
			out = append(out, m)
		}
	}
	return out
}

// TestWireTrace traces a stdio server (by its config's "trace"), a
// Streamable HTTP server (by --trace-server) and a server added with
// ConnectServer (by its ServerConfig's trace) at debug level, and checks
// that the messages appear in both directions while an env value, a
// header value, a secret-looking argument and a configured field do not;
// an untraced server leaves no trace lines.
func TestWireTrace(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	url := startLeakyHTTPServer(t)
	path := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"local": map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"},
			"env": map[string]string{"DEMO_TOKEN_VALUE": traceEnvSecret}, "trace": true, "traceRedact": []string{"note"}},
		"remote":   map[string]any{"type": "http", "url": url, "headers": map[string]string{"X-Secret": traceHeaderSecret}},
		"untraced": map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}},
	}}))
	d := startDaemon(ctx, t, daemonOptions{config: path, args: []string{"--log-level", "debug", "--trace-server", "remote"}})
	for _, s := range []string{"local", "remote", "untraced"} {
		d.waitServer(ctx, t, s, mcpdv1.ServerState_SERVER_STATE_READY)
	}

	// The echo carries the env value back from the server.
	if got := text(d.mustCall(ctx, t, "mcp__local__echo", map[string]any{"message": "the env is " + traceEnvSecret})); !strings.Contains(got, traceEnvSecret) {
		t.Fatalf("echo: got %q, want the env value back (the trace must see it)", got)
	}
	// The server refuses arguments it does not know; they were sent all the
	// same.
	_, _ = d.call(ctx, t, "mcp__local__echo", map[string]any{"message": "m", "api_key": traceArgSecret, "note": traceFieldSecret}, 0)
	if got := text(d.mustCall(ctx, t, "mcp__remote__leak", nil)); got != "got "+traceHeaderSecret {
		t.Fatalf("leak: got %q, want the header value (the server must really see it)", got)
	}
	d.mustCall(ctx, t, "mcp__untraced__echo", map[string]any{"message": "quiet"})
	// A server added with ConnectServer and trace set.
	added := stdioConfig("added", mcpdBinary(t), []string{"demo-server"}, map[string]string{"DEMO_TOKEN_VALUE": traceEnvSecret})
	added.Trace = true
	if _, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: added}); err != nil {
		t.Fatal(err)
	}
	d.mustCall(ctx, t, "mcp__added__echo", map[string]any{"message": "again " + traceEnvSecret})

	// Each traced server's call shows up in both directions (the log
	// reaches the test a little after the call returns).
	traced := func(log, server string) bool {
		dirs := map[any]bool{}
		for _, l := range traceLines(t, log, server) {
			msg, _ := l["jsonrpc"].(string)
			switch {
			case l["dir"] == "send" && strings.Contains(msg, `"tools/call"`):
				dirs["send"] = true
			case l["dir"] == "recv" && strings.Contains(msg, `"content"`):
				dirs["recv"] = true
			}
		}
		return dirs["send"] && dirs["recv"]
	}
	poll(ctx, t, "the calls of every traced server in the trace", func() (bool, error) {
		log := d.log.String()
		return traced(log, "local") && traced(log, "remote") && traced(log, "added"), nil
	})
	log := d.log.String()
	if !strings.Contains(log, `got [REDACTED]`) {
		t.Errorf("the leaked header value is not shown redacted in the trace:\n%s", log)
	}
	for _, secret := range []string{traceEnvSecret, traceHeaderSecret, traceArgSecret, traceFieldSecret} {
		if strings.Contains(log, secret) {
			t.Errorf("the log holds the secret %q:\n%s", secret, log)
		}
	}
	if n := len(traceLines(t, log, "untraced")); n != 0 {
		t.Errorf("untraced server: %d trace lines, want none", n)
	}
}
