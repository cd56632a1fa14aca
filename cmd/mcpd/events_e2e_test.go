package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestResubscribeRefused: a server that accepted a resource subscription
// refuses it on its next session (here after a restart). The stream that
// holds it stays open, but its updates no longer come: the server's status
// says so in its notes, and a stream that asks for the resource now ends
// with the server's refusal, as it would have had the server refused it
// from the start, instead of opening on a subscription that is not there.
// Once the server accepts again, a new stream subscribes upstream for
// every holder, and the note goes.
func TestResubscribeRefused(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	mark := filepath.Join(t.TempDir(), "refuse")
	cfg := stdioConfig("note", testBinary(t), nil, map[string]string{fakeServerEnv: fakeNote, fakeMarkEnv: mark})
	cfg.ProtocolVersion = "2025-11-25" // a legacy session answers subscribe
	if _, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: cfg}); err != nil {
		t.Fatal(err)
	}
	note := []*mcpdv1.ResourceRef{{Server: "note", Uri: fakeNoteURI}}
	subscribed := func() string { return text(d.mustCall(ctx, t, "mcp__note__subscribed", nil)) }
	refusalNote := func() string {
		resp, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "note"})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range resp.GetServer().GetNotes() {
			if strings.Contains(n, fakeNoteURI) {
				return n
			}
		}
		return ""
	}

	held, err := d.hub.Subscribe(ctx, &mcpdv1.SubscribeRequest{Resources: note})
	if err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "the note server to have a subscriber", func() (bool, error) { return subscribed() == "true", nil })
	if n := refusalNote(); n != "" {
		t.Fatalf("a note before any refusal: %q", n)
	}

	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "note"}); err != nil {
		t.Fatal(err)
	}
	d.waitServer(ctx, t, "note", mcpdv1.ServerState_SERVER_STATE_READY)
	if subscribed() != "false" {
		t.Fatal("the restarted server has a subscriber, though it refuses them")
	}
	if n := refusalNote(); !strings.Contains(n, "fake: subscriptions refused") {
		t.Errorf("notes after the refused subscription: got %q, want one giving the refusal of %s", n, fakeNoteURI)
	}

	// A stream that asks for the resource now learns of the refusal. Its
	// kinds let through the state of the server connected below: before
	// it ended, the stream would get that first.
	later, err := d.hub.Subscribe(ctx, &mcpdv1.SubscribeRequest{Resources: note, Kinds: []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_SERVER_STATE}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := later.Header(); err != nil { // the stream reads the bus from here
		t.Fatal(err)
	}
	d.connectFake(ctx, t, "other", fakeNote)
	ev, err := later.Recv()
	if err == nil {
		t.Fatalf("a stream of a refused subscription: got %v, want the server's refusal", ev)
	}
	wantCode(t, err, codes.InvalidArgument)

	// The server accepts again: the next stream subscribes for all.
	if err := os.Remove(mark); err != nil {
		t.Fatal(err)
	}
	again, err := d.hub.Subscribe(ctx, &mcpdv1.SubscribeRequest{Resources: note})
	if err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "the note server to have a subscriber again", func() (bool, error) { return subscribed() == "true", nil })
	if n := refusalNote(); n != "" {
		t.Errorf("notes once subscribed again: got %q, want none on %s", n, fakeNoteURI)
	}
	d.mustCall(ctx, t, "mcp__note__set", map[string]any{"text": "v2"})
	// The update reaches both streams: the new one has nothing else of
	// the note to get first, the held one gets it after what came before.
	update := nextUpdate(t, again, fakeNoteURI)
	for {
		if ev := nextUpdate(t, held, fakeNoteURI); ev.GetSequence() >= update.GetSequence() {
			if ev.GetSequence() != update.GetSequence() {
				t.Errorf("the held stream: got update %d, want %d", ev.GetSequence(), update.GetSequence())
			}
			break
		}
	}
}

// nextUpdate reads sub up to the next update of uri.
func nextUpdate(t *testing.T, sub mcpdv1.MCPHub_SubscribeClient, uri string) *mcpdv1.Event {
	t.Helper()
	for {
		resp, err := sub.Recv()
		if err != nil {
			t.Fatalf("waiting for an update of %s: %v", uri, err)
		}
		if resp.GetEvent().GetResourceUpdated().GetUri() == uri {
			return resp.GetEvent()
		}
	}
}

