package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// Tokens of the callers in these tests.
const (
	apiTokenBesideCallers = "api-token-beside-callers-31f8"
	readerToken           = "reader-token-0a41"
	adminToken            = "admin-token-77d3"
	outsiderToken         = "outsider-token-5e90"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// twoDemoServers is a config with the demo server twice: "demo" and
// "other".
func twoDemoServers(t *testing.T) string {
	t.Helper()
	demo := map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}}
	return writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{"demo": demo, "other": demo}}))
}

// permissionCallers writes a callers file with a reader (one server, some
// of its tools, resources and prompts, roots requests), an admin
// (everything, token in a file) and an outsider (server "other" only,
// token from ${VAR}).
func permissionCallers(t *testing.T) string {
	t.Helper()
	dir := shortTempDir(t)
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "callers.json")
	content := mustJSON(t, map[string]any{"callers": []any{
		map[string]any{"name": "reader", "token_sha256": sha256Hex(readerToken), "permissions": map[string]any{
			"servers":         []string{"demo"},
			"tools":           []string{"mcp__demo__echo", "mcp__*__weather"},
			"resources":       []any{map[string]any{"server": "demo", "uri": "demo://clock"}},
			"prompts":         []any{map[string]any{"server": "*", "name": "greet"}},
			"server_requests": []string{"roots"},
		}},
		map[string]any{"name": "admin", "token_file": "admin.token", "permissions": map[string]any{
			"servers":         []string{"*"},
			"tools":           []string{"*"},
			"resources":       []any{map[string]any{"server": "*", "uri": "*"}},
			"prompts":         []any{map[string]any{"server": "*", "name": "*"}},
			"manage":          true,
			"server_requests": []string{"sampling", "elicitation", "roots"},
		}},
		map[string]any{"name": "outsider", "token": "${E2E_OUTSIDER_TOKEN}", "permissions": map[string]any{
			"servers": []string{"other"},
		}},
	}})
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCallerPermissions checks each permission kind allowed and denied,
// list and event filtering, refused management RPCs and server-request
// registrations, and that a denied call changes nothing.
func TestCallerPermissions(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{
		config: twoDemoServers(t),
		args:   []string{"--callers", permissionCallers(t)},
		env:    []string{"E2E_OUTSIDER_TOKEN=" + outsiderToken, "MCPD_API_TOKEN=" + apiTokenBesideCallers},
	})
	admin := bearer(ctx, adminToken)
	reader := bearer(ctx, readerToken)
	outsider := bearer(ctx, outsiderToken)
	poll(ctx, t, "both servers ready", func() (bool, error) {
		resp, err := d.hub.ListServers(admin, &mcpdv1.ListServersRequest{})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, s := range resp.GetServers() {
			if s.GetState() == mcpdv1.ServerState_SERVER_STATE_READY {
				ready++
			}
		}
		return ready == 2, nil
	})

	denied := func(t *testing.T, err error, permission string) {
		t.Helper()
		st := wantCode(t, err, codes.PermissionDenied)
		if !strings.Contains(st.Message(), `"`+permission+`"`) {
			t.Errorf("denial %q: want it to name permission %q", st.Message(), permission)
		}
		for _, tok := range []string{readerToken, adminToken, outsiderToken} {
			if strings.Contains(st.Message(), tok) {
				t.Errorf("denial %q quotes a token", st.Message())
			}
		}
	}

	serverNames := func(ctx context.Context) []string {
		t.Helper()
		resp, err := d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{})
		if err != nil {
			t.Fatalf("ListServers: %v", err)
		}
		var names []string
		for _, s := range resp.GetServers() {
			names = append(names, s.GetName())
		}
		return names
	}
	resourceURIs := func(ctx context.Context) []string {
		t.Helper()
		resp, err := d.hub.ListResources(ctx, &mcpdv1.ListResourcesRequest{})
		if err != nil {
			t.Fatalf("ListResources: %v", err)
		}
		var uris []string
		for _, r := range resp.GetResources() {
			uris = append(uris, r.GetServer()+" "+r.GetUri())
		}
		return uris
	}
	promptNames := func(ctx context.Context) []string {
		t.Helper()
		resp, err := d.hub.ListPrompts(ctx, &mcpdv1.ListPromptsRequest{})
		if err != nil {
			t.Fatalf("ListPrompts: %v", err)
		}
		var names []string
		for _, p := range resp.GetPrompts() {
			names = append(names, p.GetServer()+" "+p.GetName())
		}
		return names
	}

	t.Run("lists", func(t *testing.T) {
		for _, tc := range []struct {
			who       string
			ctx       context.Context
			servers   string
			tools     string
			resources string
			prompts   string
		}{
			{"reader", reader, "demo", "mcp__demo__echo,mcp__demo__weather", "demo demo://clock", "demo greet"},
			{"outsider", outsider, "other", "", "", ""},
		} {
			if got := strings.Join(serverNames(tc.ctx), ","); got != tc.servers {
				t.Errorf("%s's servers: got %q, want %q", tc.who, got, tc.servers)
			}
			if got := strings.Join(toolNames(tc.ctx, t, d.hub), ","); got != tc.tools {
				t.Errorf("%s's tools: got %q, want %q", tc.who, got, tc.tools)
			}
			if got := strings.Join(resourceURIs(tc.ctx), ","); got != tc.resources {
				t.Errorf("%s's resources: got %q, want %q", tc.who, got, tc.resources)
			}
			if got := strings.Join(promptNames(tc.ctx), ","); got != tc.prompts {
				t.Errorf("%s's prompts: got %q, want %q", tc.who, got, tc.prompts)
			}
		}
		if got := serverNames(admin); !slices.Equal(got, []string{"demo", "other"}) {
			t.Errorf("admin's servers: got %v, want demo and other", got)
		}
		if got := toolNames(admin, t, d.hub); len(got) < 10 {
			t.Errorf("admin's tools: got %v, want every tool of both servers", got)
		}
		_, err := d.hub.ListTools(reader, &mcpdv1.ListToolsRequest{Server: "other"})
		denied(t, err, "servers")
	})

	t.Run("tools", func(t *testing.T) {
		if _, err := d.hub.CallTool(reader, &mcpdv1.CallToolRequest{Name: "mcp__demo__echo", Arguments: mustStruct(t, map[string]any{"message": "hi"})}); err != nil {
			t.Errorf("reader calls echo: %v", err)
		}
		_, err := d.hub.CallTool(reader, &mcpdv1.CallToolRequest{Name: "mcp__demo__add", Arguments: mustStruct(t, map[string]any{"a": 1, "b": 2})})
		denied(t, err, "tools")
		_, err = d.hub.CallTool(reader, &mcpdv1.CallToolRequest{Name: "mcp__other__weather", Arguments: mustStruct(t, map[string]any{"city": "Oslo"})})
		denied(t, err, "servers")
		stream, err := d.hub.CallToolStream(reader, &mcpdv1.CallToolStreamRequest{Name: "mcp__demo__slow"})
		if err == nil {
			_, err = stream.Recv()
		}
		denied(t, err, "tools")
	})

	t.Run("resources", func(t *testing.T) {
		if _, err := d.hub.ReadResource(reader, &mcpdv1.ReadResourceRequest{Server: "demo", Uri: "demo://clock"}); err != nil {
			t.Errorf("reader reads demo://clock: %v", err)
		}
		_, err := d.hub.ReadResource(reader, &mcpdv1.ReadResourceRequest{Server: "demo", Uri: "demo://readme"})
		denied(t, err, "resources")
		_, err = d.hub.ReadResource(outsider, &mcpdv1.ReadResourceRequest{Server: "other", Uri: "demo://clock"})
		denied(t, err, "resources")
	})

	t.Run("prompts", func(t *testing.T) {
		if _, err := d.hub.GetPrompt(reader, &mcpdv1.GetPromptRequest{Server: "demo", Name: "greet", Arguments: map[string]string{"name": "Ada"}}); err != nil {
			t.Errorf("reader gets greet: %v", err)
		}
		_, err := d.hub.GetPrompt(outsider, &mcpdv1.GetPromptRequest{Server: "other", Name: "greet", Arguments: map[string]string{"name": "Ada"}})
		denied(t, err, "prompts")
	})

	t.Run("templates and completion", func(t *testing.T) {
		templates := func(ctx context.Context) []string {
			t.Helper()
			resp, err := d.hub.ListResourceTemplates(ctx, &mcpdv1.ListResourceTemplatesRequest{})
			if err != nil {
				t.Fatalf("ListResourceTemplates: %v", err)
			}
			var out []string
			for _, rt := range resp.GetResourceTemplates() {
				out = append(out, rt.GetServer()+" "+rt.GetUriTemplate())
			}
			return out
		}
		if got := templates(reader); len(got) != 0 {
			t.Errorf("reader's resource templates: got %v, want none (demo://clock is all it may read)", got)
		}
		if got := templates(admin); !slices.Contains(got, "demo demo://greeting/{name}") {
			t.Errorf("admin's resource templates: got %v, want demo's greeting template", got)
		}
		complete := func(ctx context.Context, server string, ref any) error {
			req := &mcpdv1.CompleteRequest{Server: server, Argument: &mcpdv1.CompleteArgument{Name: "name", Value: "A"}}
			switch r := ref.(type) {
			case *mcpdv1.CompleteRequest_Prompt:
				req.Ref = r
			case *mcpdv1.CompleteRequest_ResourceTemplate:
				req.Ref = r
			}
			_, err := d.hub.Complete(ctx, req)
			return err
		}
		greet := &mcpdv1.CompleteRequest_Prompt{Prompt: "greet"}
		greeting := &mcpdv1.CompleteRequest_ResourceTemplate{ResourceTemplate: "demo://greeting/{name}"}
		if err := complete(reader, "demo", greet); err != nil {
			t.Errorf("reader completes greet: %v", err)
		}
		denied(t, complete(reader, "demo", greeting), "resources")
		denied(t, complete(outsider, "other", greet), "prompts")
		if err := complete(admin, "demo", greeting); err != nil {
			t.Errorf("admin completes the greeting template: %v", err)
		}
	})

	t.Run("API token beside a callers file", func(t *testing.T) {
		api := bearer(ctx, apiTokenBesideCallers)
		if got := serverNames(api); !slices.Equal(got, []string{"demo", "other"}) {
			t.Errorf("API token's servers: got %v, want demo and other", got)
		}
		if _, err := d.hub.SetLogLevel(api, &mcpdv1.SetLogLevelRequest{Server: "other", Level: mcpdv1.LogLevel_LOG_LEVEL_INFO}); err != nil {
			t.Errorf("API token manages a server: %v", err)
		}
	})

	t.Run("manage", func(t *testing.T) {
		before, err := d.hub.GetServer(admin, &mcpdv1.GetServerRequest{Name: "demo"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.hub.DisconnectServer(reader, &mcpdv1.DisconnectServerRequest{Name: "demo"})
		denied(t, err, "manage")
		_, err = d.hub.RestartServer(reader, &mcpdv1.RestartServerRequest{Name: "demo"})
		denied(t, err, "manage")
		_, err = d.hub.SetServerEnabled(reader, &mcpdv1.SetServerEnabledRequest{Name: "demo", Enabled: false})
		denied(t, err, "manage")
		_, err = d.hub.SetLogLevel(reader, &mcpdv1.SetLogLevelRequest{Server: "demo", Level: mcpdv1.LogLevel_LOG_LEVEL_INFO})
		denied(t, err, "manage")
		_, err = d.hub.SetRoots(reader, &mcpdv1.SetRootsRequest{Server: "demo", Roots: []*mcpdv1.Root{{Uri: "file:///tmp"}}})
		denied(t, err, "manage")
		_, err = d.hub.ConnectServer(reader, &mcpdv1.ConnectServerRequest{Server: stdioConfig("demo", mcpdBinary(t), []string{"demo-server"}, nil)})
		denied(t, err, "manage")
		_, err = d.hub.ConnectServer(reader, &mcpdv1.ConnectServerRequest{Server: stdioConfig("added", mcpdBinary(t), []string{"demo-server"}, nil)})
		denied(t, err, "servers")

		// Nothing changed.
		after, err := d.hub.GetServer(admin, &mcpdv1.GetServerRequest{Name: "demo"})
		if err != nil {
			t.Fatal(err)
		}
		if after.GetServer().GetState() != mcpdv1.ServerState_SERVER_STATE_READY || after.GetServer().GetPid() != before.GetServer().GetPid() ||
			after.GetServer().GetRestarts() != before.GetServer().GetRestarts() {
			t.Errorf("demo after denied calls: got %v pid %d, want READY pid %d untouched", after.GetServer().GetState(), after.GetServer().GetPid(), before.GetServer().GetPid())
		}
		_, err = d.hub.GetServer(admin, &mcpdv1.GetServerRequest{Name: "added"})
		wantCode(t, err, codes.NotFound)

		if _, err := d.hub.SetLogLevel(admin, &mcpdv1.SetLogLevelRequest{Server: "demo", Level: mcpdv1.LogLevel_LOG_LEVEL_INFO}); err != nil {
			t.Errorf("admin SetLogLevel: %v", err)
		}
	})

	t.Run("server requests", func(t *testing.T) {
		register := func(ctx context.Context, servers []string, kind mcpdv1.ServerRequestKind) error {
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream, err := d.hub.HandleServerRequests(sctx)
			if err != nil {
				return err
			}
			if err := stream.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Register{
				Register: &mcpdv1.ServerRequestRegistration{Servers: servers, Kinds: []mcpdv1.ServerRequestKind{kind}},
			}}); err != nil {
				return err
			}
			_, err = stream.Recv()
			return err
		}
		if err := register(reader, []string{"demo"}, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_ROOTS); err != nil {
			t.Errorf("reader registers for roots of demo: %v", err)
		}
		denied(t, register(reader, []string{"demo"}, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING), "server_requests")
		denied(t, register(reader, nil, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_ROOTS), "servers")
		if err := register(admin, nil, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING); err != nil {
			t.Errorf("admin registers for sampling of every server: %v", err)
		}

		// A registration sent again on the stream is checked as the first,
		// and its refusal audited as the first's would be.
		refusals := func() int {
			n := 0
			for _, line := range auditLines(t, d) {
				if line["caller"] == "reader" && line["method"] == "HandleServerRequests" && line["code"] == "PermissionDenied" {
					n++
				}
			}
			return n
		}
		before := refusals()
		sctx, cancel := context.WithCancel(reader)
		defer cancel()
		stream, err := d.hub.HandleServerRequests(sctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, kinds := range [][]mcpdv1.ServerRequestKind{
			{mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_ROOTS},
			{mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_ROOTS, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING},
		} {
			if err := stream.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Register{
				Register: &mcpdv1.ServerRequestRegistration{Servers: []string{"demo"}, Kinds: kinds},
			}}); err != nil {
				t.Fatal(err)
			}
		}
		if m, err := stream.Recv(); err != nil || m.GetRegistered() == nil {
			t.Fatalf("reader's first registration: got %v, %v", m, err)
		}
		_, err = stream.Recv()
		denied(t, err, "server_requests")
		// mcpd's log reaches the test a little after the refusal.
		poll(ctx, t, "the audit line of the refused registration", func() (bool, error) { return refusals() == before+1, nil })
	})

	t.Run("events", func(t *testing.T) {
		sctx, cancel := context.WithCancel(reader)
		defer cancel()
		sub, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{Kinds: []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_SERVER_STATE}})
		if err != nil {
			t.Fatal(err)
		}
		other, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{Servers: []string{"other"}})
		if err == nil {
			_, err = other.Recv()
		}
		denied(t, err, "servers")
		readme, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{Resources: []*mcpdv1.ResourceRef{{Server: "demo", Uri: "demo://readme"}}})
		if err == nil {
			_, err = readme.Recv()
		}
		denied(t, err, "resources")
		// "other" restarts first: its events come before demo's, so a
		// leak would show before demo's READY does.
		if _, err := d.hub.RestartServer(admin, &mcpdv1.RestartServerRequest{Name: "other"}); err != nil {
			t.Fatal(err)
		}
		if _, err := d.hub.RestartServer(admin, &mcpdv1.RestartServerRequest{Name: "demo"}); err != nil {
			t.Fatal(err)
		}
		for {
			resp, err := sub.Recv()
			if err != nil {
				t.Fatalf("Subscribe: %v", err)
			}
			ev := resp.GetEvent()
			if ev.GetServer() != "demo" {
				t.Fatalf("reader got an event of server %q: %v", ev.GetServer(), ev)
			}
			if ev.GetServerState().GetState() == mcpdv1.ServerState_SERVER_STATE_READY {
				break
			}
		}
	})

	t.Run("polls", func(t *testing.T) {
		start := func(ctx context.Context, target any) (*mcpdv1.Poll, error) {
			req := &mcpdv1.StartPollRequest{Server: "demo"}
			switch v := target.(type) {
			case string:
				req.Target = &mcpdv1.StartPollRequest_ResourceUri{ResourceUri: v}
			case *mcpdv1.PollToolCall:
				req.Target = &mcpdv1.StartPollRequest_Tool{Tool: v}
			}
			resp, err := d.hub.StartPoll(ctx, req)
			return resp.GetPoll(), err
		}
		// The admin's poll of a resource the reader may not read; its
		// baseline is out before the reader's polls start.
		readme, err := start(admin, "demo://readme")
		if err != nil {
			t.Fatalf("admin StartPoll: %v", err)
		}
		defer d.hub.StopPoll(admin, &mcpdv1.StopPollRequest{Id: readme.GetId()}) //nolint:errcheck // best effort
		poll(ctx, t, "the readme poll's baseline", func() (bool, error) {
			resp, err := d.hub.ListPolls(admin, &mcpdv1.ListPollsRequest{})
			return len(resp.GetPolls()) == 1 && resp.GetPolls()[0].GetChanges() == 1, err
		})

		_, err = start(reader, "demo://readme")
		denied(t, err, "resources")
		_, err = start(reader, &mcpdv1.PollToolCall{Name: "add"})
		denied(t, err, "tools")
		// A poll the reader may not see does not exist for it.
		_, err = d.hub.StopPoll(reader, &mcpdv1.StopPollRequest{Id: readme.GetId()})
		if status.Code(err) != codes.NotFound {
			t.Errorf("reader StopPoll of the admin's poll: got %v, want NOT_FOUND", err)
		}
		clock, err := start(reader, "demo://clock")
		if err != nil {
			t.Fatalf("reader StartPoll demo://clock: %v", err)
		}
		echo, err := start(reader, &mcpdv1.PollToolCall{Name: "mcp__demo__echo", Arguments: mustStruct(t, map[string]any{"message": "x"})})
		if err != nil {
			t.Fatalf("reader StartPoll echo: %v", err)
		}
		resp, err := d.hub.ListPolls(reader, &mcpdv1.ListPollsRequest{})
		if err != nil {
			t.Fatalf("ListPolls: %v", err)
		}
		var ids []string
		for _, p := range resp.GetPolls() {
			ids = append(ids, p.GetId())
		}
		if want := []string{clock.GetId(), echo.GetId()}; !slices.Equal(ids, want) {
			t.Errorf("reader's ListPolls: got %v, want %v", ids, want)
		}

		// From the start of the buffer: the readme's baseline came first,
		// so a leak would show before the reader's own baselines.
		sctx, cancel := context.WithCancel(reader)
		defer cancel()
		sub := d.subscribePolls(sctx, t, &mcpdv1.SubscribeRequest{AfterSequence: new(uint64)})
		for seen := map[string]bool{}; !seen[clock.GetId()] || !seen[echo.GetId()]; {
			ev := recvPoll(ctx, t, sub)
			id := ev.GetPollResult().GetPollId()
			if id == readme.GetId() {
				t.Fatalf("reader got an event of the admin's readme poll: %v", ev)
			}
			seen[id] = true
		}
		for _, id := range []string{clock.GetId(), echo.GetId()} {
			if _, err := d.hub.StopPoll(reader, &mcpdv1.StopPollRequest{Id: id}); err != nil {
				t.Errorf("reader StopPoll %s: %v", id, err)
			}
		}
	})

	t.Run("search", func(t *testing.T) {
		resp, err := d.hub.SearchTools(reader, &mcpdv1.SearchToolsRequest{Query: "add two numbers weather"})
		if err != nil {
			t.Fatalf("SearchTools: %v", err)
		}
		var names []string
		for _, m := range resp.GetMatches() {
			names = append(names, m.GetTool().GetName())
		}
		if !slices.Equal(names, []string{"mcp__demo__weather"}) {
			t.Errorf("reader's SearchTools: got %v, want only mcp__demo__weather (the reader may not call add)", names)
		}
		_, err = d.hub.SearchTools(reader, &mcpdv1.SearchToolsRequest{Query: "echo", Servers: []string{"other"}})
		denied(t, err, "servers")
	})

	t.Run("unknown token", func(t *testing.T) {
		_, err := d.hub.ListServers(bearer(ctx, "not-a-caller"), &mcpdv1.ListServersRequest{})
		wantCode(t, err, codes.Unauthenticated)
		_, err = d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{})
		wantCode(t, err, codes.Unauthenticated)
	})
}

