package server

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/events"
)

// TestDescribe checks the table from requests to actions: what each RPC
// needs, and that a request the table does not know needs manage.
func TestDescribe(t *testing.T) {
	args, _ := structpb.NewStruct(map[string]any{"q": "x"})
	for _, tc := range []struct {
		name    string
		msg     any
		want    []access.Action
		audited bool
	}{
		{"list servers", &mcpdv1.ListServersRequest{}, nil, false},
		{"list tools of all servers", &mcpdv1.ListToolsRequest{}, nil, false},
		{"list tools of one server", &mcpdv1.ListToolsRequest{Server: "gh"}, []access.Action{{Verb: access.ViewServer, Server: "gh"}}, false},
		{"get server", &mcpdv1.GetServerRequest{Name: "gh"}, []access.Action{{Verb: access.ViewServer, Server: "gh"}}, false},
		{"call tool", &mcpdv1.CallToolRequest{Name: "mcp__gh__get_issue", Arguments: args},
			[]access.Action{{Verb: access.CallTool, Server: "gh", Tool: "mcp__gh__get_issue"}}, true},
		{"call tool stream", &mcpdv1.CallToolStreamRequest{Name: "mcp__gh__get_issue"},
			[]access.Action{{Verb: access.CallTool, Server: "gh", Tool: "mcp__gh__get_issue"}}, true},
		{"read resource", &mcpdv1.ReadResourceRequest{Server: "fs", Uri: "file:///a"},
			[]access.Action{{Verb: access.ReadResource, Server: "fs", URI: "file:///a"}}, true},
		{"get prompt", &mcpdv1.GetPromptRequest{Server: "p", Name: "greet"},
			[]access.Action{{Verb: access.GetPrompt, Server: "p", Prompt: "greet"}}, true},
		{"complete prompt", &mcpdv1.CompleteRequest{Server: "p", Ref: &mcpdv1.CompleteRequest_Prompt{Prompt: "greet"}},
			[]access.Action{{Verb: access.GetPrompt, Server: "p", Prompt: "greet"}}, false},
		{"subscribe", &mcpdv1.SubscribeRequest{Servers: []string{"a"}, Resources: []*mcpdv1.ResourceRef{{Server: "b", Uri: "u"}}},
			[]access.Action{{Verb: access.ViewServer, Server: "a"}, {Verb: access.ReadResource, Server: "b", URI: "u"}}, false},
		{"register for every server", &mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Register{
			Register: &mcpdv1.ServerRequestRegistration{Kinds: []mcpdv1.ServerRequestKind{mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING}},
		}}, []access.Action{{Verb: access.AnswerRequests, Server: access.AllServers, RequestKind: "sampling"}}, false},
		{"register for every kind", &mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Register{
			Register: &mcpdv1.ServerRequestRegistration{Servers: []string{"s"}},
		}}, []access.Action{
			{Verb: access.AnswerRequests, Server: "s", RequestKind: "sampling"},
			{Verb: access.AnswerRequests, Server: "s", RequestKind: "elicitation"},
			{Verb: access.AnswerRequests, Server: "s", RequestKind: "roots"},
		}, false},
		{"reply", &mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{}}, nil, false},
		{"serve tools", &mcpdv1.ServeToolsRequest{Message: &mcpdv1.ServeToolsRequest_Declare{Declare: &mcpdv1.ToolServerDeclaration{Server: "app"}}},
			[]access.Action{{Verb: access.ManageServers, Server: "app"}}, true},
		{"a tool result", &mcpdv1.ServeToolsRequest{Message: &mcpdv1.ServeToolsRequest_Result{}}, nil, false},
		{"connect", &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{Name: "n"}}, []access.Action{{Verb: access.ManageServers, Server: "n"}}, true},
		{"disconnect", &mcpdv1.DisconnectServerRequest{Name: "n"}, []access.Action{{Verb: access.ManageServers, Server: "n"}}, true},
		{"restart", &mcpdv1.RestartServerRequest{Name: "n"}, []access.Action{{Verb: access.ManageServers, Server: "n"}}, true},
		{"enable", &mcpdv1.SetServerEnabledRequest{Name: "n", Enabled: true}, []access.Action{{Verb: access.ManageServers, Server: "n"}}, true},
		{"set log level", &mcpdv1.SetLogLevelRequest{Server: "n"}, []access.Action{{Verb: access.ManageServers, Server: "n"}}, true},
		{"set roots everywhere", &mcpdv1.SetRootsRequest{}, []access.Action{{Verb: access.ManageServers, Server: access.AllServers}}, true},
		{"a request the table does not know", &mcpdv1.Server{}, []access.Action{{Verb: access.ManageServers}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := describe("M", tc.msg, false)
			if diff := cmp.Diff(tc.want, got.actions); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if got.audited != tc.audited {
				t.Errorf("audited: got %v, want %v", got.audited, tc.audited)
			}
			if got.record.Arguments != nil {
				t.Errorf("arguments recorded without being asked: %v", got.record.Arguments)
			}
		})
	}
	if got := describe("CallTool", &mcpdv1.CallToolRequest{Name: "mcp__a__b", Arguments: args}, true); got.record.Arguments["q"] != "x" {
		t.Errorf("arguments when asked: got %v, want q=x", got.record.Arguments)
	}
}

