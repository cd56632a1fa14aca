package main

import (
	"context"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestEverythingSurface drives the whole MCP surface of the reference
// server-everything through the real mcpd binary: resources, prompts,
// completion, subscriptions, progress, logging, roots, and sampling and
// elicitation answered by an agent on the server-request stream.
func TestEverythingSurface(t *testing.T) {
	t.Parallel()
	bin := everythingBinary(t)
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})

	// An agent answers sampling and elicitation from the start; the server
	// registers its sampling, elicitation and roots tools only for clients
	// that advertise them, after initialization, and says so with
	// tools/list_changed.
	agent := startAgent(ctx, t, d)
	s := d.connect(ctx, t, "ev", bin, []string{"stdio"}, nil)
	if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("state %v: %s", s.GetState(), s.GetLastError())
	}
	poll(ctx, t, "the conditional tools to be listed", func() (bool, error) {
		tools, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "ev"})
		if err != nil {
			return false, err
		}
		var names []string
		for _, tool := range tools.GetTools() {
			names = append(names, tool.GetToolName())
		}
		return slices.Contains(names, "trigger-sampling-request") &&
			slices.Contains(names, "trigger-elicitation-request") &&
			slices.Contains(names, "get-roots-list"), nil
	})

	t.Run("resources", func(t *testing.T) {
		r, err := d.hub.ReadResource(ctx, &mcpdv1.ReadResourceRequest{Server: "ev", Uri: "demo://resource/dynamic/text/1"})
		if err != nil {
			t.Fatal(err)
		}
		if c := r.GetContents(); len(c) != 1 || c[0].GetText() == "" || c[0].GetUri() != "demo://resource/dynamic/text/1" {
			t.Errorf("text resource: got %v", c)
		}
		r, err = d.hub.ReadResource(ctx, &mcpdv1.ReadResourceRequest{Server: "ev", Uri: "demo://resource/dynamic/blob/1"})
		if err != nil {
			t.Fatal(err)
		}
		if c := r.GetContents(); len(c) != 1 || len(c[0].GetBlob()) == 0 {
			t.Errorf("blob resource: got %v, want bytes", c)
		}
		list, err := d.hub.ListResources(ctx, &mcpdv1.ListResourcesRequest{Server: "ev"})
		if err != nil || len(list.GetResources()) == 0 {
			t.Errorf("ListResources: got %v %v", list, err)
		}
		tpls, err := d.hub.ListResourceTemplates(ctx, &mcpdv1.ListResourceTemplatesRequest{Server: "ev"})
		if err != nil || len(tpls.GetResourceTemplates()) == 0 {
			t.Errorf("ListResourceTemplates: got %v %v", tpls, err)
		}
	})

	t.Run("prompts and completion", func(t *testing.T) {
		p, err := d.hub.GetPrompt(ctx, &mcpdv1.GetPromptRequest{Server: "ev", Name: "args-prompt", Arguments: map[string]string{"city": "Lisbon"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.GetMessages()) == 0 || !strings.Contains(p.GetMessages()[0].GetContent().GetText().GetText(), "Lisbon") {
			t.Errorf("args-prompt: got %v", p)
		}
		c, err := d.hub.Complete(ctx, &mcpdv1.CompleteRequest{
			Server: "ev", Ref: &mcpdv1.CompleteRequest_Prompt{Prompt: "completable-prompt"},
			Argument: &mcpdv1.CompleteArgument{Name: "department", Value: "Eng"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(c.GetValues(), "Engineering") {
			t.Errorf("completion: got %v, want Engineering", c.GetValues())
		}
		c, err = d.hub.Complete(ctx, &mcpdv1.CompleteRequest{
			Server: "ev", Ref: &mcpdv1.CompleteRequest_Prompt{Prompt: "completable-prompt"},
			Argument: &mcpdv1.CompleteArgument{Name: "name", Value: ""},
			Context:  map[string]string{"department": "Sales"},
		})
		if err != nil || len(c.GetValues()) == 0 {
			t.Errorf("completion with context: got %v %v", c, err)
		}
	})

	t.Run("resource updates", func(t *testing.T) {
		const uri = "demo://resource/dynamic/text/2"
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		sub, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{
			Resources: []*mcpdv1.ResourceRef{{Server: "ev", Uri: uri}},
			Kinds:     []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_RESOURCE_UPDATED},
		})
		if err != nil {
			t.Fatal(err)
		}
		d.mustCall(ctx, t, "mcp__ev__toggle-subscriber-updates", nil)
		defer d.mustCall(ctx, t, "mcp__ev__toggle-subscriber-updates", nil)
		m, err := sub.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if got := m.GetEvent().GetResourceUpdated().GetUri(); got != uri || m.GetEvent().GetServer() != "ev" {
			t.Errorf("got %v, want resource_updated of %s", m.GetEvent(), uri)
		}
	})

	t.Run("progress", func(t *testing.T) {
		var progress []float64
		var result *mcpdv1.CallToolResponse
		for _, m := range d.callStream(ctx, t, "mcp__ev__trigger-long-running-operation", map[string]any{"duration": 0.4, "steps": 4}) {
			if p := m.GetProgress(); p != nil {
				progress = append(progress, p.GetProgress())
				if p.GetTotal() != 4 {
					t.Errorf("progress total: got %v, want 4", p.GetTotal())
				}
			}
			if r := m.GetResult(); r != nil {
				result = r
			}
		}
		if !slices.Equal(progress, []float64{1, 2, 3, 4}) {
			t.Errorf("progress: got %v, want 1..4", progress)
		}
		if !strings.Contains(text(result), "completed") {
			t.Errorf("result: got %q", text(result))
		}
	})

	t.Run("sampling", func(t *testing.T) {
		resp := d.mustCall(ctx, t, "mcp__ev__trigger-sampling-request", map[string]any{"prompt": "a haiku", "maxTokens": 20})
		if got := text(resp); !strings.Contains(got, "agent-model") || !strings.Contains(got, "answer to: Resource trigger-sampling-request context: a haiku") {
			t.Errorf("got %q, want the agent's answer", got)
		}
		// server-everything echoes the result it read as JSON.
		if got := text(resp); !strings.Contains(got, `"priority": 0.25`) || !strings.Contains(got, `"agentTrace": "t-42"`) {
			t.Errorf("got %q, want the answer's annotations and _meta in it", got)
		}
	})

	t.Run("elicitation", func(t *testing.T) {
		resp := d.mustCall(ctx, t, "mcp__ev__trigger-elicitation-request", nil)
		if got := text(resp); !strings.Contains(got, "Ada Lovelace") {
			t.Errorf("got %q, want the agent's answer", got)
		}
	})

	t.Run("logging and roots", func(t *testing.T) {
		// The server logs "Roots updated: N root(s)" at info each time it
		// fetches the client's roots. The change to two roots happens at
		// level error, the change to one root at debug: only the second log
		// may arrive, and a server's events arrive in order.
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		after := uint64(0)
		logs, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{
			Servers: []string{"ev"}, Kinds: []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_LOG}, AfterSequence: &after,
		})
		if err != nil {
			t.Fatal(err)
		}
		setRoots := func(uris ...string) { d.setRoots(ctx, t, uris...) }
		if _, err := d.hub.SetLogLevel(ctx, &mcpdv1.SetLogLevelRequest{Server: "ev", Level: mcpdv1.LogLevel_LOG_LEVEL_ERROR}); err != nil {
			t.Fatal(err)
		}
		setRoots("file:///srv/first", "file:///srv/second")
		// The server has fetched the two roots (and so logged) once its
		// tool shows them.
		for !strings.Contains(text(d.mustCall(ctx, t, "mcp__ev__get-roots-list", nil)), "file:///srv/second") {
			if ctx.Err() != nil {
				t.Fatal("the server never showed the two roots")
			}
		}
		if _, err := d.hub.SetLogLevel(ctx, &mcpdv1.SetLogLevelRequest{Server: "ev", Level: mcpdv1.LogLevel_LOG_LEVEL_DEBUG}); err != nil {
			t.Fatal(err)
		}
		setRoots("file:///srv/project")
		for {
			m, err := logs.Recv()
			if err != nil {
				t.Fatal(err)
			}
			l := m.GetEvent().GetLog()
			data := l.GetData().GetStringValue()
			if strings.Contains(data, "Roots updated: 2 root") {
				t.Fatalf("an info log passed the error level: %v", l)
			}
			if strings.Contains(data, "Roots updated: 1 root") {
				if l.GetLevel() != mcpdv1.LogLevel_LOG_LEVEL_INFO || l.GetLogger() != "everything-server" {
					t.Errorf("roots log: got %v", l)
				}
				break
			}
		}
		resp := d.mustCall(ctx, t, "mcp__ev__get-roots-list", nil)
		if !strings.Contains(text(resp), "file:///srv/project") {
			t.Errorf("get-roots-list: got %q, want the root set with SetRoots", text(resp))
		}

		// Simulated logging sends messages of random levels at an
		// interval; at debug every one of them passes.
		d.mustCall(ctx, t, "mcp__ev__toggle-simulated-logging", nil)
		defer d.mustCall(ctx, t, "mcp__ev__toggle-simulated-logging", nil)
		for {
			m, err := logs.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(strings.ToLower(m.GetEvent().GetLog().GetData().GetStringValue()), "level message") ||
				strings.Contains(strings.ToLower(m.GetEvent().GetLog().GetData().GetStringValue()), "level-message") {
				break
			}
		}
	})

	t.Run("restart replays roots and log level", func(t *testing.T) {
		logs := d.subscribe(ctx, t, "ev", mcpdv1.EventKind_EVENT_KIND_LOG)
		if _, err := d.hub.SetLogLevel(ctx, &mcpdv1.SetLogLevelRequest{Server: "ev", Level: mcpdv1.LogLevel_LOG_LEVEL_ERROR}); err != nil {
			t.Fatal(err)
		}
		d.setRoots(ctx, t, "file:///srv/kept")
		before := d.waitServer(ctx, t, "ev", mcpdv1.ServerState_SERVER_STATE_READY)
		if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "ev"}); err != nil {
			t.Fatal(err)
		}
		after := d.waitServer(ctx, t, "ev", mcpdv1.ServerState_SERVER_STATE_READY)
		if after.GetPid() == before.GetPid() {
			t.Fatalf("pid %d unchanged: the server was not restarted", after.GetPid())
		}
		// The new process asked for the roots and got the ones set before.
		d.waitRoots(ctx, t, "file:///srv/kept")

		// The new session got the error level: a change of roots, which
		// the server logs at info, logs nothing until the level is debug.
		d.setRoots(ctx, t, "file:///srv/a", "file:///srv/b")
		d.waitRoots(ctx, t, "file:///srv/b")
		if _, err := d.hub.SetLogLevel(ctx, &mcpdv1.SetLogLevelRequest{Server: "ev", Level: mcpdv1.LogLevel_LOG_LEVEL_DEBUG}); err != nil {
			t.Fatal(err)
		}
		d.setRoots(ctx, t, "file:///srv/x", "file:///srv/y", "file:///srv/z")
		for {
			m, err := logs.Recv()
			if err != nil {
				t.Fatal(err)
			}
			data := m.GetEvent().GetLog().GetData().GetStringValue()
			if strings.Contains(data, "Roots updated: 2 root") {
				t.Fatalf("an info log passed the replayed error level: %q", data)
			}
			if strings.Contains(data, "Roots updated: 3 root") {
				break
			}
		}
	})

	if n := agent.count(); n < 2 {
		t.Errorf("the agent answered %d requests, want sampling and elicitation at least", n)
	}
}

