package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// rulesConfig is two demo servers, "demo" and "other", with tool rules in
// every place a config can hold them, and fields mcpd does not know.
func rulesConfig(t *testing.T, extraDeny ...string) string {
	t.Helper()
	demo := map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}}
	other := map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"},
		"alwaysAllow": []string{"echo"}, "permissions": map[string]any{"deny": []string{"weath?r"}},
		"bogusField": true}
	return writeConfig(t, mustJSON(t, map[string]any{
		"permissions": map[string]any{
			// A cross-server glob, and an exact name that beats it.
			"deny":  append([]string{"mcp__*__ad?"}, extraDeny...),
			"allow": []string{"mcp__demo__add"},
		},
		"mcpServers": map[string]any{"demo": demo, "other": other},
	}))
}

// TestToolRules checks each rule kind on qualified names, where the rules
// come from (top-level block, a server's own block, alwaysAllow, flags),
// the most specific rule winning, denied tools hidden from ListTools, an
// unknown field reported, and a SIGHUP bringing new rules in.
func TestToolRules(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	path := rulesConfig(t)
	d := startDaemon(ctx, t, daemonOptions{config: path, args: []string{
		"--ask-tool", "mcp__*__echo", "--deny-tool", "mcp__demo__image",
	}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	d.waitServer(ctx, t, "other", mcpdv1.ServerState_SERVER_STATE_READY)

	// allow: the exact name beats the cross-server deny.
	if got := text(d.mustCall(ctx, t, "mcp__demo__add", map[string]any{"a": 2, "b": 3})); got != "5" {
		t.Errorf("mcp__demo__add: got %q, want 5", got)
	}
	// deny by the cross-server glob of the top-level block.
	_, err := d.call(ctx, t, "mcp__other__add", map[string]any{"a": 2, "b": 3}, 0)
	st := wantCode(t, err, codes.PermissionDenied)
	if !strings.Contains(st.Message(), `deny mcp__*__ad?`) {
		t.Errorf("denial: got %q, want it to name the rule", st.Message())
	}
	// deny by a server's own block and by a flag.
	for _, tool := range []string{"mcp__other__weather", "mcp__demo__image"} {
		_, err = d.call(ctx, t, tool, map[string]any{"city": "Oslo"}, 0)
		wantCode(t, err, codes.PermissionDenied)
	}
	// ask with no agent attached: denied, saying why.
	_, err = d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "hi"}, 0)
	st = wantCode(t, err, codes.PermissionDenied)
	if !strings.Contains(st.Message(), "no agent") || !strings.Contains(st.Message(), "ask mcp__*__echo") {
		t.Errorf("ask without agent: got %q, want it to say no agent is attached and name the rule", st.Message())
	}
	// alwaysAllow of "other" is an exact allow: it beats the ask glob.
	if got := text(d.mustCall(ctx, t, "mcp__other__echo", map[string]any{"message": "hi"})); got != "hi" {
		t.Errorf("mcp__other__echo: got %q, want hi", got)
	}
	// No rule: the default allows.
	d.mustCall(ctx, t, "mcp__other__image", nil)

	// Denied tools are hidden; tools that ask are listed.
	list, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.GetTools() {
		names = append(names, tool.GetName())
	}
	for _, hidden := range []string{"mcp__other__add", "mcp__other__weather", "mcp__demo__image"} {
		if slices.Contains(names, hidden) {
			t.Errorf("ListTools lists %s, which a deny rule hides", hidden)
		}
	}
	for _, listed := range []string{"mcp__demo__add", "mcp__demo__echo", "mcp__other__echo", "mcp__other__image"} {
		if !slices.Contains(names, listed) {
			t.Errorf("ListTools: %s missing from %v", listed, names)
		}
	}

	// The unknown field shows in the server's status and in the log, once.
	other, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`field "bogusField" is not understood by mcpd; ignored`}
	if got := other.GetServer().GetConfigWarnings(); !slices.Equal(got, want) {
		t.Errorf("config_warnings: got %q, want %q", got, want)
	}
	if n := strings.Count(d.log.String(), `bogusField`); n != 1 {
		t.Errorf("the log names bogusField %d times, want once:\n%s", n, d.log.String())
	}

	// SIGHUP: a new deny rule applies to the next call.
	if err := os.WriteFile(path, []byte(readFile(t, rulesConfig(t, "mcp__*__image"))), 0o600); err != nil {
		t.Fatal(err)
	}
	d.send(t, syscall.SIGHUP)
	poll(ctx, t, "the reloaded deny rule", func() (bool, error) {
		_, err := d.call(ctx, t, "mcp__other__image", nil, 0)
		return err != nil, nil
	})
	_, err = d.call(ctx, t, "mcp__other__image", nil, 0)
	wantCode(t, err, codes.PermissionDenied)
	// The unchanged entry was not restarted, nor its warning logged again.
	if n := strings.Count(d.log.String(), `bogusField`); n != 1 {
		t.Errorf("after the reload the log names bogusField %d times, want once", n)
	}
}

