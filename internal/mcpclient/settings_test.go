package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
)

// TestSubscribeWhileSessionCatchesUp subscribes to a resource in the moment
// after a new session is declared ready and before it has caught up with
// what agents set up while it was being set up. The resource must be
// subscribed upstream once: by the catch-up or by SubscribeResource, never
// by both.
func TestSubscribeWhileSessionCatchesUp(t *testing.T) {
	ctx := testContext(t)
	var subscribes atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "catch-up", Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: legacyVersions,
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			if req.Params.URI == testDocURI {
				subscribes.Add(1)
			}
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	srv.AddResource(&mcp.Resource{URI: testDocURI, Name: "doc"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: testDocURI, Text: "the doc"}}}, nil
		})
	// Each logging/setLevel call is announced on setLevel, then waits until
	// the test lets it through.
	setLevel := make(chan mcp.LoggingLevel)
	proceed := make(chan struct{})
	testCtx := ctx
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if params, ok := req.GetParams().(*mcp.SetLoggingLevelParams); ok && method == "logging/setLevel" {
				select {
				case setLevel <- params.Level:
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-testCtx.Done():
					return nil, testCtx.Err()
				}
				select {
				case <-proceed:
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-testCtx.Done():
					return nil, testCtx.Err()
				}
			}
			return next(ctx, method, req)
		}
	})
	expectSetLevel := func(want mcp.LoggingLevel) {
		t.Helper()
		select {
		case got := <-setLevel:
			if got != want {
				t.Fatalf("logging/setLevel %q, want %q", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("no logging/setLevel %q", want)
		}
	}
	letThrough := func() {
		t.Helper()
		select {
		case proceed <- struct{}{}:
		case <-ctx.Done():
			t.Fatal("no logging/setLevel to let through")
		}
	}
	await := func(what string, done <-chan error) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s did not return", what)
		}
	}
	ts := serveRemote(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	m, _, _ := remoteManager(t, nil)
	if _, err := m.Connect(ctx, remoteConfig("s", config.TransportHTTP, ts.URL), false); err != nil {
		t.Fatal(err)
	}

	// Connect returns as the session is declared ready, before it catches
	// up; a subscription waits for the catch-up, so that one cannot see
	// the level set next and set it again.
	release, err := m.SubscribeResource(ctx, "s", "test://barrier")
	if err != nil {
		t.Fatal(err)
	}
	release()

	// The new session's set-up replays "info"; "debug" is set meanwhile,
	// so its catch-up sets the level again, and is held there.
	infoSet := make(chan error, 1)
	go func() { infoSet <- m.SetLogLevel(ctx, "s", "info") }()
	expectSetLevel("info")
	letThrough()
	await("SetLogLevel info", infoSet)
	restarted := make(chan error, 1)
	go func() {
		_, err := m.Restart(ctx, "s")
		restarted <- err
	}()
	expectSetLevel("info") // the set-up
	if err := m.SetLogLevel(ctx, "s", "debug"); err != nil {
		t.Fatal(err)
	}
	letThrough()
	expectSetLevel("debug") // the catch-up
	await("Restart", restarted)

	subscribed := make(chan error, 1)
	go func() {
		_, err := m.SubscribeResource(ctx, "s", testDocURI)
		subscribed <- err
	}()
	select {
	case err := <-subscribed:
		letThrough()
		t.Fatalf("SubscribeResource returned (%v) before the session caught up; the catch-up may subscribe again", err)
	case <-time.After(100 * time.Millisecond):
	}
	letThrough()
	await("SubscribeResource", subscribed)
	if n := subscribes.Load(); n != 1 {
		t.Errorf("the server saw %d resources/subscribe, want 1", n)
	}
}