// setRoots sets the roots of every server.
func (d *daemon) setRoots(ctx context.Context, t *testing.T, uris ...string) {
	t.Helper()
	var roots []*mcpdv1.Root
	for _, u := range uris {
		roots = append(roots, &mcpdv1.Root{Uri: u, Name: path.Base(u)})
	}
	if _, err := d.hub.SetRoots(ctx, &mcpdv1.SetRootsRequest{Roots: roots}); err != nil {
		t.Fatal(err)
	}
}

// waitRoots polls the everything server "ev" until its get-roots-list tool
// (listed only once the server has seen the client's roots capability)
// shows uri.
func (d *daemon) waitRoots(ctx context.Context, t *testing.T, uri string) {
	t.Helper()
	poll(ctx, t, "server ev to show root "+uri, func() (bool, error) {
		resp, err := d.call(ctx, t, "mcp__ev__get-roots-list", nil, 0)
		if err != nil {
			return false, err
		}
		return strings.Contains(text(resp), uri), nil
	})
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testAgent answers sampling with a fixed model and elicitation with a
// fixed name, over HandleServerRequests.
type testAgent struct {
	answered chan struct{}
}

func (a *testAgent) count() int { return len(a.answered) }

func startAgent(ctx context.Context, t *testing.T, d *daemon) *testAgent {
	t.Helper()
	a := &testAgent{answered: make(chan struct{}, 100)}
	answerAgent(ctx, t, d, func(req *mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply {
		reply := &mcpdv1.ServerRequestReply{Id: req.GetId()}
		switch {
		case req.GetSampling() != nil:
			prompt := req.GetSampling().GetMessages()[0].GetContent()[0].GetText().GetText()
			// The answer's annotations and _meta reach the server too.
			priority := 0.25
			meta, _ := structpb.NewStruct(map[string]any{"agentTrace": "t-42"})
			reply.Result = &mcpdv1.ServerRequestReply_Sampling{Sampling: &mcpdv1.SamplingResult{
				Role: mcpdv1.Role_ROLE_ASSISTANT, Model: "agent-model", StopReason: "endTurn",
				Content: []*mcpdv1.Content{{
					Kind:        &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: "answer to: " + prompt}},
					Annotations: &mcpdv1.Annotations{Audience: []mcpdv1.Role{mcpdv1.Role_ROLE_USER}, Priority: &priority},
					Meta:        meta,
				}},
			}}
		case req.GetElicitation() != nil:
			content, _ := structpb.NewStruct(map[string]any{"name": "Ada Lovelace"})
			reply.Result = &mcpdv1.ServerRequestReply_Elicitation{Elicitation: &mcpdv1.ElicitationResult{
				Action: mcpdv1.ElicitationAction_ELICITATION_ACTION_ACCEPT, Content: content,
			}}
		default:
			return nil
		}
		a.answered <- struct{}{}
		return reply
	}, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_ELICITATION)
	return a
}