// TestServerWideToolRules: a rule that names a server alone, as Claude
// Code's settings write it ("mcp__demo"), covers every tool of that
// server; a rule on one of its tools by name is more specific and wins.
func TestServerWideToolRules(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	demo := map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}}
	path := writeConfig(t, mustJSON(t, map[string]any{
		"permissions": map[string]any{"allow": []string{"mcp__demo"}, "ask": []string{"mcp__other"}, "default": "deny"},
		"mcpServers":  map[string]any{"demo": demo, "other": demo, "third": demo},
	}))
	d := startDaemon(ctx, t, daemonOptions{config: path, args: []string{"--deny-tool", "mcp__demo__image"}})
	for _, name := range []string{"demo", "other", "third"} {
		d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
	}
	if got := text(d.mustCall(ctx, t, "mcp__demo__echo", map[string]any{"message": "hi"})); got != "hi" {
		t.Errorf("mcp__demo__echo under allow mcp__demo: got %q, want hi", got)
	}
	_, err := d.call(ctx, t, "mcp__demo__image", nil, 0)
	if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), "deny mcp__demo__image") {
		t.Errorf("mcp__demo__image: got %q, want the exact deny to beat the server-wide allow", st.Message())
	}
	_, err = d.call(ctx, t, "mcp__other__echo", map[string]any{"message": "hi"}, 0)
	if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), "needs approval") || !strings.Contains(st.Message(), "mcp__other") {
		t.Errorf("mcp__other__echo under ask mcp__other: got %q, want it held for approval by that rule", st.Message())
	}
	_, err = d.call(ctx, t, "mcp__third__echo", map[string]any{"message": "hi"}, 0)
	if st := wantCode(t, err, codes.PermissionDenied); strings.Contains(st.Message(), "approval") {
		t.Errorf("mcp__third__echo: got %q, want the default deny", st.Message())
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// approvalAgent registers for APPROVAL requests and answers by the call's
// "message" argument: "yes" approves, "no" denies, anything else is left
// unanswered. It hands every request it gets to seen.
func approvalAgent(ctx context.Context, t *testing.T, d *daemon, seen chan<- *mcpdv1.ServerRequest) {
	t.Helper()
	answerAgent(ctx, t, d, func(req *mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply {
		select {
		case seen <- req:
		default:
		}
		var result *mcpdv1.ApprovalResult
		switch req.GetApproval().GetArguments().GetFields()["message"].GetStringValue() {
		case "yes":
			result = &mcpdv1.ApprovalResult{Approved: true}
		case "no":
			result = &mcpdv1.ApprovalResult{Reason: "not today"}
		default:
			return nil
		}
		return &mcpdv1.ServerRequestReply{Id: req.GetId(), Result: &mcpdv1.ServerRequestReply_Approval{Approval: result}}
	}, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_APPROVAL)
}

// TestToolRulesAsk sends calls that an "ask" rule holds to an agent that
// approves, denies, or never answers them.
func TestToolRulesAsk(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: twoDemoServers(t), args: []string{
		"--ask-tool", "mcp__demo__*", "--server-request-timeout", "5s", // long enough for a loaded machine to answer in time
	}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	agentCtx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	seen := make(chan *mcpdv1.ServerRequest, 10)
	approvalAgent(agentCtx, t, d, seen)

	// Approved: the call runs, and the agent saw what it approved.
	if got := text(d.mustCall(ctx, t, "mcp__demo__echo", map[string]any{"message": "yes"})); got != "yes" {
		t.Errorf("approved call: got %q, want yes", got)
	}
	req := nextApproval(ctx, t, seen)
	a := req.GetApproval()
	if req.GetServer() != "demo" || a.GetTool() != "mcp__demo__echo" || a.GetRule() != "ask mcp__demo__*" || a.GetCaller() == "" {
		t.Errorf("approval request: got server %q, %v; want server demo, tool mcp__demo__echo, rule ask mcp__demo__*, a caller", req.GetServer(), a)
	}
	if !a.GetAnnotations().GetFields()["readOnlyHint"].GetBoolValue() {
		t.Errorf("approval request annotations: got %v, want readOnlyHint true", a.GetAnnotations())
	}
	// CallToolStream asks too.
	args, _ := structpb.NewStruct(map[string]any{"message": "yes"})
	stream, err := d.hub.CallToolStream(ctx, &mcpdv1.CallToolStreamRequest{Name: "mcp__demo__echo", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetResult() == nil {
		t.Errorf("approved stream: got %v, %v; want the result", m, err)
	}
	nextApproval(ctx, t, seen)

	// Denied by the agent: PERMISSION_DENIED with its reason.
	_, err = d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "no"}, 0)
	if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), "not today") {
		t.Errorf("denied: got %q, want the agent's reason", st.Message())
	}
	nextApproval(ctx, t, seen)
	// Not answered within --server-request-timeout.
	_, err = d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "later"}, 0)
	if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), "in time") {
		t.Errorf("timed out: got %q, want it to say no agent answered in time", st.Message())
	}
	nextApproval(ctx, t, seen)
	// Other servers' tools need no approval.
	if got := text(d.mustCall(ctx, t, "mcp__other__echo", map[string]any{"message": "later"})); got != "later" {
		t.Errorf("unruled call: got %q, want later", got)
	}
	// The agent leaves: denied for want of an agent.
	stopAgent()
	poll(ctx, t, "the agent to detach", func() (bool, error) {
		_, err := d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "yes"}, 0)
		return err != nil && strings.Contains(err.Error(), "no agent is attached"), nil
	})
}

