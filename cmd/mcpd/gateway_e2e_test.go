package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// The MCP endpoint (--mcp-listen) through bin/mcpd, with go-sdk clients in
// both protocol eras. The TypeScript SDK's side is in
// gateway_ts_e2e_test.go.

// mcpEras are the protocol versions the endpoint's clients force: the
// newest initialize-based revision and the stateless one.
var mcpEras = []string{"2025-11-25", "2026-07-28"}

// gatewayConfig is a config with two upstream servers: the demo server and
// server-everything.
func gatewayConfig(t *testing.T, everything string) string {
	t.Helper()
	return writeConfig(t, fmt.Sprintf(`{"mcpServers": {
		"demo": {"command": %q, "args": ["demo-server"]},
		"ev": {"command": %q, "args": ["stdio"]}
	}}`, mcpdBinary(t), everything))
}

// startGateway starts mcpd with the MCP endpoint on a free loopback port
// and returns the daemon and the endpoint's URL.
func startGateway(ctx context.Context, t *testing.T, config string, env ...string) (*daemon, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startDaemon(ctx, t, daemonOptions{config: config, args: []string{"--mcp-listen", addr}, env: env})
	return d, "http://" + addr + "/mcp"
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connectMCP opens a go-sdk client session to the endpoint at version.
func connectMCP(ctx context.Context, t *testing.T, url, version, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url}
	if token != "" {
		tr.HTTPClient = &http.Client{Transport: bearerTransport{token}}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "gateway-e2e", Version: "0"}, opts)
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s at %s: %v", url, version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// waitTools polls tools/list until it has every name in want: the
// endpoint lists a server's tools once the server is ready.
func waitTools(ctx context.Context, t *testing.T, cs *mcp.ClientSession, want ...string) []string {
	t.Helper()
	var names []string
	poll(ctx, t, "tools/list to have "+strings.Join(want, ", "), func() (bool, error) {
		names = names[:0]
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				return false, err
			}
			names = append(names, tool.Name)
		}
		for _, w := range want {
			if !slices.Contains(names, w) {
				return false, fmt.Errorf("got %v", names)
			}
		}
		return true, nil
	})
	return names
}

// waitResources polls resources/list on cs until it lists every URI of
// want.
func waitResources(ctx context.Context, t *testing.T, cs *mcp.ClientSession, want ...string) {
	t.Helper()
	poll(ctx, t, "resources/list to have "+strings.Join(want, ", "), func() (bool, error) {
		var uris []string
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return false, err
			}
			uris = append(uris, r.URI)
		}
		for _, w := range want {
			if !slices.Contains(uris, w) {
				return false, fmt.Errorf("got %v", uris)
			}
		}
		return true, nil
	})
}

func toolText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestMCPEndpointGoClient lists and calls the tools of two upstream
// servers through the MCP endpoint, reads a resource and renders a prompt
// under their gateway names, in both eras; a legacy host answers
// server-everything's sampling request.
func TestMCPEndpointGoClient(t *testing.T) {
	t.Parallel()
	everything := everythingBinary(t)
	ctx := testContext(t)
	_, url := startGateway(ctx, t, gatewayConfig(t, everything))

	for _, version := range mcpEras {
		t.Run(version, func(t *testing.T) {
			sampled := make(chan string, 1)
			cs := connectMCP(ctx, t, url, version, "", &mcp.ClientOptions{
				CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					text := ""
					if len(req.Params.Messages) > 0 {
						if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
							text = tc.Text
						}
					}
					select {
					case sampled <- text:
					default:
					}
					return &mcp.CreateMessageResult{Model: "host-model", Role: "assistant", Content: &mcp.TextContent{Text: "a reply from the MCP host"}}, nil
				},
			})
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Errorf("negotiated protocol version: got %s, want %s", got, version)
			}
			if names := waitTools(ctx, t, cs, "mcp__demo__echo", "mcp__demo__add", "mcp__ev__echo", "mcp__ev__get-sum"); slices.Contains(names, "search_tools") {
				t.Errorf("tools/list without --mcp-tool-search: got search_tools in %v", names)
			}
			if version >= "2026-07-28" {
				// Lists are filtered per caller: never shared by a cache.
				list, err := cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if list.CacheScope != "private" {
					t.Errorf("tools/list cacheScope: got %q, want private", list.CacheScope)
				}
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__demo__echo", Arguments: map[string]any{"message": "via the endpoint"}})
			if err != nil {
				t.Fatalf("call demo echo: %v", err)
			}
			if got := toolText(t, res); !strings.Contains(got, "via the endpoint") || res.IsError {
				t.Errorf("demo echo: got %q (isError %v), want the message back", got, res.IsError)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__ev__get-sum", Arguments: map[string]any{"a": 2, "b": 40}})
			if err != nil {
				t.Fatalf("call everything get-sum: %v", err)
			}
			if got := toolText(t, res); !strings.Contains(got, "42") {
				t.Errorf("everything get-sum: got %q, want 42 in it", got)
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__demo__no-such-tool"}); err == nil {
				t.Errorf("call of an unknown tool: got no error, want one")
			}

			// Resources and prompts, under the gateway's names (brought
			// in after the tools).
			readme := "mcpd://demo/demo://readme"
			waitResources(ctx, t, cs, readme)
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: readme})
			if err != nil {
				t.Fatalf("read %s: %v", readme, err)
			}
			if len(rr.Contents) == 0 || rr.Contents[0].URI != readme || rr.Contents[0].Text == "" {
				t.Errorf("read %s: got %+v, want its text under the gateway URI", readme, rr.Contents)
			}
			pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "mcp__demo__greet", Arguments: map[string]string{"name": "Ada"}})
			if err != nil {
				t.Fatalf("prompts/get: %v", err)
			}
			if len(pr.Messages) == 0 {
				t.Errorf("prompts/get: got no messages")
			}
			comp, err := cs.Complete(ctx, &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "mcp__demo__greet"},
				Argument: mcp.CompleteParamsArgument{Name: "style", Value: "p"},
			})
			if err != nil {
				t.Fatalf("completion/complete: %v", err)
			}
			if !slices.Contains(comp.Completion.Values, "pirate") {
				t.Errorf("completion: got %v, want pirate", comp.Completion.Values)
			}
			// A 2026-07-28 answer names its server: mcpd, never the one
			// behind it.
			for what, meta := range map[string]mcp.Meta{"resources/read": rr.Meta, "prompts/get": pr.Meta, "completion/complete": comp.Meta} {
				info, _ := meta["io.modelcontextprotocol/serverInfo"].(map[string]any)
				if name, _ := info["name"].(string); name != "" && name != "mcpd" {
					t.Errorf("%s: the answer names server %q, want mcpd", what, name)
				}
			}

			// Sampling: the upstream's request reaches this host (the
			// initialize era sends it on the call's stream; 2026-07-28 as an
			// input-required result, which the client answers and calls
			// again).
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__ev__trigger-sampling-request", Arguments: map[string]any{"prompt": "a haiku", "maxTokens": 20}})
			if err != nil {
				t.Fatalf("call trigger-sampling-request: %v", err)
			}
			if got := toolText(t, res); !strings.Contains(got, "a reply from the MCP host") {
				t.Errorf("trigger-sampling-request: got %q, want the host's reply in it", got)
			}
			select {
			case got := <-sampled:
				if !strings.Contains(got, "a haiku") {
					t.Errorf("sampling request: got %q, want the prompt in it", got)
				}
			default:
				t.Errorf("the host's CreateMessageHandler was not called")
			}
		})
	}
}

