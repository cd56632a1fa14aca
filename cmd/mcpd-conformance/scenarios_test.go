package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// fakeHub is an MCPHub that records the driver's RPCs. Its first CallTool
// sends the server requests in ask to the attached agent and records the
// replies.
type fakeHub struct {
	mcpdv1.UnimplementedMCPHubServer

	state     mcpdv1.ServerState
	tools     []*mcpdv1.Tool
	resources []*mcpdv1.Resource
	prompts   []*mcpdv1.Prompt
	failTools map[string]bool // CallTool of these fails
	ask       []*mcpdv1.ServerRequest

	agents  chan mcpdv1.MCPHub_HandleServerRequestsServer // capacity 1
	replyCh chan *mcpdv1.ServerRequestReply

	mu      sync.Mutex
	calls   []string
	replies []string
	config  *mcpdv1.ServerConfig
}

func (h *fakeHub) record(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf(format, args...))
}

func (h *fakeHub) ConnectServer(_ context.Context, req *mcpdv1.ConnectServerRequest) (*mcpdv1.ConnectServerResponse, error) {
	h.mu.Lock()
	h.config = req.GetServer()
	h.mu.Unlock()
	h.record("ConnectServer %s", req.GetServer().GetName())
	return &mcpdv1.ConnectServerResponse{Server: &mcpdv1.Server{
		Name: req.GetServer().GetName(), State: h.state, LastError: "upstream said no",
	}}, nil
}

func (h *fakeHub) ListTools(_ context.Context, req *mcpdv1.ListToolsRequest) (*mcpdv1.ListToolsResponse, error) {
	h.record("ListTools %s", req.GetServer())
	// Two pages, to see that the driver follows next_page_token.
	if req.GetPageToken() == "" && len(h.tools) > 1 {
		return &mcpdv1.ListToolsResponse{Tools: h.tools[:1], NextPageToken: "p2"}, nil
	}
	if req.GetPageToken() == "p2" {
		return &mcpdv1.ListToolsResponse{Tools: h.tools[1:]}, nil
	}
	return &mcpdv1.ListToolsResponse{Tools: h.tools}, nil
}

func (h *fakeHub) CallTool(ctx context.Context, req *mcpdv1.CallToolRequest) (*mcpdv1.CallToolResponse, error) {
	args, err := protojson.Marshal(req.GetArguments())
	if err != nil {
		return nil, err
	}
	h.record("CallTool %s %s", req.GetName(), compactJSON(args))
	if len(h.ask) > 0 {
		if err := h.askAgent(ctx); err != nil {
			return nil, err
		}
	}
	if h.failTools[req.GetName()] {
		return nil, status.Error(codes.InvalidArgument, "refused")
	}
	return &mcpdv1.CallToolResponse{}, nil
}