// TestCallersReload rewrites the callers file and sends SIGHUP: the new
// callers take effect, removed ones are refused (their open streams and
// their tool calls in flight end with UNAUTHENTICATED, the calls upstream
// too), and a broken file keeps the callers loaded before, with their
// streams.
func TestCallersReload(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	caller := func(name, token string) map[string]any {
		return map[string]any{"name": name, "token_sha256": sha256Hex(token), "permissions": map[string]any{
			"servers": []string{"*"}, "tools": []string{"*"}, "manage": true, "server_requests": []string{"roots"},
		}}
	}
	path := writeCallers(t, mustJSON(t, map[string]any{"callers": []any{caller("first", "first-token-1")}}))
	metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--callers", path, "--metrics-listen", metrics}})
	first := bearer(ctx, "first-token-1")
	if _, err := d.hub.ListServers(first, &mcpdv1.ListServersRequest{}); err != nil {
		t.Fatalf("first caller: %v", err)
	}
	// The first caller's tool call, which would run for hours.
	if _, err := d.hub.ConnectServer(first, &mcpdv1.ConnectServerRequest{Server: stdioConfig("held", mcpdBinary(t), []string{"demo-server"}, nil)}); err != nil {
		t.Fatal(err)
	}
	held := map[string]string{"server": "held"}
	inFlight := func() float64 {
		v, _ := scrapeMetrics(ctx, t, metrics).value("mcpd_calls_in_flight", held)
		return v
	}
	long, _ := structpb.NewStruct(map[string]any{"steps": 1000, "delay_ms": 60000})
	callDone := make(chan error, 1)
	go func() {
		_, err := d.hub.CallTool(first, &mcpdv1.CallToolRequest{Name: "mcp__held__slow", Arguments: long})
		callDone <- err
	}()
	poll(ctx, t, "the first caller's call reaches the server", func() (bool, error) { return inFlight() == 1, nil })
	// The first caller's streams: events, and an agent's registration.
	firstEvents, err := d.hub.Subscribe(first, &mcpdv1.SubscribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	firstAgent := registerAgent(first, t, d, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_ROOTS)
	// And a poll: it runs as the first caller, so it pauses when that
	// caller goes.
	firstPoll, err := d.hub.StartPoll(first, &mcpdv1.StartPollRequest{Server: "held", Interval: durationpb.New(time.Second),
		Target: &mcpdv1.StartPollRequest_Tool{Tool: &mcpdv1.PollToolCall{Name: "echo", Arguments: mustStruct(t, map[string]any{"message": "x"})}}})
	if err != nil {
		t.Fatal(err)
	}

	replaceFile(t, path, mustJSON(t, map[string]any{"callers": []any{caller("second", "second-token-2")}}))
	d.send(t, syscall.SIGHUP)
	poll(ctx, t, "the second caller gets in", func() (bool, error) {
		_, err := d.hub.ListServers(bearer(ctx, "second-token-2"), &mcpdv1.ListServersRequest{})
		return err == nil, err
	})
	poll(ctx, t, "the removed caller's poll pauses", func() (bool, error) {
		resp, err := d.hub.ListPolls(bearer(ctx, "second-token-2"), &mcpdv1.ListPollsRequest{})
		for _, p := range resp.GetPolls() {
			if p.GetId() == firstPoll.GetPoll().GetId() {
				return p.GetPaused() && strings.Contains(p.GetLastError(), "no longer in the callers file"), err
			}
		}
		return false, err
	})
	_, err = d.hub.ListServers(first, &mcpdv1.ListServersRequest{})
	wantCode(t, err, codes.Unauthenticated)
	select {
	case err = <-callDone:
		wantCode(t, err, codes.Unauthenticated)
	case <-ctx.Done():
		t.Fatal("the removed caller's tool call ran on")
	}
	poll(ctx, t, "the call upstream ends", func() (bool, error) { return inFlight() == 0, nil })
	for {
		if _, err = firstEvents.Recv(); err != nil {
			break
		}
	}
	wantCode(t, err, codes.Unauthenticated)
	for {
		if _, err = firstAgent.Recv(); err != nil {
			break
		}
	}
	wantCode(t, err, codes.Unauthenticated)
	for _, method := range []string{"Subscribe", "CallTool"} {
		if findAudit(auditLines(t, d), map[string]any{"caller": "first", "method": method, "code": "Unauthenticated"}) == nil {
			t.Errorf("no audit line of the ended %s in:\n%v", method, auditLines(t, d))
		}
	}

	// The second caller's stream outlives a broken reload and one that
	// keeps the caller.
	second := bearer(ctx, "second-token-2")
	secondEvents, err := d.hub.Subscribe(second, &mcpdv1.SubscribeRequest{Kinds: []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_SERVER_STATE}})
	if err != nil {
		t.Fatal(err)
	}
	callersFiles := map[string]string{"files": "callers"}
	loadedAt := func(s scrape) float64 {
		v, _ := s.value("mcpd_config_last_reload_success_timestamp_seconds", callersFiles)
		return v
	}
	// reloadRead waits until the metrics say the last read of the callers
	// file succeeded (1) or failed (0): a reload takes effect a moment
	// before they say so.
	reloadRead := func(want float64) scrape {
		var s scrape
		poll(ctx, t, fmt.Sprintf("mcpd_config_last_reload_successful{files=callers} %v", want), func() (bool, error) {
			s = scrapeMetrics(ctx, t, metrics)
			v, ok := s.value("mcpd_config_last_reload_successful", callersFiles)
			return ok && v == want, nil
		})
		return s
	}
	good := reloadRead(1)
	replaceFile(t, path, `{"callers": [{"name": "broken"`)
	d.send(t, syscall.SIGHUP)
	poll(ctx, t, "the reload error is logged", func() (bool, error) {
		return strings.Contains(d.log.String(), "keeping the previous callers"), nil
	})
	if _, err := d.hub.ListServers(second, &mcpdv1.ListServersRequest{}); err != nil {
		t.Errorf("second caller after a broken reload: %v", err)
	}
	broken := reloadRead(0)
	broken.want(t, "mcpd_config_last_reload_successful", map[string]string{"files": "config"}, 1)
	if loadedAt(broken) != loadedAt(good) {
		t.Errorf("the callers' last good read moved at a failed one: %v, then %v", loadedAt(good), loadedAt(broken))
	}
	replaceFile(t, path, mustJSON(t, map[string]any{"callers": []any{caller("second", "second-token-2"), caller("third", "third-token-3")}}))
	d.send(t, syscall.SIGHUP)
	poll(ctx, t, "the third caller gets in", func() (bool, error) {
		_, err := d.hub.ListServers(bearer(ctx, "third-token-3"), &mcpdv1.ListServersRequest{})
		return err == nil, err
	})
	mended := reloadRead(1)
	if loadedAt(mended) == loadedAt(broken) {
		t.Errorf("the callers' last good read did not move at a good reload: %v", loadedAt(mended))
	}
	if _, err := d.hub.ConnectServer(second, &mcpdv1.ConnectServerRequest{Server: stdioConfig("demo", mcpdBinary(t), []string{"demo-server"}, nil)}); err != nil {
		t.Fatal(err)
	}
	ev, err := secondEvents.Recv()
	if err != nil || ev.GetEvent().GetServer() != "demo" {
		t.Errorf("the second caller's stream after two reloads: got %v, %v, want an event of demo", ev, err)
	}

	// An agent serving tools stops when its caller loses manage, though
	// the caller stays.
	agent, _, err := serveTools(second, t, d, &mcpdv1.ToolServerDeclaration{Server: "served", Tools: agentTools()})
	if err != nil {
		t.Fatal(err)
	}
	unmanaged := caller("second", "second-token-2")
	unmanaged["permissions"].(map[string]any)["manage"] = false
	replaceFile(t, path, mustJSON(t, map[string]any{"callers": []any{unmanaged, caller("third", "third-token-3")}}))
	d.send(t, syscall.SIGHUP)
	wantCode(t, agent.ended(ctx, t), codes.PermissionDenied)
}

