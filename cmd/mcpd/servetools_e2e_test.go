package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// toolAgent is an agent serving its own tools over ServeTools, on a
// connection of its own: the tests play its part by hand, reading the
// calls it gets and answering them.
type toolAgent struct {
	stream mcpdv1.MCPHub_ServeToolsClient
	cancel context.CancelFunc
	msgs   chan *mcpdv1.ServeToolsResponse
	done   chan struct{} // closed when the stream ended; err is set before
	err    error
}

// agentTools are the tools the tests' agents declare.
func agentTools() []*mcpdv1.ToolDefinition {
	readOnly := true
	return []*mcpdv1.ToolDefinition{
		{
			Name:        "echo",
			Description: "Echoes its text.",
			InputSchema: &structpb.Struct{Fields: map[string]*structpb.Value{
				"type": structpb.NewStringValue("object"),
				"properties": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
					"text": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("string")}}),
				}}),
				"required": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue("text")}}),
			}},
			Annotations: &mcpdv1.ToolAnnotations{ReadOnlyHint: &readOnly},
		},
		{Name: "work", Description: "Works for a while."},
	}
}

// serveTools opens a ServeTools stream on a new connection and declares
// tools for server. It returns the agent once mcpd confirmed, or the
// status mcpd refused the declaration with.
func serveTools(ctx context.Context, t *testing.T, d *daemon, decl *mcpdv1.ToolServerDeclaration) (*toolAgent, *mcpdv1.Server, error) {
	t.Helper()
	target := "unix://" + d.sock
	if d.net == "tcp" {
		target = "passthrough:///" + d.dialTo
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	sctx, cancel := context.WithCancel(ctx)
	stream, err := mcpdv1.NewMCPHubClient(conn).ServeTools(sctx)
	if err != nil {
		cancel()
		t.Fatalf("ServeTools: %v", err)
	}
	if err := stream.Send(&mcpdv1.ServeToolsRequest{Message: &mcpdv1.ServeToolsRequest_Declare{Declare: decl}}); err != nil {
		cancel()
		t.Fatalf("ServeTools declare: %v", err)
	}
	first, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, nil, err
	}
	if first.GetServing() == nil {
		cancel()
		t.Fatalf("first ServeTools message: got %v, want serving", first)
	}
	a := &toolAgent{stream: stream, cancel: cancel, msgs: make(chan *mcpdv1.ServeToolsResponse, 16), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for {
			m, err := stream.Recv()
			if err != nil {
				a.err = err
				return
			}
			select {
			case a.msgs <- m:
			case <-sctx.Done():
				a.err = sctx.Err()
				return
			}
		}
	}()
	t.Cleanup(a.stop)
	return a, first.GetServing(), nil
}

// stop ends the agent's stream from its side and waits for its reader.
func (a *toolAgent) stop() {
	a.cancel()
	<-a.done
}

// next returns the agent's next message from mcpd.
func (a *toolAgent) next(ctx context.Context, t *testing.T) *mcpdv1.ServeToolsResponse {
	t.Helper()
	select {
	case m := <-a.msgs:
		return m
	case <-a.done:
		t.Fatalf("agent stream ended: %v", a.err)
	case <-ctx.Done():
		t.Fatalf("waiting for a message on the agent stream: %v", ctx.Err())
	}
	return nil
}

// nextCall returns the next call the agent gets.
func (a *toolAgent) nextCall(ctx context.Context, t *testing.T) *mcpdv1.ToolCall {
	t.Helper()
	m := a.next(ctx, t)
	if m.GetCall() == nil {
		t.Fatalf("agent message: got %v, want a call", m)
	}
	return m.GetCall()
}

func (a *toolAgent) send(t *testing.T, m *mcpdv1.ServeToolsRequest) {
	t.Helper()
	if err := a.stream.Send(m); err != nil {
		t.Fatalf("agent send: %v", err)
	}
}

func (a *toolAgent) answer(t *testing.T, id string, res *mcpdv1.CallToolResponse) {
	t.Helper()
	a.send(t, &mcpdv1.ServeToolsRequest{Message: &mcpdv1.ServeToolsRequest_Result{Result: &mcpdv1.ToolCallResult{
		Id: id, Outcome: &mcpdv1.ToolCallResult_Result{Result: res},
	}}})
}