// askAgent sends h.ask to the agent, once, and records the replies.
func (h *fakeHub) askAgent(ctx context.Context) error {
	h.mu.Lock()
	ask := h.ask
	h.ask = nil
	h.mu.Unlock()
	var stream mcpdv1.MCPHub_HandleServerRequestsServer
	select {
	case stream = <-h.agents:
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, req := range ask {
		if err := stream.Send(&mcpdv1.HandleServerRequestsResponse{
			Message: &mcpdv1.HandleServerRequestsResponse_Request{Request: req},
		}); err != nil {
			return err
		}
		var reply *mcpdv1.ServerRequestReply
		select {
		case reply = <-h.replyCh:
		case <-ctx.Done():
			return ctx.Err()
		}
		b, err := protojson.Marshal(reply)
		if err != nil {
			return err
		}
		h.mu.Lock()
		h.replies = append(h.replies, compactJSON(b))
		h.mu.Unlock()
	}
	return nil
}

func (h *fakeHub) HandleServerRequests(stream mcpdv1.MCPHub_HandleServerRequestsServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	reg := first.GetRegister()
	h.record("HandleServerRequests %v %v", reg.GetServers(), reg.GetKinds())
	if err := stream.Send(&mcpdv1.HandleServerRequestsResponse{
		Message: &mcpdv1.HandleServerRequestsResponse_Registered{Registered: reg},
	}); err != nil {
		return err
	}
	h.agents <- stream
	// Like mcpd, serve until the agent closes its side.
	for {
		msg, err := stream.Recv()
		if err != nil {
			return nil
		}
		h.replyCh <- msg.GetReply()
	}
}

func (h *fakeHub) ListResources(_ context.Context, req *mcpdv1.ListResourcesRequest) (*mcpdv1.ListResourcesResponse, error) {
	h.record("ListResources %s", req.GetServer())
	return &mcpdv1.ListResourcesResponse{Resources: h.resources}, nil
}

func (h *fakeHub) ReadResource(_ context.Context, req *mcpdv1.ReadResourceRequest) (*mcpdv1.ReadResourceResponse, error) {
	h.record("ReadResource %s %s", req.GetServer(), req.GetUri())
	return &mcpdv1.ReadResourceResponse{}, nil
}

func (h *fakeHub) ListPrompts(_ context.Context, req *mcpdv1.ListPromptsRequest) (*mcpdv1.ListPromptsResponse, error) {
	h.record("ListPrompts %s", req.GetServer())
	return &mcpdv1.ListPromptsResponse{Prompts: h.prompts}, nil
}

func (h *fakeHub) GetPrompt(_ context.Context, req *mcpdv1.GetPromptRequest) (*mcpdv1.GetPromptResponse, error) {
	h.record("GetPrompt %s %s", req.GetServer(), req.GetName())
	return &mcpdv1.GetPromptResponse{}, nil
}

// compactJSON re-encodes JSON with sorted keys and no spaces (protojson
// output is deliberately unstable).
func compactJSON(b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "invalid JSON: " + err.Error()
	}
	out, err := json.Marshal(v)
	if err != nil {
		return "unencodable: " + err.Error()
	}
	return string(out)
}

// serveHub serves h over bufconn and returns a client; both end with the
// test.
func serveHub(t *testing.T, h *fakeHub) mcpdv1.MCPHubClient {
	t.Helper()
	h.agents = make(chan mcpdv1.MCPHub_HandleServerRequestsServer, 1)
	h.replyCh = make(chan *mcpdv1.ServerRequestReply, 8)
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	mcpdv1.RegisterMCPHubServer(srv, h)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		<-served
	})
	return mcpdv1.NewMCPHubClient(conn)
}

func tool(name string, schema map[string]any) *mcpdv1.Tool {
	t := &mcpdv1.Tool{Name: "mcp__conformance__" + name, Server: serverName, ToolName: name}
	if schema != nil {
		s, err := structpb.NewStruct(schema)
		if err != nil {
			panic(err)
		}
		t.InputSchema = s
	}
	return t
}