// TestMCPEndpointToken checks the bearer token on every request: none or
// a wrong one is refused with 401, the right one is served.
func TestMCPEndpointToken(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const token = "gateway-e2e-token"
	_, url := startGateway(ctx, t, "", "MCPD_API_TOKEN="+token)
	for _, tok := range []string{"", "wrong"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: got HTTP %d, want 401", tok, resp.StatusCode)
		}
	}
	for _, version := range mcpEras {
		cs := connectMCP(ctx, t, url, version, token, nil)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__demo__add", Arguments: map[string]any{"a": 1, "b": 2}})
		if err != nil {
			t.Fatalf("%s: call with the token: %v", version, err)
		}
		if got := toolText(t, res); !strings.Contains(got, "3") {
			t.Errorf("%s: add: got %q, want 3", version, got)
		}
	}
}

// TestMCPStdioGoClient: a go-sdk host starts `mcpd mcp-stdio` as its stdio
// server, in both eras, and reaches the servers behind the endpoint; a
// host that writes its requests and closes stdin still gets every answer.
func TestMCPStdioGoClient(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, url := startGateway(ctx, t, "")
	waitTools(ctx, t, connectMCP(ctx, t, url, "", "", nil), "mcp__demo__echo")
	for _, version := range mcpEras {
		t.Run(version, func(t *testing.T) {
			cmd := exec.Command(mcpdBinary(t), "mcp-stdio", "--connect", url)
			cmd.Env = daemonEnv()
			c := mcp.NewClient(&mcp.Implementation{Name: "stdio-host", Version: "0"}, nil)
			cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connect through mcp-stdio: %v", err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Errorf("negotiated protocol version: got %s, want %s", got, version)
			}
			waitTools(ctx, t, cs, "mcp__demo__echo", "mcp__demo__add")
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__demo__echo", Arguments: map[string]any{"message": "over stdio"}})
			if err != nil {
				t.Fatalf("call through mcp-stdio: %v", err)
			}
			if got := toolText(t, res); !strings.Contains(got, "over stdio") {
				t.Errorf("echo through mcp-stdio: got %q", got)
			}
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mcpd://demo/demo://readme"})
			if err != nil || len(rr.Contents) == 0 {
				t.Errorf("read through mcp-stdio: got %v, %v", rr, err)
			}
		})
	}

	cmd := exec.CommandContext(ctx, mcpdBinary(t), "mcp-stdio", "--connect", url)
	cmd.Env = daemonEnv()
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__demo__add","arguments":{"a":40,"b":2}}}
{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"mcpd://demo/demo://readme"}}
{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"mcp__demo__greet","arguments":{"name":"Ada"}}}
{"jsonrpc":"2.0","id":5,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"mcp__demo__greet"},"argument":{"name":"style","value":"p"}}}
`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp-stdio with a closed stdin: %v", err)
	}
	if !strings.Contains(string(out), `"id":2`) || !strings.Contains(string(out), "42") {
		t.Errorf("mcp-stdio with a closed stdin: got %q, want the answer to request 2 (42)", out)
	}
	// The demo server speaks 2026-07-28 to mcpd; its answers reach this
	// 2025-11-25 host without that revision's resultType, and never with
	// the demo server's name for mcpd's.
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var msg struct {
			ID     int                        `json:"id"`
			Result map[string]json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil || msg.Result == nil {
			t.Errorf("mcp-stdio: want a result, got %s", line)
			continue
		}
		if _, ok := msg.Result["resultType"]; ok {
			t.Errorf("answer %d to a 2025-11-25 host carries resultType: %s", msg.ID, line)
		}
		if strings.Contains(line, `"mcpd-demo"`) {
			t.Errorf("answer %d names the upstream server: %s", msg.ID, line)
		}
	}
	if n := strings.Count(string(out), `"jsonrpc"`); n != 5 {
		t.Errorf("mcp-stdio: got %d answers, want 5: %s", n, out)
	}
}

// TestMCPStdioBatch: a 2025-03-26 host's JSON-RPC batch reaches mcpd as
// one, and its answers come back to the host as one batch; a later
// revision's batch, and a batch with a message that does not parse, which
// mcpd refuses, come back as one batch of errors.
func TestMCPStdioBatch(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, url := startGateway(ctx, t, "")
	waitTools(ctx, t, connectMCP(ctx, t, url, "", "", nil), "mcp__demo__echo")
	const (
		add   = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__demo__add","arguments":{"a":40,"b":2}}}`
		note  = `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`
		ping  = `{"jsonrpc":"2.0","id":"three","method":"ping"}`
		batch = "[" + add + "," + note + "," + ping + "]"
	)
	for _, tc := range []struct {
		name, version, batch, want string
	}{
		{"2025-03-26", "2025-03-26", batch, `{"2":"42","three":"{}"}`},
		{"2025-11-25", "2025-11-25", batch, `{"2":"error","three":"error"}`},
		{"a message that does not parse", "2025-03-26", "[" + add + `,{"jsonrpc":"1.0","id":7},` + ping + "]", `{"2":"error","three":"error"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, mcpdBinary(t), "mcp-stdio", "--connect", url)
			cmd.Env = daemonEnv()
			cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + tc.version + `","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
` + tc.batch + "\n")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("mcp-stdio: %v", err)
			}
			var answers []struct {
				ID     any             `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			for line := range strings.Lines(string(out)) {
				if strings.HasPrefix(line, "[") {
					if answers != nil {
						t.Errorf("more than one batch in %q", out)
					}
					if err := json.Unmarshal([]byte(line), &answers); err != nil {
						t.Fatalf("batch %q: %v", line, err)
					}
				}
			}
			got := map[string]string{}
			for _, a := range answers {
				switch {
				case a.Error != nil:
					got[fmt.Sprint(a.ID)] = "error"
					if !strings.Contains(a.Error.Message, "mcpd answered HTTP 400") {
						t.Errorf("error %q: want it to say mcpd refused the batch", a.Error.Message)
					}
				case strings.Contains(string(a.Result), `"42"`):
					got[fmt.Sprint(a.ID)] = "42"
				default:
					got[fmt.Sprint(a.ID)] = string(a.Result)
				}
			}
			if b, _ := json.Marshal(got); string(b) != tc.want {
				t.Errorf("answers: got %s, want %s; output:\n%s", b, tc.want, out)
			}
		})
	}
}