// TestSubscribeAgainAtOnce subscribes to demo://clock through bin/mcpd,
// closes the stream after an update and opens the next one at once, as a
// client that reconnects does. Every stream gets updates, and the demo
// server, which speaks 2026-07-28, sees one subscriptions/listen for them
// all: mcpd keeps the upstream subscription while the streams come and go
// (an unsubscribe and subscribe in a row could lose it; docs/events.md).
func TestSubscribeAgainAtOnce(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--metrics-listen", addr}})
	if st := d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY); st.GetProtocolVersion() != "2026-07-28" {
		t.Fatalf("demo server speaks %q, want 2026-07-28", st.GetProtocolVersion())
	}
	listens := func() float64 {
		n, _ := scrapeMetrics(ctx, t, addr).value("mcp_client_operation_duration_seconds",
			map[string]string{"server": "demo", "mcp_method_name": "subscriptions/listen"})
		return n
	}
	before := listens()
	const rounds = 4
	for round := range rounds {
		sctx, cancel := context.WithCancel(ctx)
		sub, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{
			Resources: []*mcpdv1.ResourceRef{{Server: "demo", Uri: "demo://clock"}},
			Kinds:     []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_RESOURCE_UPDATED},
		})
		if err != nil {
			cancel()
			t.Fatalf("round %d: Subscribe: %v", round, err)
		}
		// The clock ticks every second; a lost subscription gets nothing
		// until the test's deadline.
		ev, err := sub.Recv()
		cancel()
		if err != nil {
			t.Fatalf("round %d: no update of demo://clock: %v", round, err)
		}
		if got := ev.GetEvent().GetResourceUpdated().GetUri(); got != "demo://clock" {
			t.Fatalf("round %d: got %v, want an update of demo://clock", round, ev)
		}
	}
	if n := listens() - before; n != 1 {
		t.Errorf("the demo server got %v subscriptions/listen for %d streams in a row, want 1", n, rounds)
	}
}