// ended waits for the agent's stream to end and returns how it ended.
func (a *toolAgent) ended(ctx context.Context, t *testing.T) error {
	t.Helper()
	for {
		select {
		case <-a.msgs:
		case <-a.done:
			return a.err
		case <-ctx.Done():
			t.Fatalf("waiting for the agent stream to end: %v", ctx.Err())
		}
	}
}

func agentText(s string) *mcpdv1.CallToolResponse {
	return &mcpdv1.CallToolResponse{Content: []*mcpdv1.Content{{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: s}}}}}
}

type callOutcome struct {
	resp *mcpdv1.CallToolResponse
	err  error
}

// callAsync calls a tool on d's own connection (another client than the
// agent's) and delivers the outcome on the returned channel.
func callAsync(ctx context.Context, d *daemon, req *mcpdv1.CallToolRequest) <-chan callOutcome {
	out := make(chan callOutcome, 1)
	go func() {
		resp, err := d.hub.CallTool(ctx, req)
		out <- callOutcome{resp, err}
	}()
	return out
}

func waitOutcome(ctx context.Context, t *testing.T, ch <-chan callOutcome) callOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-ctx.Done():
		t.Fatalf("waiting for a call's outcome: %v", ctx.Err())
	}
	return callOutcome{}
}

func TestServeTools(t *testing.T) {
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	// From the first buffered event: a stream opened just before ServeTools
	// may be registered after its first state change.
	events, err := d.hub.Subscribe(ctx, &mcpdv1.SubscribeRequest{
		Servers: []string{"app"}, Kinds: []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_SERVER_STATE}, AfterSequence: proto.Uint64(0),
	})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}

	agent, serving, err := serveTools(ctx, t, d, &mcpdv1.ToolServerDeclaration{
		Server: "app", Tools: agentTools(), Instructions: "Tools of the app.",
		ServerInfo: &mcpdv1.Implementation{Name: "the-app", Version: "1.2.3"},
	})
	if err != nil {
		t.Fatalf("ServeTools: %v", err)
	}
	if serving.GetState() != mcpdv1.ServerState_SERVER_STATE_READY || serving.GetTransport() != mcpdv1.Transport_TRANSPORT_AGENT {
		t.Fatalf("serving: got state %v transport %v, want READY and AGENT", serving.GetState(), serving.GetTransport())
	}

	t.Run("listed", func(t *testing.T) {
		servers, err := d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var app *mcpdv1.Server
		for _, s := range servers.GetServers() {
			if s.GetName() == "app" {
				app = s
			}
		}
		switch {
		case app == nil:
			t.Fatalf("ListServers: no server app in %v", servers.GetServers())
		case app.GetState() != mcpdv1.ServerState_SERVER_STATE_READY, app.GetTransport() != mcpdv1.Transport_TRANSPORT_AGENT,
			app.GetToolCount() != 2, app.GetInstructions() != "Tools of the app.", app.GetServerInfo().GetName() != "the-app":
			t.Fatalf("app: got %v, want READY, AGENT, 2 tools, its instructions and server info", app)
		}
		tools, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "app"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range tools.GetTools() {
			names = append(names, tool.GetName())
		}
		if got, want := strings.Join(names, " "), "mcp__app__echo mcp__app__work"; got != want {
			t.Fatalf("ListTools: got %q, want %q", got, want)
		}
		echo := tools.GetTools()[0]
		if echo.GetInputSchema().GetFields()["required"] == nil || !echo.GetAnnotations().GetReadOnlyHint() || echo.GetDescription() != "Echoes its text." {
			t.Fatalf("echo: got %v, want its declared schema, description and annotations", echo)
		}
	})

	t.Run("call", func(t *testing.T) {
		meta, _ := structpb.NewStruct(map[string]any{"trace": "t-1"})
		outcome := callAsync(ctx, d, &mcpdv1.CallToolRequest{
			Name: "mcp__app__echo", Arguments: mustStruct(t, map[string]any{"text": "hello"}),
			Meta: meta, Timeout: durationpb.New(time.Hour),
		})
		call := agent.nextCall(ctx, t)
		if call.GetTool() != "echo" || call.GetArguments().AsMap()["text"] != "hello" || call.GetMeta().AsMap()["trace"] != "t-1" {
			t.Fatalf("call: got %v, want echo with text hello and meta trace", call)
		}
		// The RPC's own deadline (the test's) comes before the hour.
		if dl, rpcDeadline := call.GetDeadline(), time.Now().Add(testTimeout); dl == nil || !dl.AsTime().After(time.Now()) || dl.AsTime().After(rpcDeadline) {
			t.Fatalf("call deadline: got %v, want one in the future, no later than the RPC's", call.GetDeadline())
		}
		res := agentText("hello")
		res.StructuredContent = structpb.NewStructValue(mustStruct(t, map[string]any{"echoed": "hello"}))
		agent.answer(t, call.GetId(), res)
		o := waitOutcome(ctx, t, outcome)
		if o.err != nil {
			t.Fatalf("CallTool: %v", o.err)
		}
		if text(o.resp) != "hello" || o.resp.GetStructuredContent().GetStructValue().AsMap()["echoed"] != "hello" || o.resp.GetIsError() {
			t.Fatalf("CallTool: got %v, want text and structured content hello", o.resp)
		}
	})

	t.Run("tool error and protocol error", func(t *testing.T) {
		outcome := callAsync(ctx, d, &mcpdv1.CallToolRequest{Name: "mcp__app__work"})
		call := agent.nextCall(ctx, t)
		res := agentText("it broke")
		res.IsError = true
		agent.answer(t, call.GetId(), res)
		o := waitOutcome(ctx, t, outcome)
		if o.err != nil || !o.resp.GetIsError() || text(o.resp) != "it broke" {
			t.Fatalf("CallTool: got %v, %v; want an is_error result", o.resp, o.err)
		}

		outcome = callAsync(ctx, d, &mcpdv1.CallToolRequest{Name: "mcp__app__work"})
		call = agent.nextCall(ctx, t)
		agent.send(t, &mcpdv1.ServeToolsRequest{Message: &mcpdv1.ServeToolsRequest_Result{Result: &mcpdv1.ToolCallResult{
			Id: call.GetId(), Outcome: &mcpdv1.ToolCallResult_Error{Error: &mcpdv1.ReplyError{Code: -32602, Message: "count must be positive"}},
		}}})
		o = waitOutcome(ctx, t, outcome)
		if st := wantCode(t, o.err, codes.InvalidArgument); !strings.Contains(st.Message(), "count must be positive") {
			t.Fatalf("CallTool: got %q, want the agent's message", st.Message())
		}
	})

	t.Run("progress", func(t *testing.T) {
		done := make(chan []*mcpdv1.CallToolStreamResponse, 1)
		go func() {
			var msgs []*mcpdv1.CallToolStreamResponse
			defer func() { done <- msgs }()
			stream, err := d.hub.CallToolStream(ctx, &mcpdv1.CallToolStreamRequest{Name: "mcp__app__work"})
			if err != nil {
				return
			}
			for {
				m, err := stream.Recv()
				if err != nil {
					return
				}
				msgs = append(msgs, m)
			}
		}()
		call := agent.nextCall(ctx, t)
		total := 2.0
		for i, msg := range []string{"first half", "second half"} {
			agent.send(t, &mcpdv1.ServeToolsRequest{Message: &mcpdv1.ServeToolsRequest_Progress{Progress: &mcpdv1.ToolCallProgress{
				Id: call.GetId(), Progress: &mcpdv1.Progress{Progress: float64(i + 1), Total: &total, Message: msg},
			}}})
		}
		agent.answer(t, call.GetId(), agentText("worked"))
		var msgs []*mcpdv1.CallToolStreamResponse
		select {
		case msgs = <-done:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		var got []string
		for _, m := range msgs {
			switch {
			case m.GetProgress() != nil:
				got = append(got, m.GetProgress().GetMessage())
			case m.GetResult() != nil:
				got = append(got, "result:"+text(m.GetResult()))
			}
		}
		if want := "first half|second half|result:worked"; strings.Join(got, "|") != want {
			t.Fatalf("CallToolStream: got %q, want %q", strings.Join(got, "|"), want)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		outcome := callAsync(cctx, d, &mcpdv1.CallToolRequest{Name: "mcp__app__work"})
		call := agent.nextCall(ctx, t)
		cancel()
		m := agent.next(ctx, t)
		if m.GetCancel().GetId() != call.GetId() {
			t.Fatalf("after the caller cancelled: got %v, want a cancel of call %s", m, call.GetId())
		}
		wantCode(t, waitOutcome(ctx, t, outcome).err, codes.Canceled)
		// A late answer is dropped; the stream goes on.
		agent.answer(t, call.GetId(), agentText("too late"))
	})

	t.Run("duplicate refused", func(t *testing.T) {
		_, _, err := serveTools(ctx, t, d, &mcpdv1.ToolServerDeclaration{Server: "app", Tools: agentTools()})
		wantCode(t, err, codes.AlreadyExists)
		// The first agent still serves.
		outcome := callAsync(ctx, d, &mcpdv1.CallToolRequest{Name: "mcp__app__work"})
		agent.answer(t, agent.nextCall(ctx, t).GetId(), agentText("still here"))
		if o := waitOutcome(ctx, t, outcome); o.err != nil || text(o.resp) != "still here" {
			t.Fatalf("CallTool: got %v, %v; want the first agent's answer", o.resp, o.err)
		}
	})

	t.Run("replace, then the stream ends", func(t *testing.T) {
		second, _, err := serveTools(ctx, t, d, &mcpdv1.ToolServerDeclaration{Server: "app", Tools: agentTools()[1:], Replace: true})
		if err != nil {
			t.Fatalf("ServeTools with replace: %v", err)
		}
		wantCode(t, agent.ended(ctx, t), codes.Aborted)
		outcome := callAsync(ctx, d, &mcpdv1.CallToolRequest{Name: "mcp__app__work"})
		second.answer(t, second.nextCall(ctx, t).GetId(), agentText("second"))
		if o := waitOutcome(ctx, t, outcome); o.err != nil || text(o.resp) != "second" {
			t.Fatalf("CallTool: got %v, %v; want the second agent's answer", o.resp, o.err)
		}
		_, err = d.call(ctx, t, "mcp__app__echo", nil, 0)
		wantCode(t, err, codes.NotFound)

		// The stream's end fails the call in flight, which the agent had
		// and may have run (so a client's retry must not repeat it), and
		// stops the server.
		outcome = callAsync(ctx, d, &mcpdv1.CallToolRequest{Name: "mcp__app__work"})
		second.nextCall(ctx, t)
		second.stop()
		if info := errorInfo(wantCode(t, waitOutcome(ctx, t, outcome).err, codes.Unavailable)); info.GetReason() != "CALL_MAY_HAVE_RUN" {
			t.Errorf("the call in flight: got error details %v, want reason CALL_MAY_HAVE_RUN", info)
		}
		srv := d.waitServer(ctx, t, "app", mcpdv1.ServerState_SERVER_STATE_STOPPED)
		if !strings.Contains(srv.GetLastError(), "ServeTools stream ended") {
			t.Fatalf("last_error: got %q, want it to say the stream ended", srv.GetLastError())
		}
		_, err = d.call(ctx, t, "mcp__app__work", nil, time.Hour)
		wantCode(t, err, codes.Unavailable)
	})

	t.Run("server_state events", func(t *testing.T) {
		var got []string
		for len(got) == 0 || got[len(got)-1] != "SERVER_STATE_STOPPED" || len(got) < 3 {
			ev, err := events.Recv()
			if err != nil {
				t.Fatalf("Subscribe: %v (states so far %v)", err, got)
			}
			got = append(got, ev.GetEvent().GetServerState().GetState().String())
		}
		if !strings.HasPrefix(strings.Join(got, " "), "SERVER_STATE_CONNECTING SERVER_STATE_READY") {
			t.Fatalf("server_state events: got %v, want CONNECTING, READY, ... STOPPED", got)
		}
	})

	t.Run("served again after it stopped", func(t *testing.T) {
		again, _, err := serveTools(ctx, t, d, &mcpdv1.ToolServerDeclaration{Server: "app", Tools: agentTools()})
		if err != nil {
			t.Fatalf("ServeTools: %v", err)
		}
		outcome := callAsync(ctx, d, &mcpdv1.CallToolRequest{Name: "mcp__app__echo", Arguments: mustStruct(t, map[string]any{"text": "x"})})
		again.answer(t, again.nextCall(ctx, t).GetId(), agentText("again"))
		if o := waitOutcome(ctx, t, outcome); o.err != nil || text(o.resp) != "again" {
			t.Fatalf("CallTool: got %v, %v; want the new agent's answer", o.resp, o.err)
		}
		// RestartServer keeps the agent: the same stream serves again.
		if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "app"}); err != nil {
			t.Fatalf("RestartServer: %v", err)
		}
		outcome = callAsync(ctx, d, &mcpdv1.CallToolRequest{Name: "mcp__app__work"})
		again.answer(t, again.nextCall(ctx, t).GetId(), agentText("after restart"))
		if o := waitOutcome(ctx, t, outcome); o.err != nil || text(o.resp) != "after restart" {
			t.Fatalf("CallTool after RestartServer: got %v, %v; want the same agent's answer", o.resp, o.err)
		}
		// DisconnectServer ends the agent's stream.
		if _, err := d.hub.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: "app"}); err != nil {
			t.Fatal(err)
		}
		wantCode(t, again.ended(ctx, t), codes.Aborted)
	})
}

