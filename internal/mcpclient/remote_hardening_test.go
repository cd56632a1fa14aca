package mcpclient

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
)

// TestStandaloneGETNeverAnswers: a legacy Streamable HTTP server (or a
// proxy in front of it) that accepts the session's standalone GET but
// never sends its headers fails the connect at the connect timeout,
// saying so, and the server can still be stopped (the SDK opens that GET
// inside Connect, on a context no caller can end).
func TestStandaloneGETNeverAnswers(t *testing.T) {
	srv := newRemoteMCPServer(legacyVersions)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	release := make(chan struct{})
	ts := serveRemote(t, newObserver(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			select { // headers never come
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		h.ServeHTTP(w, r)
	})))
	t.Cleanup(func() { closeSessions(srv) })
	t.Cleanup(func() { close(release) })
	m := NewManager(&Options{
		ConnectTimeout: 2 * time.Second,
		ProbeTimeout:   time.Second,
		Dialer:         NewRemoteDialer(&RemoteOptions{HTTPClient: testHTTPClient(t)}),
	})
	// The caller's deadline is far beyond the connect timeout: the connect
	// must end at the latter.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := m.Connect(ctx, remoteConfig("s", config.TransportHTTP, ts.URL), false)
	if ctx.Err() != nil || !strings.Contains(st.LastError, "connect timeout") {
		t.Errorf("Connect: state %v, last_error %q, err %v; want it ended by the connect timeout, saying so", st.State, st.LastError, err)
	}
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancelClose()
	if err := m.Close(closeCtx); err != nil {
		t.Errorf("Manager.Close: %v (the server's run is stuck in the standalone GET)", err)
	}
}

// TestRedirectStatuses: an MCP endpoint that answers 301 or 302 (an
// http->https or a trailing-slash redirect), which net/http would follow
// with a bodiless GET, fails with an error naming where it points; 307
// and 308 are followed.
func TestRedirectStatuses(t *testing.T) {
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			srv := newRemoteMCPServer(legacyVersions)
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
			mux := http.NewServeMux()
			mux.Handle("/mcp/", h)
			mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/mcp/", code)
			})
			ts := serveRemote(t, newObserver(mux))
			t.Cleanup(func() { closeSessions(srv) })
			m, _, _ := remoteManager(t, nil)
			ctx := testContext(t)
			st, err := m.Connect(ctx, remoteConfig("s", config.TransportHTTP, ts.URL+"/mcp"), false)
			t.Logf("%d: state %v, last_error %q, err %v", code, st.State, st.LastError, err)
			if st.State != StateReady && !strings.Contains(st.LastError, "redirects with") {
				t.Errorf("%d redirect: got state %v, want ready or an error naming the redirect", code, st.State)
			}
		})
	}
}

// TestStandaloneGET503Once: a legacy Streamable HTTP server (or its load
// balancer) that answers the session's first standalone GET with a
// transient 503 still delivers resource updates: the GET is tried again
// (the SDK gave the stream up for good, and the session stayed READY
// without notifications).
func TestStandaloneGET503Once(t *testing.T) {
	ctx := testContext(t)
	srv := newRemoteMCPServer(legacyVersions)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var gets atomic.Int32
	ts := serveRemote(t, newObserver(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && gets.Add(1) == 1 {
			http.Error(w, "upstream connect error", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})))
	t.Cleanup(func() { closeSessions(srv) })
	m, bus, _ := remoteManager(t, nil)
	st, err := m.Connect(ctx, remoteConfig("s", config.TransportHTTP, ts.URL), false)
	if err != nil || st.State != StateReady {
		t.Fatalf("connect: %v %v", st.State, err)
	}
	release, err := m.SubscribeResource(ctx, "s", testDocURI)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	sub := bus.Subscribe(events.Filter{Servers: []string{"s"}, Kinds: []events.Kind{events.KindResourceUpdated}}, nil)
	defer sub.Close()
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for time.Now().Before(deadline) {
		_ = srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: testDocURI})
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := sub.Next(wctx)
		cancel()
		if err == nil {
			return
		}
	}
	st, _ = m.Get("s")
	t.Errorf("no resource update; server state %v, GETs seen %d (the SDK gave the standalone stream up after one 503 and mcpd kept the session)", st.State, gets.Load())
}

// TestSSEPostURLRedacted: a legacy SSE server's POSTs go to the endpoint
// the server names, resolved against the configured URL (keeping its user
// info); a failed POST's error quotes that URL, and neither the user info
// nor a key the server echoed into its query reaches last_error.
func TestSSEPostURLRedacted(t *testing.T) {
	ctx := testContext(t)
	release := make(chan struct{})
	ts := serveRemote(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("event: endpoint\ndata: /messages?sessionId=1&key=k3y-echoed\n\n"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case http.MethodPost:
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close() // no answer at all
		}
	}))
	t.Cleanup(func() { close(release) })
	m, _, _ := remoteManager(t, nil)
	u := strings.Replace(ts.URL, "http://", "http://tok3n-secret@", 1) + "/sse?key=k3y-echoed"
	st, _ := m.Connect(ctx, config.Server{Name: "s", Kind: config.TransportSSE, URL: u}, false)
	t.Logf("state %v, last_error %q", st.State, st.LastError)
	for _, secret := range []string{"tok3n-secret", "k3y-echoed"} {
		if strings.Contains(st.LastError, secret) {
			t.Errorf("last_error shows %q", secret)
		}
	}
}