// auditLines returns mcpd's audit log lines (logger=audit), decoded.
func auditLines(t *testing.T, d *daemon) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(d.log.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["logger"] == "audit" {
			out = append(out, m)
		}
	}
	return out
}

// findAudit returns the first audit line with every field of want.
func findAudit(lines []map[string]any, want map[string]any) map[string]any {
	for _, l := range lines {
		match := true
		for k, v := range want {
			if l[k] != v {
				match = false
				break
			}
		}
		if match {
			return l
		}
	}
	return nil
}

// TestAudit checks the audit line of each audited action (tool call,
// resource read, prompt get, server change, denial, failed
// authentication), and that no token, env value, header value or (by
// default) argument reaches the log; with --audit-arguments the arguments
// appear with secret-looking keys redacted.
func TestAudit(t *testing.T) {
	t.Parallel()
	const (
		envSecret    = "env-secret-value-3b7f"
		headerSecret = "header-secret-value-c01d"
		argValue     = "plain-argument-value-8e2a"
		argSecret    = "argument-secret-value-f4c9"
		uriSecret    = "uri-secret-value-7d2e"
	)
	for _, withArgs := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "with arguments"}[withArgs], func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			mcpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
			args := []string{"--callers", permissionCallers(t), "--mcp-listen", mcpAddr}
			if withArgs {
				args = append(args, "--audit-arguments")
			}
			d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: args, env: []string{"E2E_OUTSIDER_TOKEN=" + outsiderToken}})
			admin := bearer(ctx, adminToken)
			reader := bearer(ctx, readerToken)

			if _, err := d.hub.ConnectServer(admin, &mcpdv1.ConnectServerRequest{Server: stdioConfig("demo", mcpdBinary(t), []string{"demo-server"}, map[string]string{"API_KEY": envSecret})}); err != nil {
				t.Fatal(err)
			}
			d.waitServer(admin, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
			// A remote server whose header carries a secret; it need not
			// come up.
			_, _ = d.hub.ConnectServer(admin, &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{
				Name:      "remote",
				Transport: &mcpdv1.ServerConfig_Http{Http: &mcpdv1.HttpConfig{Url: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer " + headerSecret}}},
			}})
			if _, err := d.hub.CallTool(admin, &mcpdv1.CallToolRequest{Name: "mcp__demo__echo", Arguments: mustStruct(t, map[string]any{"message": "hello"})}); err != nil {
				t.Fatal(err)
			}
			// echo takes no api_token: the server refuses the call, which
			// is audited with its arguments all the same.
			_, err := d.hub.CallTool(admin, &mcpdv1.CallToolRequest{Name: "mcp__demo__echo", Arguments: mustStruct(t, map[string]any{"message": argValue, "api_token": argSecret})})
			wantCode(t, err, codes.InvalidArgument)
			if _, err := d.hub.CallTool(admin, &mcpdv1.CallToolRequest{Name: "mcp__demo__fail"}); err != nil {
				t.Fatal(err)
			}
			if _, err := d.hub.ReadResource(admin, &mcpdv1.ReadResourceRequest{Server: "demo", Uri: "demo://clock"}); err != nil {
				t.Fatal(err)
			}
			// A URI may carry a credential in its query: the audit line
			// masks it, as a span does. (The demo server has no such
			// resource; the read is audited all the same.)
			_, _ = d.hub.ReadResource(admin, &mcpdv1.ReadResourceRequest{Server: "demo", Uri: "demo://readme?token=" + uriSecret})
			if _, err := d.hub.GetPrompt(admin, &mcpdv1.GetPromptRequest{Server: "demo", Name: "greet", Arguments: map[string]string{"name": argValue, "password": argSecret}}); err != nil {
				t.Fatal(err)
			}
			stream, err := d.hub.CallToolStream(admin, &mcpdv1.CallToolStreamRequest{Name: "mcp__demo__echo", Arguments: mustStruct(t, map[string]any{"message": "streamed"})})
			if err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := stream.Recv(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("CallToolStream: %v", err)
				}
			}
			if _, err := d.hub.SetLogLevel(admin, &mcpdv1.SetLogLevelRequest{Server: "demo", Level: mcpdv1.LogLevel_LOG_LEVEL_INFO}); err != nil {
				t.Fatal(err)
			}
			// The same acts through the MCP endpoint.
			host := connectMCP(ctx, t, "http://"+mcpAddr+"/mcp", mcpEras[0], adminToken, nil)
			if _, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__demo__echo", Arguments: map[string]any{"message": argValue, "api_token": argSecret}}); err == nil {
				t.Error("echo with an argument it does not take, over MCP: want an error")
			}
			if _, err := host.GetPrompt(ctx, &mcp.GetPromptParams{Name: "mcp__demo__greet", Arguments: map[string]string{"name": argValue, "password": argSecret}}); err != nil {
				t.Fatalf("prompts/get over MCP: %v", err)
			}
			_, _ = host.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mcpd://demo/demo://readme?token=" + uriSecret})
			_, _ = host.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mcpd://nosuch/redis:user:" + uriSecret + "@host"})
			if err := host.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
				t.Fatalf("logging/setLevel over MCP: %v", err)
			}
			_ = host.Close()
			if _, err := d.hub.SetRoots(admin, &mcpdv1.SetRootsRequest{Server: "demo", Roots: []*mcpdv1.Root{{Uri: "file:///tmp"}}}); err != nil {
				t.Fatal(err)
			}
			if _, err := d.hub.RestartServer(admin, &mcpdv1.RestartServerRequest{Name: "demo"}); err != nil {
				t.Fatal(err)
			}
			d.waitServer(admin, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
			if _, err := d.hub.SetServerEnabled(admin, &mcpdv1.SetServerEnabledRequest{Name: "demo", Enabled: false}); err != nil {
				t.Fatal(err)
			}
			_, err = d.hub.CallTool(reader, &mcpdv1.CallToolRequest{Name: "mcp__demo__add", Arguments: mustStruct(t, map[string]any{"a": 1, "b": 2})})
			wantCode(t, err, codes.PermissionDenied)
			_, err = d.hub.ListServers(bearer(ctx, "unknown-token-aa11"), &mcpdv1.ListServersRequest{})
			wantCode(t, err, codes.Unauthenticated)
			if _, err := d.hub.DisconnectServer(admin, &mcpdv1.DisconnectServerRequest{Name: "demo"}); err != nil {
				t.Fatal(err)
			}

			var lines []map[string]any
			poll(ctx, t, "the DisconnectServer audit line", func() (bool, error) {
				lines = auditLines(t, d)
				return findAudit(lines, map[string]any{"method": "DisconnectServer"}) != nil, nil
			})
			for _, want := range []map[string]any{
				{"caller": "admin", "method": "ConnectServer", "server": "demo", "code": "OK"},
				{"caller": "admin", "method": "CallTool", "server": "demo", "tool": "mcp__demo__echo", "code": "OK", "is_error": false},
				{"caller": "admin", "method": "CallTool", "tool": "mcp__demo__echo", "code": "InvalidArgument"},
				{"caller": "admin", "method": "CallTool", "tool": "mcp__demo__fail", "code": "OK", "is_error": true},
				{"caller": "admin", "method": "ReadResource", "server": "demo", "uri": "demo://clock", "code": "OK"},
				{"caller": "admin", "method": "ReadResource", "server": "demo", "uri": "demo://readme?token=xxxxx"},
				{"caller": "admin", "method": "mcp resources/read", "server": "demo", "uri": "demo://readme?token=xxxxx"},
				{"caller": "admin", "method": "mcp resources/read", "server": "nosuch", "uri": "redis:xxxxx@host"},
				{"caller": "admin", "method": "GetPrompt", "server": "demo", "prompt": "greet", "code": "OK"},
				{"caller": "admin", "method": "CallToolStream", "server": "demo", "tool": "mcp__demo__echo", "code": "OK", "is_error": false},
				{"caller": "admin", "method": "SetLogLevel", "server": "demo", "code": "OK"},
				{"caller": "admin", "method": "SetRoots", "server": "demo", "code": "OK"},
				{"caller": "admin", "method": "RestartServer", "server": "demo", "code": "OK"},
				{"caller": "admin", "method": "SetServerEnabled", "server": "demo", "code": "OK"},
				{"caller": "reader", "method": "CallTool", "tool": "mcp__demo__add", "code": "PermissionDenied", "denied_permission": "tools"},
				{"method": "ListServers", "code": "Unauthenticated"},
				{"caller": "admin", "method": "DisconnectServer", "server": "demo", "code": "OK"},
				{"caller": "admin", "method": "mcp tools/call", "server": "demo", "tool": "mcp__demo__echo", "code": "InvalidArgument"},
				{"caller": "admin", "method": "mcp prompts/get", "server": "demo", "prompt": "greet", "code": "OK"},
				{"caller": "admin", "method": "mcp logging/setLevel", "code": "OK"},
			} {
				line := findAudit(lines, want)
				if line == nil {
					t.Errorf("no audit line with %v in:\n%v", want, lines)
					continue
				}
				if _, ok := line["duration"]; !ok {
					t.Errorf("audit line %v has no duration", line)
				}
			}
			if findAudit(lines, map[string]any{"method": "ListServers", "caller": "admin"}) != nil {
				t.Errorf("a ListServers that succeeded was audited; only actions are")
			}

			log := d.log.String()
			for _, secret := range []string{adminToken, readerToken, "unknown-token-aa11", envSecret, headerSecret, argSecret, uriSecret} {
				if strings.Contains(log, secret) {
					t.Errorf("mcpd log contains secret %q", secret)
				}
			}
			if got := strings.Contains(log, argValue); got != withArgs {
				t.Errorf("argument value in the log: got %v, want %v", got, withArgs)
			}
			if withArgs {
				call := findAudit(lines, map[string]any{"method": "CallTool", "tool": "mcp__demo__echo", "code": "InvalidArgument"})
				want := map[string]any{"message": argValue, "api_token": "[REDACTED]"}
				if got, _ := call["arguments"].(map[string]any); !maps.Equal(got, want) {
					t.Errorf("audited arguments: got %v, want %v", call["arguments"], want)
				}
				prompt := findAudit(lines, map[string]any{"method": "GetPrompt"})
				want = map[string]any{"name": argValue, "password": "[REDACTED]"}
				if got, _ := prompt["arguments"].(map[string]any); !maps.Equal(got, want) {
					t.Errorf("audited prompt arguments: got %v, want %v", prompt["arguments"], want)
				}
				call = findAudit(lines, map[string]any{"method": "mcp tools/call", "code": "InvalidArgument"})
				want = map[string]any{"message": argValue, "api_token": "[REDACTED]"}
				if got, _ := call["arguments"].(map[string]any); !maps.Equal(got, want) {
					t.Errorf("audited arguments of a call over MCP: got %v, want %v", call["arguments"], want)
				}
				prompt = findAudit(lines, map[string]any{"method": "mcp prompts/get"})
				want = map[string]any{"name": argValue, "password": "[REDACTED]"}
				if got, _ := prompt["arguments"].(map[string]any); !maps.Equal(got, want) {
					t.Errorf("audited prompt arguments over MCP: got %v, want %v", prompt["arguments"], want)
				}
			}
		})
	}
}