// TestServerToolsAsk connects a server whose config asks for approval of
// some of its tools: those calls go to the approving agent, the daemon's
// rules are only tightened (its allow of a tool still asks, its deny
// still refuses without asking), other tools run, and the asks come back
// from the state file after a restart.
func TestServerToolsAsk(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	stateFile := filepath.Join(shortTempDir(t), "state.json")
	opts := daemonOptions{config: emptyConfig(t), args: []string{
		"--state-file", stateFile,
		"--allow-tool", "mcp__asked__weather", "--deny-tool", "mcp__asked__add",
	}}
	d := startDaemon(ctx, t, opts)
	cfg := stdioConfig("asked", mcpdBinary(t), []string{"demo-server"}, nil)
	cfg.ToolsAsk = []string{"e*", "weather", "add"}
	if _, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: cfg}); err != nil {
		t.Fatal(err)
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	seen := make(chan *mcpdv1.ServerRequest, 10)
	approvalAgent(agentCtx, t, d, seen)

	if got := text(d.mustCall(ctx, t, "mcp__asked__echo", map[string]any{"message": "yes"})); got != "yes" {
		t.Errorf("approved echo: got %q, want yes", got)
	}
	if r := nextApproval(ctx, t, seen).GetApproval(); r.GetTool() != "mcp__asked__echo" || r.GetRule() != "ask mcp__asked__e*" || r.GetPollInterval() != nil {
		t.Errorf("approval request: got tool %q rule %q poll interval %v, want mcp__asked__echo by ask mcp__asked__e*, no poll", r.GetTool(), r.GetRule(), r.GetPollInterval())
	}
	// The daemon's more specific allow does not undo the server's ask.
	_, err := d.call(ctx, t, "mcp__asked__weather", map[string]any{"message": "no"}, 0)
	if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), `rule "ask mcp__asked__weather"`) || !strings.Contains(st.Message(), "not today") {
		t.Errorf("weather: got %q, want the agent's refusal under ask mcp__asked__weather", st.Message())
	}
	nextApproval(ctx, t, seen)
	// The daemon's deny refuses without asking.
	_, err = d.call(ctx, t, "mcp__asked__add", map[string]any{"message": "yes", "a": 1, "b": 2}, 0)
	if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), `rule "deny mcp__asked__add"`) {
		t.Errorf("add: got %q, want the daemon's deny", st.Message())
	}
	// A tool the server does not ask for runs without asking.
	if res := d.mustCall(ctx, t, "mcp__asked__image", nil); res.GetIsError() {
		t.Errorf("image: got an error result %v", res)
	}
	select {
	case r := <-seen:
		t.Errorf("the agent was asked about %s, want only echo and weather", r.GetApproval().GetTool())
	default:
	}
	// A poll that will be refused is refused before anyone is asked: too
	// often, or the tool of another server.
	for _, bad := range []*mcpdv1.StartPollRequest{
		{Server: "asked", Interval: durationpb.New(500 * time.Millisecond), Target: &mcpdv1.StartPollRequest_Tool{Tool: &mcpdv1.PollToolCall{Name: "echo"}}},
		{Server: "asked", Target: &mcpdv1.StartPollRequest_Tool{Tool: &mcpdv1.PollToolCall{Name: "mcp__other__echo"}}},
	} {
		bad.GetTool().Arguments = mustStruct(t, map[string]any{"message": "yes"})
		_, err = d.hub.StartPoll(ctx, bad)
		wantCode(t, err, codes.InvalidArgument)
		select {
		case r := <-seen:
			t.Errorf("the agent was asked about a poll of %s every %v, want it refused first", r.GetApproval().GetTool(), r.GetApproval().GetPollInterval().AsDuration())
		default:
		}
	}
	// A poll of an asked tool is approved when it starts, and stopped
	// without asking (here: with no agent left to ask).
	poll, err := d.hub.StartPoll(ctx, &mcpdv1.StartPollRequest{Server: "asked", Interval: durationpb.New(time.Hour),
		Target: &mcpdv1.StartPollRequest_Tool{Tool: &mcpdv1.PollToolCall{Name: "echo", Arguments: mustStruct(t, map[string]any{"message": "yes"})}}})
	if err != nil {
		t.Fatalf("StartPoll of echo: %v", err)
	}
	if iv := nextApproval(ctx, t, seen).GetApproval().GetPollInterval(); iv.AsDuration() != time.Hour {
		t.Errorf("the poll's approval request: got poll_interval %v, want 1h", iv)
	}
	stopAgent()
	if _, err := d.hub.StopPoll(ctx, &mcpdv1.StopPollRequest{Id: poll.GetPoll().GetId()}); err != nil {
		t.Errorf("StopPoll of an asked tool without an agent: %v", err)
	}

	// After a restart the server comes back from the state file, and asks
	// again (no agent now: refused for want of one).
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("mcpd exit code %d, want 0", code)
	}
	d2 := startDaemon(ctx, t, opts)
	d2.waitServer(ctx, t, "asked", mcpdv1.ServerState_SERVER_STATE_READY)
	_, err = d2.call(ctx, t, "mcp__asked__echo", map[string]any{"message": "yes"}, 0)
	if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), `rule "ask mcp__asked__e*"`) {
		t.Errorf("echo after a restart: got %q, want it held by ask mcp__asked__e*", st.Message())
	}
}

