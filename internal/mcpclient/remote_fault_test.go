package mcpclient

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
)

// unknownSession400 answers requests for sessions next does not know the
// way TypeScript servers do: 400 with a JSON-RPC error body.
func unknownSession400(srv *mcp.Server, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			known := false
			for ss := range srv.Sessions() {
				known = known || ss.ID() == id
			}
			if !known {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// subscribedRemote connects server "r", an initialize-era HTTP server
// (old) behind obs, through which a test can swap it for another, and
// subscribes to testDocURI on it until the test ends.
func subscribedRemote(ctx context.Context, t *testing.T) (*Manager, *events.Bus, *observer, *mcp.Server) {
	t.Helper()
	old := newRemoteMCPServer(legacyVersions)
	obs := newObserver(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return old }, nil))
	ts := serveRemote(t, obs)
	t.Cleanup(func() { closeSessions(old) })
	m, bus, _ := remoteManager(t, nil)
	if st, err := m.Connect(ctx, remoteConfig("r", config.TransportHTTP, ts.URL), false); err != nil || st.State != StateReady {
		t.Fatalf("connect: %v %v (%s)", st.State, err, st.LastError)
	}
	release, err := m.SubscribeResource(ctx, "r", testDocURI)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return m, bus, obs, old
}

// TestSubscriptionSurvivesServerRestart restarts an HTTP server, which
// forgets every session, while a resource subscription is open: mcpd
// notices (404, or 400 for an unknown session), builds a new session,
// subscribes again, and updates keep arriving on the same bus
// subscription.
func TestSubscriptionSurvivesServerRestart(t *testing.T) {
	tests := []struct {
		name string
		// restarted wraps a fresh server as the restarted one serves it.
		restarted func(srv *mcp.Server, h http.Handler) http.Handler
	}{
		{"404 unknown session", func(_ *mcp.Server, h http.Handler) http.Handler { return h }},
		{"400 unknown session", unknownSession400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			m, bus, obs, old := subscribedRemote(ctx, t)
			waitResourceUpdate(ctx, t, bus, old, "r", testDocURI)

			// The restart: a new server process knows no session, and the
			// old one's streams end.
			fresh := newRemoteMCPServer(legacyVersions)
			t.Cleanup(func() { closeSessions(fresh) })
			obs.swap(tt.restarted(fresh, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fresh }, nil)))
			closeSessions(old)

			// A call may meet the lost session (UNAVAILABLE) or already the
			// new one; either way the server comes back READY by itself.
			_, _ = m.CallTool(ctx, "mcp__r__echo", map[string]any{"message": "x"}, CallOptions{})
			eventually(ctx, t, "server r back READY after a restart", func() bool {
				st, _ := m.Get("r")
				return st.State == StateReady && st.Restarts >= 1
			})
			if _, err := m.CallTool(ctx, "mcp__r__echo", map[string]any{"message": "x"}, CallOptions{}); err != nil {
				t.Fatalf("call after the restart: %v", err)
			}
			// The subscription was replayed on the new session.
			waitResourceUpdate(ctx, t, bus, fresh, "r", testDocURI)
			if n := m.ResourceInterest("r", testDocURI); n != 1 {
				t.Errorf("interest after the restart: got %d, want 1", n)
			}
		})
	}
}

// TestResubscribeAnnouncesUpdate: a resource that changed while its
// server was away is never notified (the new session's subscription only
// sees later changes), so mcpd publishes one update of each resource it
// subscribes again on a new session: its followers read it again.
func TestResubscribeAnnouncesUpdate(t *testing.T) {
	ctx := testContext(t)
	m, bus, obs, old := subscribedRemote(ctx, t)
	sub := bus.Subscribe(events.Filter{Servers: []string{"r"}, Kinds: []events.Kind{events.KindResourceUpdated, events.KindServerState}}, nil)
	defer sub.Close()

	// The server restarts and knows no session; the fresh one sends no
	// update of its own.
	fresh := newRemoteMCPServer(legacyVersions)
	t.Cleanup(func() { closeSessions(fresh) })
	obs.swap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fresh }, nil))
	closeSessions(old)
	_, _ = m.CallTool(ctx, "mcp__r__echo", map[string]any{"message": "x"}, CallOptions{})

	var updated bool
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for the server to be READY again: %v (an update seen: %v)", err, updated)
		}
		if ev.Kind == events.KindResourceUpdated {
			if ev.URI != testDocURI {
				t.Fatalf("update of %q, want %q", ev.URI, testDocURI)
			}
			updated = true
		}
		if ev.Kind == events.KindServerState && ev.State == StateReady.String() {
			break
		}
	}
	if !updated {
		t.Errorf("no update of %s once it was subscribed again on the new session", testDocURI)
	}
}