// TestServerRequestsFollowReload attaches an agent whose caller may answer
// sampling and elicitation, then reloads a callers file that withdraws
// that: the next requests are not forwarded to the agent, and the server
// gets an error at once instead of waiting for the deadline.
func TestServerRequestsFollowReload(t *testing.T) {
	callers := newCallersFile(t, map[string]string{"agent": `{"servers": ["*"], "tools": ["*"], "manage": true, "server_requests": ["sampling", "elicitation", "roots"]}`})
	e := newEnv(t, &envOptions{server: Options{Access: callers.authz}, requestTimeout: time.Minute, dialOpts: callers.defaultCaller("agent")})
	ctx := testContext(t)
	e.connect(t, "s", newSurfaceServer(t, eras[0].versions).srv)
	actx, cancelAgent := context.WithCancel(ctx)
	defer cancelAgent()
	seen := attachAgent(t, actx, e, nil, func(r *mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply { return nil })

	callers.rewrite(t, map[string]string{"agent": `{"servers": ["*"], "tools": ["*"], "manage": true, "server_requests": []}`})
	// Without the check the agent, which never answers, would hold the
	// call until the one-minute request timeout; the test's own deadline
	// is shorter.
	if _, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__s__ask"}); err != nil {
		t.Logf("CallTool: %v", err) // how the tool reports the refusal is its own business
	}
	if got := seen(); len(got) != 0 {
		t.Errorf("the agent got %d requests after its permission was withdrawn, want none", len(got))
	}
}

