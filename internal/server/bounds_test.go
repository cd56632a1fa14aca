package server

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
)

// nested is the JSON object {"a": {"a": ... leaf}} of depth levels: the
// outermost object is the first.
func nested(depth int, leaf *structpb.Value) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{"a": leaf}}
	for range depth - 1 {
		s = &structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewStructValue(s)}}
	}
	return s
}

// probeServer is a server with one read-only tool, probe, that counts its
// calls.
func probeServer(versions []string, calls *atomic.Int64) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "probe", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	srv.AddTool(&mcp.Tool{Name: "probe", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	return srv
}

// argumentCalls are the requests that hand a caller's JSON to a server's
// tool: each makes its request with args as the arguments and meta as the
// _meta, and returns its error.
func argumentCalls(ctx context.Context, e *env, tool string) map[string]func(args, meta *structpb.Struct) error {
	return map[string]func(args, meta *structpb.Struct) error{
		"CallTool": func(args, meta *structpb.Struct) error {
			_, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: tool, Arguments: args, Meta: meta})
			return err
		},
		"CallToolStream": func(args, meta *structpb.Struct) error {
			stream, err := e.client.CallToolStream(ctx, &mcpdv1.CallToolStreamRequest{Name: tool, Arguments: args, Meta: meta})
			if err != nil {
				return err
			}
			for {
				if _, err := stream.Recv(); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
			}
		},
		"StartPoll": func(args, _ *structpb.Struct) error { // a poll has no _meta
			server, name, _ := strings.Cut(strings.TrimPrefix(tool, "mcp__"), "__")
			resp, err := e.client.StartPoll(ctx, &mcpdv1.StartPollRequest{Server: server, Interval: durationpb.New(time.Hour),
				Target: &mcpdv1.StartPollRequest_Tool{Tool: &mcpdv1.PollToolCall{Name: name, Arguments: args}}})
			if err == nil {
				_, err = e.client.StopPoll(ctx, &mcpdv1.StopPollRequest{Id: resp.GetPoll().GetId()})
			}
			return err
		},
	}
}

// TestDeepArgumentsRefused: arguments (or _meta) nested a thousand levels
// deep are refused before they reach the server, whose JSON decoder would
// fail on them and, for many servers, end the session: the server stays
// ready for everyone, and a call with arguments of an ordinary depth
// still goes through.
func TestDeepArgumentsRefused(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			var calls atomic.Int64
			e.connect(t, "d", probeServer(era.versions, &calls))
			ctx := testContext(t)
			deep := nested(1000, structpb.NewStringValue("x"))
			for name, call := range argumentCalls(ctx, e, "mcp__d__probe") {
				t.Run(name, func(t *testing.T) {
					st := wantCode(t, call(deep, nil), codes.InvalidArgument)
					if !strings.Contains(st.Message(), "arguments") || !strings.Contains(st.Message(), "levels") {
						t.Errorf("message %q: want it to name arguments and the depth bound", st.Message())
					}
					if name != "StartPoll" {
						st := wantCode(t, call(nil, deep), codes.InvalidArgument)
						if !strings.Contains(st.Message(), "meta") {
							t.Errorf("message %q: want it to name meta", st.Message())
						}
					}
				})
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("the tool ran %d times, want 0", n)
			}
			got, err := e.client.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "d"})
			if err != nil || got.GetServer().GetState() != mcpdv1.ServerState_SERVER_STATE_READY || got.GetServer().GetRestarts() != 0 {
				t.Fatalf("server after the refused calls: got %v, %v; want READY, never restarted", got.GetServer(), err)
			}
			for name, call := range argumentCalls(ctx, e, "mcp__d__probe") {
				if err := call(nested(20, structpb.NewNumberValue(1)), nil); err != nil {
					t.Errorf("%s with arguments 20 levels deep: %v", name, err)
				}
			}
		})
	}
}