// TestStatelessSubscriptionSurvivesServerRestart restarts a stateless
// 2026-07-28 server while a resource subscription is open. Such a server
// has no sessions to forget: the only sign is the subscriptions/listen
// stream ending. mcpd rebuilds the session and listens again, and updates
// keep arriving.
func TestStatelessSubscriptionSurvivesServerRestart(t *testing.T) {
	ctx := testContext(t)
	stateless := &mcp.StreamableHTTPOptions{Stateless: true}
	old := newRemoteMCPServer(nil)
	obs := newObserver(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return old }, stateless))
	ts := serveRemote(t, obs)

	m, bus, _ := remoteManager(t, nil)
	st, err := m.Connect(ctx, remoteConfig("s", config.TransportHTTP, ts.URL), false)
	if err != nil || st.State != StateReady || st.ProtocolVersion != "2026-07-28" {
		t.Fatalf("connect: %v %v %q (%s)", st.State, err, st.ProtocolVersion, st.LastError)
	}
	release, err := m.SubscribeResource(ctx, "s", testDocURI)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	waitResourceUpdate(ctx, t, bus, old, "s", testDocURI)

	// The restart: the old process and its open streams are gone.
	fresh := newRemoteMCPServer(nil)
	obs.swap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fresh }, stateless))
	ts.CloseClientConnections()

	eventually(ctx, t, "server s back READY after a restart", func() bool {
		st, _ := m.Get("s")
		return st.State == StateReady && st.Restarts >= 1
	})
	waitResourceUpdate(ctx, t, bus, fresh, "s", testDocURI)
}

// TestReconnectFailuresPublishState: a remote server that goes away after
// READY is RECONNECTING, and each failed reconnect whose error differs from
// the last one published says so on the event bus, so that an agent
// following events learns why the server stays away; the same error again
// publishes nothing.
func TestReconnectFailuresPublishState(t *testing.T) {
	ctx := testContext(t)
	srv := newRemoteMCPServer(legacyVersions)
	obs := newObserver(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ts := serveRemote(t, obs)
	t.Cleanup(func() { closeSessions(srv) })
	m, bus := retryingManager(t)
	if st, err := m.Connect(ctx, remoteConfig("r", config.TransportHTTP, ts.URL), false); err != nil || st.State != StateReady {
		t.Fatalf("connect: %v %v (%s)", st.State, err, st.LastError)
	}
	sub := bus.Subscribe(events.Filter{Servers: []string{"r"}, Kinds: []events.Kind{events.KindServerState}}, nil)
	defer sub.Close()

	// The server goes away: its deployment now answers 503 to everything,
	// so the session ends (its stream cannot be reopened) and every
	// reconnect fails with another error (initialize is refused).
	obs.swap(forgetful(http.StatusServiceUnavailable, "down for maintenance"))
	closeSessions(srv)
	_, _ = m.CallTool(ctx, "mcp__r__echo", map[string]any{"message": "x"}, CallOptions{Timeout: time.Second})
	// The session's end names the failed stream; a reconnect, the
	// initialize that failed.
	expectRetryEvents(ctx, t, m, sub, StateReconnecting, `"initialize"`)
}

// TestNeverReadyFailuresPublishState: a remote server that was never ready
// is FAILED and tried again in the background; when the attempts begin to
// fail differently, an event says so, and the same error again publishes
// nothing.
func TestNeverReadyFailuresPublishState(t *testing.T) {
	ctx := testContext(t)
	obs := newObserver(forgetful(http.StatusServiceUnavailable, "down for maintenance"))
	ts := serveRemote(t, obs)
	m, bus := retryingManager(t)
	sub := bus.Subscribe(events.Filter{Servers: []string{"r"}, Kinds: []events.Kind{events.KindServerState}}, nil)
	defer sub.Close()
	if st, _ := m.Connect(ctx, remoteConfig("r", config.TransportHTTP, ts.URL), false); st.State != StateFailed {
		t.Fatalf("connect: got %v (%s), want failed", st.State, st.LastError)
	}
	obs.swap(forgetful(http.StatusBadGateway, "no upstream"))
	expectRetryEvents(ctx, t, m, sub, StateFailed, "Bad Gateway")
}

// retryingManager returns a Manager with a bus that tries remote servers
// again every few milliseconds.
func retryingManager(t *testing.T) (*Manager, *events.Bus) {
	return busManager(t, &Options{
		ProbeTimeout:      20 * time.Second,
		RestartBackoff:    10 * time.Millisecond,
		RestartBackoffMax: 20 * time.Millisecond,
		Dialer:            NewRemoteDialer(&RemoteOptions{HTTPClient: testHTTPClient(t)}),
	})
}

// expectRetryEvents reads server r's state events until one in state whose
// error contains errPart, lets five more attempts fail the same way, and
// checks that no event repeated the one before it.
func expectRetryEvents(ctx context.Context, t *testing.T, m *Manager, sub *events.Subscription, state State, errPart string) {
	t.Helper()
	var got []events.Event
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for a %v event with %q in its error: %v; got %+v", state, errPart, err, got)
		}
		got = append(got, ev)
		if ev.State == state.String() && strings.Contains(ev.Error, errPart) {
			break
		}
	}
	st, _ := m.Get("r")
	eventually(ctx, t, "more failed attempts", func() bool {
		now, _ := m.Get("r")
		return now.Restarts >= st.Restarts+5
	})
	if st, _ := m.Get("r"); st.State != state || !strings.Contains(st.LastError, errPart) {
		t.Fatalf("got state %v, last error %q; want %v with %q (events: %+v)", st.State, st.LastError, state, errPart, got)
	}
	for {
		waitCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		ev, err := sub.Next(waitCtx)
		cancel()
		if err != nil {
			break
		}
		got = append(got, ev)
	}
	for i := 1; i < len(got); i++ {
		if got[i].State == got[i-1].State && got[i].Error == got[i-1].Error {
			t.Errorf("event %d repeats the one before: %q %q", i, got[i].State, got[i].Error)
		}
	}
}