// TestSubscribeDoesNotWaitForOtherServers holds one server's
// resources/subscribe and checks that another server's subscription goes
// through meanwhile.
func TestSubscribeDoesNotWaitForOtherServers(t *testing.T) {
	ctx := testContext(t)
	entered, unblock := make(chan struct{}), make(chan struct{})
	urls := map[string]string{}
	for _, name := range []string{"slow", "quick"} {
		srv := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{
			SupportedProtocolVersions: legacyVersions,
			SubscribeHandler: func(ctx context.Context, _ *mcp.SubscribeRequest) error {
				if name == "slow" {
					close(entered)
					select {
					case <-unblock:
					case <-ctx.Done():
					}
				}
				return nil
			},
			UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		})
		urls[name] = serveRemote(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)).URL
	}
	m, _, _ := remoteManager(t, nil) // closes before the servers
	for name, url := range urls {
		if _, err := m.Connect(ctx, remoteConfig(name, config.TransportHTTP, url), false); err != nil {
			t.Fatal(err)
		}
	}

	slowDone := make(chan error, 1)
	go func() {
		_, err := m.SubscribeResource(ctx, "slow", testDocURI)
		slowDone <- err
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the slow server never saw resources/subscribe")
	}
	defer close(unblock)
	quickDone := make(chan error, 1)
	go func() {
		_, err := m.SubscribeResource(ctx, "quick", testDocURI)
		quickDone <- err
	}()
	select {
	case err := <-quickDone:
		if err != nil {
			t.Fatalf("subscribing on quick while slow's subscribe is pending: %v", err)
		}
	case err := <-slowDone:
		t.Fatalf("slow's subscribe ended (%v) before quick's, which waited for it", err)
	case <-ctx.Done():
		t.Fatal("quick's subscribe waits for slow's")
	}
}

// docSubscriptions connects server "s", a legacy Streamable HTTP server
// that runs subscribed(ctx) for each resources/subscribe of testDocURI and
// counts its resources/unsubscribe, to a Manager with the given
// unsubscribe delay.
func docSubscriptions(ctx context.Context, t *testing.T, delay time.Duration, subscribed func(context.Context)) (*Manager, *atomic.Int32) {
	t.Helper()
	unsubscribes := new(atomic.Int32)
	srv := mcp.NewServer(&mcp.Implementation{Name: "subscriptions", Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: legacyVersions,
		SubscribeHandler: func(ctx context.Context, req *mcp.SubscribeRequest) error {
			if req.Params.URI == testDocURI {
				subscribed(ctx)
			}
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			if req.Params.URI == testDocURI {
				unsubscribes.Add(1)
			}
			return nil
		},
	})
	ts := serveRemote(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	m, _ := busManager(t, &Options{
		ProbeTimeout:     20 * time.Second,
		Dialer:           NewRemoteDialer(&RemoteOptions{HTTPClient: testHTTPClient(t)}),
		UnsubscribeDelay: delay,
	})
	if _, err := m.Connect(ctx, remoteConfig("s", config.TransportHTTP, ts.URL), false); err != nil {
		t.Fatal(err)
	}
	return m, unsubscribes
}

// TestReleaseWhileSessionSetsUp drops the last interest in a resource while
// a new session is subscribing to it again: once the session is ready, it
// must unsubscribe.
func TestReleaseWhileSessionSetsUp(t *testing.T) {
	ctx := testContext(t)
	var subscribes atomic.Int32
	replaying, proceed := make(chan struct{}), make(chan struct{})
	// Without an unsubscribe delay the release is the catch-up's to apply.
	m, unsubscribes := docSubscriptions(ctx, t, -1, func(ctx context.Context) {
		if subscribes.Add(1) == 2 { // the new session's replay
			close(replaying)
			select {
			case <-proceed:
			case <-ctx.Done():
			}
		}
	})
	release, err := m.SubscribeResource(ctx, "s", testDocURI)
	if err != nil {
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	go func() {
		_, err := m.Restart(ctx, "s")
		restarted <- err
	}()
	select {
	case <-replaying:
	case <-ctx.Done():
		t.Fatal("the new session never subscribed again")
	}
	release() // the server is not ready: nothing to unsubscribe yet
	close(proceed)
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	// A subscription waits for the new session's catch-up.
	barrier, err := m.SubscribeResource(ctx, "s", "test://barrier")
	if err != nil {
		t.Fatal(err)
	}
	barrier()
	if n := unsubscribes.Load(); n != 1 {
		t.Errorf("the server saw %d resources/unsubscribe of %s, want 1", n, testDocURI)
	}
}

// TestCancelledFirstSubscribeLetGo: the caller of a first subscription
// goes away while the server is still answering its resources/subscribe.
// The server subscribes all the same (cancellation is advisory); mcpd
// waits for its answer, then lets the subscription go as any: at once
// without an unsubscribe delay, rather than leave the server sending
// updates nobody reads; with one, held meanwhile since the subscribe, so
// that a stream resuming within the delay gets its catch-up update.
func TestCancelledFirstSubscribeLetGo(t *testing.T) {
	for _, tc := range []struct {
		name         string
		delay        time.Duration
		unsubscribes int32
	}{
		{"without a delay", -1, 1},
		{"within the delay", time.Minute, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			entered, proceed := make(chan struct{}), make(chan struct{})
			m, unsubscribes := docSubscriptions(ctx, t, tc.delay, func(context.Context) {
				close(entered)
				<-proceed // subscribes, whatever the client says meanwhile
			})
			callCtx, cancel := context.WithCancel(ctx)
			got := make(chan error, 1)
			go func() {
				_, err := m.SubscribeResource(callCtx, "s", testDocURI)
				got <- err
			}()
			select {
			case <-entered:
			case <-ctx.Done():
				t.Fatal("the server never saw resources/subscribe")
			}
			before := m.lastSequence()
			cancel()
			if err := <-got; !errors.Is(err, context.Canceled) {
				t.Fatalf("SubscribeResource whose caller went away: got %v, want context.Canceled", err)
			}
			close(proceed)
			// A subscription waits for the server's lock, which the first
			// one's answer and its release hold.
			barrier, err := m.SubscribeResource(ctx, "s", "test://barrier")
			if err != nil {
				t.Fatal(err)
			}
			barrier()
			if n := unsubscribes.Load(); n != tc.unsubscribes {
				t.Errorf("the server saw %d resources/unsubscribe of %s, want %d", n, testDocURI, tc.unsubscribes)
			}
			since, held := m.ResourceHeldSince("s", testDocURI)
			switch {
			case tc.delay < 0 && held:
				t.Error("the resource is still held, want it let go")
			case tc.delay > 0 && (!held || since < before):
				t.Errorf("the resource within its unsubscribe delay: held %v since %d, want held since %d or later", held, since, before)
			}
		})
	}
}

// TestSubscribeGivesUpWaitingAtItsDeadline holds a server's subscription
// lock and checks that SubscribeResource returns at its context's end, not
// when the lock is free; and that an unknown server name gets no lock.
func TestSubscribeGivesUpWaitingAtItsDeadline(t *testing.T) {
	ctx := testContext(t)
	ts := serveRemote(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		return newRemoteMCPServer(legacyVersions)
	}, nil))
	m, _, _ := remoteManager(t, nil)
	if _, err := m.Connect(ctx, remoteConfig("s", config.TransportHTTP, ts.URL), false); err != nil {
		t.Fatal(err)
	}
	unlock, err := m.settings.lockSubscribing(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.SubscribeResource(cancelled, "s", testDocURI); !errors.Is(err, context.Canceled) {
		t.Fatalf("SubscribeResource: got %v, want context.Canceled", err)
	}
	if n := m.ResourceInterest("s", testDocURI); n != 0 {
		t.Errorf("interest: got %d, want 0", n)
	}

	if _, err := m.SubscribeResource(ctx, "no-such-server", testDocURI); err == nil {
		t.Fatal("SubscribeResource on an unknown server: got no error")
	}
	m.settings.mu.Lock()
	defer m.settings.mu.Unlock()
	if _, ok := m.settings.calls["no-such-server"]; ok {
		t.Error("an unknown server name got a subscription lock")
	}
}

