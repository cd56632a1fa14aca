package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
	"github.com/mcpd-project/mcpd/internal/toolsearch"
)

func wantCode(t *testing.T, err error, want codes.Code) *status.Status {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != want {
		t.Fatalf("got code %v (%v), want %v", st.Code(), err, want)
	}
	return st
}

// errorInfo is the status's ErrorInfo, or nil.
func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

func args(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestServerLifecycleBothEras(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := testContext(t)
			got := e.connect(t, "fx", newFixtureServer(t, era.versions, 0))
			if got.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
				t.Fatalf("state: got %v (%s), want READY", got.GetState(), got.GetLastError())
			}
			if got.GetProtocolVersion() != era.want {
				t.Errorf("protocol_version: got %q, want %q", got.GetProtocolVersion(), era.want)
			}
			if got.GetServerInfo().GetName() != "fixture" || got.GetServerInfo().GetVersion() != "1.2.3" {
				t.Errorf("server_info: got %v, want fixture 1.2.3", got.GetServerInfo())
			}
			if got.GetInstructions() != "fixture instructions" {
				t.Errorf("instructions: got %q", got.GetInstructions())
			}
			if got.GetToolCount() != 5 {
				t.Errorf("tool_count: got %d, want 5", got.GetToolCount())
			}
			if got.GetCapabilities().GetFields()["tools"] == nil {
				t.Errorf("capabilities: got %v, want a tools entry", got.GetCapabilities())
			}
			if got.GetTransport() != mcpdv1.Transport_TRANSPORT_HTTP {
				t.Errorf("transport: got %v, want HTTP", got.GetTransport())
			}

			gs, err := e.client.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "fx"})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, gs.GetServer(), protocmp.Transform()); diff != "" {
				t.Errorf("GetServer differs from ConnectServer (-connect +get):\n%s", diff)
			}

			rs, err := e.client.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "fx"})
			if err != nil {
				t.Fatal(err)
			}
			if rs.GetServer().GetRestarts() != 1 || rs.GetServer().GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
				t.Errorf("after restart: got restarts=%d state=%v, want 1 READY", rs.GetServer().GetRestarts(), rs.GetServer().GetState())
			}

			if _, err := e.client.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: "fx"}); err != nil {
				t.Fatal(err)
			}
			_, err = e.client.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "fx"})
			wantCode(t, err, codes.NotFound)
			_, err = e.client.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: "fx"})
			wantCode(t, err, codes.NotFound)
			_, err = e.client.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "fx"})
			wantCode(t, err, codes.NotFound)
		})
	}
}

func TestListToolsPaging(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := testContext(t)
			// Upstream pages hold 2 tools, so mcpd must follow cursors.
			e.connect(t, "a", newFixtureServer(t, era.versions, 7))
			e.connect(t, "b", newFixtureServer(t, era.versions, 0))

			var names []string
			token := ""
			pages := 0
			for {
				resp, err := e.client.ListTools(ctx, &mcpdv1.ListToolsRequest{PageSize: 3, PageToken: token})
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.GetTools()) > 3 {
					t.Fatalf("page %d: got %d tools, want at most 3", pages, len(resp.GetTools()))
				}
				for _, tool := range resp.GetTools() {
					names = append(names, tool.GetName())
				}
				pages++
				if token = resp.GetNextPageToken(); token == "" {
					break
				}
			}
			if len(names) != 17 {
				t.Fatalf("got %d tools %v, want 12 of a + 5 of b", len(names), names)
			}
			if !slices.IsSorted(names) {
				t.Errorf("tools not sorted by qualified name: %v", names)
			}
			if pages != 6 {
				t.Errorf("got %d pages, want 6", pages)
			}
			if !slices.Contains(names, "mcp__a__extra_06") || !slices.Contains(names, "mcp__b__echo") {
				t.Errorf("missing tools in %v", names)
			}

			one, err := e.client.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "b"})
			if err != nil {
				t.Fatal(err)
			}
			if len(one.GetTools()) != 5 || one.GetNextPageToken() != "" {
				t.Fatalf("server b: got %d tools, token %q; want 5, none", len(one.GetTools()), one.GetNextPageToken())
			}
			echo := one.GetTools()[0]
			if echo.GetName() != "mcp__b__echo" || echo.GetServer() != "b" || echo.GetToolName() != "echo" || echo.GetDescription() != "echoes" {
				t.Errorf("echo tool: got %v", echo)
			}
			if echo.GetInputSchema().GetFields()["type"].GetStringValue() != "object" {
				t.Errorf("echo input schema: got %v", echo.GetInputSchema())
			}

			_, err = e.client.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "nope"})
			wantCode(t, err, codes.NotFound)
			_, err = e.client.ListTools(ctx, &mcpdv1.ListToolsRequest{PageToken: "%%%"})
			wantCode(t, err, codes.InvalidArgument)
			_, err = e.client.ListTools(ctx, &mcpdv1.ListToolsRequest{PageSize: -1})
			wantCode(t, err, codes.InvalidArgument)
		})
	}
}