// TestCallersAgentsAnswerTheirCalls: alice and bob each attach a sampling
// agent; a 2026-07-28 server's sampling request, which belongs to the call
// that made it, reaches the agent of the caller who called, not the newest
// agent (bob's).
func TestCallersAgentsAnswerTheirCalls(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	tokens := map[string]string{"alice": "alice-token-5c1e", "bob": "bob-token-92fd"}
	var callers []any
	for _, name := range []string{"alice", "bob"} {
		callers = append(callers, map[string]any{"name": name, "token_sha256": sha256Hex(tokens[name]), "permissions": map[string]any{
			"servers": []string{"*"}, "tools": []string{"*"}, "server_requests": []string{"sampling"},
		}})
	}
	callersFile := writeCallers(t, mustJSON(t, map[string]any{"callers": callers}))
	config := writeConfig(t, fmt.Sprintf(`{"mcpServers": {"pair": {"command": %q, "env": {%q: %q}}}}`,
		testBinary(t), fakeServerEnv, fakeAskPair))
	d := startDaemon(ctx, t, daemonOptions{config: config, args: []string{"--callers", callersFile}})
	d.waitServer(bearer(ctx, tokens["alice"]), t, "pair", mcpdv1.ServerState_SERVER_STATE_READY)
	for _, name := range []string{"alice", "bob"} { // bob's agent is the newest
		samplingAgent(bearer(ctx, tokens[name]), t, d, name)
	}
	for _, name := range []string{"alice", "bob"} {
		resp, err := d.call(bearer(ctx, tokens[name]), t, "mcp__pair__ask", map[string]any{"group": name, "count": 1, "tag": name}, 0)
		if err != nil {
			t.Fatalf("%s calls ask: %v", name, err)
		}
		if got, want := text(resp), name+" answered by "+name; got != want {
			t.Errorf("%s's call: got %q, want %q", name, got, want)
		}
	}
}

