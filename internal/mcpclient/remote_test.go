package mcpclient

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
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
// debug logger writing into logs.
func remoteManager(t *testing.T, ropts *RemoteOptions) (*Manager, *events.Bus, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	bus := events.NewBus(nil)
	var o RemoteOptions
	if ropts != nil {
		o = *ropts
	}
	if o.HTTPClient == nil {
		o.HTTPClient = testHTTPClient(t)
	}
	m := NewManager(&Options{
		Logger:       zerolog.New(logs).Level(zerolog.DebugLevel),
		ProbeTimeout: 20 * time.Second,
		Dialer:       NewRemoteDialer(&o),
		Events:       bus,
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		bus.Close()
	})
	return m, bus, logs
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

func TestExploreLimits(t *testing.T) {
	mk := map[string]func(*mcp.Server) http.Handler{
		"sse-stream": func(srv *mcp.Server) http.Handler {
			return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
		},
		"json": func(srv *mcp.Server) http.Handler {
			return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
		},
		"stateless": func(srv *mcp.Server) http.Handler {
			return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
		},
		"legacy-sse": func(srv *mcp.Server) http.Handler {
			return mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
		},
	}
	for name, h := range mk {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			srv := newRemoteMCPServer(legacyVersions)
			if name == "stateless" {
				srv = newRemoteMCPServer(nil)
			}
			ts := serveRemote(t, newObserver(h(srv)))
			m, _, _ := remoteManager(t, &RemoteOptions{MaxMessageBytes: 64 << 10})
			kind := config.TransportHTTP
			if name == "legacy-sse" {
				kind = config.TransportSSE
			}
			st, err := m.Connect(ctx, remoteConfig("s", kind, ts.URL), false)
			if err != nil || st.State != StateReady {
				t.Fatal(err, st.LastError)
			}
			_, err = m.CallTool(ctx, "mcp__s__big", map[string]any{"size": 100 << 10}, CallOptions{})
			t.Logf("err: %v", err)
			var tl *MessageTooLargeError
			t.Logf("toolarge=%v unavailable=%v", errors.As(err, &tl), errors.Is(err, ErrUnavailable))
			time.Sleep(200 * time.Millisecond)
			st, _ = m.Get("s")
			t.Logf("state after: %v %s", st.State, st.LastError)
			_, err = m.CallTool(ctx, "mcp__s__echo", map[string]any{"message": "x"}, CallOptions{})
			t.Logf("next call: %v", err)
		})
	}
}