func TestServeToolsRefusesBadDeclarations(t *testing.T) {
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	for _, decl := range []*mcpdv1.ToolServerDeclaration{
		{Server: "bad__name", Tools: agentTools()},
		{Server: "app", Tools: []*mcpdv1.ToolDefinition{{Name: ""}}},
		{Server: "app", Tools: []*mcpdv1.ToolDefinition{{Name: "a"}, {Name: "a"}}},
		{Server: "app", Tools: []*mcpdv1.ToolDefinition{{Name: "a", InputSchema: mustStruct(t, map[string]any{"type": "string"})}}},
	} {
		_, _, err := serveTools(ctx, t, d, decl)
		wantCode(t, err, codes.InvalidArgument)
	}
	// A stdio server of the name is kept unless the agent replaces it.
	d.connectFake(ctx, t, "taken", "echo")
	_, _, err := serveTools(ctx, t, d, &mcpdv1.ToolServerDeclaration{Server: "taken", Tools: agentTools()})
	wantCode(t, err, codes.AlreadyExists)
	if _, srv, err := serveTools(ctx, t, d, &mcpdv1.ToolServerDeclaration{Server: "taken", Tools: agentTools(), Replace: true}); err != nil || srv.GetTransport() != mcpdv1.Transport_TRANSPORT_AGENT {
		t.Fatalf("ServeTools with replace over a stdio server: got %v, %v", srv, err)
	}
}