// samplingAgent attaches, with ctx's credentials, an agent that answers
// every sampling request with the text answer, until the test ends.
func samplingAgent(ctx context.Context, t *testing.T, d *daemon, answer string) {
	t.Helper()
	answerAgent(ctx, t, d, func(req *mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply {
		reply := &mcpdv1.SamplingResult{Role: mcpdv1.Role_ROLE_ASSISTANT, Model: "m",
			Content: []*mcpdv1.Content{{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: answer}}}}}
		return &mcpdv1.ServerRequestReply{Id: req.GetId(), Result: &mcpdv1.ServerRequestReply_Sampling{Sampling: reply}}
	}, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING)
}

// TestCallerListsAskOnlyVisibleServers: ListResources,
// ListResourceTemplates and ListPrompts over every server ask only the
// servers the caller may see. A server it may not see gets no request on
// its behalf: the caller's list neither waits on it nor makes it do
// anything (an OAuth server would start a consent for it).
func TestCallerListsAskOnlyVisibleServers(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startDaemon(ctx, t, daemonOptions{
		config: twoDemoServers(t),
		args:   []string{"--callers", permissionCallers(t), "--metrics-listen", metrics},
		env:    []string{"E2E_OUTSIDER_TOKEN=" + outsiderToken},
	})
	admin := bearer(ctx, adminToken)
	d.waitServer(admin, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	d.waitServer(admin, t, "other", mcpdv1.ServerState_SERVER_STATE_READY)
	methods := []string{"resources/list", "resources/templates/list", "prompts/list"}
	// asked counts the list requests mcpd made to server "other".
	asked := func() map[string]float64 {
		s := scrapeMetrics(ctx, t, metrics)
		out := map[string]float64{}
		for _, m := range methods {
			out[m], _ = s.value("mcp_client_operation_duration_seconds", map[string]string{"server": "other", "mcp_method_name": m})
		}
		return out
	}
	list := func(ctx context.Context, who string) {
		t.Helper()
		if _, err := d.hub.ListResources(ctx, &mcpdv1.ListResourcesRequest{}); err != nil {
			t.Fatalf("%s ListResources: %v", who, err)
		}
		if _, err := d.hub.ListResourceTemplates(ctx, &mcpdv1.ListResourceTemplatesRequest{}); err != nil {
			t.Fatalf("%s ListResourceTemplates: %v", who, err)
		}
		if _, err := d.hub.ListPrompts(ctx, &mcpdv1.ListPromptsRequest{}); err != nil {
			t.Fatalf("%s ListPrompts: %v", who, err)
		}
	}

	before := asked()
	list(bearer(ctx, readerToken), "reader") // sees "demo" only
	for m, n := range asked() {
		if n != before[m] {
			t.Errorf("the reader's lists sent %v %s to server \"other\", which it may not see; want none", n-before[m], m)
		}
	}
	// The admin sees both: its lists ask "other" (the metric counts).
	before = asked()
	list(admin, "admin")
	for m, n := range asked() {
		if n != before[m]+1 {
			t.Errorf("the admin's lists sent %v %s to server \"other\"; want 1", n-before[m], m)
		}
	}
}