// tickingManager is a Manager with an event bus and the given unsubscribe
// delay (0: the default), for the ticking fake servers.
func tickingManager(t *testing.T, delay time.Duration) (*Manager, *events.Bus) {
	t.Helper()
	return busManager(t, &Options{ProbeTimeout: 20 * time.Second, StopGrace: 500 * time.Millisecond, UnsubscribeDelay: delay})
}

// connectTicking connects a ticking fake server named s and checks its era.
func connectTicking(ctx context.Context, t *testing.T, m *Manager, mode string) {
	t.Helper()
	want := "2026-07-28"
	if mode == "ticking-legacy" {
		want = "2025-11-25"
	}
	st, err := m.Connect(ctx, fakeServer("s", mode), false)
	if err != nil || st.State != StateReady || st.ProtocolVersion != want {
		t.Fatalf("connect: %v %v %q, want READY in %s (%s)", st.State, err, st.ProtocolVersion, want, st.LastError)
	}
}

// nextTick waits for an update of tickURI on sub, up to a bound that only
// guards against a hang: the server ticks every 20ms.
func nextTick(ctx context.Context, sub *events.Subscription) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := sub.Next(ctx)
	return err
}

// stderrCount counts the lines of the server's stderr tail that are line.
func stderrCount(t *testing.T, m *Manager, line string) int {
	t.Helper()
	st, err := m.Get("s")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range st.StderrTail {
		if l == line {
			n++
		}
	}
	return n
}

