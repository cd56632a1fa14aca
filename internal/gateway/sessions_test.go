package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/testheap"
)

// followedUpstream is an upstream server "s" whose every URI can be
// subscribed to, and the set of URIs it is subscribed to now.
type followedUpstream struct {
	srv *mcp.Server
	mu  sync.Mutex
	on  map[string]bool
}

func newFollowedUpstream() *followedUpstream {
	u := &followedUpstream{on: map[string]bool{}}
	u.srv = mcp.NewServer(&mcp.Implementation{Name: "up", Version: "0"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, r *mcp.SubscribeRequest) error {
			u.mu.Lock()
			defer u.mu.Unlock()
			u.on[r.Params.URI] = true
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, r *mcp.UnsubscribeRequest) error {
			u.mu.Lock()
			defer u.mu.Unlock()
			delete(u.on, r.Params.URI)
			return nil
		},
	})
	u.srv.AddResource(&mcp.Resource{URI: "res://a", Name: "a"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "a"}}}, nil
	})
	return u
}

func (u *followedUpstream) followed() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.on)
}

// gatewayFor serves a Gateway in front of the upstream "s" until the test
// ends, and returns it and the endpoint's URL.
func gatewayFor(ctx context.Context, t *testing.T, up *mcp.Server, opts *Options) (*Gateway, string) {
	t.Helper()
	m := inMemoryUpstreams(ctx, t, nil, "2025-11-25", map[string]*mcp.Server{"s": up})
	g := New(m, opts)
	runGateway(ctx, t, g)
	hs := httptest.NewServer(g.Handler())
	t.Cleanup(hs.Close)
	return g, hs.URL
}

// tracked reports how many sessions g keeps a record of, and how many of
// them count against MaxSessions.
func (g *Gateway) tracked() (hosts, counted int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.hosts), g.sessions
}

// dialHost connects a host to url at version.
func dialHost(ctx context.Context, url, version string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "0"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
}

// TestSessionLimit: the MCP endpoint keeps at most MaxSessions legacy
// sessions; one more initialize is refused with codeUnavailable, and one
// ending makes room. 2026-07-28 hosts hold no session and are not counted.
func TestSessionLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, url := gatewayFor(ctx, t, newFollowedUpstream().srv, &Options{MaxSessions: 2})

	var open []*mcp.ClientSession
	for range 2 {
		cs, err := dialHost(ctx, url, "2025-11-25")
		if err != nil {
			t.Fatalf("a session within the limit: %v", err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		open = append(open, cs)
	}
	over, err := dialHost(ctx, url, "2025-11-25")
	if err == nil {
		_ = over.Close()
	}
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != codeUnavailable || !strings.Contains(je.Message, "--mcp-max-sessions") {
		t.Fatalf("a session over the limit: got %v, want code %d naming --mcp-max-sessions", err, codeUnavailable)
	}

	for range 3 {
		cs, err := dialHost(ctx, url, "2026-07-28")
		if err != nil {
			t.Fatalf("a 2026-07-28 host at the legacy limit: %v", err)
		}
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatalf("a 2026-07-28 host at the legacy limit: list tools: %v", err)
		}
		_ = cs.Close()
	}

	if err := open[0].Close(); err != nil {
		t.Fatal(err)
	}
	waitForRoom(ctx, t, url, "room for a session once one ended")
}

// TestListenStreamsCount: a 2026-07-28 subscriptions/listen stream, a
// session of its own, counts against MaxSessions from its first
// subscription until it ends.
func TestListenStreamsCount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	up := newFollowedUpstream()
	_, url := gatewayFor(ctx, t, up.srv, &Options{MaxSessions: 1})
	listener, err := dialHost(ctx, url, "2026-07-28")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = listener.Close() })
	if err := listener.Subscribe(ctx, &mcp.SubscribeParams{URI: "mcpd://s/res://a"}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the upstream subscription", func() bool { return up.followed() == 1 })
	over, err := dialHost(ctx, url, "2025-11-25")
	if err == nil {
		_ = over.Close()
	}
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != codeUnavailable {
		t.Fatalf("a session while a listen stream holds the only place: got %v, want code %d", err, codeUnavailable)
	}
	_ = listener.Close()
	waitForRoom(ctx, t, url, "room once the listen stream ended")
}