func TestCallToolBothEras(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.connect(t, "fx", newFixtureServer(t, era.versions, 0))
			ctx := testContext(t)

			res, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__fx__echo", Arguments: args(t, map[string]any{"message": "hi"})})
			if err != nil {
				t.Fatal(err)
			}
			if res.GetIsError() || len(res.GetContent()) != 1 || res.GetContent()[0].GetText().GetText() != "hi" {
				t.Errorf("echo: got %v, want text hi", res)
			}

			res, err = e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__fx__sum", Arguments: args(t, map[string]any{"a": 2, "b": 3.5})})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.GetStructuredContent().GetStructValue().GetFields()["sum"].GetNumberValue(); got != 5.5 {
				t.Errorf("sum structured_content: got %v, want sum 5.5", res.GetStructuredContent())
			}

			res, err = e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__fx__fail"})
			if err != nil {
				t.Fatalf("a failing tool is data, not an RPC error: %v", err)
			}
			if !res.GetIsError() || res.GetContent()[0].GetText().GetText() != "the tool failed on purpose" {
				t.Errorf("fail: got %v, want is_error with the message", res)
			}

			res, err = e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__fx__media"})
			if err != nil {
				t.Fatal(err)
			}
			size := int64(3)
			priority := 0.5
			want := []*mcpdv1.Content{
				{Kind: &mcpdv1.Content_Image{Image: &mcpdv1.MediaContent{Data: []byte{1, 2, 3}, MimeType: "image/png"}},
					Annotations: &mcpdv1.Annotations{Audience: []mcpdv1.Role{mcpdv1.Role_ROLE_USER}, Priority: &priority}},
				{Kind: &mcpdv1.Content_Audio{Audio: &mcpdv1.MediaContent{Data: []byte{4, 5}, MimeType: "audio/wav"}}},
				{Kind: &mcpdv1.Content_ResourceLink{ResourceLink: &mcpdv1.ResourceLink{Uri: "test://a", Name: "a", MimeType: "text/plain", Size: &size}}},
				{Kind: &mcpdv1.Content_Resource{Resource: &mcpdv1.ResourceContents{Uri: "test://b", MimeType: "application/octet-stream", Data: &mcpdv1.ResourceContents_Blob{Blob: []byte{9, 9}}}}},
				{Kind: &mcpdv1.Content_Resource{Resource: &mcpdv1.ResourceContents{Uri: "test://c", MimeType: "text/plain", Data: &mcpdv1.ResourceContents_Text{Text: "see"}}}},
			}
			if diff := cmp.Diff(want, res.GetContent(), protocmp.Transform()); diff != "" {
				t.Errorf("media content (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCallToolErrors(t *testing.T) {
	e := newEnv(t, nil)
	e.connect(t, "fx", newFixtureServer(t, nil, 0))
	ctx := testContext(t)
	tests := []struct {
		name string
		req  *mcpdv1.CallToolRequest
		want codes.Code
	}{
		{"empty name", &mcpdv1.CallToolRequest{}, codes.InvalidArgument},
		{"unqualified name", &mcpdv1.CallToolRequest{Name: "echo"}, codes.InvalidArgument},
		{"unknown server", &mcpdv1.CallToolRequest{Name: "mcp__nope__echo"}, codes.NotFound},
		{"unknown tool", &mcpdv1.CallToolRequest{Name: "mcp__fx__nope"}, codes.NotFound},
		{"arguments not matching the schema", &mcpdv1.CallToolRequest{Name: "mcp__fx__echo", Arguments: args(t, map[string]any{"message": 5})}, codes.InvalidArgument},
		{"negative timeout", &mcpdv1.CallToolRequest{Name: "mcp__fx__echo", Timeout: durationpb.New(-time.Second)}, codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.client.CallTool(ctx, tt.req)
			wantCode(t, err, tt.want)
		})
	}
	t.Run("server error detail", func(t *testing.T) {
		_, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__fx__echo", Arguments: args(t, map[string]any{"message": 5})})
		st := wantCode(t, err, codes.InvalidArgument)
		var info *errdetails.ErrorInfo
		for _, d := range st.Details() {
			if i, ok := d.(*errdetails.ErrorInfo); ok {
				info = i
			}
		}
		if info == nil || info.GetMetadata()["server"] != "fx" || info.GetMetadata()["jsonrpc_code"] != "-32602" {
			t.Errorf("ErrorInfo: got %v, want server fx and jsonrpc_code -32602", info)
		}
	})
}

