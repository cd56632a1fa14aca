package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestPolls polls the demo server through bin/mcpd: demo://clock changes
// on every tick of the demo server's clock (1s, the shortest poll
// interval), demo://readme never does, the echo tool answers the same to
// the same arguments, and demo://nope does not exist.
func TestPolls(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	t.Run("IntervalFloor", func(t *testing.T) {
		for _, iv := range []time.Duration{500 * time.Millisecond, 0} {
			_, err := d.hub.StartPoll(ctx, &mcpdv1.StartPollRequest{
				Server:   "demo",
				Target:   &mcpdv1.StartPollRequest_ResourceUri{ResourceUri: "demo://clock"},
				Interval: durationpb.New(iv),
			})
			wantCode(t, err, codes.InvalidArgument)
		}
		_, err := d.hub.StartPoll(ctx, &mcpdv1.StartPollRequest{Server: "nope", Target: &mcpdv1.StartPollRequest_ResourceUri{ResourceUri: "demo://clock"}})
		wantCode(t, err, codes.NotFound)
		_, err = d.hub.StopPoll(ctx, &mcpdv1.StopPollRequest{Id: "poll-404"})
		wantCode(t, err, codes.NotFound)
	})

	sub := d.subscribePolls(ctx, t, nil)
	start := func(target any) *mcpdv1.Poll {
		t.Helper()
		req := &mcpdv1.StartPollRequest{Server: "demo", Interval: durationpb.New(time.Second)}
		switch v := target.(type) {
		case string:
			req.Target = &mcpdv1.StartPollRequest_ResourceUri{ResourceUri: v}
		case *mcpdv1.PollToolCall:
			req.Target = &mcpdv1.StartPollRequest_Tool{Tool: v}
		}
		resp, err := d.hub.StartPoll(ctx, req)
		if err != nil {
			t.Fatalf("StartPoll %v: %v", target, err)
		}
		return resp.GetPoll()
	}
	clock := start("demo://clock")
	readme := start("demo://readme")
	echo := start(&mcpdv1.PollToolCall{Name: "echo", Arguments: mustStruct(t, map[string]any{"message": "polled"})})
	missing := start("demo://nope")

	// The baseline of each, then a change of the clock.
	baselines := map[string]*mcpdv1.PollResult{}
	var clockChange *mcpdv1.Event
	for len(baselines) < 4 || clockChange == nil {
		ev := recvPoll(ctx, t, sub)
		r := ev.GetPollResult()
		switch {
		case r.GetBaseline():
			if baselines[r.GetPollId()] != nil {
				t.Fatalf("a second baseline for %s: %v", r.GetPollId(), r)
			}
			baselines[r.GetPollId()] = r
		case r.GetPollId() == clock.GetId():
			clockChange = ev
		default:
			t.Fatalf("a change of a poll that does not change: %v", ev)
		}
	}
	if got := baselines[clock.GetId()].GetContents(); len(got) != 1 || got[0].GetText() == "" || got[0].GetUri() != "demo://clock" {
		t.Errorf("clock baseline: got %v, want the clock's text", got)
	}
	if got, base := clockChange.GetPollResult().GetContents()[0].GetText(), baselines[clock.GetId()].GetContents()[0].GetText(); got == base {
		t.Errorf("clock change: got %q, the same as the baseline", got)
	}
	if clockChange.GetServer() != "demo" || clockChange.GetPollResult().GetResourceUri() != "demo://clock" {
		t.Errorf("clock change: got %v, want server demo and uri demo://clock", clockChange)
	}
	if r := baselines[echo.GetId()]; r.GetTool() != "mcp__demo__echo" || len(r.GetToolResult().GetContent()) != 1 ||
		r.GetToolResult().GetContent()[0].GetText().GetText() != "polled" {
		t.Errorf("echo baseline: got %v, want the tool's result", r)
	}
	if r := baselines[missing.GetId()]; r.GetError() == "" || len(r.GetContents()) != 0 {
		t.Errorf("missing resource baseline: got %v, want an error", r)
	}

	t.Run("Unchanged", func(t *testing.T) {
		// A poll that does not change published its baseline only; one
		// that fails keeps polling.
		for _, p := range []*mcpdv1.Poll{readme, echo, missing} {
			st := d.waitPoll(ctx, t, p.GetId(), func(p *mcpdv1.Poll) bool { return p.GetPolls() >= 3 })
			if st.GetChanges() != 1 {
				t.Errorf("poll %s after %d polls: got %d changes, want 1 (the baseline)", st.GetId(), st.GetPolls(), st.GetChanges())
			}
		}
		if st := d.waitPoll(ctx, t, missing.GetId(), nil); st.GetLastError() == "" {
			t.Errorf("failing poll: got no last_error: %v", st)
		}
	})

	t.Run("Resume", func(t *testing.T) {
		// A stream that resumes from the start gets the clock's baseline
		// again, and only that poll's events.
		resumed := d.subscribePolls(ctx, t, &mcpdv1.SubscribeRequest{AfterSequence: proto.Uint64(0), PollIds: []string{clock.GetId()}})
		ev := recvPoll(ctx, t, resumed)
		if r := ev.GetPollResult(); r.GetPollId() != clock.GetId() || !r.GetBaseline() {
			t.Errorf("first resumed event: got %v, want the clock's baseline", ev)
		}
		if ev = recvPoll(ctx, t, resumed); ev.GetPollResult().GetPollId() != clock.GetId() || ev.GetPollResult().GetBaseline() {
			t.Errorf("second resumed event: got %v, want a change of the clock", ev)
		}
	})

	t.Run("UpstreamRestart", func(t *testing.T) {
		before := d.waitPoll(ctx, t, readme.GetId(), nil).GetPolls()
		if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "demo"}); err != nil {
			t.Fatalf("RestartServer: %v", err)
		}
		d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
		// The polls go on with the new process; the readme is still the
		// same, so its baseline stands.
		st := d.waitPoll(ctx, t, readme.GetId(), func(p *mcpdv1.Poll) bool { return p.GetPolls() >= before+2 })
		if st.GetChanges() != 1 {
			t.Errorf("readme poll after the restart: got %d changes, want 1", st.GetChanges())
		}
		after := d.waitPoll(ctx, t, clock.GetId(), nil).GetChanges()
		d.waitPoll(ctx, t, clock.GetId(), func(p *mcpdv1.Poll) bool { return p.GetChanges() > after })
	})

	t.Run("StopPoll", func(t *testing.T) {
		if _, err := d.hub.StopPoll(ctx, &mcpdv1.StopPollRequest{Id: echo.GetId()}); err != nil {
			t.Fatalf("StopPoll: %v", err)
		}
		_, err := d.hub.StopPoll(ctx, &mcpdv1.StopPollRequest{Id: echo.GetId()})
		wantCode(t, err, codes.NotFound)
	})

	t.Run("ServerRemoved", func(t *testing.T) {
		if _, err := d.hub.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: "demo"}); err != nil {
			t.Fatalf("DisconnectServer: %v", err)
		}
		resp, err := d.hub.ListPolls(ctx, &mcpdv1.ListPollsRequest{})
		if err != nil {
			t.Fatalf("ListPolls: %v", err)
		}
		if len(resp.GetPolls()) != 0 {
			t.Errorf("polls after the server was removed: got %v, want none", resp.GetPolls())
		}
		_, err = d.hub.StopPoll(ctx, &mcpdv1.StopPollRequest{Id: clock.GetId()})
		wantCode(t, err, codes.NotFound)
	})
}