// TestMCPEndpointPermissions: the endpoint applies the callers file with
// the gRPC edge's check: lists show what the caller may use, calls beyond
// its permissions are refused, an unknown token gets 401.
func TestMCPEndpointPermissions(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startDaemon(ctx, t, daemonOptions{
		config: twoDemoServers(t),
		args:   []string{"--callers", permissionCallers(t), "--mcp-listen", addr},
		env:    []string{"E2E_OUTSIDER_TOKEN=" + outsiderToken},
	})
	url := "http://" + addr + "/mcp"
	admin := connectMCP(ctx, t, url, "", adminToken, nil)
	waitTools(ctx, t, admin, "mcp__demo__echo", "mcp__other__echo")
	// Resources are brought in after tools: wait for them too.
	waitResources(ctx, t, admin, "mcpd://demo/demo://clock", "mcpd://other/demo://clock")

	for _, version := range mcpEras {
		t.Run(version, func(t *testing.T) {
			reader := connectMCP(ctx, t, url, version, readerToken, nil)
			var tools []string
			for tool, err := range reader.Tools(ctx, nil) {
				if err != nil {
					t.Fatalf("tools/list: %v", err)
				}
				tools = append(tools, tool.Name)
			}
			slices.Sort(tools)
			if want := []string{"mcp__demo__echo", "mcp__demo__weather"}; !slices.Equal(tools, want) {
				t.Errorf("reader's tools: got %v, want %v", tools, want)
			}
			var uris []string
			for r, err := range reader.Resources(ctx, nil) {
				if err != nil {
					t.Fatalf("resources/list: %v", err)
				}
				uris = append(uris, r.URI)
			}
			if want := []string{"mcpd://demo/demo://clock"}; !slices.Equal(uris, want) {
				t.Errorf("reader's resources: got %v, want %v", uris, want)
			}
			if _, err := reader.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__demo__echo", Arguments: map[string]any{"message": "ok"}}); err != nil {
				t.Errorf("reader calls an allowed tool: %v", err)
			}
			for _, name := range []string{"mcp__demo__add", "mcp__other__echo"} {
				if _, err := reader.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"a": 1, "b": 2, "message": "x"}}); err == nil ||
					!strings.Contains(err.Error(), "lacks permission") {
					t.Errorf("reader calls %s: got %v, want a permission error", name, err)
				}
			}
			if _, err := reader.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mcpd://demo/demo://readme"}); err == nil {
				t.Errorf("reader reads demo://readme: got no error, want a permission error")
			}
			// A bare name resolves among the servers the caller sees only.
			if _, err := reader.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "bare"}}); err != nil {
				t.Errorf("reader calls the bare name echo (only demo is visible): %v", err)
			}
			if _, err := admin.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "bare"}}); err == nil ||
				!strings.Contains(err.Error(), "ambiguous") {
				t.Errorf("admin calls the bare name echo (two servers have it): got %v, want an ambiguity error", err)
			}
			// So does a bare URI to subscribe to, in either era (a
			// 2026-07-28 listen resolved it among every server: ambiguous
			// here, and with one server's template, the wrong server).
			updates := watchBareClock(ctx, t, url, version)
			select {
			case uri := <-updates:
				if uri != "demo://clock" {
					t.Errorf("update: got %q, want demo://clock", uri)
				}
			case <-time.After(15 * time.Second):
				t.Errorf("no update of the bare demo://clock in 15 s (the clock ticks every second)")
			}
		})
	}

	// A bare URI stands for the server it resolved to: the reader hears
	// nothing of the other server's clock, which the admin follows, once
	// its own server is gone.
	updates := watchBareClock(ctx, t, url, "")
	if err := admin.Subscribe(ctx, &mcp.SubscribeParams{URI: "mcpd://other/demo://clock"}); err != nil {
		t.Fatalf("admin subscribes to the other server's clock: %v", err)
	}
	<-updates
	if _, err := d.hub.SetServerEnabled(bearer(ctx, adminToken), &mcpdv1.SetServerEnabledRequest{Name: "demo", Enabled: false}); err != nil {
		t.Fatal(err)
	}
	// Updates already under way may still come; the clocks tick every
	// second, so three quiet seconds in a row mean the other's do not.
	quiet, gone := time.NewTimer(3*time.Second), time.After(20*time.Second)
	for waiting := true; waiting; {
		select {
		case <-updates:
			quiet.Reset(3 * time.Second)
		case <-quiet.C:
			waiting = false
		case <-gone:
			t.Fatal("the reader still hears of the bare demo://clock 20 s after its server went: the other server's updates reach it")
		}
	}
	if _, err := d.hub.SetServerEnabled(bearer(ctx, adminToken), &mcpdv1.SetServerEnabledRequest{Name: "demo", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "x", Version: "0"}, nil)
	// An unknown token, and a known one padded (refused on the gRPC and
	// HTTP wires too).
	for _, token := range []string{"not-a-caller", " " + readerToken} {
		tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{token}}}
		if _, err := c.Connect(ctx, tr, nil); err == nil {
			t.Errorf("connect with the token %q: got no error, want 401", token)
		}
	}
}

// watchBareClock connects the reader to the MCP endpoint, subscribes it to
// the bare demo://clock, and returns the URIs of the updates it hears.
func watchBareClock(ctx context.Context, t *testing.T, url, version string) <-chan string {
	t.Helper()
	updates := make(chan string, 64)
	watcher := connectMCP(ctx, t, url, version, readerToken, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updates <- req.Params.URI:
			default:
			}
		},
	})
	if err := watcher.Subscribe(ctx, &mcp.SubscribeParams{URI: "demo://clock"}); err != nil {
		t.Fatalf("reader subscribes to the bare demo://clock: %v", err)
	}
	return updates
}

// TestMCPEndpointNotifications: a server added while a host is connected
// makes its tool list change, and the host hears of it; a host's
// subscription to the demo server's clock gets its updates under the
// gateway URI. In both eras.
func TestMCPEndpointNotifications(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d, url := startGateway(ctx, t, "")
	waitTools(ctx, t, connectMCP(ctx, t, url, "", "", nil), "mcp__demo__echo")
	for i, version := range mcpEras {
		t.Run(version, func(t *testing.T) {
			toolsChanged := make(chan struct{}, 16)
			updated := make(chan string, 16)
			cs := connectMCP(ctx, t, url, version, "", &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
					select {
					case toolsChanged <- struct{}{}:
					default:
					}
				},
				ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
					select {
					case updated <- req.Params.URI:
					default:
					}
				},
			})
			const clock = "mcpd://demo/demo://clock"
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: clock}); err != nil {
				t.Fatalf("subscribe %s: %v", clock, err)
			}
			name := fmt.Sprintf("added%d", i)
			d.connect(ctx, t, name, mcpdBinary(t), []string{"demo-server"}, nil)
			select {
			case <-toolsChanged:
			case <-ctx.Done():
				t.Fatalf("no tools list_changed after server %s was added", name)
			}
			waitTools(ctx, t, cs, "mcp__"+name+"__echo")
			select {
			case got := <-updated:
				if got != clock {
					t.Errorf("resource updated: got %q, want %q", got, clock)
				}
			case <-ctx.Done():
				t.Fatalf("no update of %s", clock)
			}
		})
	}
}