func TestCallToolTimeoutAndCancel(t *testing.T) {
	e := newEnv(t, nil)
	e.connect(t, "fx", newFixtureServer(t, nil, 0))
	ctx := testContext(t)

	_, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__fx__wait", Timeout: durationpb.New(50 * time.Millisecond)})
	wantCode(t, err, codes.DeadlineExceeded)

	// The server keeps working after a timed-out call.
	if _, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__fx__echo", Arguments: args(t, map[string]any{"message": "still here"})}); err != nil {
		t.Fatalf("call after timeout: %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := e.client.CallTool(cctx, &mcpdv1.CallToolRequest{Name: "mcp__fx__wait"})
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the call reach the server; the outcome does not depend on it
	cancel()
	wantCode(t, <-errc, codes.Canceled)
}

func TestCancelReachesUpstream(t *testing.T) {
	e := newEnv(t, nil)
	started, cancelled := connectBlocking(t, e)
	ctx := testContext(t)
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := e.client.CallTool(cctx, &mcpdv1.CallToolRequest{Name: "mcp__c__block"})
		errc <- err
	}()
	await(ctx, t, started, "the tool never started")
	cancel()
	wantCode(t, <-errc, codes.Canceled)
	await(ctx, t, cancelled, "cancelling the RPC did not cancel the upstream request")
}

// connectBlocking connects server "c" whose tool "block" runs until its
// request is cancelled. The channels receive when the tool starts and when
// it sees the cancellation.
func connectBlocking(t *testing.T, e *env) (started, cancelled <-chan struct{}) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "cancel", Version: "1"}, nil)
	start, cancel := make(chan struct{}, 1), make(chan struct{}, 1)
	mcp.AddTool(srv, &mcp.Tool{Name: "block"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		start <- struct{}{}
		<-ctx.Done()
		cancel <- struct{}{}
		return nil, nil, ctx.Err()
	})
	e.connect(t, "c", srv)
	return start, cancel
}

// await fails the test with failure unless ch receives before ctx ends.
func await(ctx context.Context, t *testing.T, ch <-chan struct{}, failure string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatal(failure)
	}
}