// TestPollFallback subscribes to a resource of a server that cannot
// notify: with a fallback interval, mcpd polls it and reports its changes
// as resource updates.
func TestPollFallback(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	d.connectFake(ctx, t, "quiet", fakeQuietClock)
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	sub, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{
		Resources:            []*mcpdv1.ResourceRef{{Server: "quiet", Uri: fakeClockURI}},
		FallbackPollInterval: durationpb.New(time.Second),
	})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	for range 2 {
		ev, err := sub.Recv()
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		if ev.GetEvent().GetResourceUpdated().GetUri() != fakeClockURI {
			t.Fatalf("got %v, want an update of %s", ev, fakeClockURI)
		}
	}

	// The stream's interest outlives the server: connected again under
	// the same name, it is read again.
	if _, err := d.hub.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: "quiet"}); err != nil {
		t.Fatal(err)
	}
	d.connectFake(ctx, t, "quiet", fakeQuietClock)
	back := false
	for {
		resp, err := sub.Recv()
		if err != nil {
			t.Fatalf("Subscribe after the server came back: %v", err)
		}
		ev := resp.GetEvent()
		if ev.GetServerState().GetState() == mcpdv1.ServerState_SERVER_STATE_READY {
			back = true
		}
		if back && ev.GetResourceUpdated().GetUri() == fakeClockURI {
			break
		}
	}
}