// TestServerRequestsGoToTheCallersAgent: alice and bob each attach an
// agent; a 2026-07-28 server's requests, which belong to the call that
// made them, reach the agent of the caller who called (not the newest
// agent), and a caller without an agent gets the newest one's answer.
func TestServerRequestsGoToTheCallersAgent(t *testing.T) {
	perms := map[string]string{}
	for _, name := range []string{"alice", "bob", "carol"} {
		// alice connects the server.
		perms[name] = fmt.Sprintf(`{"servers": ["*"], "tools": ["*"], "manage": %t, "server_requests": ["sampling", "elicitation", "roots"]}`, name == "alice")
	}
	callers := newCallersFile(t, perms)
	e := newEnv(t, &envOptions{server: Options{Access: callers.authz}, requestTimeout: time.Minute, dialOpts: callers.defaultCaller("alice")})
	ctx := testContext(t)
	as := func(name string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+name+"-token")
	}
	e.connect(t, "s", newSurfaceServer(t, eras[0].versions).srv)
	// Each agent answers with its caller's name, alice's first, bob's
	// newest.
	for _, name := range []string{"alice", "bob"} {
		attachAgent(t, as(name), e, nil, func(r *mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply {
			switch {
			case r.GetElicitation() != nil:
				content, _ := structpb.NewStruct(map[string]any{"name": name})
				return &mcpdv1.ServerRequestReply{Id: r.GetId(), Result: &mcpdv1.ServerRequestReply_Elicitation{
					Elicitation: &mcpdv1.ElicitationResult{Action: mcpdv1.ElicitationAction_ELICITATION_ACTION_ACCEPT, Content: content}}}
			case r.GetSampling() != nil:
				return &mcpdv1.ServerRequestReply{Id: r.GetId(), Result: &mcpdv1.ServerRequestReply_Sampling{Sampling: &mcpdv1.SamplingResult{
					Role: mcpdv1.Role_ROLE_ASSISTANT, Model: "m", Content: []*mcpdv1.Content{{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: name}}}}}}}
			}
			return nil
		})
	}
	for caller, want := range map[string]string{"alice": "alice", "bob": "bob", "carol": "bob"} {
		res, err := e.client.CallTool(as(caller), &mcpdv1.CallToolRequest{Name: "mcp__s__ask"})
		if err != nil {
			t.Fatalf("%s calls ask: %v", caller, err)
		}
		if got, w := res.GetContent()[0].GetText().GetText(), "elicit:accept:"+want+" sample:"+want; got != w {
			t.Errorf("%s's call: the tool saw %q, want %q", caller, got, w)
		}
	}
}

// TestApprovalWaitEndsWithItsCaller holds alice's call with an "ask" rule
// before an agent that never answers, then reloads a callers file without
// alice: the call ends with UNAUTHENTICATED at once, not when the wait
// for the agent times out, and is audited so.
func TestApprovalWaitEndsWithItsCaller(t *testing.T) {
	alice := `{"servers": ["*"], "tools": ["*"], "manage": true}`
	approver := `{"servers": ["*"], "server_requests": ["approval"]}`
	callers := newCallersFile(t, map[string]string{"alice": alice, "approver": approver})
	callers.authz.SetRules(access.NewRules([]access.Rule{{Effect: access.Ask, Pattern: access.NewGlob("mcp__s__*")}}, 0))
	// Written before the call's answer goes out, read after it came.
	var audit bytes.Buffer
	e := newEnv(t, &envOptions{
		server:         Options{Access: callers.authz, Audit: access.NewAuditor(zerolog.New(&audit), nil)},
		requestTimeout: time.Hour, dialOpts: callers.defaultCaller("alice"),
	})
	ctx := testContext(t)
	e.connect(t, "s", newSurfaceServer(t, eras[0].versions).srv)
	seen := attachAgent(t, metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer approver-token"), e,
		[]mcpdv1.ServerRequestKind{mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_APPROVAL},
		func(*mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply { return nil })
	done := make(chan error, 1)
	go func() {
		_, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__s__ask"})
		done <- err
	}()
	waitFor(t, func() bool { return len(seen()) == 1 }) // the approval request reaches the agent

	callers.rewrite(t, map[string]string{"approver": approver})
	if err := <-done; status.Code(err) != codes.Unauthenticated {
		t.Fatalf("alice's call after she was removed: got %v, want UNAUTHENTICATED", err)
	}
	if want := `"caller":"alice","method":"CallTool","server":"s","tool":"mcp__s__ask","code":"Unauthenticated"`; !strings.Contains(audit.String(), want) {
		t.Errorf("audit log: want a line with %s in:\n%s", want, audit.String())
	}
}

// TestStopPollOfAPollTheCallerMayNotSee: a caller that may not see a poll
// (ListPolls hides it) is told by StopPoll that it does not exist, as for
// an id no poll has, not which tool or resource the poll reads; the poll
// runs on.
func TestStopPollOfAPollTheCallerMayNotSee(t *testing.T) {
	callers := newCallersFile(t, map[string]string{
		"admin":  `{"servers": ["*"], "tools": ["*"], "resources": [{"server": "*", "uri": "*"}], "manage": true}`,
		"nobody": `{}`,
		"viewer": `{"servers": ["*"]}`,
	})
	e := newEnv(t, &envOptions{server: Options{Access: callers.authz}, dialOpts: callers.defaultCaller("admin")})
	ctx := testContext(t)
	e.connect(t, "a", newFixtureServer(t, eras[0].versions, 0))
	started, err := e.client.StartPoll(ctx, &mcpdv1.StartPollRequest{Server: "a", Interval: durationpb.New(time.Hour),
		Target: &mcpdv1.StartPollRequest_Tool{Tool: &mcpdv1.PollToolCall{Name: "echo", Arguments: structArgs(t, map[string]any{"message": "private"})}}})
	if err != nil {
		t.Fatal(err)
	}
	id := started.GetPoll().GetId()
	as := func(name string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+name+"-token")
	}
	_, unknown := e.client.StopPoll(ctx, &mcpdv1.StopPollRequest{Id: "poll-404"})
	for _, caller := range []string{"nobody", "viewer"} {
		_, err := e.client.StopPoll(as(caller), &mcpdv1.StopPollRequest{Id: id})
		if status.Code(err) != codes.NotFound || status.Convert(err).Message() != strings.ReplaceAll(status.Convert(unknown).Message(), "poll-404", id) {
			t.Errorf("%s stops %s: got %v, want NOT_FOUND as for an unknown poll (%v)", caller, id, err, unknown)
		}
	}
	if list, err := e.client.ListPolls(ctx, &mcpdv1.ListPollsRequest{}); err != nil || len(list.GetPolls()) != 1 {
		t.Fatalf("the admin's polls after the refused stops: got %v, %v; want the one poll", list, err)
	}
	if _, err := e.client.StopPoll(ctx, &mcpdv1.StopPollRequest{Id: id}); err != nil {
		t.Errorf("the admin stops its poll: %v", err)
	}
}