func TestConnectServerValidation(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testContext(t)
	stdio := func(name string) *mcpdv1.ServerConfig {
		return &mcpdv1.ServerConfig{Name: name, Transport: &mcpdv1.ServerConfig_Stdio{Stdio: &mcpdv1.StdioConfig{Command: "true"}}}
	}
	tests := []struct {
		name string
		cfg  *mcpdv1.ServerConfig
	}{
		{"no config", nil},
		{"empty name", stdio("")},
		{"bad character", stdio("a.b")},
		{"double underscore", stdio("a__b")},
		{"trailing underscore", stdio("a_")},
		{"too long", stdio(string(make([]byte, 65)))},
		{"no transport", &mcpdv1.ServerConfig{Name: "x"}},
		{"no command", &mcpdv1.ServerConfig{Name: "x", Transport: &mcpdv1.ServerConfig_Stdio{Stdio: &mcpdv1.StdioConfig{}}}},
		{"bad url", &mcpdv1.ServerConfig{Name: "x", Transport: &mcpdv1.ServerConfig_Http{Http: &mcpdv1.HttpConfig{Url: "not a url"}}}},
		{"bad protocol version", func() *mcpdv1.ServerConfig { c := stdio("x"); c.ProtocolVersion = "1999-01-01"; return c }()},
		{"negative timeout", func() *mcpdv1.ServerConfig { c := stdio("x"); c.CallTimeout = durationpb.New(-time.Second); return c }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.client.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: tt.cfg})
			wantCode(t, err, codes.InvalidArgument)
		})
	}
	list, err := e.client.ListServers(ctx, &mcpdv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetServers()) != 0 {
		t.Errorf("bad requests changed the server list: %v", list.GetServers())
	}
}

func TestConnectServerReplace(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testContext(t)
	e.connect(t, "fx", newFixtureServer(t, nil, 0))
	cfg := &mcpdv1.ServerConfig{Name: "fx", Transport: &mcpdv1.ServerConfig_Http{Http: &mcpdv1.HttpConfig{Url: "http://in-memory/other"}}}
	e.upstream.add("http://in-memory/other", newFixtureServer(t, nil, 1))

	_, err := e.client.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: cfg})
	wantCode(t, err, codes.AlreadyExists)
	gs, err := e.client.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "fx"})
	if err != nil || gs.GetServer().GetToolCount() != 5 {
		t.Fatalf("the refused request changed the server: %v %v", gs, err)
	}

	resp, err := e.client.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: cfg, Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetServer().GetToolCount() != 6 {
		t.Errorf("replaced server: got %d tools, want 6", resp.GetServer().GetToolCount())
	}
}