func TestServeToolsConfigEntry(t *testing.T) {
	ctx := testContext(t)
	// The daemon becomes SERVING although no agent serves the entry yet.
	d := startDaemon(ctx, t, daemonOptions{config: writeConfig(t, `{"mcpServers": {"app": {"type": "sdk", "name": "app"}}}`)})
	srv, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if s := srv.GetServer(); s.GetState() != mcpdv1.ServerState_SERVER_STATE_CONNECTING || s.GetTransport() != mcpdv1.Transport_TRANSPORT_AGENT ||
		!strings.Contains(s.GetLastError(), "waiting for an agent") {
		t.Fatalf("app before an agent serves it: got %v, want CONNECTING, AGENT, waiting for an agent", s)
	}
	// A call fails at once instead of waiting out its timeout (which would
	// end in DEADLINE_EXCEEDED from the test's own deadline).
	_, err = d.call(ctx, t, "mcp__app__echo", nil, 24*time.Hour)
	if st := wantCode(t, err, codes.Unavailable); !strings.Contains(st.Message(), "waiting for an agent") {
		t.Fatalf("CallTool: got %q, want it to say the server waits for an agent", st.Message())
	}

	agent, serving, err := serveTools(ctx, t, d, &mcpdv1.ToolServerDeclaration{Server: "app", Tools: agentTools()})
	if err != nil {
		t.Fatalf("ServeTools for the config entry: %v", err)
	}
	if serving.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("serving: got %v, want READY", serving.GetState())
	}
	outcome := callAsync(ctx, d, &mcpdv1.CallToolRequest{Name: "mcp__app__echo", Arguments: mustStruct(t, map[string]any{"text": "hi"})})
	agent.answer(t, agent.nextCall(ctx, t).GetId(), agentText("hi"))
	if o := waitOutcome(ctx, t, outcome); o.err != nil || text(o.resp) != "hi" {
		t.Fatalf("CallTool: got %v, %v; want hi", o.resp, o.err)
	}
	agent.stop()
	d.waitServer(ctx, t, "app", mcpdv1.ServerState_SERVER_STATE_STOPPED)
}