// TestResumeFromForeignSequence: a resume point beyond every number this
// run of mcpd gave out comes from elsewhere (another replica, or a run
// before a clock that went back): the client cannot have seen any event of
// this run, so the stream starts with a gap, then everything buffered,
// rather than from now, which loses, unmarked, what happened meanwhile.
func TestResumeFromForeignSequence(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	afterHeader := func(sub mcpdv1.MCPHub_SubscribeClient) uint64 {
		t.Helper()
		md, err := sub.Header()
		if err != nil {
			t.Fatal(err)
		}
		v := md.Get("mcpd-after-sequence")
		if len(v) != 1 {
			t.Fatalf("mcpd-after-sequence: got %q, want one number", v)
		}
		n, err := strconv.ParseUint(v[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	now, err := d.hub.Subscribe(ctx, &mcpdv1.SubscribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	last := afterHeader(now)

	foreign := last + 1_000_000
	sub, err := d.hub.Subscribe(ctx, &mcpdv1.SubscribeRequest{AfterSequence: &foreign})
	if err != nil {
		t.Fatal(err)
	}
	afterHeader(sub) // the stream reads the bus from here
	d.connectFake(ctx, t, "other", fakeNote)
	first, err := sub.Recv()
	if err != nil {
		t.Fatal(err)
	}
	gap := first.GetEvent().GetGap()
	if gap == nil {
		t.Fatalf("first event after a foreign resume point: got %v, want a gap", first)
	}
	if got := first.GetEvent().GetSequence(); got != gap.GetLastSequence() || got >= last {
		t.Errorf("gap: got sequence %d, want its last sequence, below this run's events (last %d)", got, last)
	}
	// Then what this run buffered, from its first event: the demo
	// server's start.
	next, err := sub.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if ev := next.GetEvent(); ev.GetSequence() != gap.GetLastSequence()+1 || ev.GetServer() != "demo" || ev.GetServerState() == nil {
		t.Errorf("after the gap: got %v, want this run's first event, demo's state, %d", ev, gap.GetLastSequence()+1)
	}
}

// TestResumeFromZeroAfterSubscriptionLapsed: a stream opened with
// after_sequence 0 that saw no event resumes with 0 again (the Python and
// TypeScript clients do). If mcpd let the resource's subscription go
// meanwhile, the resumed stream gets an update of it, as one resumed from
// any other number does: the resource changed while nobody followed it,
// and the server will not say so again.
func TestResumeFromZeroAfterSubscriptionLapsed(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	d.connectFake(ctx, t, "note", fakeNote)
	note := []*mcpdv1.ResourceRef{{Server: "note", Uri: fakeNoteURI}}
	updates := []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_RESOURCE_UPDATED}
	subscribed := func() string { return text(d.mustCall(ctx, t, "mcp__note__subscribed", nil)) }
	zero := uint64(0)

	sctx, cancel := context.WithCancel(ctx)
	if _, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{Resources: note, Kinds: updates, AfterSequence: &zero}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "the note server to have a subscriber", func() (bool, error) { return subscribed() == "true", nil })
	cancel()
	poll(ctx, t, "mcpd to let the subscription go", func() (bool, error) { return subscribed() == "false", nil })
	d.mustCall(ctx, t, "mcp__note__set", map[string]any{"text": "v2"}) // nobody hears of it

	resumed, err := d.hub.Subscribe(ctx, &mcpdv1.SubscribeRequest{Resources: note, Kinds: updates, AfterSequence: &zero})
	if err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "the note server to have a subscriber again", func() (bool, error) { return subscribed() == "true", nil })
	// Without the update, the stream would wait for a change that came
	// already: this one would be the first it hears of.
	d.mustCall(ctx, t, "mcp__note__set", map[string]any{"text": "v3"})
	ev, err := resumed.Recv()
	if err != nil {
		t.Fatal(err)
	}
	second, err := resumed.Recv()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*mcpdv1.SubscribeResponse{ev, second} {
		if e.GetEvent().GetResourceUpdated().GetUri() != fakeNoteURI {
			t.Errorf("resumed stream: got %v, want updates of %s", e, fakeNoteURI)
		}
	}
}