func TestConnectFailureIsReported(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testContext(t)
	resp, err := e.client.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{
		Name:      "missing",
		Transport: &mcpdv1.ServerConfig_Stdio{Stdio: &mcpdv1.StdioConfig{Command: "/nonexistent/mcp-server", Env: map[string]string{"SECRET_TOKEN": "hunter2"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := resp.GetServer()
	if s.GetState() != mcpdv1.ServerState_SERVER_STATE_FAILED || s.GetLastError() == "" {
		t.Fatalf("got state %v error %q, want FAILED with a reason", s.GetState(), s.GetLastError())
	}
	if !slices.Equal(s.GetEnvNames(), []string{"SECRET_TOKEN"}) {
		t.Errorf("env_names: got %v", s.GetEnvNames())
	}
	if txt := fmt.Sprint(s); strings.Contains(txt, "hunter2") {
		t.Errorf("server status leaks an env value: %s", txt)
	}
	_, err = e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__missing__x"})
	wantCode(t, err, codes.Unavailable)
	_, err = e.client.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "missing"})
	wantCode(t, err, codes.Unavailable)
}

func TestToolFilters(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testContext(t)
	e.connect(t, "fx", newFixtureServer(t, nil, 3), func(c *mcpdv1.ServerConfig) {
		c.ToolsAllow = []string{"echo", "extra_*"}
		c.ToolsDeny = []string{"extra_01"}
	})
	resp, err := e.client.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "fx"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range resp.GetTools() {
		names = append(names, tool.GetToolName())
	}
	if want := []string{"echo", "extra_00", "extra_02"}; !slices.Equal(names, want) {
		t.Errorf("filtered tools: got %v, want %v", names, want)
	}
	_, err = e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__fx__extra_01"})
	wantCode(t, err, codes.PermissionDenied)
	_, err = e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__fx__sum"})
	wantCode(t, err, codes.PermissionDenied)
}

func TestCommandPolicy(t *testing.T) {
	e := newEnv(t, &envOptions{server: Options{Commands: &CommandPolicy{Allowed: []string{"/bin/true", "bin/server", "true"}}}})
	ctx := testContext(t)
	_, err := e.client.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{
		Name: "x", Transport: &mcpdv1.ServerConfig_Stdio{Stdio: &mcpdv1.StdioConfig{Command: "sh"}},
	}})
	wantCode(t, err, codes.PermissionDenied)
	// An allowed relative path with a cwd of the request's choosing would
	// start whatever lies there.
	_, err = e.client.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{
		Name: "y", Transport: &mcpdv1.ServerConfig_Stdio{Stdio: &mcpdv1.StdioConfig{Command: "bin/server", Cwd: t.TempDir()}},
	}})
	wantCode(t, err, codes.PermissionDenied)
	// So would an allowed bare name with a PATH of the request's choosing,
	// in which the server's command is looked up.
	_, err = e.client.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{
		Name: "z", Transport: &mcpdv1.ServerConfig_Stdio{Stdio: &mcpdv1.StdioConfig{Command: "true", Env: map[string]string{"PATH": t.TempDir()}}},
	}})
	wantCode(t, err, codes.PermissionDenied)
}

// TestCommandPolicyNone: --allow-command none allows no command, not even
// one named none; remote servers start nothing and pass, unless they name
// local files (an oauth file field, a tls block), as under any list.
func TestCommandPolicyNone(t *testing.T) {
	p := &CommandPolicy{None: true}
	for _, command := range []string{"none", "npx", "/bin/true"} {
		err := p.Check(config.Server{Name: "x", Kind: config.TransportStdio, Command: command})
		if !errors.Is(err, mcpclient.ErrPermissionDenied) || !strings.Contains(err.Error(), "--allow-command none") {
			t.Errorf("command %q: got %v, want a denial naming --allow-command none", command, err)
		}
	}
	if err := p.Check(config.Server{Name: "x", Kind: config.TransportHTTP, URL: "https://mcp.example.com/mcp"}); err != nil {
		t.Errorf("remote server: got %v, want it allowed", err)
	}
	// A remote server naming local files is not, whatever the list says.
	for _, p := range []*CommandPolicy{p, {Allowed: []string{"/bin/true"}}} {
		for what, s := range map[string]config.Server{
			"tls":   {Name: "x", Kind: config.TransportHTTP, URL: "https://mcp.example.com/mcp", TLS: &config.TLS{CA: "/etc/ca.pem"}},
			"oauth": {Name: "x", Kind: config.TransportSSE, URL: "https://mcp.example.com/sse", OAuth: &config.OAuth{AssertionFile: "/run/token"}},
		} {
			if err := p.Check(s); !errors.Is(err, mcpclient.ErrPermissionDenied) || !strings.Contains(err.Error(), "local file") {
				t.Errorf("%+v: %s naming a file: got %v, want a denial naming the local file", p, what, err)
			}
		}
	}
	if err := (*CommandPolicy)(nil).Check(config.Server{Name: "x", Kind: config.TransportHTTP, URL: "https://mcp.example.com/mcp", TLS: &config.TLS{CA: "/etc/ca.pem"}}); err != nil {
		t.Errorf("no --allow-command: tls got %v, want it allowed", err)
	}
}