// nextApproval returns the next request approvalAgent saw, failing the
// test if none comes before ctx ends.
func nextApproval(ctx context.Context, t *testing.T, seen <-chan *mcpdv1.ServerRequest) *mcpdv1.ServerRequest {
	t.Helper()
	select {
	case r := <-seen:
		return r
	case <-ctx.Done():
		t.Fatal("the approval agent was not asked")
		return nil
	}
}

// TestApprovalRevokedWhilePending: an approver whose "approval"
// permission a reload of the callers file takes away (the caller stays)
// may no longer approve: an approval request it was handed before the
// reload is not approved by its late answer.
func TestApprovalRevokedWhilePending(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	callers := func(approverKinds ...string) string {
		return mustJSON(t, map[string]any{"callers": []any{
			map[string]any{"name": "worker", "token_sha256": sha256Hex("worker-token-1"), "permissions": map[string]any{
				"servers": []string{"*"}, "tools": []string{"*"},
			}},
			map[string]any{"name": "approver", "token_sha256": sha256Hex("approver-token-2"), "permissions": map[string]any{
				"servers": []string{"*"}, "server_requests": approverKinds,
			}},
		}})
	}
	path := writeCallers(t, callers("approval", "roots"))
	d := startDaemon(ctx, t, daemonOptions{config: twoDemoServers(t), args: []string{
		"--callers", path, "--ask-tool", "mcp__demo__echo", "--server-request-timeout", "30s",
	}})
	worker, approverCtx := bearer(ctx, "worker-token-1"), bearer(ctx, "approver-token-2")
	agent := registerAgent(approverCtx, t, d, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_APPROVAL)

	callDone := make(chan error, 1)
	go func() {
		_, err := d.call(worker, t, "mcp__demo__echo", map[string]any{"message": "hi"}, 0)
		callDone <- err
	}()
	m, err := agent.Recv()
	if err != nil || m.GetRequest().GetApproval() == nil {
		t.Fatalf("the approver's request: got %v, %v", m, err)
	}
	// The approver loses "approval" (it keeps "roots", so it stays a
	// caller and its stream stays open).
	replaceFile(t, path, callers("roots"))
	d.send(t, syscall.SIGHUP)
	poll(ctx, t, "the reload to take effect", func() (bool, error) {
		return strings.Contains(d.log.String(), "reloaded callers"), nil
	})
	// Its late answer approves the call all the same.
	if err := agent.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: &mcpdv1.ServerRequestReply{
		Id: m.GetRequest().GetId(), Result: &mcpdv1.ServerRequestReply_Approval{Approval: &mcpdv1.ApprovalResult{Approved: true}},
	}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-callDone:
		wantCode(t, err, codes.PermissionDenied)
	case <-time.After(20 * time.Second):
		t.Fatal("the call neither ran nor was refused")
	}
}