// TestAnswerPOSTNeverAnswered: a server that takes the POST of mcpd's
// answer to its own request (roots/list here) and never answers it does
// not hold that POST for ever: mcpd gives up after RemoteOptions'
// PostTimeout, says so, and a Streamable HTTP session goes on.
func TestAnswerPOSTNeverAnswered(t *testing.T) {
	for _, kind := range []config.TransportKind{config.TransportHTTP, config.TransportSSE} {
		t.Run(kind.String(), func(t *testing.T) {
			srv := newRemoteMCPServer(legacyVersions)
			mcp.AddTool(srv, &mcp.Tool{Name: "roots"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				_, err := req.Session.ListRoots(ctx, nil)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(err)}}}, nil, nil
			})
			var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
			if kind == config.TransportSSE {
				h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
			}
			abandoned, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			ts := serveRemote(t, newObserver(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					body, _ := io.ReadAll(r.Body)
					if msg, err := jsonrpc.DecodeMessage(body); err == nil {
						if _, answer := msg.(*jsonrpc.Response); answer {
							select { // taken, never answered
							case <-r.Context().Done():
								once.Do(func() { close(abandoned) })
							case <-release:
							}
							return
						}
					}
					r.Body = io.NopCloser(bytes.NewReader(body))
				}
				h.ServeHTTP(w, r)
			})))
			t.Cleanup(func() { closeSessions(srv) })
			t.Cleanup(func() { close(release) })
			m, _, logs := remoteManager(t, &RemoteOptions{PostTimeout: 300 * time.Millisecond})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if st, err := m.Connect(ctx, remoteConfig("s", kind, ts.URL), false); err != nil || st.State != StateReady {
				t.Fatalf("Connect: %v %v", st.State, err)
			}
			if _, err := m.CallTool(ctx, "mcp__s__roots", nil, CallOptions{}); err != nil {
				t.Logf("call: %v", err) // the server asks, and waits for the lost answer
			}
			select {
			case <-abandoned:
			case <-time.After(30 * time.Second): // a hang guard, far beyond PostTimeout
				t.Fatal("mcpd still holds the POST of its answer that the server never answered")
			}
			eventually(ctx, t, "the warning", func() bool { return strings.Contains(logs.String(), "did not answer the POST") })
			if kind != config.TransportHTTP {
				return
			}
			res, err := m.CallTool(ctx, "mcp__s__echo", map[string]any{"message": "still here"}, CallOptions{})
			if err != nil || res.IsError {
				t.Errorf("a call after the lost answer: %v %v, want the session to go on", res, err)
			}
		})
	}
}

// TestHurryReachesRemoteSessions: closing the session of a remote server
// that stopped answering (it asked for the roots mid-call, and takes
// mcpd's answer, the cancellation and the DELETE without answering them)
// waits, with a stop grace far beyond the test, until Close's deadline
// hurries the stop; then the session's requests are cut off, and the
// server is stopped when Close returns.
func TestHurryReachesRemoteSessions(t *testing.T) {
	for _, kind := range []config.TransportKind{config.TransportHTTP, config.TransportSSE} {
		t.Run(kind.String(), func(t *testing.T) {
			ctx := testContext(t)
			url, hung := hungRemote(t, kind)
			m := NewManager(&Options{
				ProbeTimeout: 20 * time.Second,
				StopGrace:    10 * time.Minute,
				Dialer:       NewRemoteDialer(&RemoteOptions{HTTPClient: testHTTPClient(t)}),
			})
			if st, err := m.Connect(ctx, remoteConfig("s", kind, url), false); err != nil || st.State != StateReady {
				t.Fatalf("Connect: %v %v", st.State, err)
			}
			called := make(chan error, 1)
			go func() {
				_, err := m.CallTool(ctx, "mcp__s__hang", nil, CallOptions{})
				called <- err
			}()
			awaitOp(t, ctx, "the server to hang", hung)

			closeCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			closed := make(chan error, 1)
			go func() { closed <- m.Close(closeCtx) }()
			awaitOp(t, ctx, "Close", closed)
			if st, _ := m.Get("s"); st.State != StateStopped {
				t.Errorf("state once Close returned: got %v, want stopped", st.State)
			}
			awaitOp(t, ctx, "the call", called)
		})
	}
}

// hungRemote serves, until the test ends, a legacy server over kind whose
// tool "hang" asks its client for the roots, and from then on the server
// takes every new request without answering it (a stream opened before
// goes on). It returns the server's URL, and a channel closed once the
// server has taken mcpd's answer, and hangs.
func hungRemote(t *testing.T, kind config.TransportKind) (url string, hanging <-chan struct{}) {
	t.Helper()
	srv := newRemoteMCPServer(legacyVersions)
	var hung atomic.Bool
	released, release := context.WithCancel(context.Background())
	hangs := make(chan struct{})
	var once sync.Once
	mcp.AddTool(srv, &mcp.Tool{Name: "hang"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(released, cancel)()
		hung.Store(true)
		_, _ = req.Session.ListRoots(ctx, nil)
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	if kind == config.TransportSSE {
		h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	}
	ts := serveRemote(t, newObserver(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hung.Load() {
			if r.Method == http.MethodPost {
				once.Do(func() { close(hangs) }) // mcpd's answer, taken
			}
			select {
			case <-released.Done():
			case <-r.Context().Done():
			}
			return
		}
		h.ServeHTTP(w, r)
	})))
	t.Cleanup(func() { closeSessions(srv) })
	t.Cleanup(release)
	return ts.URL, hangs
}