func TestAuthAndHealth(t *testing.T) {
	const token = "s3cret-token"
	e := newEnv(t, &envOptions{server: Options{APIToken: token}})
	ctx := testContext(t)
	health := healthpb.NewHealthClient(e.conn)

	// Health and reflection need no token.
	hr, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health without token: got %v %v, want SERVING", hr, err)
	}
	refl, err := reflectionpb.NewServerReflectionClient(e.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := refl.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	if r, err := refl.Recv(); err != nil || len(r.GetListServicesResponse().GetService()) == 0 {
		t.Fatalf("reflection without token: got %v %v, want the services", r, err)
	}
	_ = refl.CloseSend()
	_, err = e.client.ListServers(ctx, &mcpdv1.ListServersRequest{})
	wantCode(t, err, codes.Unauthenticated)
	bad := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wrong")
	_, err = e.client.ListServers(bad, &mcpdv1.ListServersRequest{})
	wantCode(t, err, codes.Unauthenticated)

	good := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	e.upstream.add("http://in-memory/fx", newFixtureServer(t, nil, 0))
	_, err = e.client.ConnectServer(good, &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{
		Name: "fx", Transport: &mcpdv1.ServerConfig_Http{Http: &mcpdv1.HttpConfig{Url: "http://in-memory/fx"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	hr, err = health.Check(ctx, &healthpb.HealthCheckRequest{Service: HealthServicePrefix + "fx"})
	if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("per-server health: got %v %v, want SERVING", hr, err)
	}
	if _, err := e.client.DisconnectServer(good, &mcpdv1.DisconnectServerRequest{Name: "fx"}); err != nil {
		t.Fatal(err)
	}
	_, err = health.Check(ctx, &healthpb.HealthCheckRequest{Service: HealthServicePrefix + "fx"})
	wantCode(t, err, codes.NotFound) // as for a name mcpd never had
}

// TestUpstreamErrorData: a server's JSON-RPC error data reaches the
// caller in the ErrorInfo, when it is small: for -32042 it holds the URL
// the user must open.
func TestUpstreamErrorData(t *testing.T) {
	data := `{"elicitations":[{"mode":"url","elicitationId":"e1","url":"https://example.com/link","message":"Link your account"}]}`
	for _, tt := range []struct {
		data json.RawMessage
		want string
	}{
		{json.RawMessage(data), data},
		{nil, ""},
		{json.RawMessage(`"` + strings.Repeat("x", maxErrorDataBytes) + `"`), ""}, // too large for a header
		{json.RawMessage("\"\xff\""), ""},                                         // not UTF-8: left out, the rest kept
	} {
		st, _ := status.FromError(toStatus(&mcpclient.RPCError{Server: "s", Code: -32042, Message: "URL elicitation required", Data: tt.data}))
		info := st.Details()[0].(*errdetails.ErrorInfo)
		got, ok := info.GetMetadata()["jsonrpc_data"]
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("data %.40s: got jsonrpc_data %.60q (%v), want %.60q", tt.data, got, ok, tt.want)
		}
		if info.GetMetadata()["jsonrpc_code"] != "-32042" || st.Code() != codes.FailedPrecondition {
			t.Errorf("got %v %v", st.Code(), info.GetMetadata())
		}
	}
}

// TestServerHealth: a server's health is SERVING when ready, NOT_SERVING
// in every other state, STOPPED included (an agent's server whose stream
// ended stays listed), and NOT_FOUND, as a name mcpd never had, only once
// it was removed.
func TestServerHealth(t *testing.T) {
	h := NewHealth()
	check := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		got, err := h.srv.Check(context.Background(), &healthpb.HealthCheckRequest{Service: HealthServicePrefix + "app"})
		if err != nil || got.GetStatus() != want {
			t.Errorf("got %v %v, want %v", got.GetStatus(), err, want)
		}
	}
	h.ServerStateChanged("app", mcpclient.StateReady)
	check(healthpb.HealthCheckResponse_SERVING)
	h.ServerStateChanged("app", mcpclient.StateStopped)
	check(healthpb.HealthCheckResponse_NOT_SERVING)
	h.ServerRemoved("app")
	_, err := h.srv.Check(context.Background(), &healthpb.HealthCheckRequest{Service: HealthServicePrefix + "app"})
	wantCode(t, err, codes.NotFound)
}

func TestToStatus(t *testing.T) {
	tests := []struct {
		err    error
		want   codes.Code
		reason string // the ErrorInfo reason, "" for none
	}{
		{fmt.Errorf("x: %w", context.DeadlineExceeded), codes.DeadlineExceeded, ""},
		{fmt.Errorf("x: %w", context.Canceled), codes.Canceled, ""},
		{fmt.Errorf("x: %w", mcpclient.ErrNotFound), codes.NotFound, ""},
		{mcpclient.Deny("no"), codes.PermissionDenied, ""},
		// mcpd's own UNAVAILABLE has a reason, so that a client tells it
		// from a connection to mcpd that broke (none).
		{fmt.Errorf("x: %w", mcpclient.ErrUnavailable), codes.Unavailable, reasonServerUnavailable},
		{fmt.Errorf("x: %w", mcpclient.ErrShuttingDown), codes.Unavailable, reasonShuttingDown},
		{errShuttingDown, codes.Unavailable, reasonShuttingDown},
		{&mcpclient.RPCError{Server: "s", Code: -32602, Message: "bad"}, codes.InvalidArgument, reasonUpstreamError},
		{&mcpclient.RPCError{Server: "s", Code: -32601, Message: "no method"}, codes.Unimplemented, reasonUpstreamError},
		{&mcpclient.RPCError{Server: "s", Code: 42, Message: "custom"}, codes.Unknown, reasonUpstreamError},
		{&mcpclient.RPCError{Server: "s", Code: -1, Message: "sampling declined"}, codes.FailedPrecondition, reasonUpstreamError},
		{errors.New("some internal detail"), codes.Internal, ""},
		{&mcpclient.CallInterruptedError{Server: "s", Tool: "t", Err: fmt.Errorf("closed: %w", mcpclient.ErrUnavailable)}, codes.Unavailable, reasonCallMayHaveRun},
		{&mcpclient.CallInterruptedError{Server: "s", Tool: "t", Err: fmt.Errorf("waiting: %w", context.DeadlineExceeded)}, codes.DeadlineExceeded, ""},
		{fmt.Errorf("x: %w", mcpclient.ErrDisabled), codes.FailedPrecondition, reasonServerDisabled},
		// The queue timeout passes as calls finish: its reason tells it
		// from the limits that fail the same way again.
		{fmt.Errorf("x: %w", mcpclient.ErrQueueTimeout), codes.ResourceExhausted, reasonQueueTimeout},
		{fmt.Errorf("x: message exceeds 64 bytes: %w", mcpclient.ErrResourceExhausted), codes.ResourceExhausted, ""},
		{tooLarge(128, 64), codes.ResourceExhausted, ""},
		// The server answered something mcpd cannot read: the request
		// ran, and retrying would run it again.
		{fmt.Errorf("x: %w", mcpclient.ErrMalformedResult), codes.DataLoss, ""},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.err.Error()), func(t *testing.T) {
			st, _ := status.FromError(toStatus(tt.err))
			if st.Code() != tt.want {
				t.Errorf("got %v, want %v", st.Code(), tt.want)
			}
			if tt.want == codes.Internal && st.Message() != "internal error" {
				t.Errorf("internal error leaks its message: %q", st.Message())
			}
			info := errorInfo(st)
			switch {
			case tt.reason == "" && info != nil:
				t.Errorf("got ErrorInfo %v, want none", info)
			case tt.reason != "" && (info.GetReason() != tt.reason || info.GetDomain() != errorDomain):
				t.Errorf("got ErrorInfo %v, want reason %s, domain %s", info, tt.reason, errorDomain)
			}
			if tt.reason == reasonCallMayHaveRun && !strings.Contains(st.Message(), "the call may have run") {
				t.Errorf("message %q does not say the call may have run", st.Message())
			}
			// The logging interceptor logs the returned error: it keeps the cause.
			if got := toStatus(tt.err).Error(); tt.want == codes.Internal && !strings.Contains(got, tt.err.Error()) {
				t.Errorf("the logged error %q lost its cause", got)
			}
		})
	}
}