// TestSubscribeAgainAtOnce lets go of a resource's subscription and takes
// it again straight away, as a stream that reconnects does, on stdio
// servers of both eras: updates must keep coming. With the unsubscribe
// delay the upstream subscription is kept meanwhile. Without it, the
// unsubscribe and the subscribe go out one after the other, which on a
// 2026-07-28 go-sdk server loses the subscription unless the subscribe
// waits for the ended listen to unwind.
func TestSubscribeAgainAtOnce(t *testing.T) {
	for _, mode := range []string{"ticking", "ticking-legacy"} {
		for name, delay := range map[string]time.Duration{"kept": 0, "unsubscribed": -1} {
			t.Run(mode+"/"+name, func(t *testing.T) {
				t.Parallel()
				ctx := testContext(t)
				m, bus := tickingManager(t, delay)
				connectTicking(ctx, t, m, mode)
				for round := range 5 {
					sub := bus.Subscribe(events.Filter{Servers: []string{"s"}, Kinds: []events.Kind{events.KindResourceUpdated}}, nil)
					release, err := m.SubscribeResource(ctx, "s", tickURI)
					if err != nil {
						sub.Close()
						t.Fatal(err)
					}
					// Several ticks, so that one sent before a lost
					// subscription is gone does not pass.
					for range 5 {
						if err = nextTick(ctx, sub); err != nil {
							break
						}
					}
					sub.Close()
					release()
					if err != nil {
						t.Fatalf("round %d: updates of %s stopped: %v", round, tickURI, err)
					}
				}
			})
		}
	}
}

// TestUnsubscribeDelay checks that mcpd keeps an upstream subscription for
// the unsubscribe delay after its last holder lets go, hands it to a new
// holder within the delay without asking the server again, and unsubscribes
// once the delay passes unheld.
func TestUnsubscribeDelay(t *testing.T) {
	ctx := testContext(t)
	const delay = time.Second
	m, bus := tickingManager(t, delay)
	connectTicking(ctx, t, m, "ticking")

	release, err := m.SubscribeResource(ctx, "s", tickURI)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if n := m.ResourceInterest("s", tickURI); n != 0 {
		t.Errorf("interest after the release: %d, want 0", n)
	}
	release, err = m.SubscribeResource(ctx, "s", tickURI)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * delay) // held: the first release's delay passes harmlessly
	sub := bus.Subscribe(events.Filter{Servers: []string{"s"}, Kinds: []events.Kind{events.KindResourceUpdated}}, nil)
	defer sub.Close()
	if err := nextTick(ctx, sub); err != nil {
		t.Fatalf("no update after taking the subscription again: %v", err)
	}
	if n := stderrCount(t, m, "subscribed "+tickURI); n != 1 {
		t.Errorf("the server saw %d subscribes, want 1: the subscription was not kept", n)
	}
	if n := stderrCount(t, m, "unsubscribed "+tickURI); n != 0 {
		t.Errorf("the server saw %d unsubscribes while the subscription was held, want 0", n)
	}

	release()
	eventually(ctx, t, "the server unsubscribed after the delay", func() bool {
		return stderrCount(t, m, "unsubscribed "+tickURI) == 1
	})
	if n := m.ResourceInterest("s", tickURI); n != 0 {
		t.Errorf("interest: %d, want 0", n)
	}
	if rs := m.settings.resources("s"); len(rs) != 0 {
		t.Errorf("still subscribed upstream to %v", rs)
	}
}