// TestRetryFailuresIgnoreAddresses: failed attempts whose errors differ
// only in the connection's addresses (the local port is new for each
// attempt, the peer may change behind round-robin DNS) are one failure:
// one event, not one per attempt.
func TestRetryFailuresIgnoreAddresses(t *testing.T) {
	ctx := testContext(t)
	bus := events.NewBus(nil)
	defer bus.Close()
	u := newUpstream(config.Server{Name: "r", Kind: config.TransportHTTP}, (&Options{Events: bus}).withDefaults(), ctx, newSettings(), nil)
	sub := bus.Subscribe(events.Filter{Servers: []string{"r"}, Kinds: []events.Kind{events.KindServerState}}, nil)
	defer sub.Close()
	u.setState(StateReconnecting, "session ended")
	for _, err := range []string{
		"read tcp 10.0.0.2:53422->10.0.0.9:443: read: connection reset by peer",
		"read tcp 10.0.0.2:53423->10.0.0.9:443: read: connection reset by peer",
		"read tcp 10.0.0.2:53424->10.0.0.10:443: read: connection reset by peer",
		"read tcp [fd00::2]:53425->[fd00::9]:443: read: connection reset by peer",
		"dial tcp 10.0.0.9:443: connect: connection refused",
		"dial tcp 10.0.0.10:443: connect: connection refused",
		"dial tcp: lookup mcp.example.com: no such host",
	} {
		u.retryFailed(StateReconnecting, err)
	}
	// Then a change of state: the event after those wanted must be its.
	u.setState(StateReady, "")
	for i, w := range []string{
		"session ended",
		"read tcp 10.0.0.2:53422->10.0.0.9:443: read: connection reset by peer",
		"dial tcp 10.0.0.9:443: connect: connection refused",
		"dial tcp: lookup mcp.example.com: no such host",
		"",
	} {
		ev, err := sub.Next(ctx)
		if err != nil || ev.Error != w {
			t.Fatalf("event %d: got %q %q, %v; want %q", i, ev.State, ev.Error, err, w)
		}
	}
}

// TestUnreachableServerIsNotProbed: a remote server nobody listens for
// tells nothing of its protocol era, so an attempt that cannot connect at
// all ends at once, with the connection's error: no fallback from the
// server/discover probe to initialize (a second attempt that can only
// fail the same way, and a log line that blames the probe).
func TestUnreachableServerIsNotProbed(t *testing.T) {
	ctx := testContext(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nobody listens there now: connection refused
	m, _, logs := remoteManager(t, nil)
	st, _ := m.Connect(ctx, remoteConfig("gone", config.TransportHTTP, "http://"+addr+"/mcp"), false)
	if st.State == StateReady {
		t.Fatalf("state: got READY, want a failure")
	}
	if !strings.Contains(st.LastError, "connection refused") {
		t.Errorf("last_error: got %q, want the connection's error", st.LastError)
	}
	if out := logs.String(); strings.Contains(out, "probe unanswered") {
		t.Errorf("an unreachable server was probed and then dialled again with initialize:\n%s", out)
	}
}