// TestResumeAcrossRestart: a client that resumes with the sequence of an
// event from mcpd's previous run gets a gap first, then what the new run
// has buffered: never the new run's events under the old numbers.
func TestResumeAcrossRestart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	states := []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_SERVER_STATE}
	firstEvent := func(d *daemon, after uint64) *mcpdv1.Event {
		t.Helper()
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		sub, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{Kinds: states, AfterSequence: &after})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := sub.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetEvent()
	}
	d := startDaemon(ctx, t, daemonOptions{})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	seen := firstEvent(d, 0)
	if seen.GetServerState() == nil {
		t.Fatalf("first event of the first run: got %v, want a server state", seen)
	}
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("mcpd exit code %d, want 0", code)
	}

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d2 := startDaemon(ctx, t, daemonOptions{args: []string{"--metrics-listen", addr}})
	d2.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	if ev := firstEvent(d2, seen.GetSequence()); ev.GetGap() == nil {
		t.Errorf("resume with the first run's sequence %d: got %v, want a gap", seen.GetSequence(), ev)
	}
	// The second run dropped nothing: the gap is the first run's.
	if n, _ := scrapeMetrics(ctx, t, addr).value("mcpd_events_dropped_total", nil); n != 0 {
		t.Errorf("mcpd_events_dropped_total after a resume from the first run: got %v, want 0", n)
	}
	if ev := firstEvent(d2, 0); ev.GetServerState() == nil || ev.GetSequence() <= seen.GetSequence() {
		t.Errorf("the second run's first event: got %v, want a server state numbered after the first run's %d", ev, seen.GetSequence())
	}
}