func TestDrive(t *testing.T) {
	const register = "HandleServerRequests [conformance] [SERVER_REQUEST_KIND_SAMPLING SERVER_REQUEST_KIND_ELICITATION SERVER_REQUEST_KIND_AUTHORIZATION]"
	schema2020 := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"$defs":                map[string]any{"address": map[string]any{"$anchor": "addr", "type": "object"}},
		"additionalProperties": false,
		"type":                 "object",
	}
	formElicit := &mcpdv1.ServerRequest{Id: "e1", Server: serverName, Kind: &mcpdv1.ServerRequest_Elicitation{
		Elicitation: &mcpdv1.ElicitationRequest{Mode: "form", Message: "confirm?"},
	}}
	urlElicit := &mcpdv1.ServerRequest{Id: "e2", Server: serverName, Kind: &mcpdv1.ServerRequest_Elicitation{
		Elicitation: &mcpdv1.ElicitationRequest{Mode: "url", Url: "https://example.com/"},
	}}
	sampling := &mcpdv1.ServerRequest{Id: "s1", Server: serverName, Kind: &mcpdv1.ServerRequest_Sampling{
		Sampling: &mcpdv1.SamplingRequest{MaxTokens: 10},
	}}
	tests := []struct {
		scenario    string
		hub         *fakeHub
		context     map[string]any
		wantCalls   []string // after ConnectServer
		wantReplies []string
		wantErr     string // substring; "" = success
	}{{
		scenario:  "initialize",
		hub:       &fakeHub{tools: []*mcpdv1.Tool{tool("a", nil), tool("b", nil)}},
		wantCalls: []string{"ListTools conformance", "ListTools conformance"},
	}, {
		scenario: "tools_call",
		hub:      &fakeHub{tools: []*mcpdv1.Tool{tool("add_numbers", nil)}},
		wantCalls: []string{
			"ListTools conformance",
			`CallTool mcp__conformance__add_numbers {"a":5,"b":3}`,
		},
	}, {
		scenario: "elicitation-sep1034-client-defaults",
		hub: &fakeHub{
			tools: []*mcpdv1.Tool{tool("test_client_elicitation_defaults", nil)},
			ask:   []*mcpdv1.ServerRequest{formElicit, urlElicit, sampling},
		},
		wantCalls: []string{
			"ListTools conformance",
			"CallTool mcp__conformance__test_client_elicitation_defaults {}",
		},
		wantReplies: []string{
			`{"elicitation":{"action":"ELICITATION_ACTION_ACCEPT","content":{}},"id":"e1"}`,
			`{"elicitation":{"action":"ELICITATION_ACTION_ACCEPT"},"id":"e2"}`,
			`{"id":"s1","sampling":{"content":[{"text":{"text":"mcpd-conformance sampling reply"}}],"model":"mcpd-conformance","role":"ROLE_ASSISTANT","stopReason":"endTurn"}}`,
		},
	}, {
		scenario: "sep-2322-client-request-state",
		hub:      &fakeHub{ask: []*mcpdv1.ServerRequest{formElicit}},
		wantCalls: []string{
			"ListTools conformance",
			"CallTool mcp__conformance__test_mrtr_echo_state {}",
			"CallTool mcp__conformance__test_mrtr_unrelated {}",
			"CallTool mcp__conformance__test_mrtr_no_state {}",
			"CallTool mcp__conformance__test_mrtr_no_result_type {}",
		},
		wantReplies: []string{`{"elicitation":{"action":"ELICITATION_ACTION_ACCEPT","content":{"confirmed":true}},"id":"e1"}`},
	}, {
		scenario: "json-schema-2020-12-preservation",
		hub: &fakeHub{tools: []*mcpdv1.Tool{
			tool("json_schema_2020_12_tool", schema2020), tool("json_schema_echo", nil),
		}},
		wantCalls: []string{
			"ListTools conformance", "ListTools conformance",
			`CallTool mcp__conformance__json_schema_echo {"schema":{"$defs":{"address":{"$anchor":"addr","type":"object"}},"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"type":"object"}}`,
		},
	}, {
		scenario: "json-schema-2020-12-preservation",
		hub:      &fakeHub{tools: []*mcpdv1.Tool{tool("json_schema_echo", nil)}},
		wantCalls: []string{
			"ListTools conformance",
		},
		wantErr: "no tool json_schema_2020_12_tool",
	}, {
		scenario: "http-standard-headers",
		hub: &fakeHub{
			tools:     []*mcpdv1.Tool{tool("test_headers", nil)},
			resources: []*mcpdv1.Resource{{Server: serverName, Uri: "file:///path/to/file%20name.txt"}},
			prompts:   []*mcpdv1.Prompt{{Server: serverName, Name: "test_prompt"}},
		},
		wantCalls: []string{
			"ListTools conformance",
			"CallTool mcp__conformance__test_headers {}",
			"ListResources conformance",
			"ReadResource conformance file:///path/to/file%20name.txt",
			"ListPrompts conformance",
			"GetPrompt conformance test_prompt",
		},
	}, {
		scenario: "http-custom-headers",
		hub:      &fakeHub{},
		context: map[string]any{"toolCalls": []any{
			map[string]any{"name": "test_custom_headers", "arguments": map[string]any{"region": "us-west1", "crlf_val": "a\r\nb", "priority": 42.0}},
			map[string]any{"name": "test_custom_headers_null", "arguments": map[string]any{"verbose": nil}},
		}},
		wantCalls: []string{
			"ListTools conformance",
			`CallTool mcp__conformance__test_custom_headers {"crlf_val":"a\r\nb","priority":42,"region":"us-west1"}`,
			`CallTool mcp__conformance__test_custom_headers_null {"verbose":null}`,
		},
	}, {
		scenario: "http-custom-headers",
		hub:      &fakeHub{},
		wantErr:  "has no toolCalls",
	}, {
		scenario: "http-invalid-tool-headers",
		hub: &fakeHub{
			tools:     []*mcpdv1.Tool{tool("valid_tool", nil), tool("invalid_empty_header", nil)},
			failTools: map[string]bool{"mcp__conformance__invalid_empty_header": true},
		},
		wantCalls: []string{
			"ListTools conformance", "ListTools conformance",
			`CallTool mcp__conformance__valid_tool {"region":"us-west1"}`,
			`CallTool mcp__conformance__invalid_empty_header {"region":"us-west1"}`,
		},
	}, {
		scenario: "tools_call",
		hub: &fakeHub{
			tools:     []*mcpdv1.Tool{tool("add_numbers", nil)},
			failTools: map[string]bool{"mcp__conformance__add_numbers": true},
		},
		wantCalls: []string{
			"ListTools conformance",
			`CallTool mcp__conformance__add_numbers {"a":5,"b":3}`,
		},
		wantErr: "CallTool add_numbers: rpc error: code = InvalidArgument desc = refused",
	}, {
		scenario: "auth/scope-step-up",
		hub:      &fakeHub{},
		wantCalls: []string{
			"ListTools conformance",
			"CallTool mcp__conformance__test-tool {}",
		},
	}, {
		scenario: "tools_call",
		hub:      &fakeHub{state: mcpdv1.ServerState_SERVER_STATE_FAILED},
		wantErr:  "ConnectServer: server is SERVER_STATE_FAILED: upstream said no",
	}}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			if tt.hub.state == 0 {
				tt.hub.state = mcpdv1.ServerState_SERVER_STATE_READY
			}
			hub := serveHub(t, tt.hub)
			sc, ok := lookupScenario(tt.scenario)
			if !ok {
				t.Fatalf("lookupScenario(%q): not found", tt.scenario)
			}
			cfg := &config{url: "http://127.0.0.1:1/mcp", scenario: tt.scenario, context: tt.context, transport: "http"}
			err := drive(testContext(t), hub, cfg, sc, io.Discard)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("drive: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("drive: got error %v, want one containing %q", err, tt.wantErr)
			}
			want := append([]string{register, "ConnectServer conformance"}, tt.wantCalls...)
			tt.hub.mu.Lock()
			defer tt.hub.mu.Unlock()
			if diff := cmp.Diff(want, tt.hub.calls); diff != "" {
				t.Errorf("RPCs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantReplies, tt.hub.replies); diff != "" {
				t.Errorf("replies to server requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConnectConfig(t *testing.T) {
	tests := []struct {
		transport, version string
		want               string
	}{
		{"http", "2025-11-25", `{"http":{"url":"http://h/mcp"},"name":"conformance","protocolVersion":"2025-11-25"}`},
		{"remote", "", `{"name":"conformance","remote":{"url":"http://h/mcp"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.transport, func(t *testing.T) {
			h := &fakeHub{state: mcpdv1.ServerState_SERVER_STATE_READY}
			hub := serveHub(t, h)
			cfg := &config{url: "http://h/mcp", transport: tt.transport, protocolVersion: tt.version}
			if err := connect(testContext(t), hub, cfg); err != nil {
				t.Fatalf("connect: %v", err)
			}
			b, err := protojson.Marshal(h.config)
			if err != nil {
				t.Fatal(err)
			}
			if got := compactJSON(b); got != tt.want {
				t.Errorf("ServerConfig: got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestLookupScenario(t *testing.T) {
	// Every client scenario of both requirement sets (and the not-scored
	// json-schema one) has actions; auth scenarios share one.
	for _, name := range []string{
		"initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry",
		"request-metadata", "sep-2322-client-request-state", "http-standard-headers",
		"http-custom-headers", "http-invalid-tool-headers", "json-schema-ref-no-deref",
		"json-schema-2020-12-preservation", "auth/metadata-default", "auth/dpop",
	} {
		if _, ok := lookupScenario(name); !ok {
			t.Errorf("lookupScenario(%q): got not found, want actions", name)
		}
	}
	if _, ok := lookupScenario("no-such-scenario"); ok {
		t.Errorf("lookupScenario(%q): got actions, want not found", "no-such-scenario")
	}
}