// TestMCPEndpointProgress: the host's progress token gets the demo slow
// tool's progress, in both eras.
func TestMCPEndpointProgress(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, url := startGateway(ctx, t, "")
	waitTools(ctx, t, connectMCP(ctx, t, url, "", "", nil), "mcp__demo__slow")
	for _, version := range mcpEras {
		t.Run(version, func(t *testing.T) {
			progress := make(chan *mcp.ProgressNotificationParams, 16)
			cs := connectMCP(ctx, t, url, version, "", &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					select {
					case progress <- req.Params:
					default:
					}
				},
			})
			params := &mcp.CallToolParams{Name: "mcp__demo__slow", Arguments: map[string]any{"steps": 3, "delay_ms": 1}}
			params.SetProgressToken("host-token")
			res, err := cs.CallTool(ctx, params)
			if err != nil || res.IsError {
				t.Fatalf("call slow: %v %v", res, err)
			}
			// The client may hand notifications to their handler after
			// the result: wait for all three.
			var got []float64
			for len(got) < 3 {
				select {
				case n := <-progress:
					if n.ProgressToken != "host-token" {
						t.Errorf("progress token: got %v, want host-token", n.ProgressToken)
					}
					got = append(got, n.Progress)
				case <-ctx.Done():
					t.Fatalf("progress notifications: got %v, want 3", got)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, []float64{1, 2, 3}) {
				t.Errorf("progress: got %v, want 1, 2, 3", got)
			}
		})
	}
}

// TestMCPEndpointGuards: a non-loopback --mcp-listen without TLS is
// refused before anything binds; SIGTERM ends hosts' open sessions and
// mcpd exits cleanly.
func TestMCPEndpointGuards(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	t.Run("not loopback", func(t *testing.T) {
		code, out := runMcpdEnv(ctx, t, []string{"MCPD_API_TOKEN=mcp-plain-5d1e"}, "--listen", "127.0.0.1:0", "--config", emptyConfig(t),
			"--mcp-listen", "0.0.0.0:"+strconv.Itoa(freePort(t)))
		if code != 1 || !strings.Contains(out, `--mcp-listen "0.0.0.0:`) || !strings.Contains(out, "not a loopback address") {
			t.Errorf("got exit code %d, want 1 and a refusal naming --mcp-listen:\n%s", code, out)
		}
		if strings.Contains(out, "mcp-plain-5d1e") {
			t.Errorf("the message quotes the token:\n%s", out)
		}
	})
	t.Run("another origin", func(t *testing.T) {
		_, url := startGateway(ctx, t, "")
		for origin, want := range map[string]int{"https://evil.example": http.StatusForbidden, "null": http.StatusForbidden, "http://localhost:6274": http.StatusOK} {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Origin", origin)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if (resp.StatusCode == http.StatusForbidden) != (want == http.StatusForbidden) {
				t.Errorf("Origin %s: got HTTP %d, want %s", origin, resp.StatusCode, map[bool]string{true: "403", false: "not 403"}[want == http.StatusForbidden])
			}
		}
	})
	t.Run("shutdown ends sessions", func(t *testing.T) {
		d, url := startGateway(ctx, t, "")
		cs := connectMCP(ctx, t, url, mcpEras[0], "", nil)
		waitTools(ctx, t, cs, "mcp__demo__echo")
		d.send(t, syscall.SIGTERM)
		if code := d.wait(t, syscall.SIGTERM); code != 0 {
			t.Errorf("mcpd exit code with a host connected: got %d, want 0\n%s", code, d.log.String())
		}
	})
}

// TestMCPEndpointAskRules calls through the MCP endpoint a tool an "ask"
// rule holds: as on gRPC, it runs only when the agent registered for
// approval requests approves it, and is refused, with an audit line naming
// the rule, when the agent denies it or none is attached. A server's own
// toolsAsk holds its calls there too.
func TestMCPEndpointAskRules(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--mcp-listen", addr, "--ask-tool", "mcp__demo__echo"}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	cs := connectMCP(ctx, t, "http://"+addr+"/mcp", mcpEras[0], "", nil)
	waitTools(ctx, t, cs, "mcp__demo__echo")
	echo := func(message string) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__demo__echo", Arguments: map[string]any{"message": message}})
	}

	if _, err := echo("yes"); err == nil || !strings.Contains(err.Error(), "no agent is attached") {
		t.Fatalf("ask-held call with no agent: got %v, want a refusal saying no agent is attached", err)
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	seen := make(chan *mcpdv1.ServerRequest, 10)
	approvalAgent(agentCtx, t, d, seen)
	res, err := echo("yes")
	if err != nil || toolText(t, res) != "yes" {
		t.Fatalf("approved call: got %v, %v", res, err)
	}
	if req := nextApproval(ctx, t, seen); req.GetApproval().GetTool() != "mcp__demo__echo" {
		t.Errorf("approval request: got %v, want one for mcp__demo__echo", req)
	}
	if _, err := echo("no"); err == nil || !strings.Contains(err.Error(), "not today") {
		t.Fatalf("denied call: got %v, want the agent's reason", err)
	}
	nextApproval(ctx, t, seen)
	lines := auditLines(t, d)
	if findAudit(lines, map[string]any{"method": "mcp tools/call", "code": "PermissionDenied", "denied_permission": "rule: ask mcp__demo__echo"}) == nil {
		t.Errorf("no audit line of the refused call naming its rule in:\n%v", lines)
	}

	cfg := stdioConfig("asked", mcpdBinary(t), []string{"demo-server"}, nil)
	cfg.ToolsAsk = []string{"ech*"}
	if _, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: cfg}); err != nil {
		t.Fatal(err)
	}
	waitTools(ctx, t, cs, "mcp__asked__echo")
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__asked__echo", Arguments: map[string]any{"message": "no"}})
	if err == nil || !strings.Contains(err.Error(), `ask mcp__asked__ech*`) || !strings.Contains(err.Error(), "not today") {
		t.Fatalf("a call the server's toolsAsk holds: got %v, want the agent's refusal under ask mcp__asked__ech*", err)
	}
	if req := nextApproval(ctx, t, seen); req.GetApproval().GetTool() != "mcp__asked__echo" {
		t.Errorf("approval request: got %v, want one for mcp__asked__echo", req)
	}
}