// TestNonFiniteArgumentsRefused: a protobuf number may be NaN or
// infinite, a JSON number may not. Such an argument is refused, naming
// where it is and not what the arguments hold, instead of reaching the
// tool as the string "NaN".
func TestNonFiniteArgumentsRefused(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			var calls atomic.Int64
			e.connect(t, "n", probeServer(era.versions, &calls))
			ctx := testContext(t)
			for _, number := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				args := func(key string) *structpb.Struct {
					list, _ := structpb.NewList([]any{1, "two"})
					list.Values = append(list.Values, structpb.NewNumberValue(number))
					return &structpb.Struct{Fields: map[string]*structpb.Value{
						"token": structpb.NewStringValue("hunter2-SECRET"),
						"a":     structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{key: structpb.NewListValue(list)}}),
					}}
				}
				for name, call := range argumentCalls(ctx, e, "mcp__n__probe") {
					t.Run(name, func(t *testing.T) {
						for key, path := range map[string]string{"b": "a.b[2]", "not an identifier": `a["not an identifier"][2]`} {
							st := wantCode(t, call(args(key), nil), codes.InvalidArgument)
							if !strings.Contains(st.Message(), "arguments."+path) || strings.Contains(st.Message(), "hunter2") {
								t.Errorf("message %q: want it to name arguments.%s, and no argument's value", st.Message(), path)
							}
							if name == "StartPoll" {
								continue
							}
							st = wantCode(t, call(nil, args(key)), codes.InvalidArgument)
							if !strings.Contains(st.Message(), "meta."+path) {
								t.Errorf("message %q: want it to name meta.%s", st.Message(), path)
							}
						}
					})
				}
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("the tool ran %d times, want 0", n)
			}
		})
	}
}

// TestBadArgumentsRefusedBeforeApproval: arguments the handler would
// refuse are refused before an "ask" rule has an agent approve the call,
// and the audit line of the refusal (with arguments audited) holds none
// of them.
func TestBadArgumentsRefusedBeforeApproval(t *testing.T) {
	callers := newCallersFile(t, map[string]string{
		"alice":    `{"servers": ["*"], "tools": ["*"], "manage": true}`,
		"approver": `{"servers": ["*"], "server_requests": ["approval"]}`,
	})
	callers.authz.SetRules(access.NewRules([]access.Rule{{Effect: access.Ask, Pattern: access.NewGlob("mcp__p__*")}}, 0))
	var audit syncBuffer
	e := newEnv(t, &envOptions{
		server:   Options{Access: callers.authz, Audit: access.NewAuditor(zerolog.New(&audit), &access.AuditOptions{Arguments: true})},
		dialOpts: callers.defaultCaller("alice"),
	})
	ctx := testContext(t)
	var calls atomic.Int64
	e.connect(t, "p", probeServer(nil, &calls))
	seen := attachAgent(t, metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer approver-token"), e,
		[]mcpdv1.ServerRequestKind{mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_APPROVAL},
		func(req *mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply {
			return &mcpdv1.ServerRequestReply{Id: req.GetId(), Result: &mcpdv1.ServerRequestReply_Approval{Approval: &mcpdv1.ApprovalResult{Approved: true}}}
		})
	bad := &structpb.Struct{Fields: map[string]*structpb.Value{"n": structpb.NewNumberValue(math.Inf(1)), "deep": structpb.NewStructValue(nested(200, structpb.NewStringValue("leaf")))}}
	for name, call := range argumentCalls(ctx, e, "mcp__p__probe") {
		t.Run(name, func(t *testing.T) { wantCode(t, call(bad, nil), codes.InvalidArgument) })
	}
	if n := len(seen()); n != 0 {
		t.Errorf("the approver was asked %d times, want 0", n)
	}
	refused := 0
	for _, l := range audit.lines() {
		if l["method"] == "ConnectServer" {
			continue
		}
		refused++
		if _, args := l["arguments"]; l["code"] != "InvalidArgument" || args {
			t.Errorf("audit line of %v: code %v, with arguments %v; want InvalidArgument without", l["method"], l["code"], args)
		}
	}
	if refused != 3 {
		t.Errorf("audit lines of the refused calls: got %d, want 3", refused)
	}
	// The same call with good arguments is asked about, and runs.
	if err := argumentCalls(ctx, e, "mcp__p__probe")["CallTool"](structArgs(t, map[string]any{"n": 1}), nil); err != nil || len(seen()) != 1 || calls.Load() != 1 {
		t.Errorf("a call with good arguments: got %v, %d approvals, %d runs; want it approved once and run", err, len(seen()), calls.Load())
	}
}

// TestDeepArgumentsOverHTTP: the HTTP listener's calls run the same
// handlers, and its JSON is refused the same way.
func TestDeepArgumentsOverHTTP(t *testing.T) {
	e := newHTTPEnv(t)
	deep := strings.Repeat(`{"a":`, 1000) + "1" + strings.Repeat("}", 1000)
	code, out := e.post(t, "CallTool", `{"name": "mcp__x__y", "arguments": `+deep+`}`)
	if msg, _ := out["message"].(string); code != http.StatusBadRequest || out["code"] != "invalid_argument" || !strings.Contains(msg, "arguments") {
		t.Errorf("got %d %v, want 400 invalid_argument naming arguments", code, out)
	}
}

// TestJSONDepthBound: the bound counts objects and arrays, the outermost
// object included; a value of its own (structured content) starts outside
// any.
func TestJSONDepthBound(t *testing.T) {
	inList := func(depth int) *structpb.Struct { // {"a": ... [[... [true]]]}
		v := structpb.NewBoolValue(true)
		for range depth - 1 {
			v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
		}
		return &structpb.Struct{Fields: map[string]*structpb.Value{"a": v}}
	}
	for _, tc := range []struct {
		name string
		s    *structpb.Struct
		ok   bool
	}{
		{"objects at the bound", nested(maxJSONDepth, structpb.NewNullValue()), true},
		{"objects over it", nested(maxJSONDepth+1, structpb.NewNullValue()), false},
		{"arrays at the bound", inList(maxJSONDepth), true},
		{"arrays over it", inList(maxJSONDepth + 1), false},
		{"an empty object over it", nested(maxJSONDepth, structpb.NewStructValue(&structpb.Struct{})), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := structToMap("arguments", tc.s); (err == nil) != tc.ok {
				t.Errorf("got %v, want ok %v", err, tc.ok)
			}
			if _, err := valueToAny("structured_content", structpb.NewStructValue(tc.s)); (err == nil) != tc.ok {
				t.Errorf("as a value: got %v, want ok %v", err, tc.ok)
			}
		})
	}
	if got, err := structToMap("meta", nil); err != nil || got == nil || len(got) != 0 {
		t.Errorf("no struct: got %v, %v; want an empty object, as AsMap gives", got, err)
	}
}