// TestChurnedServersLeaveNoSettings connects, uses and disconnects servers
// under names of their own, as a long-running caller of ConnectServer may
// for months, in both eras: once a server is disconnected (forgotten),
// nothing of what was set up for it stays behind, neither its log level,
// its roots, its resource subscriptions, the notes of its unsubscribes nor
// the lock that orders its subscribe calls; a server connected again under
// the same name starts afresh.
func TestChurnedServersLeaveNoSettings(t *testing.T) {
	for era, versions := range map[string][]string{"legacy": legacyVersions, "2026-07-28": nil} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			srv := newRemoteMCPServer(versions)
			ts := serveRemote(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
				&mcp.StreamableHTTPOptions{Stateless: versions == nil}))
			// Unsubscribed at once, so that unsubscribes go out while
			// the servers are there.
			m, _ := busManager(t, &Options{
				ProbeTimeout: 20 * time.Second, UnsubscribeDelay: -1,
				Dialer: NewRemoteDialer(&RemoteOptions{HTTPClient: testHTTPClient(t)}),
			})
			for i := range 3 {
				name := fmt.Sprintf("tmp-%d", i)
				if _, err := m.Connect(ctx, remoteConfig(name, config.TransportHTTP, ts.URL), false); err != nil {
					t.Fatal(err)
				}
				if err := m.SetLogLevel(ctx, name, "debug"); err != nil {
					t.Fatal(err)
				}
				if err := m.SetRoots(name, []*mcp.Root{{URI: "file:///" + name}}); err != nil {
					t.Fatal(err)
				}
				release, err := m.SubscribeResource(ctx, name, testDocURI)
				if err != nil {
					t.Fatal(err)
				}
				release() // unsubscribed upstream
				// A stream still holding a subscription as its server
				// goes lets go of it afterwards.
				release, err = m.SubscribeResource(ctx, name, "test://other")
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Disconnect(ctx, name); err != nil {
					t.Fatal(err)
				}
				release()
			}
			poll := time.NewTicker(20 * time.Millisecond)
			defer poll.Stop()
			for {
				m.settings.mu.Lock()
				calls, subs, settling := len(m.settings.calls), len(m.settings.subs), len(m.settings.settling)
				levels, roots := len(m.settings.levels), len(m.settings.roots)
				m.settings.mu.Unlock()
				if calls == 0 && subs == 0 && settling == 0 && levels == 0 && roots == 0 {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("after the servers were disconnected: got %d subscription locks, %d servers with subscriptions, %d with unsubscribe notes, %d log levels, %d root lists; want none",
						calls, subs, settling, levels, roots)
				case <-poll.C:
				}
			}

			// Connected again under a used name: the defaults, not what
			// was set for the server before.
			if _, err := m.Connect(ctx, remoteConfig("tmp-0", config.TransportHTTP, ts.URL), false); err != nil {
				t.Fatal(err)
			}
			if got := m.settings.logLevel("tmp-0"); got != "" {
				t.Errorf("log level of tmp-0 connected again: got %q, want none", got)
			}
			if got := m.settings.rootsFor("tmp-0"); len(got) != 0 {
				t.Errorf("roots of tmp-0 connected again: got %v, want none", got)
			}
		})
	}
}

// TestSetRootsRefusesWhatIsNoFileURI: MCP's roots are file:// URIs in
// every revision. A root whose uri is none (empty, not a URI, of another
// scheme, file: without //, with a control character, without a path) is
// refused with ErrInvalidArgument naming its index and at most the start
// of the uri, and no roots change.
func TestSetRootsRefusesWhatIsNoFileURI(t *testing.T) {
	m := closingManager(t, nil)
	if err := m.SetRoots("", []*mcp.Root{{URI: "file:///kept"}}); err != nil {
		t.Fatalf("file:///kept: %v", err)
	}
	long := "http://x/" + strings.Repeat("a", 500)
	for _, uri := range []string{"", "not a uri", "http://x/", "file:relative", "file:///tmp/\x00x", "file://", "FTP://x/y", long} {
		err := m.SetRoots("", []*mcp.Root{{URI: "file:///ok"}, {URI: uri}})
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "roots[1]") {
			t.Errorf("uri %.40q: got %v, want ErrInvalidArgument naming roots[1]", uri, err)
			continue
		}
		if strings.Contains(err.Error(), long[:100]) {
			t.Errorf("uri %.40q: the error %q holds more than the uri's start", uri, err)
		}
	}
	if got := m.settings.rootsFor("x"); len(got) != 1 || got[0].URI != "file:///kept" {
		t.Errorf("roots after the refusals: got %v, want file:///kept", got)
	}
	for _, uri := range []string{"file:///tmp/project", "file://host/share/dir", "file:///home/jos%C3%A9", "FILE:///tmp/upper"} {
		if err := m.SetRoots("", []*mcp.Root{{URI: uri}}); err != nil {
			t.Errorf("uri %q: %v", uri, err)
		}
	}
}