// TestMCPEndpointRequestsReachTheirHost: two hosts and a gRPC agent-less
// caller call the same tool at once; the server asks each call's client
// for a sample (a 2026-07-28 input request, tied to its call), and each
// host's request reaches that host, not the host whose call started last;
// the gRPC call's reaches no host (it has no agent to go to, and is
// declined). In each era of host and with one of each.
func TestMCPEndpointRequestsReachTheirHost(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	config := writeConfig(t, fmt.Sprintf(`{"mcpServers": {"pair": {"command": %q, "env": {%q: %q}}}}`,
		testBinary(t), fakeServerEnv, fakeAskPair))
	d, url := startGateway(ctx, t, config)

	// host connects a host whose sampling answer is its name.
	host := func(t *testing.T, version, name string) *mcp.ClientSession {
		return connectMCP(ctx, t, url, version, "", &mcp.ClientOptions{
			CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: name}}, nil
			},
		})
	}
	for _, versions := range [][2]string{{mcpEras[0], mcpEras[0]}, {mcpEras[1], mcpEras[1]}, {mcpEras[0], mcpEras[1]}} {
		group := versions[0] + "+" + versions[1]
		t.Run(group, func(t *testing.T) {
			hosts := []*mcp.ClientSession{host(t, versions[0], "host-a"), host(t, versions[1], "host-b")}
			waitTools(ctx, t, hosts[0], "mcp__pair__ask")
			callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			args := func(tag string) map[string]any {
				return map[string]any{"group": group, "count": len(hosts) + 1, "tag": tag}
			}
			got := make([]string, len(hosts)+1)
			var wg sync.WaitGroup
			for i, cs := range hosts {
				wg.Go(func() {
					res, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "mcp__pair__ask", Arguments: args([]string{"a", "b"}[i])})
					if err != nil {
						got[i] = err.Error()
						return
					}
					got[i] = toolText(t, res)
				})
			}
			wg.Go(func() {
				res, err := d.call(callCtx, t, "mcp__pair__ask", args("grpc"), 0)
				if err != nil {
					got[len(hosts)] = err.Error()
					return
				}
				got[len(hosts)] = text(res)
			})
			wg.Wait()
			if want := []string{"a answered by host-a", "b answered by host-b"}; !slices.Equal(got[:len(hosts)], want) {
				t.Errorf("the hosts' results: got %q, want %q", got[:len(hosts)], want)
			}
			if strings.Contains(got[len(hosts)], "host-") {
				t.Errorf("the gRPC call's result: got %q, want no host's answer in it", got[len(hosts)])
			}
		})
	}
}

// mcpRequest sends one raw HTTP request of the initialize-era Streamable
// HTTP transport to url with a bearer token, in session if not empty; the
// body is closed when the test ends.
func mcpRequest(ctx context.Context, t *testing.T, method, url, token, session, body string) *http.Response {
	t.Helper()
	return mcpRequestWith(ctx, t, http.DefaultClient, method, url, token, session, body)
}

// mcpRequestWith is mcpRequest through client; an empty token sends none.
func mcpRequestWith(ctx context.Context, t *testing.T, client *http.Client, method, url, token, session, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", mcpEras[0])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestMCPEndpointSessionOwner: an MCP session belongs to the caller who
// opened it; another caller who presents its id is refused.
func TestMCPEndpointSessionOwner(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startDaemon(ctx, t, daemonOptions{
		args: []string{"--callers", permissionCallers(t), "--mcp-listen", addr},
		env:  []string{"E2E_OUTSIDER_TOKEN=" + outsiderToken},
	})
	d.waitServer(bearer(ctx, adminToken), t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	url := "http://" + addr + "/mcp"
	post := func(token, session, body string) *http.Response {
		t.Helper()
		return mcpRequest(ctx, t, http.MethodPost, url, token, session, body)
	}
	init := post(readerToken, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+mcpEras[0]+`","capabilities":{},"clientInfo":{"name":"owner","version":"0"}}}`)
	session := init.Header.Get("Mcp-Session-Id")
	if init.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: got %d and session %q", init.StatusCode, session)
	}
	const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if resp := post(adminToken, session, list); resp.StatusCode != http.StatusForbidden {
		t.Errorf("another caller with the session's id: got %d, want 403", resp.StatusCode)
	}
	if resp := post(readerToken, session, list); resp.StatusCode != http.StatusOK {
		t.Errorf("the session's own caller: got %d, want 200", resp.StatusCode)
	}
}

// TestMCPEndpointSessionOwnerByCertificate: callers known by their client
// certificate own their MCP sessions too.
func TestMCPEndpointSessionOwnerByCertificate(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	serverCA := newCA(t, "server")
	clientCA := newCA(t, "clients")
	cert, key := serverCA.serverCert(t, "mcpd")
	callers := writeCallers(t, `{"callers": [
	  {"name": "alpha", "dns_name": "alpha.e2e.test", "permissions": {"servers": ["demo"]}},
	  {"name": "beta", "dns_name": "beta.e2e.test", "permissions": {"servers": ["demo"]}}
	]}`)
	alphaCert, alphaKey := clientCA.issue(t, "alpha", certSpec{CN: "alpha", DNS: []string{"alpha.e2e.test"}})
	betaCert, betaKey := clientCA.issue(t, "beta", certSpec{CN: "beta", DNS: []string{"beta.e2e.test"}})
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startDaemon(ctx, t, daemonOptions{
		args:  []string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", clientCA.path, "--callers", callers, "--mcp-listen", addr},
		creds: clientTLS(t, serverCA, alphaCert, alphaKey),
	})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	httpsClient := func(cert, key string) *http.Client {
		tr := &http.Transport{TLSClientConfig: clientTLSConfig(t, serverCA, cert, key)}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}
	alpha, beta := httpsClient(alphaCert, alphaKey), httpsClient(betaCert, betaKey)
	url := "https://" + addr + "/mcp"

	opened := mcpRequestWith(ctx, t, alpha, http.MethodPost, url, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+mcpEras[0]+`","capabilities":{},"clientInfo":{"name":"owner","version":"0"}}}`)
	session := opened.Header.Get("Mcp-Session-Id")
	if opened.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: got %d and session %q", opened.StatusCode, session)
	}
	const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if resp := mcpRequestWith(ctx, t, beta, http.MethodPost, url, "", session, list); resp.StatusCode != http.StatusForbidden {
		t.Errorf("another caller's certificate with the session's id: got %d, want 403", resp.StatusCode)
	}
	if resp := mcpRequestWith(ctx, t, alpha, http.MethodPost, url, "", session, list); resp.StatusCode != http.StatusOK {
		t.Errorf("the session's own caller: got %d, want 200", resp.StatusCode)
	}
}