// TestMissingNames: a request without the server's name is a bad request,
// not a search for a server named "".
func TestMissingNames(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testContext(t)
	for name, call := range map[string]func() error{
		"GetServer":        func() error { _, err := e.client.GetServer(ctx, &mcpdv1.GetServerRequest{}); return err },
		"RestartServer":    func() error { _, err := e.client.RestartServer(ctx, &mcpdv1.RestartServerRequest{}); return err },
		"DisconnectServer": func() error { _, err := e.client.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{}); return err },
		"ForgetAuthorization": func() error {
			_, err := e.client.ForgetAuthorization(ctx, &mcpdv1.ForgetAuthorizationRequest{})
			return err
		},
		"SetLogLevel": func() error {
			_, err := e.client.SetLogLevel(ctx, &mcpdv1.SetLogLevelRequest{Level: mcpdv1.LogLevel_LOG_LEVEL_DEBUG})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) { wantCode(t, call(), codes.InvalidArgument) })
	}
}

// TestSetLogLevelRefusals: a missing level and one this mcpd does not
// know (a newer client's) are refused, each saying which it is.
func TestSetLogLevelRefusals(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testContext(t)
	for level, want := range map[mcpdv1.LogLevel]string{
		mcpdv1.LogLevel_LOG_LEVEL_UNSPECIFIED: "level is required",
		mcpdv1.LogLevel(99):                   "level 99 is not a LogLevel",
	} {
		_, err := e.client.SetLogLevel(ctx, &mcpdv1.SetLogLevelRequest{Server: "s", Level: level})
		if st := wantCode(t, err, codes.InvalidArgument); !strings.Contains(st.Message(), want) {
			t.Errorf("level %d: message %q, want %q", level, st.Message(), want)
		}
	}
}