// TestServeToolsOverridesFiles: a server an agent serves overrides the
// files' entry of its name, as a ConnectServer one does: a reload that
// changes or adds that entry leaves the agent serving.
func TestServeToolsOverridesFiles(t *testing.T) {
	ctx := testContext(t)
	demo := func(args ...string) map[string]any {
		return map[string]any{"command": mcpdBinary(t), "args": append([]string{"demo-server"}, args...)}
	}
	path := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{"taken": demo()}}))
	d := startDaemon(ctx, t, daemonOptions{config: path})
	d.waitServer(ctx, t, "taken", mcpdv1.ServerState_SERVER_STATE_READY)
	took, _, err := serveTools(ctx, t, d, &mcpdv1.ToolServerDeclaration{Server: "taken", Tools: agentTools(), Replace: true})
	if err != nil {
		t.Fatalf("ServeTools taking over a file's server: %v", err)
	}
	fresh, _, err := serveTools(ctx, t, d, &mcpdv1.ToolServerDeclaration{Server: "fresh", Tools: agentTools()})
	if err != nil {
		t.Fatalf("ServeTools: %v", err)
	}

	// The reload goes through the names in order: once zz-marker is
	// there, it has been through the other two.
	replaceFile(t, path, mustJSON(t, map[string]any{"mcpServers": map[string]any{"taken": demo("v2"), "fresh": demo(), "zz-marker": demo()}}))
	d.send(t, syscall.SIGHUP)
	d.waitServer(ctx, t, "zz-marker", mcpdv1.ServerState_SERVER_STATE_READY)
	for name, agent := range map[string]*toolAgent{"taken": took, "fresh": fresh} {
		st, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if s := st.GetServer(); s.GetTransport() != mcpdv1.Transport_TRANSPORT_AGENT || s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY || s.GetScope() == mcpdv1.ConfigScope_CONFIG_SCOPE_FLAG {
			t.Errorf("%s after the reload: got %v %v scope %v, want the agent's server, READY, not the file's", name, s.GetTransport(), s.GetState(), s.GetScope())
			continue
		}
		outcome := callAsync(ctx, d, &mcpdv1.CallToolRequest{Name: "mcp__" + name + "__echo", Arguments: mustStruct(t, map[string]any{"text": "hi"})})
		agent.answer(t, agent.nextCall(ctx, t).GetId(), agentText("still mine"))
		if o := waitOutcome(ctx, t, outcome); o.err != nil || text(o.resp) != "still mine" {
			t.Errorf("%s after the reload: got %v, %v; want the agent's answer", name, o.resp, o.err)
		}
	}
}