// TestMCPEndpointCallerRemoved: a reload of the callers file that removes
// a caller ends the open stream of its MCP session, and its next request
// is refused.
func TestMCPEndpointCallerRemoved(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	callers := permissionCallers(t)
	// holder may call the slow tool, and will be removed with a call in
	// flight.
	var file map[string][]map[string]any
	b, err := os.ReadFile(callers)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	const holderToken = "holder-token-5c2e"
	file["callers"] = append(file["callers"], map[string]any{"name": "holder", "token_sha256": sha256Hex(holderToken),
		"permissions": map[string]any{"servers": []string{"demo"}, "tools": []string{"mcp__demo__slow"}}})
	replaceFile(t, callers, mustJSON(t, file))
	d := startDaemon(ctx, t, daemonOptions{
		args: []string{"--callers", callers, "--mcp-listen", addr, "--metrics-listen", metrics},
		env:  []string{"E2E_OUTSIDER_TOKEN=" + outsiderToken},
	})
	d.waitServer(bearer(ctx, adminToken), t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	url := "http://" + addr + "/mcp"
	request := func(method, token, session, body string) *http.Response {
		t.Helper()
		return mcpRequest(ctx, t, method, url, token, session, body)
	}
	init := request(http.MethodPost, readerToken, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+mcpEras[0]+`","capabilities":{},"clientInfo":{"name":"removed","version":"0"}}}`)
	session := init.Header.Get("Mcp-Session-Id")
	if init.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: got %d and session %q", init.StatusCode, session)
	}
	request(http.MethodPost, readerToken, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	stream := request(http.MethodGet, readerToken, session, "")
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("the session's standalone stream: got %d", stream.StatusCode)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, stream.Body)
		ended <- err
	}()
	// The holder calls in each era.
	held := make(chan error, len(mcpEras))
	for _, era := range mcpEras {
		holder := connectMCP(ctx, t, url, era, holderToken, nil)
		go func() {
			_, err := holder.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__demo__slow", Arguments: map[string]any{"steps": 1000, "delay_ms": 60000}})
			held <- err
		}()
	}
	inFlight := func() float64 {
		v, _ := scrapeMetrics(ctx, t, metrics).value("mcpd_calls_in_flight", map[string]string{"server": "demo"})
		return v
	}
	poll(ctx, t, "the holder's calls reach the server", func() (bool, error) { return inFlight() == float64(len(mcpEras)), nil })

	// The callers file without the reader and the holder.
	file["callers"] = slices.DeleteFunc(file["callers"], func(c map[string]any) bool { return c["name"] == "reader" || c["name"] == "holder" })
	replaceFile(t, callers, mustJSON(t, file))
	d.send(t, syscall.SIGHUP)
	select {
	case <-ended:
	case <-ctx.Done():
		t.Fatal("the removed caller's stream is still open")
	}
	for range mcpEras {
		select {
		case <-held:
		case <-ctx.Done():
			t.Fatal("the removed caller's tool call ran on")
		}
	}
	poll(ctx, t, "the calls upstream end", func() (bool, error) { return inFlight() == 0, nil })
	if findAudit(auditLines(t, d), map[string]any{"caller": "holder", "method": "mcp tools/call", "code": "Unauthenticated"}) == nil {
		t.Errorf("no audit line of the removed caller's ended call in:\n%v", auditLines(t, d))
	}
	if resp := request(http.MethodPost, readerToken, session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the removed caller's next request: got %d, want 401", resp.StatusCode)
	}
	// The admin, who stays, still works.
	admin := connectMCP(ctx, t, url, mcpEras[0], adminToken, nil)
	waitTools(ctx, t, admin, "mcp__demo__echo")
}

// TestMCPEndpointClosedRequest: a host that closes the HTTP request of a
// tool call, without notifications/cancelled, ends the call upstream (the
// endpoint keeps no events, so its answer could never be delivered).
func TestMCPEndpointClosedRequest(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--mcp-listen", addr, "--metrics-listen", metrics}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	url := "http://" + addr + "/mcp"
	init := mcpRequest(ctx, t, http.MethodPost, url, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+mcpEras[0]+`","capabilities":{},"clientInfo":{"name":"closer","version":"0"}}}`)
	session := init.Header.Get("Mcp-Session-Id")
	if init.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: got %d and session %q", init.StatusCode, session)
	}
	mcpRequest(ctx, t, http.MethodPost, url, "", session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	inFlight := func() float64 {
		v, _ := scrapeMetrics(ctx, t, metrics).value("mcpd_calls_in_flight", map[string]string{"server": "demo"})
		return v
	}
	// The answer's headers come with its first event, so the request is
	// made aside; closing its context closes the connection.
	callCtx, closeCall := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__demo__slow","arguments":{"steps":1000,"delay_ms":60000}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", mcpEras[0])
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	poll(ctx, t, "the call reaches the server", func() (bool, error) { return inFlight() == 1, nil })
	closeCall()
	<-done
	poll(ctx, t, "the call upstream ends", func() (bool, error) { return inFlight() == 0, nil })
}

// TestMCPEndpointRequestState holds a 2026-07-28 host's requestState to the
// request it was issued for: presented with another method, or another
// tool, it is refused (it used to resume the suspended call and hand its
// result to a read or a prompt, which ended mcpd), and the right retry
// still completes the call.
func TestMCPEndpointRequestState(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	config := writeConfig(t, fmt.Sprintf(`{"mcpServers": {"pair": {"command": %q, "env": {%q: %q}}, "demo": {"command": %q, "args": ["demo-server"]}}}`,
		testBinary(t), fakeServerEnv, fakeAskPair, mcpdBinary(t)))
	d, url := startGateway(ctx, t, config)
	d.waitServer(ctx, t, "pair", mcpdv1.ServerState_SERVER_STATE_READY)
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	// The endpoint lists a server's tools a little after it is ready.
	waitTools(ctx, t, connectMCP(ctx, t, url, "", "", nil), "mcp__pair__ask", "mcp__demo__echo")

	first := statelessPost(ctx, t, url, "tools/call", "mcp__pair__ask", map[string]any{
		"name": "mcp__pair__ask", "arguments": map[string]any{"group": "state", "count": 1, "tag": "t"},
	})
	var asked struct {
		Result struct {
			InputRequests map[string]any `json:"inputRequests"`
			RequestState  string         `json:"requestState"`
		} `json:"result"`
	}
	if err := json.Unmarshal(first, &asked); err != nil || asked.Result.RequestState == "" || len(asked.Result.InputRequests) != 1 {
		t.Fatalf("the first call: got %s (%v), want an input-required result", first, err)
	}
	state := asked.Result.RequestState
	var id string
	for k := range asked.Result.InputRequests {
		id = k
	}
	responses := map[string]any{id: map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "the host"}}}

	for _, misuse := range []struct{ method, name string }{
		{"resources/read", "demo://readme"},
		{"prompts/get", "mcp__demo__greet"},
		{"tools/call", "mcp__demo__echo"},
	} {
		params := map[string]any{"requestState": state, "inputResponses": responses}
		if misuse.method == "resources/read" {
			params["uri"] = misuse.name
		} else {
			params["name"] = misuse.name
		}
		got := statelessPost(ctx, t, url, misuse.method, misuse.name, params)
		if !strings.Contains(string(got), "requestState belongs to another request") {
			t.Errorf("%s %s with the call's requestState: got %s, want it refused", misuse.method, misuse.name, got)
		}
	}

	done := statelessPost(ctx, t, url, "tools/call", "mcp__pair__ask", map[string]any{
		"name": "mcp__pair__ask", "arguments": map[string]any{"group": "state", "count": 1, "tag": "t"},
		"requestState": state, "inputResponses": responses,
	})
	if !strings.Contains(string(done), "t answered by the host") {
		t.Errorf("the retry: got %s, want the call's result", done)
	}
}

