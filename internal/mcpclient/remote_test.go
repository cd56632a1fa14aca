package mcpclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/transport"
)

// testAuth is the static header the remote tests configure; its value must
// reach the server and never a log line.
const testAuth = "Bearer tok-5ecret-v4lue"

// legacyVersions are the initialize-based revisions a legacy test server
// speaks.
var legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

const testDocURI = "test://doc"

// newRemoteMCPServer is a go-sdk server with an echo tool, a "big" tool
// that answers size bytes of text, and a subscribable resource.
func newRemoteMCPServer(versions []string) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: versions,
		SubscribeHandler:          func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler:        func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Message string `json:"message"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "big"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Size int `json:"size"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.Size)}}}, nil, nil
	})
	srv.AddResource(&mcp.Resource{URI: testDocURI, Name: "doc", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: testDocURI, MIMEType: "text/plain", Text: "the doc"}}}, nil
		})
	return srv
}

// observedRequest is one HTTP request a test server saw.
type observedRequest struct {
	method, session, auth string
}

// observer is an http.Handler in front of a test server: it refuses
// requests without the test's Authorization header, records each request,
// and counts the ones still running (hanging streams included). Its next
// handler can be swapped, to play a server that restarted.
type observer struct {
	mu       sync.Mutex
	next     http.Handler
	seen     []observedRequest
	inFlight int
}

func newObserver(next http.Handler) *observer { return &observer{next: next} }

func (o *observer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.seen = append(o.seen, observedRequest{method: r.Method, session: r.Header.Get("Mcp-Session-Id"), auth: r.Header.Get("Authorization")})
	o.inFlight++
	next := o.next
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.inFlight--
		o.mu.Unlock()
	}()
	if r.Header.Get("Authorization") != testAuth {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	next.ServeHTTP(w, r)
}

func (o *observer) swap(next http.Handler) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next = next
}

func (o *observer) requests() []observedRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.seen)
}

func (o *observer) running() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.inFlight
}