// TestPollUnderALaterAskRule: an ask rule added after a poll started holds
// the poll up, as it would hold up a direct call; a poll an agent approved
// under the rule when it started runs on.
func TestPollUnderALaterAskRule(t *testing.T) {
	callers := newCallersFile(t, map[string]string{
		"admin":    `{"servers": ["*"], "tools": ["*"], "manage": true}`,
		"approver": `{"servers": ["*"], "server_requests": ["approval"]}`,
	})
	e := newEnv(t, &envOptions{server: Options{Access: callers.authz}, dialOpts: callers.defaultCaller("admin")})
	ctx := testContext(t)
	e.connect(t, "a", newFixtureServer(t, eras[0].versions, 0))
	startPoll := func(tool string) string {
		t.Helper()
		resp, err := e.client.StartPoll(ctx, &mcpdv1.StartPollRequest{Server: "a", Interval: durationpb.New(time.Second),
			Target: &mcpdv1.StartPollRequest_Tool{Tool: &mcpdv1.PollToolCall{Name: tool, Arguments: structArgs(t, map[string]any{"message": "x", "a": 1, "b": 2})}}})
		if err != nil {
			t.Fatalf("StartPoll %s: %v", tool, err)
		}
		return resp.GetPoll().GetId()
	}
	pollNamed := func(id string) *mcpdv1.Poll {
		t.Helper()
		list, err := e.client.ListPolls(ctx, &mcpdv1.ListPollsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.GetPolls() {
			if p.GetId() == id {
				return p
			}
		}
		t.Fatalf("poll %s not listed", id)
		return nil
	}
	unasked := startPoll("echo")
	waitFor(t, func() bool { return pollNamed(unasked).GetPolls() >= 1 })

	attachAgent(t, metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer approver-token"), e,
		[]mcpdv1.ServerRequestKind{mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_APPROVAL},
		func(req *mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply {
			return &mcpdv1.ServerRequestReply{Id: req.GetId(), Result: &mcpdv1.ServerRequestReply_Approval{Approval: &mcpdv1.ApprovalResult{Approved: true}}}
		})
	callers.authz.SetRules(access.NewRules([]access.Rule{{Effect: access.Ask, Pattern: access.NewGlob("mcp__a__*")}}, access.Allow))
	approved := startPoll("sum")

	waitFor(t, func() bool {
		p := pollNamed(unasked)
		return p.GetPaused() && strings.Contains(p.GetLastError(), "not approved")
	})
	held := pollNamed(unasked).GetPolls()
	waitFor(t, func() bool { return pollNamed(approved).GetPolls() >= 2 })
	if p := pollNamed(approved); p.GetPaused() || p.GetLastError() != "" {
		t.Errorf("the poll approved under the rule: paused %v, last error %q; want it running", p.GetPaused(), p.GetLastError())
	}
	if p := pollNamed(unasked); p.GetPolls() != held || !p.GetPaused() {
		t.Errorf("the poll started before the rule: %d requests, paused %v; want it held at %d", p.GetPolls(), p.GetPaused(), held)
	}
}

// TestBareToolNameAmongListedTools: a bare tool name resolves among the
// tools the caller's ListTools shows. A tool it may not call, or that a
// deny rule hides, is no candidate, and no answer names it.
func TestBareToolNameAmongListedTools(t *testing.T) {
	callers := newCallersFile(t, map[string]string{
		"admin": `{"servers": ["*"], "tools": ["*"], "manage": true}`,
		"bob":   `{"servers": ["*"], "tools": ["mcp__b__*"]}`,
	})
	e := newEnv(t, &envOptions{server: Options{Access: callers.authz}, dialOpts: callers.defaultCaller("admin")})
	ctx := testContext(t)
	e.connect(t, "a", newFixtureServer(t, eras[0].versions, 0))
	e.connect(t, "b", newFixtureServer(t, eras[0].versions, 0))
	callers.authz.SetRules(access.NewRules([]access.Rule{{Effect: access.Deny, Pattern: access.NewGlob("mcp__b__sum")}}, access.Allow))
	bob := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer bob-token")

	res, err := e.client.CallTool(bob, &mcpdv1.CallToolRequest{Name: "echo", Arguments: structArgs(t, map[string]any{"message": "hi"})})
	if err != nil || res.GetContent()[0].GetText().GetText() != "hi" {
		t.Errorf(`bob calls "echo", which only b gives him: got %v, %v; want the echo of mcp__b__echo`, res, err)
	}
	for _, name := range []string{"sum", "nosuch"} {
		_, err := e.client.CallTool(bob, &mcpdv1.CallToolRequest{Name: name, Arguments: structArgs(t, map[string]any{"a": 1, "b": 2})})
		if status.Code(err) != codes.NotFound || strings.Contains(err.Error(), "mcp__a__") {
			t.Errorf("bob calls %q: got %v; want NOT_FOUND naming no tool", name, err)
		}
	}
	// The admin may call both echoes: the bare name is ambiguous for it.
	_, err = e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "echo", Arguments: structArgs(t, map[string]any{"message": "hi"})})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "mcp__a__echo, mcp__b__echo") {
		t.Errorf(`the admin calls "echo": got %v; want INVALID_ARGUMENT naming both`, err)
	}
}