// TestMCPEndpointAnswersAhead: a 2026-07-28 host may send inputResponses
// with its first call, before anything was asked; the server's request of
// that key is answered with it, and the call completes in one round. An
// answer under a key the server does not ask is ignored.
func TestMCPEndpointAnswersAhead(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	config := writeConfig(t, fmt.Sprintf(`{"mcpServers": {"pair": {"command": %q, "env": {%q: %q}}}}`,
		testBinary(t), fakeServerEnv, fakeAskPair))
	d, url := startGateway(ctx, t, config)
	d.waitServer(ctx, t, "pair", mcpdv1.ServerState_SERVER_STATE_READY)
	waitTools(ctx, t, connectMCP(ctx, t, url, "", "", nil), "mcp__pair__ask")

	answer := map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "the host"}}
	done := statelessPost(ctx, t, url, "tools/call", "mcp__pair__ask", map[string]any{
		"name": "mcp__pair__ask", "arguments": map[string]any{"group": "ahead", "count": 1, "tag": "t"},
		"inputResponses": map[string]any{"sample": answer, "unasked": answer},
	})
	if !strings.Contains(string(done), "t answered by the host") {
		t.Errorf("a call with its answer given ahead: got %s, want the call's result at once", done)
	}
	// Under another key, the server's request still reaches the host.
	asked := statelessPost(ctx, t, url, "tools/call", "mcp__pair__ask", map[string]any{
		"name": "mcp__pair__ask", "arguments": map[string]any{"group": "other", "count": 1, "tag": "t"},
		"inputResponses": map[string]any{"unasked": answer},
	})
	if !strings.Contains(string(asked), `"requestState"`) || !strings.Contains(string(asked), `"sample"`) {
		t.Errorf("a call with an answer the server does not ask: got %s, want an input-required result asking sample", asked)
	}
}

// statelessPost sends one 2026-07-28 request to the endpoint, as a host
// that can answer sampling, and returns the JSON-RPC response.
func statelessPost(ctx context.Context, t *testing.T, url, method, name string, params map[string]any) []byte {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    mcpEras[1],
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"sampling": map[string]any{}},
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcpEras[1])
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	// An event stream holds the response as its data line.
	for line := range strings.SplitSeq(string(b), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"jsonrpc"`) {
			return []byte(data)
		}
	}
	return b
}

// TestMCPStdioStateless: through mcp-stdio, a 2026-07-28 host's
// notifications/cancelled cancels its call at the server (each request is
// a POST of its own, which the bridge ends), and closing stdin ends a
// subscriptions/listen, so that the bridge exits.
func TestMCPStdioStateless(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d, url := startGateway(ctx, t, "")
	d.connectFake(ctx, t, "slow", fakeSlow)
	d.waitServer(ctx, t, "slow", mcpdv1.ServerState_SERVER_STATE_READY)
	// The endpoint lists a server's tools a little after it is ready.
	waitTools(ctx, t, connectMCP(ctx, t, url, "", "", nil), "mcp__slow__sleep")
	cmd := exec.CommandContext(ctx, mcpdBinary(t), "mcp-stdio", "--connect", url)
	cmd.Env = daemonEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mcp__slow__sleep","arguments":{"ms":60000,"tag":"stdio"},` + meta + `}}`)
	d.waitStderr(ctx, t, "slow", fakeSleepStarted+" stdio")
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,` + meta + `}}`)
	d.waitStderr(ctx, t, "slow", fakeSleepCancelled+" stdio")

	send(`{"jsonrpc":"2.0","id":6,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + meta + `}}`)
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("mcp-stdio: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("mcp-stdio did not exit after stdin closed with a listen open; stdout: %s", out.String())
	}
}

// TestMCPEndpointAskOnceAcrossInput: a 2026-07-28 host's call that an ask
// rule holds is approved once, not again on each retry that brings the
// input the server asked for.
func TestMCPEndpointAskOnceAcrossInput(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	config := writeConfig(t, fmt.Sprintf(`{"mcpServers": {"pair": {"command": %q, "env": {%q: %q}}}}`,
		testBinary(t), fakeServerEnv, fakeAskPair))
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startDaemon(ctx, t, daemonOptions{config: config, args: []string{"--mcp-listen", addr, "--ask-tool", "mcp__pair__ask"}})
	d.waitServer(ctx, t, "pair", mcpdv1.ServerState_SERVER_STATE_READY)
	url := "http://" + addr + "/mcp"
	waitTools(ctx, t, connectMCP(ctx, t, url, "", "", nil), "mcp__pair__ask")
	var mu sync.Mutex
	approvals := 0
	agentCtx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	answerAgent(agentCtx, t, d, func(req *mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply {
		mu.Lock()
		approvals++
		mu.Unlock()
		return &mcpdv1.ServerRequestReply{Id: req.GetId(), Result: &mcpdv1.ServerRequestReply_Approval{Approval: &mcpdv1.ApprovalResult{Approved: true}}}
	}, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_APPROVAL)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return approvals
	}

	args := map[string]any{"group": "once", "count": 1, "tag": "t"}
	first := statelessPost(ctx, t, url, "tools/call", "mcp__pair__ask", map[string]any{"name": "mcp__pair__ask", "arguments": args})
	var asked struct {
		Result struct {
			InputRequests map[string]any `json:"inputRequests"`
			RequestState  string         `json:"requestState"`
		} `json:"result"`
	}
	if err := json.Unmarshal(first, &asked); err != nil || asked.Result.RequestState == "" {
		t.Fatalf("the first call: got %s (%v), want an input-required result", first, err)
	}
	if n := count(); n != 1 {
		t.Fatalf("approvals after the first call: got %d, want 1", n)
	}
	responses := map[string]any{}
	for id := range asked.Result.InputRequests {
		responses[id] = map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "the host"}}
	}
	done := statelessPost(ctx, t, url, "tools/call", "mcp__pair__ask", map[string]any{
		"name": "mcp__pair__ask", "arguments": args, "requestState": asked.Result.RequestState, "inputResponses": responses,
	})
	if !strings.Contains(string(done), "t answered by the host") {
		t.Fatalf("the retry: got %s, want the call's result", done)
	}
	if n := count(); n != 1 {
		t.Errorf("approvals after the retry: got %d, want still 1", n)
	}
}