// TestServeToolsPermission checks that serving tools needs the manage
// permission for the server, while calling them needs only tools.
func TestServeToolsPermission(t *testing.T) {
	ctx := testContext(t)
	const agentToken, callerToken = "agent-token-31f5", "caller-token-9a2c"
	callers := writeCallers(t, mustJSON(t, map[string]any{"callers": []any{
		map[string]any{"name": "agent", "token_sha256": sha256Hex(agentToken), "permissions": map[string]any{
			"servers": []string{"app"}, "manage": true,
		}},
		map[string]any{"name": "caller", "token_sha256": sha256Hex(callerToken), "permissions": map[string]any{
			"servers": []string{"app"}, "tools": []string{"mcp__app__*"},
		}},
	}}))
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--callers", callers}})

	_, _, err := serveTools(bearer(ctx, callerToken), t, d, &mcpdv1.ToolServerDeclaration{Server: "app", Tools: agentTools()})
	if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), `"manage"`) {
		t.Fatalf("denial %q: want it to name the manage permission", st.Message())
	}
	agent, _, err := serveTools(bearer(ctx, agentToken), t, d, &mcpdv1.ToolServerDeclaration{Server: "app", Tools: agentTools()})
	if err != nil {
		t.Fatalf("ServeTools with manage: %v", err)
	}
	outcome := callAsync(bearer(ctx, callerToken), d, &mcpdv1.CallToolRequest{Name: "mcp__app__work"})
	agent.answer(t, agent.nextCall(ctx, t).GetId(), agentText("allowed"))
	if o := waitOutcome(ctx, t, outcome); o.err != nil || text(o.resp) != "allowed" {
		t.Fatalf("CallTool by a caller with tools: got %v, %v", o.resp, o.err)
	}
}
