package main

import (
	"os"
	"path/filepath"
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