// TestAgentJSONBounded: what agents send on to servers and callers (an
// elicitation's content, a sampling answer's _meta, a served tool's
// results and declarations) is held to the same bounds as arguments.
func TestAgentJSONBounded(t *testing.T) {
	deep := nested(1000, structpb.NewBoolValue(true))
	nan := &structpb.Struct{Fields: map[string]*structpb.Value{"x": structpb.NewNumberValue(math.NaN())}}
	elicitation := func(content *structpb.Struct) *mcpdv1.ServerRequestReply {
		return &mcpdv1.ServerRequestReply{Id: "r", Result: &mcpdv1.ServerRequestReply_Elicitation{Elicitation: &mcpdv1.ElicitationResult{
			Action: mcpdv1.ElicitationAction_ELICITATION_ACTION_ACCEPT, Content: content}}}
	}
	text := func(meta *structpb.Struct) *mcpdv1.Content {
		return &mcpdv1.Content{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: "t"}}, Meta: meta}
	}
	result := func(r *mcpdv1.CallToolResponse) *mcpdv1.ToolCallResult {
		return &mcpdv1.ToolCallResult{Id: "c", Outcome: &mcpdv1.ToolCallResult_Result{Result: r}}
	}
	declaration := func(d *mcpdv1.ToolDefinition) error {
		_, err := declarationFromProto(&mcpdv1.ToolServerDeclaration{Server: "agent", Tools: []*mcpdv1.ToolDefinition{d}})
		return err
	}
	for _, bad := range []struct {
		what string
		s    *structpb.Struct
		want string
	}{{"deep", deep, "levels"}, {"NaN", nan, ".x"}} {
		for name, convert := range map[string]func() error{
			"elicitation content": func() error { _, err := replyFromProto(elicitation(bad.s)); return err },
			"sampling _meta":      func() error { _, err := replyFromProto(samplingReply(text(bad.s))); return err },
			"tool result structured_content": func() error {
				_, err := agentReplyFromProto(result(&mcpdv1.CallToolResponse{StructuredContent: structpb.NewStructValue(bad.s)}))
				return err
			},
			"tool result _meta": func() error {
				_, err := agentReplyFromProto(result(&mcpdv1.CallToolResponse{Meta: bad.s}))
				return err
			},
			"tool result content _meta": func() error {
				_, err := agentReplyFromProto(result(&mcpdv1.CallToolResponse{Content: []*mcpdv1.Content{text(bad.s)}}))
				return err
			},
			"tool input_schema": func() error { return declaration(&mcpdv1.ToolDefinition{Name: "t", InputSchema: bad.s}) },
			"tool _meta":        func() error { return declaration(&mcpdv1.ToolDefinition{Name: "t", Meta: bad.s}) },
		} {
			t.Run(bad.what+" "+name, func(t *testing.T) {
				err := convert()
				if st := status.Convert(toStatus(err)); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), bad.want) {
					t.Errorf("got %v, want INVALID_ARGUMENT naming %q", err, bad.want)
				}
			})
		}
	}
}