// serveRemote serves h on a loopback httptest server that closes with the
// test, after everything registered later (the Manager).
func serveRemote(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

// testHTTPClient is a client whose idle connections close with the test,
// so that no connection goroutine outlives it.
func testHTTPClient(t *testing.T) *http.Client {
	c := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// lockedBuffer collects log output from many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// remoteManager is a Manager with the remote dialer, an event bus and a
// debug logger writing into logs (the dialer's too).
func remoteManager(t *testing.T, ropts *RemoteOptions) (*Manager, *events.Bus, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	var o RemoteOptions
	if ropts != nil {
		o = *ropts
	}
	if o.HTTPClient == nil {
		o.HTTPClient = testHTTPClient(t)
	}
	o.Logger = zerolog.New(logs).Level(zerolog.DebugLevel)
	m, bus := busManager(t, &Options{
		Logger:       o.Logger,
		ProbeTimeout: 20 * time.Second,
		Dialer:       NewRemoteDialer(&o),
	})
	return m, bus, logs
}

// busManager is a Manager with opts and an event bus, both closed when the
// test ends.
func busManager(t *testing.T, opts *Options) (*Manager, *events.Bus) {
	t.Helper()
	bus := events.NewBus(nil)
	opts.Events = bus
	t.Cleanup(bus.Close) // after the Manager's Close: cleanups run last first
	return closingManager(t, opts), bus
}

func remoteConfig(name string, kind config.TransportKind, url string) config.Server {
	return config.Server{Name: name, Kind: kind, URL: url, Headers: map[string]string{"Authorization": testAuth}}
}

// waitResourceUpdate makes srv announce updates of uri until one reaches
// the bus: the subscription may reach the server a moment after the
// subscribe call returns (a 2026-07-28 listen stream opens in the
// background).
func waitResourceUpdate(ctx context.Context, t *testing.T, bus *events.Bus, srv *mcp.Server, server, uri string) {
	t.Helper()
	sub := bus.Subscribe(events.Filter{Servers: []string{server}, Kinds: []events.Kind{events.KindResourceUpdated}}, nil)
	defer sub.Close()
	for {
		if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			t.Fatalf("ResourceUpdated: %v", err)
		}
		waitCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		ev, err := sub.Next(waitCtx)
		cancel()
		if err == nil {
			if ev.URI != uri {
				t.Fatalf("resource update: got uri %q, want %q", ev.URI, uri)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no resource update of %s arrived: %v", uri, ctx.Err())
		}
	}
}

func TestRemoteServers(t *testing.T) {
	type remote struct {
		name        string
		versions    []string // of the server; nil = all
		handler     func(*mcp.Server) http.Handler
		kinds       []config.TransportKind
		transport   config.TransportKind // what auto must detect
		version     string               // negotiated
		sendsDelete bool                 // Disconnect ends a session with DELETE
	}
	streamable := func(stateless bool) func(*mcp.Server) http.Handler {
		return func(srv *mcp.Server) http.Handler {
			return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
				&mcp.StreamableHTTPOptions{Stateless: stateless})
		}
	}
	sse := func(srv *mcp.Server) http.Handler {
		return mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	}
	remotes := []remote{
		{"streamable stateless 2026", nil, streamable(true),
			[]config.TransportKind{config.TransportHTTP, config.TransportAuto}, config.TransportHTTP, "2026-07-28", false},
		{"streamable legacy", legacyVersions, streamable(false),
			[]config.TransportKind{config.TransportHTTP, config.TransportAuto}, config.TransportHTTP, "2025-11-25", true},
		{"sse legacy", legacyVersions, sse,
			[]config.TransportKind{config.TransportSSE, config.TransportAuto}, config.TransportSSE, "2025-11-25", false},
	}
	for _, r := range remotes {
		for _, kind := range r.kinds {
			t.Run(r.name+"/"+kind.String(), func(t *testing.T) {
				t.Parallel()
				ctx := testContext(t)
				srv := newRemoteMCPServer(r.versions)
				obs := newObserver(r.handler(srv))
				ts := serveRemote(t, obs)
				m, bus, logs := remoteManager(t, nil)

				st, err := m.Connect(ctx, remoteConfig("s", kind, ts.URL), false)
				if err != nil {
					t.Fatal(err)
				}
				if st.State != StateReady {
					t.Fatalf("state: got %v (%s), want ready", st.State, st.LastError)
				}
				if st.Transport != r.transport || st.ProtocolVersion != r.version {
					t.Errorf("got transport %v, protocol %q; want %v, %q", st.Transport, st.ProtocolVersion, r.transport, r.version)
				}

				tools, err := m.Tools("s")
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, tool := range tools {
					names = append(names, tool.Name)
				}
				if want := []string{"mcp__s__big", "mcp__s__echo"}; !slices.Equal(names, want) {
					t.Errorf("tools: got %v, want %v", names, want)
				}
				res, err := m.CallTool(ctx, "mcp__s__echo", map[string]any{"message": "hello"}, CallOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "hello" {
					t.Errorf("echo: got %v, want the text hello", res.Content)
				}
				doc, err := m.ReadResource(ctx, "s", testDocURI)
				if err != nil {
					t.Fatal(err)
				}
				if len(doc.Contents) != 1 || doc.Contents[0].Text != "the doc" {
					t.Errorf("resource: got %v, want the text of %s", doc.Contents, testDocURI)
				}

				release, err := m.SubscribeResource(ctx, "s", testDocURI)
				if err != nil {
					t.Fatal(err)
				}
				waitResourceUpdate(ctx, t, bus, srv, "s", testDocURI)
				release()

				var session string
				for _, req := range obs.requests() {
					if req.auth != testAuth {
						t.Errorf("%s request: got Authorization %q, want the configured header", req.method, req.auth)
					}
					if req.session != "" {
						session = req.session
					}
				}
				if err := m.Disconnect(ctx, "s"); err != nil {
					t.Fatal(err)
				}
				var deleted bool
				for _, req := range obs.requests() {
					if req.method == http.MethodDelete {
						deleted = deleted || (req.session == session && session != "")
					}
				}
				if deleted != r.sendsDelete {
					t.Errorf("DELETE of session %q on disconnect: got %v, want %v", session, deleted, r.sendsDelete)
				}
				// Disconnect ends every stream the session held open; the
				// server notices a moment later.
				eventually(ctx, t, "the server's requests to end after disconnect", func() bool { return obs.running() == 0 })
				if strings.Contains(logs.String(), "5ecret") {
					t.Errorf("the Authorization value appears in the log:\n%s", logs.String())
				}
			})
		}
	}
}

// eventually polls cond until it holds, failing the test when ctx ends
// first.
func eventually(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// forgetful answers every request as a server that lost its sessions does.
func forgetful(status int, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(body, "{") {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})
}

// connectDirect opens an SDK session over a transport of the remote dialer,
// without a Manager, to see what the transport itself does.
func connectDirect(ctx context.Context, t *testing.T, ropts *RemoteOptions, kind config.TransportKind, url, version string) *mcp.ClientSession {
	t.Helper()
	o := RemoteOptions{HTTPClient: testHTTPClient(t)}
	if ropts != nil {
		o.MaxMessageBytes = ropts.MaxMessageBytes
	}
	tr, err := NewRemoteDialer(&o)(ctx, remoteConfig("s", kind, url))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// waitEnded waits until the session ends and returns why.
func waitEnded(ctx context.Context, t *testing.T, cs *mcp.ClientSession) error {
	t.Helper()
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	select {
	case err := <-ended:
		return err
	case <-ctx.Done():
		_ = cs.Close() // ends the Wait goroutine
		<-ended
		t.Fatalf("the session did not end: %v", ctx.Err())
		return nil
	}
}

// TestRemoteSessionLoss checks that a legacy Streamable HTTP session ends
// when its server forgot it, however the server says so, so that mcpd
// rebuilds it; and that a legacy SSE session ends when its stream drops.
func TestRemoteSessionLoss(t *testing.T) {
	tests := []struct {
		name      string
		forgotten http.Handler // the server after it lost its sessions
		call      bool         // a call notices; else the dropped stream does
	}{
		{"404 plain", forgetful(http.StatusNotFound, "session not found"), true},
		{"404 json-rpc", forgetful(http.StatusNotFound, `{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}`), true},
		{"400 json-rpc", forgetful(http.StatusBadRequest, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":2}`), true},
		{"400 not initialized", forgetful(http.StatusBadRequest, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}`), true},
		{"restart drops the stream", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			srv := newRemoteMCPServer(legacyVersions)
			obs := newObserver(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
			ts := serveRemote(t, obs)
			// The client does not DELETE a session it knows is gone, so
			// the old server's session is closed here.
			t.Cleanup(func() { closeSessions(srv) })
			cs := connectDirect(ctx, t, nil, config.TransportHTTP, ts.URL, "2025-11-25")
			if cs.ID() == "" {
				t.Fatal("got no session id, want a stateful session")
			}
			forgotten := tt.forgotten
			if forgotten == nil {
				// A restarted go-sdk server: it knows no session.
				fresh := newRemoteMCPServer(legacyVersions)
				forgotten = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fresh }, nil)
			}
			obs.swap(forgotten)
			if tt.call {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}})
				if err == nil {
					t.Fatal("call to a server that forgot the session: got no error")
				}
				if !errors.Is(err, mcp.ErrSessionMissing) {
					t.Errorf("the call got %v, want an error wrapping mcp.ErrSessionMissing", err)
				}
			} else {
				// The old server goes away with its streams; the SDK
				// reconnects the standalone stream and is told 404.
				closeSessions(srv)
			}
			if err := waitEnded(ctx, t, cs); !errors.Is(err, mcp.ErrSessionMissing) {
				t.Errorf("the session ended with %v, want an error wrapping mcp.ErrSessionMissing", err)
			}
		})
	}

	t.Run("sse stream dropped", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		srv := newRemoteMCPServer(legacyVersions)
		ts := serveRemote(t, newObserver(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
		cs := connectDirect(ctx, t, nil, config.TransportSSE, ts.URL, "2025-11-25")
		closeSessions(srv)
		// The SDK reports a dropped SSE stream as a plain end of session.
		if err := waitEnded(ctx, t, cs); err != nil {
			t.Errorf("the session ended with %v, want nil", err)
		}
	})
}

// TestRemoteSessionLossInFlight: when a remote server forgets its session,
// the request it answered with "unknown session" did not run and is sent
// again on the new session; a call already running on the lost session
// (a tool without readOnlyHint or idempotentHint) may have run, and is not.
func TestRemoteSessionLossInFlight(t *testing.T) {
	ctx := testContext(t)
	started, release := make(chan struct{}), make(chan struct{})
	var oldRuns, freshRuns atomic.Int32
	holdTool := func(runs *atomic.Int32, block bool) mcp.ToolHandlerFor[struct{}, any] {
		return func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if runs.Add(1) == 1 && block {
				close(started)
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return &mcp.CallToolResult{}, nil, nil
		}
	}
	old := newRemoteMCPServer(legacyVersions)
	mcp.AddTool(old, &mcp.Tool{Name: "hold"}, holdTool(&oldRuns, true))
	obs := newObserver(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return old }, nil))
	ts := serveRemote(t, obs)
	t.Cleanup(func() { closeSessions(old) })
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce()
	m, _, _ := remoteManager(t, nil)
	if st, err := m.Connect(ctx, remoteConfig("r", config.TransportHTTP, ts.URL), false); err != nil || st.State != StateReady {
		t.Fatalf("connect: %v %v (%s)", st.State, err, st.LastError)
	}
	held := make(chan error, 1)
	go func() {
		_, err := m.CallTool(ctx, "mcp__r__hold", nil, CallOptions{})
		held <- err
	}()
	<-started

	// The server restarts: it knows no session.
	fresh := newRemoteMCPServer(legacyVersions)
	mcp.AddTool(fresh, &mcp.Tool{Name: "hold"}, holdTool(&freshRuns, false))
	t.Cleanup(func() { closeSessions(fresh) })
	obs.swap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fresh }, nil))

	res, err := m.CallTool(ctx, "mcp__r__echo", map[string]any{"message": "again"}, CallOptions{})
	if err != nil {
		t.Fatalf("a call the server refused for its unknown session: got %v, want it sent again on the new session", err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "again" {
		t.Errorf("echo: got %q", got)
	}
	// The old server finishes the call, on a session mcpd has given up.
	releaseOnce()
	err = <-held
	var interrupted *CallInterruptedError
	if !errors.As(err, &interrupted) {
		t.Errorf("the call running on the lost session: got %v, want a CallInterruptedError (it may have run)", err)
	}
	if n := freshRuns.Load(); n != 0 {
		t.Errorf("the restarted server ran the held call %d times, want 0: it was sent again", n)
	}
	if st, _ := m.Get("r"); st.Restarts != 1 {
		t.Errorf("restarts: got %d, want 1 (one lost session)", st.Restarts)
	}
}

// TestRemoteResumeAfterRestartNotSentAgain: a server takes a call (its
// answer stream carries an event id), then restarts; the SDK resumes the
// stream with a GET made with the call's context, which gets 404. The
// call reached the server and may have run: it is not sent again.
func TestRemoteResumeAfterRestartNotSentAgain(t *testing.T) {
	ctx := testContext(t)
	var oldRuns, freshRuns atomic.Int32
	count := func(runs *atomic.Int32) mcp.ToolHandlerFor[struct{}, any] {
		return func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			runs.Add(1)
			return &mcp.CallToolResult{}, nil, nil
		}
	}
	old := newRemoteMCPServer(legacyVersions)
	fresh := newRemoteMCPServer(legacyVersions)
	mcp.AddTool(fresh, &mcp.Tool{Name: "hold"}, count(&freshRuns))
	mcp.AddTool(old, &mcp.Tool{Name: "hold"}, count(&oldRuns))
	oldH := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return old }, nil)
	freshH := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fresh }, nil)
	var restarted atomic.Bool
	obs := newObserver(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if restarted.Load() {
			freshH.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte(`"hold"`)) {
				// The server takes the call, sends a priming event, and dies.
				oldRuns.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, "id: 1\nretry: 10\ndata:\n\n")
				w.(http.Flusher).Flush()
				restarted.Store(true)
				return
			}
		}
		oldH.ServeHTTP(w, r)
	}))
	ts := serveRemote(t, obs)
	t.Cleanup(func() { closeSessions(old); closeSessions(fresh) })
	m, _, _ := remoteManager(t, nil)
	if st, err := m.Connect(ctx, remoteConfig("r", config.TransportHTTP, ts.URL), false); err != nil || st.State != StateReady {
		t.Fatalf("connect: %v %v (%s)", st.State, err, st.LastError)
	}
	_, err := m.CallTool(ctx, "mcp__r__hold", nil, CallOptions{})
	var interrupted *CallInterruptedError
	if freshRuns.Load() != 0 || !errors.As(err, &interrupted) {
		t.Errorf("the call the old server took: got %v, and the restarted server ran it %d times; want a CallInterruptedError and 0 runs", err, freshRuns.Load())
	}
}

// closeSessions closes a test server's sessions, as a server that exits.
func closeSessions(srv *mcp.Server) {
	for ss := range srv.Sessions() {
		_ = ss.Close()
	}
}

// TestRemoteMessageLimit checks MaxMessageBytes on every way a response
// arrives: a JSON body fails only its call; an oversized event on a stream
// ends the session (the SDK cannot skip an event it could not read).
func TestRemoteMessageLimit(t *testing.T) {
	const limit = 64 << 10
	streamable := func(o *mcp.StreamableHTTPOptions) func(*mcp.Server) http.Handler {
		return func(srv *mcp.Server) http.Handler {
			return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, o)
		}
	}
	tests := []struct {
		name        string
		versions    []string
		handler     func(*mcp.Server) http.Handler
		kind        config.TransportKind
		version     string
		want        string // in the call's error
		sessionEnds bool
		mcpdCounts  bool // mcpd, not the SDK, finds the message too large
	}{
		{"json body", legacyVersions, streamable(&mcp.StreamableHTTPOptions{JSONResponse: true}), config.TransportHTTP, "2025-11-25",
			"upstream message exceeds 65536 bytes", false, true},
		{"streamable event", legacyVersions, streamable(nil), config.TransportHTTP, "2025-11-25",
			"SSE event exceeded 65536 bytes", true, false},
		{"stateless event", nil, streamable(&mcp.StreamableHTTPOptions{Stateless: true}), config.TransportHTTP, "2026-07-28",
			"SSE event exceeded 65536 bytes", true, false},
		{"legacy sse event", legacyVersions, func(srv *mcp.Server) http.Handler {
			return mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
		}, config.TransportSSE, "2025-11-25", "upstream message exceeds 65536 bytes", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			srv := newRemoteMCPServer(tt.versions)
			ts := serveRemote(t, newObserver(tt.handler(srv)))
			t.Cleanup(func() { closeSessions(srv) })

			cs := connectDirect(ctx, t, &RemoteOptions{MaxMessageBytes: limit}, tt.kind, ts.URL, tt.version)
			if got := cs.InitializeResult().ProtocolVersion; got != tt.version {
				t.Fatalf("protocol version: got %q, want %q", got, tt.version)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "big", Arguments: map[string]any{"size": limit / 2}})
			if err != nil {
				t.Fatalf("a result of half the limit: %v", err)
			}
			if n := len(res.Content[0].(*mcp.TextContent).Text); n != limit/2 {
				t.Fatalf("got %d bytes of text, want %d", n, limit/2)
			}
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "big", Arguments: map[string]any{"size": 2 * limit}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("a result of twice the limit: got error %v, want one saying %q", err, tt.want)
			}
			if tt.mcpdCounts && !errors.Is(err, transport.ErrMessageTooLarge) {
				t.Errorf("got %v, want an error matching transport.ErrMessageTooLarge", err)
			}
			if tt.sessionEnds {
				waitEnded(ctx, t, cs)
				return
			}
			var tooLarge *MessageTooLargeError
			if !errors.As(err, &tooLarge) || tooLarge.Limit != limit {
				t.Errorf("got error %v, want a *MessageTooLargeError of %d bytes", err, limit)
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "still here"}}); err != nil {
				t.Errorf("the session after an oversized JSON body: got %v, want it to serve the next call", err)
			}
		})
	}

	// Through a Manager the error keeps its text and is retryable (the
	// session is rebuilt), and last_error says why the session ended, not
	// only "session closed".
	t.Run("manager", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		srv := newRemoteMCPServer(legacyVersions)
		ts := serveRemote(t, newObserver(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
		m, _, _ := remoteManager(t, &RemoteOptions{MaxMessageBytes: limit})
		if st, err := m.Connect(ctx, remoteConfig("s", config.TransportSSE, ts.URL), false); err != nil || st.State != StateReady {
			t.Fatalf("connect: %v %s", err, st.LastError)
		}
		_, err := m.CallTool(ctx, "mcp__s__big", map[string]any{"size": 2 * limit}, CallOptions{})
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "upstream message exceeds 65536 bytes") {
			t.Errorf("got %v, want ErrUnavailable saying the message exceeds 65536 bytes", err)
		}
		var st Status
		eventually(ctx, t, "a last_error", func() bool { st, _ = m.Get("s"); return st.LastError != "" })
		if !strings.Contains(st.LastError, "exceeds") {
			t.Errorf("last_error %q does not say why the session ended (an event over the limit)", st.LastError)
		}
	})
	t.Run("manager json body", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t)
		srv := newRemoteMCPServer(legacyVersions)
		// JSON responses, not SSE: only the one call fails.
		ts := serveRemote(t, newObserver(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
			&mcp.StreamableHTTPOptions{JSONResponse: true})))
		t.Cleanup(func() { closeSessions(srv) })
		m, _, _ := remoteManager(t, &RemoteOptions{MaxMessageBytes: limit})
		if st, err := m.Connect(ctx, remoteConfig("j", config.TransportHTTP, ts.URL), false); err != nil || st.State != StateReady {
			t.Fatalf("connect: %v %s", err, st.LastError)
		}
		_, err := m.CallTool(ctx, "mcp__j__big", map[string]any{"size": 2 * limit}, CallOptions{})
		var rpcErr *RPCError
		if !errors.Is(err, ErrResourceExhausted) || errors.As(err, &rpcErr) || !strings.Contains(err.Error(), "exceeds 65536 bytes") {
			t.Errorf("got %v, want ErrResourceExhausted saying the message exceeds 65536 bytes, not a server error", err)
		}
		if errors.Is(err, ErrQueueTimeout) {
			t.Errorf("got %v, an ErrQueueTimeout; want only ErrResourceExhausted: the same answer fails again", err)
		}
		if _, err := m.CallTool(ctx, "mcp__j__echo", map[string]any{"message": "x"}, CallOptions{}); err != nil {
			t.Errorf("the session should go on after one oversized answer: %v", err)
		}
	})
}

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestRemoteHeaders(t *testing.T) {
	var got *http.Request
	base := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r
		return &http.Response{StatusCode: http.StatusAccepted, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})}
	o := (&RemoteOptions{HTTPClient: base}).withDefaults()
	tr, err := o.transport(config.Server{Name: "s", Kind: config.TransportHTTP, URL: "https://mcp.example.com:8443/mcp",
		Headers: map[string]string{"authorization": testAuth, "X-Team": "blue", "Accept": "text/plain", "Host": "front.example.com"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := tr.(*mcp.StreamableClientTransport).HTTPClient
	tests := []struct {
		name, url                    string
		wantAuth, wantTeam, wantHost string
	}{
		{"the server", "https://MCP.example.com:8443/other", testAuth, "blue", "front.example.com"},
		{"another port", "https://mcp.example.com/mcp", "", "", ""},
		{"another scheme", "http://mcp.example.com:8443/mcp", "", "", ""},
		{"another host", "https://evil.example.net:8443/mcp", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, tt.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if a := got.Header.Get("Authorization"); a != tt.wantAuth {
				t.Errorf("Authorization: got %q, want %q", a, tt.wantAuth)
			}
			if v := got.Header.Get("X-Team"); v != tt.wantTeam {
				t.Errorf("X-Team: got %q, want %q", v, tt.wantTeam)
			}
			wantHost := tt.wantHost
			if wantHost == "" {
				wantHost = req.URL.Host
			}
			if got.Host != wantHost {
				t.Errorf("Host: got %q, want %q", got.Host, wantHost)
			}
			if a := got.Header.Get("Accept"); a != "application/json, text/event-stream" {
				t.Errorf("Accept: got %q, want the SDK's own, not the static header", a)
			}
			if req.Header.Get("Authorization") != "" {
				t.Error("the caller's request was modified")
			}
		})
	}
}

func TestRemoteDialerRejects(t *testing.T) {
	dial := NewRemoteDialer(nil)
	tests := []struct {
		name string
		cfg  config.Server
	}{
		{"stdio", config.Server{Name: "s", Kind: config.TransportStdio, Command: "x"}},
		{"auto", config.Server{Name: "s", Kind: config.TransportAuto, URL: "http://127.0.0.1:1/mcp"}},
		{"relative url", config.Server{Name: "s", Kind: config.TransportHTTP, URL: "/mcp"}},
		{"ftp url", config.Server{Name: "s", Kind: config.TransportSSE, URL: "ftp://user:pw@host/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dial(testContext(t), tt.cfg)
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("got %v, want ErrInvalidArgument", err)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Errorf("the error %q shows the URL's password", err)
			}
		})
	}
}

func TestEventLimitBody(t *testing.T) {
	const limit = 32
	event := func(data, eol string) string { return "event: message" + eol + "data: " + data + eol + eol }
	tests := []struct {
		name, stream string
		tooLarge     bool
	}{
		{"small events, LF", event("a", "\n") + event("b", "\n") + event(strings.Repeat("c", 10), "\n"), false},
		{"small events, CRLF", event("a", "\r\n") + event("b", "\r\n") + event(strings.Repeat("c", 8), "\r\n"), false},
		{"small events, CR", event("a", "\r") + event("b", "\r") + event(strings.Repeat("c", 10), "\r"), false},
		{"many small events add up to more", strings.Repeat(event("0123456789", "\n"), 10), false},
		{"keepalive comments", strings.Repeat(": ping\n\n", 20), false},
		{"one large event, LF", event("a", "\n") + event(strings.Repeat("x", limit), "\n"), true},
		{"one large event, CRLF", event(strings.Repeat("x", limit), "\r\n"), true},
		{"an unterminated line", "data: " + strings.Repeat("x", 100), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &sseState{}
			body := &eventLimitBody{rc: io.NopCloser(iotest.OneByteReader(strings.NewReader(tt.stream))), limit: limit, state: st}
			data, err := io.ReadAll(body)
			var tl *MessageTooLargeError
			if got := errors.As(err, &tl); got != tt.tooLarge {
				t.Fatalf("got error %v, want too large: %v", err, tt.tooLarge)
			}
			if tt.tooLarge != (st.get() != nil) {
				t.Errorf("recorded: got %v, want recorded %v", st.get(), tt.tooLarge)
			}
			if !tt.tooLarge && string(data) != tt.stream {
				t.Errorf("got %q, want the stream unchanged", data)
			}
		})
	}
}

// TestResumeBody: a GET stream that stayed open ends with a made-up event
// naming the last id the server gave (or the one the GET resumed after),
// at an event's end only, and not when it closed at once.
// TestResumeBodyCountsFromTheAnswer: a stream is held from the moment its
// answer came, so a slow answer closed at once gets no made-up event, and
// the SDK still gives up on a server that closes every stream at once.
func TestResumeBodyCountsFromTheAnswer(t *testing.T) {
	rt := &remoteRoundTripper{
		base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(streamHeld + 100*time.Millisecond) // a slow server or proxy
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
				Body: io.NopCloser(strings.NewReader("")), Request: r}, nil // closed at once
		}),
		streamable: true, resumeTag: "mcpd-test.",
	}
	req, err := http.NewRequest(http.MethodGet, "http://example.invalid/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.send(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if data, _ := io.ReadAll(resp.Body); len(data) != 0 {
		t.Errorf("a stream closed as soon as it opened got %q appended", data)
	}
}

func TestResumeBody(t *testing.T) {
	const none = "(none)"
	tests := []struct {
		name, stream, resumedFrom string
		held                      bool
		want                      string // the id the made-up event stands for
	}{
		{"idle", "", "", true, ""},
		{"keepalive comments", ": ping\n\n: ping\n\n", "", true, ""},
		{"events without ids", "data: {}\n\n", "7", true, "7"},
		{"numbered events", "id: 1\ndata: {}\n\nid:  2 \r\ndata: {}\r\n\r\ndata: {}\n\n", "", true, "2"},
		{"an id of an event cut short", "id: 1\ndata: {}\n\nid: 2\ndata: {", "", true, none},
		{"cut within a line", "data: {}\n\n: pi", "", true, none},
		{"cut after a line", "id: 1\ndata: {}\n", "", true, none},
		{"closed at once", "id: 1\ndata: {}\n\n", "", false, none},
		{"an id too long to read", "id: " + strings.Repeat("x", maxTrackedLine) + "\n\n", "", true, none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opened := time.Now()
			if tt.held {
				opened = opened.Add(-streamHeld)
			}
			var minted []string
			body := &resumeBody{
				rc: io.NopCloser(iotest.OneByteReader(strings.NewReader(tt.stream))), req: context.Background(),
				opened: opened, lastID: tt.resumedFrom, boundary: true,
				mint: func(last string) string { minted = append(minted, last); return "made-up" },
			}
			data, err := io.ReadAll(body)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.TrimPrefix(string(data), tt.stream)
			if tt.want == none {
				if got != "" || len(minted) != 0 {
					t.Errorf("got %q appended, want the stream unchanged", got)
				}
				return
			}
			if got != "id: made-up\n\n" || !slices.Equal(minted, []string{tt.want}) {
				t.Errorf("got %q appended for ids %q, want an event with the made-up id for %q", got, minted, tt.want)
			}
		})
	}
}

func TestLimitBody(t *testing.T) {
	tests := []struct {
		size     int
		tooLarge bool
	}{{0, false}, {9, false}, {10, false}, {11, true}, {1000, true}}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.size), func(t *testing.T) {
			b := &limitBody{rc: io.NopCloser(strings.NewReader(strings.Repeat("x", tt.size))), left: 10, limit: 10}
			data, err := io.ReadAll(b)
			var tl *MessageTooLargeError
			if got := errors.As(err, &tl); got != tt.tooLarge {
				t.Fatalf("got error %v, want too large: %v", err, tt.tooLarge)
			}
			if !tt.tooLarge && len(data) != tt.size {
				t.Errorf("got %d bytes, want %d", len(data), tt.size)
			}
		})
	}
}

// TestErrorsHideTheURL: a failed HTTP exchange is reported with the URL
// as net/http prints it (re-encoded, the password as "***"); the error an
// RPC caller gets must show neither the password nor the query's token,
// and keeps its kind.
func TestErrorsHideTheURL(t *testing.T) {
	const rawURL = "http://user:pa55@127.0.0.1:1/mcp?api_key=t0ken-value"
	failing := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("refused")
	})}
	_, httpErr := failing.Post(rawURL, "application/json", nil)
	if httpErr == nil || strings.Contains(httpErr.Error(), rawURL) || !strings.Contains(httpErr.Error(), "t0ken-value") {
		t.Fatalf("net/http error %v: want the URL in net/http's own form, token included", httpErr)
	}
	u := &upstream{cfg: config.Server{Name: "r", Kind: config.TransportHTTP, URL: rawURL}}
	err := u.classify(testContext(t), nil, "tools/call echo", httpErr)
	if msg := err.Error(); strings.Contains(msg, "pa55") || strings.Contains(msg, "t0ken-value") {
		t.Errorf("classified error %q shows a secret of the URL", msg)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("classified error %v: want ErrUnavailable", err)
	}
}