// TestSearchToolsQueryTooLong: ranking costs the query's distinct terms
// times the tools searched, so a query of megabytes (a message may be
// 16 MiB) would hold the daemon's one Go thread for a minute. Such a
// query is refused before it is read, and one at the limit is searched.
func TestSearchToolsQueryTooLong(t *testing.T) {
	e := newEnv(t, nil)
	e.connect(t, "fx", newFixtureServer(t, nil, 0))
	ctx := testContext(t)
	long := strings.Repeat("echo ", toolsearch.MaxQueryBytes/5+1)
	_, err := e.client.SearchTools(ctx, &mcpdv1.SearchToolsRequest{Query: long})
	if st := wantCode(t, err, codes.InvalidArgument); !strings.Contains(st.Message(), strconv.Itoa(toolsearch.MaxQueryBytes)) {
		t.Errorf("message %q: want it to name the limit, %d bytes", st.Message(), toolsearch.MaxQueryBytes)
	}
	resp, err := e.client.SearchTools(ctx, &mcpdv1.SearchToolsRequest{Query: long[:toolsearch.MaxQueryBytes]})
	if err != nil || len(resp.GetMatches()) != 1 || resp.GetMatches()[0].GetTool().GetName() != "mcp__fx__echo" {
		t.Errorf("a query at the limit: got %v, %v; want mcp__fx__echo", resp.GetMatches(), err)
	}
}