// subscribePolls opens a Subscribe stream of poll results (req may narrow
// it further); it ends with the test.
func (d *daemon) subscribePolls(ctx context.Context, t *testing.T, req *mcpdv1.SubscribeRequest) mcpdv1.MCPHub_SubscribeClient {
	t.Helper()
	if req == nil {
		req = &mcpdv1.SubscribeRequest{}
	}
	req.Kinds = []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_POLL_RESULT}
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	sub, err := d.hub.Subscribe(sctx, req)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	return sub
}

// recvPoll reads the next poll result event.
func recvPoll(ctx context.Context, t *testing.T, sub mcpdv1.MCPHub_SubscribeClient) *mcpdv1.Event {
	t.Helper()
	for {
		resp, err := sub.Recv()
		if err != nil {
			t.Fatalf("Subscribe: %v (%v)", err, ctx.Err())
		}
		if resp.GetEvent().GetPollResult() != nil {
			return resp.GetEvent()
		}
	}
}

// waitPoll polls ListPolls until the poll satisfies cond (nil: at once)
// and returns it.
func (d *daemon) waitPoll(ctx context.Context, t *testing.T, id string, cond func(*mcpdv1.Poll) bool) *mcpdv1.Poll {
	t.Helper()
	var found *mcpdv1.Poll
	poll(ctx, t, "poll "+id, func() (bool, error) {
		resp, err := d.hub.ListPolls(ctx, &mcpdv1.ListPollsRequest{})
		if err != nil {
			return false, err
		}
		for _, p := range resp.GetPolls() {
			if p.GetId() == id {
				found = p
				return cond == nil || cond(p), nil
			}
		}
		t.Fatalf("poll %s is not listed: %v", id, resp.GetPolls())
		return false, nil
	})
	return found
}

// TestResumeAfterSubscriptionLapsed: a stream that resumes after mcpd let
// the resource's subscription go (its last holder left, and the linger
// passed) gets an update of the resource, which may have changed while
// nobody followed it: here it did, and the server will not say so again.
func TestResumeAfterSubscriptionLapsed(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	d.connectFake(ctx, t, "note", fakeNote)
	note := []*mcpdv1.ResourceRef{{Server: "note", Uri: fakeNoteURI}}
	updates := []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_RESOURCE_UPDATED}
	subscribed := func() string { return text(d.mustCall(ctx, t, "mcp__note__subscribed", nil)) }

	sctx, cancel := context.WithCancel(ctx)
	sub, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{Resources: note, Kinds: updates})
	if err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "the note server to have a subscriber", func() (bool, error) { return subscribed() == "true", nil })
	d.mustCall(ctx, t, "mcp__note__set", map[string]any{"text": "v1"})
	first, err := sub.Recv()
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	poll(ctx, t, "mcpd to let the subscription go", func() (bool, error) { return subscribed() == "false", nil })
	d.mustCall(ctx, t, "mcp__note__set", map[string]any{"text": "v2"}) // nobody hears of it

	after := first.GetEvent().GetSequence()
	resumed, err := d.hub.Subscribe(ctx, &mcpdv1.SubscribeRequest{Resources: note, Kinds: updates, AfterSequence: &after})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := resumed.Recv()
	if err != nil {
		t.Fatalf("the resumed stream: %v", err)
	}
	if got := ev.GetEvent().GetResourceUpdated().GetUri(); got != fakeNoteURI {
		t.Errorf("the resumed stream's first event: got %v, want an update of %s", ev, fakeNoteURI)
	}
}