// TestAskAfterToolFilter: a call an "ask" rule holds, of a tool the
// server's toolsDeny hides or that the server does not have, is refused
// as it would be without the rule (the tool filter comes before any rule;
// an unknown tool is NOT_FOUND), and no agent is asked to approve a call
// that cannot run.
func TestAskAfterToolFilter(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	config := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"demo": map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}, "toolsDeny": []string{"echo"}},
	}}))
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startDaemon(ctx, t, daemonOptions{config: config, args: []string{"--ask-tool", "mcp__demo__*", "--server-request-timeout", "5s", "--mcp-listen", addr}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	cs := connectMCP(ctx, t, "http://"+addr+"/mcp", mcpEras[0], "", nil)

	// No agent attached: the refusal says why the call cannot run.
	_, err := d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "yes"}, 0)
	if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), "tool filter") {
		t.Errorf("a filtered tool: got %q, want the server's tool filter named", st.Message())
	}
	_, err = d.call(ctx, t, "mcp__demo__nope", map[string]any{"message": "yes"}, 0)
	wantCode(t, err, codes.NotFound)

	// With an agent: it is not asked about either.
	seen := make(chan *mcpdv1.ServerRequest, 10)
	approvalAgent(ctx, t, d, seen)
	_, err = d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "yes"}, 0)
	wantCode(t, err, codes.PermissionDenied)
	_, err = d.call(ctx, t, "mcp__demo__nope", map[string]any{"message": "yes"}, 0)
	wantCode(t, err, codes.NotFound)
	// The MCP endpoint refuses them the same way.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__demo__echo", Arguments: map[string]any{"message": "yes"}}); err == nil || !strings.Contains(err.Error(), "tool filter") {
		t.Errorf("MCP endpoint, a filtered tool: got %v, want the server's tool filter named", err)
	}
	select {
	case r := <-seen:
		t.Errorf("the agent was asked to approve %s, a call that cannot run", r.GetApproval().GetTool())
	default:
	}
	// A tool the filter leaves is still asked about.
	if res := d.mustCall(ctx, t, "mcp__demo__fail", map[string]any{"message": "yes"}); text(res) != "yes" || !res.GetIsError() {
		t.Errorf("approved fail: got %v, want its error result yes", res)
	}
	nextApproval(ctx, t, seen)
}