// TestSessionEndReleasesSubscriptions: when a host's session ends without
// unsubscribing (its host went away), the upstream subscriptions it held
// are released when the SDK reports the end, in both eras.
func TestSessionEndReleasesSubscriptions(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			// Less than the 30 s the endpoint once took to notice.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			up := newFollowedUpstream()
			g, url := gatewayFor(ctx, t, up.srv, nil)
			cs, err := dialHost(ctx, url, version)
			if err != nil {
				t.Fatal(err)
			}
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "mcpd://s/res://a"}); err != nil {
				t.Fatal(err)
			}
			waitFor(ctx, t, "the upstream subscription", func() bool { return up.followed() == 1 })
			if err := cs.Close(); err != nil {
				t.Fatal(err)
			}
			waitFor(ctx, t, "the upstream subscription's release", func() bool { return up.followed() == 0 })
			// Nothing of the session is kept, its watcher gone with it.
			waitFor(ctx, t, "the session forgotten", func() bool { hosts, counted := g.tracked(); return hosts == 0 && counted == 0 })
		})
	}
}

// TestSubscriptionLimit: one session follows at most
// maxSubscriptionsPerSession resources; one more is refused, subscribing
// again to one it follows is not, and unsubscribing makes room.
func TestSubscriptionLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	up := newFollowedUpstream()
	_, url := gatewayFor(ctx, t, up.srv, nil)
	cs, err := dialHost(ctx, url, "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	uri := func(i int) string { return fmt.Sprintf("mcpd://s/res://%d", i) }
	for i := range maxSubscriptionsPerSession {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(i)}); err != nil {
			t.Fatalf("subscription %d: %v", i, err)
		}
	}
	err = cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(maxSubscriptionsPerSession)})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != codeUnavailable {
		t.Fatalf("one subscription over the limit: got %v, want code %d", err, codeUnavailable)
	}
	if got := up.followed(); got != maxSubscriptionsPerSession {
		t.Errorf("upstream subscriptions: got %d, want %d", got, maxSubscriptionsPerSession)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(0)}); err != nil {
		t.Errorf("subscribing again to a followed resource at the limit: %v", err)
	}
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri(0)}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(maxSubscriptionsPerSession)}); err != nil {
		t.Errorf("a subscription once one was dropped: %v", err)
	}
}

// waitForRoom waits until the gateway at url admits one more session,
// which the test's cleanup closes.
func waitForRoom(ctx context.Context, t *testing.T, url, what string) {
	t.Helper()
	waitFor(ctx, t, what, func() bool {
		cs, err := dialHost(ctx, url, "2025-11-25")
		if err != nil {
			return false
		}
		t.Cleanup(func() { _ = cs.Close() })
		return true
	})
}

// TestEndedSessionsLeaveNoURIs: the SDK server keeps, per URI, the
// sessions subscribed to it; a session that ends without unsubscribing
// leaves its URIs behind there unless the gateway sweeps them. Hosts come
// and go for months, each following URIs of its own (a file, a record),
// so what ended sessions followed must not pile up. It counts the URIs
// the SDK server keeps by the maps of sessions it made for them that are
// still in use (every allocation is profiled during the test).
func TestEndedSessionsLeaveNoURIs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testheap.Record(t)
	up := newFollowedUpstream()
	g, url := gatewayFor(ctx, t, up.srv, nil)

	const hosts = 16
	var sessions []*mcp.ClientSession
	for i := range hosts {
		cs, err := dialHost(ctx, url, "2025-11-25")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: fmt.Sprintf("mcpd://s/res://host/%d", i)}); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, cs)
	}
	if kept := sdkURIsKept(); kept < hosts {
		t.Fatalf("URIs the SDK server keeps while %d hosts follow one each: got %d, want at least %d (does %s still keep them?)",
			hosts, kept, hosts, sdkSubscribe)
	}
	for _, cs := range sessions {
		if err := cs.Close(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(ctx, t, "the sessions forgotten", func() bool { hosts, _ := g.tracked(); return hosts == 0 && up.followed() == 0 })
	for {
		kept := sdkURIsKept()
		if kept == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("URIs the SDK server keeps after the %d hosts went away: got %d, want 0", hosts, kept)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sdkSubscribe is the SDK server's method that keeps a session's
// subscription to a URI, in a map of sessions per URI that it makes for
// the URI's first subscriber.
const sdkSubscribe = "github.com/modelcontextprotocol/go-sdk/mcp.(*Server).subscribe"

// sdkURIsKept counts the URIs the SDK server keeps subscribers of, by the
// objects of the maps that sdkSubscribe made that are in use: at least one
// per URI, none when it keeps none.
func sdkURIsKept() int64 {
	return testheap.InUse(func(stack []string) bool {
		i := slices.Index(stack, sdkSubscribe)
		return i > 0 && (stack[i-1] == "runtime.makemap_small" || stack[i-1] == "runtime.makemap")
	})
}