// TestGatewaySessionTimeout: a host that initialized and went away
// without DELETE (no request, no stream since) holds its session only for
// --mcp-session-timeout; then the session is closed, its slot is free, and
// the host's next request with it gets 404.
func TestGatewaySessionTimeout(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{
		"--mcp-listen", addr, "--mcp-max-sessions", "1", "--mcp-session-timeout", "1s",
	}})
	url := "http://" + addr + "/mcp"
	post := func(session, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// The host that goes away: initialize, initialized, nothing more.
	resp := post("", `{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "gone", "version": "0"}}}`)
	gone := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || gone == "" {
		t.Fatalf("initialize: got %d, session %q", resp.StatusCode, gone)
	}
	post(gone, `{"jsonrpc": "2.0", "method": "notifications/initialized"}`)

	poll(ctx, t, "room for another host once the idle session timed out", func() (bool, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "gateway-e2e", Version: "0"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err == nil {
			_ = cs.Close()
		}
		return err == nil, nil
	})
	if resp := post(gone, `{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the timed-out session's next request: got %d, want 404", resp.StatusCode)
	}
}

// TestGatewaySessionLimit: with --mcp-max-sessions 1, a second
// initialize-era host is refused (-32000, naming the flag) while the first
// holds its session, and let in once that session ended.
func TestGatewaySessionLimit(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--mcp-listen", addr, "--mcp-max-sessions", "1"}})
	url := "http://" + addr + "/mcp"
	dial := func() (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "gateway-e2e", Version: "0"}, nil)
		return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	}
	first, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	second, err := dial()
	if err == nil {
		_ = second.Close()
	}
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != -32000 || !strings.Contains(je.Message, "--mcp-max-sessions") {
		t.Fatalf("a second session: got %v, want -32000 naming --mcp-max-sessions", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "room once the first session ended", func() (bool, error) {
		cs, err := dial()
		if err == nil {
			_ = cs.Close()
		}
		return err == nil, nil
	})
}

// TestMCPEndpointReadIsPrivate: a 2026-07-28 resources/read through the
// endpoint says "cacheScope": "private", as its lists do, whatever the
// server said: what a read returns is the server's answer to mcpd's
// credentials, and the caller's permissions decide who gets it, so no
// cache shared between users may keep it. (The demo server, as any SDK
// server, calls its reads public.)
func TestMCPEndpointReadIsPrivate(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	config := writeConfig(t, fmt.Sprintf(`{"mcpServers": {"demo": {"command": %[1]q, "args": ["demo-server"]},
		"legacy": {"command": %[1]q, "args": ["demo-server"], "protocolVersion": "2025-11-25"}}}`, mcpdBinary(t)))
	_, url := startGateway(ctx, t, config)
	cs := connectMCP(ctx, t, url, "2026-07-28", "", nil)
	waitResources(ctx, t, cs, "mcpd://demo/demo://readme", "mcpd://legacy/demo://readme")
	for _, uri := range []string{"mcpd://demo/demo://readme", "mcpd://legacy/demo://readme"} {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		if res.CacheScope != "private" {
			t.Errorf("read %s: cacheScope %q, want private", uri, res.CacheScope)
		}
		// The revision requires resultType, whichever revision the
		// server behind speaks.
		if raw := statelessPost(ctx, t, url, "resources/read", uri, map[string]any{"uri": uri}); !strings.Contains(string(raw), `"resultType":"complete"`) {
			t.Errorf("read %s: got %s, want resultType complete", uri, raw)
		}
	}
}

// TestMCPEndpointRequestsAfterPermissionLost: a reload of the callers file
// that takes server_requests from a caller who stays stops the server's
// requests from reaching that caller's hosts at once, their calls in
// flight included, as a HandleServerRequests stream is no longer sent
// requests of a kind its caller lost. The server is declined instead.
func TestMCPEndpointRequestsAfterPermissionLost(t *testing.T) {
	t.Parallel()
	for _, era := range mcpEras {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			const hostToken = "host-token-8d1f"
			callersFile := filepath.Join(shortTempDir(t), "callers.json")
			callers := func(hostPermissions map[string]any) string {
				return mustJSON(t, map[string]any{"callers": []any{
					map[string]any{"name": "host", "token_sha256": sha256Hex(hostToken), "permissions": hostPermissions},
					map[string]any{"name": "admin", "token_sha256": sha256Hex(adminToken), "permissions": map[string]any{
						"servers": []string{"*"}, "tools": []string{"*"}, "manage": true,
					}},
				}})
			}
			// "probe" names no server: GetServer of it tells when a reload
			// has taken effect (NOT_FOUND before, PERMISSION_DENIED after).
			replaceFile(t, callersFile, callers(map[string]any{
				"servers": []string{"pair", "probe"}, "tools": []string{"mcp__pair__*"}, "server_requests": []string{"sampling"},
			}))
			addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			d := startDaemon(ctx, t, daemonOptions{
				config: writeConfig(t, fmt.Sprintf(`{"mcpServers": {"pair": {"command": %q, "env": {%q: %q}}}}`, testBinary(t), fakeServerEnv, fakeAskPair)),
				args:   []string{"--callers", callersFile, "--mcp-listen", addr, "--metrics-listen", metrics},
			})
			admin := bearer(ctx, adminToken)
			d.waitServer(admin, t, "pair", mcpdv1.ServerState_SERVER_STATE_READY)
			asked := make(chan string, 4)
			host := connectMCP(ctx, t, "http://"+addr+"/mcp", era, hostToken, &mcp.ClientOptions{
				CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					asked <- fmt.Sprint(req.Params.Messages[0].Content.(*mcp.TextContent).Text)
					return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "the host"}}, nil
				},
			})
			waitTools(ctx, t, host, "mcp__pair__ask")
			args := func(tag string) map[string]any { return map[string]any{"group": era, "count": 2, "tag": tag} }
			type outcome struct {
				res *mcp.CallToolResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__pair__ask", Arguments: args("host-call")})
				done <- outcome{res, err}
			}()
			poll(ctx, t, "the host's call to reach the server", func() (bool, error) {
				v, _ := scrapeMetrics(ctx, t, metrics).value("mcpd_calls_in_flight", map[string]string{"server": "pair"})
				return v == 1, nil
			})

			// The host's caller stays, without server_requests.
			replaceFile(t, callersFile, callers(map[string]any{"servers": []string{"pair"}, "tools": []string{"mcp__pair__*"}}))
			d.send(t, syscall.SIGHUP)
			poll(ctx, t, "the reload to take effect", func() (bool, error) {
				_, err := d.hub.GetServer(bearer(ctx, hostToken), &mcpdv1.GetServerRequest{Name: "probe"})
				return status.Code(err) == codes.PermissionDenied, nil
			})
			// A second call lets both ask for their samples.
			if _, err := d.call(admin, t, "mcp__pair__ask", args("grpc-call"), 0); err != nil {
				t.Logf("the admin's call: %v", err)
			}
			var o outcome
			select {
			case o = <-done:
			case <-ctx.Done():
				t.Fatal("the host's call did not end")
			}
			select {
			case tag := <-asked:
				t.Errorf("the host was asked to sample %q after its caller lost server_requests", tag)
			default:
			}
			if o.err == nil && strings.Contains(toolText(t, o.res), "answered by the host") {
				t.Errorf("the host's call: got %q, want no answer of the host's in it", toolText(t, o.res))
			}
		})
	}
}

// TestMCPEndpointCallMayHaveRun: a tool call whose server dies while it
// runs is a result with isError whose text says that the call may have
// run, as CallTool's UNAVAILABLE over gRPC says: the host's model must not
// take it for a call that never happened and repeat what it did.
func TestMCPEndpointCallMayHaveRun(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d, url := startGateway(ctx, t, emptyConfig(t))
	dir := t.TempDir()
	s := d.connect(ctx, t, "gated", testBinary(t), nil, map[string]string{fakeServerEnv: fakeGated, fakeGateDirEnv: dir})
	if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("gated server: %v %s", s.GetState(), s.GetLastError())
	}
	cs := connectMCP(ctx, t, url, "2025-11-25", "", nil)
	waitTools(ctx, t, cs, "mcp__gated__"+gatedPlain)
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__gated__" + gatedPlain, Arguments: map[string]any{"tag": "killed"}})
		done <- outcome{res, err}
	}()
	poll(ctx, t, "the call started by the server", func() (bool, error) {
		starts, err := readGatedStarts(dir)
		return len(starts) == 1, err
	})
	if err := syscall.Kill(int(s.GetPid()), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("call of a server killed meanwhile: got error %v, want a result with isError", o.err)
	}
	if got := toolText(t, o.res); !o.res.IsError || !strings.Contains(got, "may have run") {
		t.Errorf("call of a server killed meanwhile: got isError %v, text %q; want isError saying the call may have run", o.res.IsError, got)
	}
}