// TestApprovalRuleDeniedWhilePending: a call waiting for approval under an
// "ask" rule, whose tool a reload then denies, is refused under the deny
// rule even when the agent approves it afterwards: the agent approved a
// call the rules in force no longer let through. On gRPC as on the MCP
// endpoint.
func TestApprovalRuleDeniedWhilePending(t *testing.T) {
	t.Parallel()
	for _, wire := range []string{"grpc", "mcp"} {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			config := func(effect string) string {
				demo := map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}}
				return mustJSON(t, map[string]any{
					"permissions": map[string]any{effect: []string{"mcp__demo__echo"}},
					"mcpServers":  map[string]any{"demo": demo},
				})
			}
			path := writeConfig(t, config("ask"))
			addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			d := startDaemon(ctx, t, daemonOptions{config: path, args: []string{
				"--server-request-timeout", "60s", "--mcp-listen", addr,
			}})
			d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
			agent := registerAgent(ctx, t, d, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_APPROVAL)

			callDone := make(chan error, 1)
			if wire == "grpc" {
				go func() {
					_, err := d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "hi"}, 0)
					callDone <- err
				}()
			} else {
				cs := connectMCP(ctx, t, "http://"+addr+"/mcp", "", "", nil)
				waitTools(ctx, t, cs, "mcp__demo__echo")
				go func() {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__demo__echo", Arguments: map[string]any{"message": "hi"}})
					if err == nil {
						err = fmt.Errorf("the call ran: %v", res.Content)
					}
					callDone <- err
				}()
			}
			m, err := agent.Recv()
			if err != nil || m.GetRequest().GetApproval() == nil {
				t.Fatalf("the approval request: got %v, %v", m, err)
			}
			replaceFile(t, path, config("deny"))
			d.send(t, syscall.SIGHUP)
			poll(ctx, t, "the deny rule to hide the tool", func() (bool, error) {
				list, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "demo"})
				if err != nil {
					return false, err
				}
				for _, tool := range list.GetTools() {
					if tool.GetName() == "mcp__demo__echo" {
						return false, nil
					}
				}
				return true, nil
			})
			if err := agent.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: &mcpdv1.ServerRequestReply{
				Id: m.GetRequest().GetId(), Result: &mcpdv1.ServerRequestReply_Approval{Approval: &mcpdv1.ApprovalResult{Approved: true}},
			}}}); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-callDone:
				if wire == "grpc" {
					wantCode(t, err, codes.PermissionDenied)
				}
				if err == nil || !strings.Contains(err.Error(), "deny mcp__demo__echo") {
					t.Errorf("refusal: got %v, want it to name the deny rule", err)
				}
			case <-ctx.Done():
				t.Fatal("the call neither ran nor was refused")
			}
		})
	}
}