// TestResumeWithoutUnwantedGap: a stream that follows one quiet server
// resumes without a gap after other servers' events pushed everything out
// of the buffer; a stream that wanted some of them gets one.
func TestResumeWithoutUnwantedGap(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--event-buffer", "2"}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	d.connect(ctx, t, "quiet", testBinary(t), nil, map[string]string{fakeServerEnv: fakeFlood})
	stateOf := func(server string) *mcpdv1.SubscribeRequest {
		return &mcpdv1.SubscribeRequest{Servers: []string{server}, Kinds: []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_SERVER_STATE}}
	}
	// Where a stream opened now starts, as a client learns it.
	sctx, cancel := context.WithCancel(ctx)
	sub, err := d.hub.Subscribe(sctx, stateOf("quiet"))
	if err != nil {
		t.Fatal(err)
	}
	header, err := sub.Header()
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	after, err := strconv.ParseUint(header.Get("mcpd-after-sequence")[0], 10, 64)
	if err != nil {
		t.Fatalf("mcpd-after-sequence: %v", err)
	}
	for range 3 { // six state events of demo: more than the buffer holds
		if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "demo"}); err != nil {
			t.Fatalf("RestartServer: %v", err)
		}
		d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	}
	resume := func(server string) mcpdv1.MCPHub_SubscribeClient {
		t.Helper()
		req := stateOf(server)
		req.AfterSequence = &after
		sctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		sub, err := d.hub.Subscribe(sctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return sub
	}
	quiet, demo := resume("quiet"), resume("demo")
	if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "quiet"}); err != nil {
		t.Fatalf("RestartServer: %v", err)
	}
	if m, err := quiet.Recv(); err != nil || m.GetEvent().GetServerState() == nil || m.GetEvent().GetServer() != "quiet" {
		t.Errorf("stream of quiet's states: got %v, %v; want quiet's next state and no gap", m.GetEvent(), err)
	}
	if m, err := demo.Recv(); err != nil || m.GetEvent().GetGap() == nil {
		t.Errorf("stream of demo's states: got %v, %v; want a gap", m.GetEvent(), err)
	}
}

// TestRestartAnnouncesSubscribedResources: a resource followed across a
// restart of its server gets one update once it is subscribed again (what
// changed while no session followed it was never notified), before the
// server is READY. demo://readme never changes, so the update is mcpd's.
func TestRestartAnnouncesSubscribedResources(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{
		Servers: []string{"demo"},
		// In this order: the clock's first update (it ticks every second)
		// says that the readme is followed too.
		Resources: []*mcpdv1.ResourceRef{{Server: "demo", Uri: "demo://readme"}, {Server: "demo", Uri: "demo://clock"}},
		Kinds:     []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_RESOURCE_UPDATED, mcpdv1.EventKind_EVENT_KIND_SERVER_STATE},
	})
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := sub.Recv()
		if err != nil {
			t.Fatalf("waiting for an update of demo://clock: %v", err)
		}
		if u := resp.GetEvent().GetResourceUpdated(); u.GetUri() == "demo://readme" {
			t.Fatalf("an update of demo://readme before the restart: %v", resp)
		} else if u.GetUri() == "demo://clock" {
			break
		}
	}
	if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "demo"}); err != nil {
		t.Fatalf("RestartServer: %v", err)
	}
	var updates int
	for {
		resp, err := sub.Recv()
		if err != nil {
			t.Fatalf("waiting for demo to be READY again: %v (updates of demo://readme: %d)", err, updates)
		}
		ev := resp.GetEvent()
		if u := ev.GetResourceUpdated(); u != nil && u.GetUri() == "demo://readme" {
			updates++
		}
		if ev.GetServerState().GetState() == mcpdv1.ServerState_SERVER_STATE_READY {
			break
		}
	}
	if updates != 1 {
		t.Errorf("updates of demo://readme across the restart: got %d, want 1", updates)
	}
}