func structArgs(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// callersFile is a callers file of a test and the authorizer that loaded
// it. Each caller's token is "<name>-token".
type callersFile struct {
	path  string
	authz *access.Authorizer
}

// newCallersFile writes a callers file with one caller per entry of perms
// (its permissions object, as JSON) and loads it.
func newCallersFile(t testing.TB, perms map[string]string) *callersFile {
	t.Helper()
	f := &callersFile{path: filepath.Join(t.TempDir(), "callers.json")}
	f.write(t, perms)
	authz, err := access.New(&access.Options{CallersFile: f.path})
	if err != nil {
		t.Fatal(err)
	}
	f.authz = authz
	return f
}

// rewrite replaces the callers with perms and reloads the file.
func (f *callersFile) rewrite(t testing.TB, perms map[string]string) {
	t.Helper()
	f.write(t, perms)
	if err := f.authz.Reload(); err != nil {
		t.Fatal(err)
	}
}

func (f *callersFile) write(t testing.TB, perms map[string]string) {
	t.Helper()
	var entries []string
	for name, p := range perms {
		if err := os.WriteFile(filepath.Join(filepath.Dir(f.path), name+".token"), []byte(name+"-token"), 0o600); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, fmt.Sprintf(`{"name": %q, "token_file": "%s.token", "permissions": %s}`, name, name, p))
	}
	if err := os.WriteFile(f.path, []byte(`{"callers": [`+strings.Join(entries, ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
}

// defaultCaller returns dial options that send name's token with every
// call and stream that carries no token of its own.
func (f *callersFile) defaultCaller(name string) []grpc.DialOption {
	withToken := func(ctx context.Context) context.Context {
		if md, _ := metadata.FromOutgoingContext(ctx); len(md.Get("authorization")) == 0 {
			return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+name+"-token")
		}
		return ctx
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(withToken(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(withToken(ctx), desc, cc, method, opts...)
		}),
	}
}

// BenchmarkGuardedCall is a unary call through the interceptor chain
// without a callers file and with one, whose calls are also watched for a
// reload that removes their caller (see guard.watchCaller).
func BenchmarkGuardedCall(b *testing.B) {
	for _, withCallers := range []bool{false, true} {
		name := "without callers file"
		if withCallers {
			name = "with callers file"
		}
		b.Run(name, func(b *testing.B) {
			o := &envOptions{}
			if withCallers {
				callers := newCallersFile(b, map[string]string{"agent": `{"servers": ["*"]}`})
				o.server.Access, o.dialOpts = callers.authz, callers.defaultCaller("agent")
			}
			e := newEnv(b, o)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.client.ListServers(ctx, &mcpdv1.ListServersRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSubscribeFollowsReload: a Subscribe stream whose caller a reload of
// the callers file leaves without the resource it follows ends with
// PERMISSION_DENIED, and the upstream subscription it held is released;
// one whose permissions still cover it runs on.
func TestSubscribeFollowsReload(t *testing.T) {
	const uri = "test://doc/1"
	both := `{"servers": ["*"], "resources": [{"server": "s", "uri": "*"}], "manage": true}`
	callers := newCallersFile(t, map[string]string{"alice": both, "bob": both})
	e := newEnv(t, &envOptions{server: Options{Access: callers.authz}, dialOpts: callers.defaultCaller("alice")})
	ctx := testContext(t)
	e.connect(t, "s", newSurfaceServer(t, eras[0].versions).srv)
	follow := func(caller string) mcpdv1.MCPHub_SubscribeClient {
		stream, err := e.client.Subscribe(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+caller+"-token"),
			&mcpdv1.SubscribeRequest{Resources: []*mcpdv1.ResourceRef{{Server: "s", Uri: uri}}})
		if err != nil {
			t.Fatal(err)
		}
		return stream
	}
	alice, bob := follow("alice"), follow("bob")
	waitFor(t, func() bool { return interest(e, "s", uri) == 2 })

	callers.rewrite(t, map[string]string{"alice": `{"servers": ["*"], "manage": true}`, "bob": both})
	_, err := alice.Recv()
	wantCode(t, err, codes.PermissionDenied)
	waitFor(t, func() bool { return interest(e, "s", uri) == 1 })

	// bob's stream still delivers.
	e.bus.Publish(events.Event{Kind: events.KindResourceUpdated, Server: "s", URI: uri})
	if m, err := bob.Recv(); err != nil || m.GetEvent().GetResourceUpdated() == nil {
		t.Errorf("bob's stream after the reload: got %v, %v; want the update", m, err)
	}
}
