package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// remoteSecret is the value of a header the remote servers get; it must
// never show in mcpd's log or answers.
const remoteSecret = "e2e-5ecret-token"

// startEverythingRemote runs server-everything in mode (streamableHttp or
// sse) on a free loopback port until the test ends, and returns its base
// URL once it accepts connections.
func startEverythingRemote(ctx context.Context, t *testing.T, mode string) string {
	t.Helper()
	bin := everythingBinary(t)
	port := strconv.Itoa(freePort(t))
	cmd := exec.Command(bin, mode)
	cmd.Env = append(daemonEnv(), "PORT="+port)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start server-everything %s: %v", mode, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("server-everything %s output:\n%s", mode, out.String())
		}
	})
	addr := net.JoinHostPort("127.0.0.1", port)
	poll(ctx, t, "server-everything "+mode+" to listen on "+addr, func() (bool, error) {
		select {
		case <-exited:
			t.Fatalf("server-everything %s exited: %s", mode, out.String())
		default:
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return false, err
		}
		c.Close()
		return true, nil
	})
	return "http://" + addr
}

// TestEverythingRemote reaches server-everything over Streamable HTTP and
// legacy SSE through mcpd, with the transport named and detected: tools,
// a resource, and a resource update.
func TestEverythingRemote(t *testing.T) {
	t.Parallel()
	everythingBinary(t)
	ctx := testContext(t)
	httpURL := startEverythingRemote(ctx, t, "streamableHttp") + "/mcp"
	sseURL := startEverythingRemote(ctx, t, "sse") + "/sse"
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})

	remote := func(url string) *mcpdv1.HttpConfig {
		return &mcpdv1.HttpConfig{Url: url, Headers: map[string]string{"Authorization": "Bearer " + remoteSecret}}
	}
	servers := []struct {
		name      string
		config    *mcpdv1.ServerConfig
		transport mcpdv1.Transport
	}{
		{"http", &mcpdv1.ServerConfig{Name: "http", Transport: &mcpdv1.ServerConfig_Http{Http: remote(httpURL)}}, mcpdv1.Transport_TRANSPORT_HTTP},
		{"http-auto", &mcpdv1.ServerConfig{Name: "http-auto", Transport: &mcpdv1.ServerConfig_Remote{Remote: remote(httpURL)}}, mcpdv1.Transport_TRANSPORT_HTTP},
		{"sse", &mcpdv1.ServerConfig{Name: "sse", Transport: &mcpdv1.ServerConfig_Sse{Sse: remote(sseURL)}}, mcpdv1.Transport_TRANSPORT_SSE},
		{"sse-auto", &mcpdv1.ServerConfig{Name: "sse-auto", Transport: &mcpdv1.ServerConfig_Remote{Remote: remote(sseURL)}}, mcpdv1.Transport_TRANSPORT_SSE},
	}
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			resp, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: s.config})
			if err != nil {
				t.Fatalf("ConnectServer: %v", err)
			}
			srv := resp.GetServer()
			if srv.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
				t.Fatalf("state: got %v (%s), want READY", srv.GetState(), srv.GetLastError())
			}
			if srv.GetTransport() != s.transport {
				t.Errorf("transport: got %v, want %v", srv.GetTransport(), s.transport)
			}
			t.Logf("%s: protocol_version %s, server_info %s %s", s.name, srv.GetProtocolVersion(),
				srv.GetServerInfo().GetName(), srv.GetServerInfo().GetVersion())
			if srv.GetProtocolVersion() == "" || srv.GetServerInfo().GetName() == "" {
				t.Errorf("got protocol_version %q and server_info %v, want both set", srv.GetProtocolVersion(), srv.GetServerInfo())
			}
			if strings.Contains(prototext.Format(srv), remoteSecret) {
				t.Errorf("the Server shows the header value: %v", srv)
			}

			tools, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: s.name})
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			var names []string
			for _, tool := range tools.GetTools() {
				names = append(names, tool.GetToolName())
			}
			for _, want := range []string{"echo", "get-sum", "toggle-subscriber-updates"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools: got %v, want %s among them", names, want)
				}
			}

			echo := d.mustCall(ctx, t, "mcp__"+s.name+"__echo", map[string]any{"message": "over " + s.name})
			if got, want := text(echo), "Echo: over "+s.name; got != want {
				t.Errorf("echo: got %q, want %q", got, want)
			}
			sum := d.mustCall(ctx, t, "mcp__"+s.name+"__get-sum", map[string]any{"a": 2, "b": 40})
			if got := text(sum); !strings.Contains(got, "42") {
				t.Errorf("get-sum: got %q, want the sum 42", got)
			}

			const uri = "demo://resource/dynamic/text/1"
			r, err := d.hub.ReadResource(ctx, &mcpdv1.ReadResourceRequest{Server: s.name, Uri: uri})
			if err != nil {
				t.Fatalf("ReadResource: %v", err)
			}
			if c := r.GetContents(); len(c) != 1 || c[0].GetText() == "" || c[0].GetUri() != uri {
				t.Errorf("ReadResource: got %v, want the text of %s", c, uri)
			}

			subCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			sub, err := d.hub.Subscribe(subCtx, &mcpdv1.SubscribeRequest{
				Resources: []*mcpdv1.ResourceRef{{Server: s.name, Uri: uri}},
				Kinds:     []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_RESOURCE_UPDATED},
			})
			if err != nil {
				t.Fatalf("Subscribe: %v", err)
			}
			// The server sends an update at once and then every 5s, so an
			// upstream subscription that lands after the toggle still
			// gets one.
			d.mustCall(ctx, t, "mcp__"+s.name+"__toggle-subscriber-updates", nil)
			defer d.mustCall(ctx, t, "mcp__"+s.name+"__toggle-subscriber-updates", nil)
			m, err := sub.Recv()
			if err != nil {
				t.Fatalf("Subscribe: %v", err)
			}
			if got := m.GetEvent().GetResourceUpdated().GetUri(); got != uri || m.GetEvent().GetServer() != s.name {
				t.Errorf("got %v, want resource_updated of %s from %s", m.GetEvent(), uri, s.name)
			}
		})
	}
	if strings.Contains(d.log.String(), remoteSecret) {
		t.Errorf("mcpd's log shows the header value:\n%s", d.log.String())
	}
}

// TestConfigRemoteEntries starts mcpd with a .mcp.json whose entries reach
// server-everything by URL: typed "http" and "sse", and one with no type
// whose transport mcpd detects. ${VAR} expands in url and headers, and the
// header's value never shows in mcpd's answers or log.
func TestConfigRemoteEntries(t *testing.T) {
	t.Parallel()
	everythingBinary(t)
	ctx := testContext(t)
	httpBase := startEverythingRemote(ctx, t, "streamableHttp")
	sseBase := startEverythingRemote(ctx, t, "sse")
	headers := map[string]string{"Authorization": "Bearer ${MCPD_E2E_TOKEN}"}
	cfg := map[string]any{"mcpServers": map[string]any{
		"cfg-http": map[string]any{"type": "http", "url": "${MCPD_E2E_HTTP}/mcp", "headers": headers},
		"cfg-sse":  map[string]any{"type": "sse", "url": "${MCPD_E2E_SSE}/sse", "headers": headers},
		"cfg-auto": map[string]any{"url": "${MCPD_E2E_HTTP}/mcp", "headers": headers},
	}}
	d := startDaemon(ctx, t, daemonOptions{
		config: writeConfig(t, mustJSON(t, cfg)),
		env:    []string{"MCPD_E2E_HTTP=" + httpBase, "MCPD_E2E_SSE=" + sseBase, "MCPD_E2E_TOKEN=" + remoteSecret},
	})
	for _, tc := range []struct {
		name      string
		transport mcpdv1.Transport
	}{
		{"cfg-http", mcpdv1.Transport_TRANSPORT_HTTP},
		{"cfg-sse", mcpdv1.Transport_TRANSPORT_SSE},
		{"cfg-auto", mcpdv1.Transport_TRANSPORT_HTTP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := d.waitServer(ctx, t, tc.name, mcpdv1.ServerState_SERVER_STATE_READY)
			if s.GetTransport() != tc.transport {
				t.Errorf("transport: got %v, want %v", s.GetTransport(), tc.transport)
			}
			if !slices.Equal(s.GetHeaderNames(), []string{"Authorization"}) || strings.Contains(prototext.Format(s), remoteSecret) {
				t.Errorf("the Server shows header names %q and must not show the value: %v", s.GetHeaderNames(), s)
			}
			echo := d.mustCall(ctx, t, "mcp__"+tc.name+"__echo", map[string]any{"message": "configured"})
			if got, want := text(echo), "Echo: configured"; got != want {
				t.Errorf("echo: got %q, want %q", got, want)
			}
		})
	}
	if strings.Contains(d.log.String(), remoteSecret) {
		t.Errorf("mcpd's log shows the header value:\n%s", d.log.String())
	}
}

// TestStandaloneStreamCutByProxy reaches a Streamable HTTP server through
// a proxy that ends every response stream after a while, as a load
// balancer's idle timeout does: the standalone GET stream is opened again
// each time, and the session lives on. A tool call in flight meanwhile
// (of a tool without hints, which mcpd would not send again) ends with its
// result, the server never leaves READY, and a tools/list_changed still
// arrives. The server numbers its events or not (with an event store, a
// GET resumes after the last one).
func TestStandaloneStreamCutByProxy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		store mcp.EventStore
	}{
		{"unnumbered", nil},
		{"event-store", mcp.NewMemoryEventStore(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testStreamCutByProxy(t, tc.store)
		})
	}
}

// serveThrough serves srv over Streamable HTTP (with opts) on a loopback
// test server until the test ends, each request going through proxy,
// which may hand it to the server's handler. At the end, release (if not
// nil) lets the server's tools return first: the listener's Close waits
// for them.
func serveThrough(t *testing.T, srv *mcp.Server, opts *mcp.StreamableHTTPOptions, release func(), proxy func(server http.Handler, w http.ResponseWriter, r *http.Request)) *httptest.Server {
	t.Helper()
	return serveHandlerThrough(t, srv, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts), release, proxy)
}

// serveOverThrough is serveThrough for kind "http" (Streamable HTTP) or
// "sse" (the legacy HTTP+SSE transport).
func serveOverThrough(t *testing.T, kind string, srv *mcp.Server, release func(), proxy func(server http.Handler, w http.ResponseWriter, r *http.Request)) *httptest.Server {
	t.Helper()
	if kind == "sse" {
		return serveHandlerThrough(t, srv, mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil), release, proxy)
	}
	return serveThrough(t, srv, nil, release, proxy)
}

// serveHandlerThrough is serveThrough with srv's HTTP handler given.
func serveHandlerThrough(t *testing.T, srv *mcp.Server, handler http.Handler, release func(), proxy func(server http.Handler, w http.ResponseWriter, r *http.Request)) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { proxy(handler, w, r) }))
	t.Cleanup(func() {
		if release != nil {
			release()
		}
		ts.CloseClientConnections()
		ts.Close()
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
	})
	return ts
}

// serverBehindProxy returns a go-sdk server with the tool "wait", which
// answers "waited" once release is called (again: a no-op); serveThrough
// calls it at the test's end.
func serverBehindProxy() (srv *mcp.Server, release func()) {
	srv = mcp.NewServer(&mcp.Implementation{Name: "behind-a-proxy", Version: "0.0.1"}, nil)
	released := make(chan struct{})
	mcp.AddTool(srv, &mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-released:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "waited"}}}, nil, nil
	})
	return srv, sync.OnceFunc(func() { close(released) })
}

func testStreamCutByProxy(t *testing.T, store mcp.EventStore) {
	ctx := testContext(t)
	srv, release := serverBehindProxy()
	// cut counts the GET streams the proxy ended. The hold is far longer
	// than a request takes to come back, so that each stream is one that
	// stayed open, not one refused.
	const hold = 3 * time.Second
	var cut atomic.Int32
	// Without a store the server numbers no events, so a GET must not name
	// one to resume after.
	var resumedAfter atomic.Value
	proxy := serveThrough(t, srv, &mcp.StreamableHTTPOptions{EventStore: store}, release, func(handler http.Handler, w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			handler.ServeHTTP(w, r)
			return
		}
		if id := r.Header.Get("Last-Event-ID"); id != "" {
			resumedAfter.Store(id)
		}
		ctx, cancel := context.WithTimeout(r.Context(), hold)
		defer cancel()
		handler.ServeHTTP(w, r.WithContext(ctx))
		if r.Context().Err() == nil {
			cut.Add(1)
		}
	})
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	changes := d.subscribe(ctx, t, "proxied", mcpdv1.EventKind_EVENT_KIND_TOOLS_CHANGED)
	d.connectReady(ctx, t, remoteConfig("proxied", "http", proxy.URL))

	called := make(chan error, 1)
	go func() {
		r, err := d.call(ctx, t, "mcp__proxied__wait", nil, 0)
		if err == nil && text(r) != "waited" {
			err = fmt.Errorf("got %q, want %q", text(r), "waited")
		}
		called <- err
	}()
	// The SDK gives a stream up after 2 retries that brought nothing new.
	const cuts = 4
	poll(ctx, t, fmt.Sprintf("the proxy to cut %d streams", cuts), func() (bool, error) {
		if n := cut.Load(); n < cuts {
			return false, fmt.Errorf("%d cut", n)
		}
		return true, nil
	})
	release()
	if err := <-called; err != nil {
		t.Errorf("the call in flight while the proxy cut the stream: %v", err)
	}

	// A notification arrives on whichever stream is open: one sent while
	// the GET is opened again is lost, so a new tool is added until one
	// is announced.
	announced := make(chan struct{})
	go func() {
		if _, err := changes.Recv(); err == nil {
			close(announced)
		}
	}()
	for i := 0; ; i++ {
		mcp.AddTool(srv, &mcp.Tool{Name: fmt.Sprintf("added-%d", i)}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
		timer := time.NewTimer(time.Second)
		select {
		case <-announced:
			timer.Stop()
		case <-timer.C:
			continue
		case <-ctx.Done():
			t.Fatal("no tools_changed event")
		}
		break
	}

	if id := resumedAfter.Load(); id != nil && store == nil {
		t.Errorf("a GET resumed after event %q, which the server never sent", id)
	}
	if s := d.waitServer(ctx, t, "proxied", mcpdv1.ServerState_SERVER_STATE_READY); s.GetRestarts() != 0 {
		t.Errorf("restarts: got %d, want 0 (last_error %q)", s.GetRestarts(), s.GetLastError())
	}
}

// TestRemoteCallCutOffMayHaveRun calls a tool without hints over
// Streamable HTTP, and the call's request reaches the server and runs, but
// no answer comes back: the server goes away while the tool runs, or a
// gateway in front of it answers 504 once it ran. Either way the call may
// have run: UNAVAILABLE with ErrorInfo reason CALL_MAY_HAVE_RUN, which
// tells a client not to repeat it blindly, and it was not sent again.
func TestRemoteCallCutOffMayHaveRun(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		how      string
		readOnly bool // the tool says it is: calling it again is safe
		// wantMayHaveRun: CALL_MAY_HAVE_RUN, else a plain UNAVAILABLE,
		// which clients may repeat.
		wantMayHaveRun bool
		wantRuns       int32
	}{
		{how: "server gone", wantMayHaveRun: true, wantRuns: 1},
		{how: "gateway timeout", wantMayHaveRun: true, wantRuns: 1},
		{how: "gateway timeout", readOnly: true, wantRuns: 1},
		{how: "rate limited", wantRuns: 0},
	} {
		how := tt.how
		name := how
		if tt.readOnly {
			name += ", read-only tool"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			srv := mcp.NewServer(&mcp.Implementation{Name: "cut-off", Version: "0.0.1"}, nil)
			var runs atomic.Int32
			running := make(chan struct{}, 1)
			quit := make(chan struct{})
			mcp.AddTool(srv, &mcp.Tool{Name: "append", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: tt.readOnly}}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				runs.Add(1)
				if how == "server gone" {
					running <- struct{}{}
					select {
					case <-quit:
					case <-ctx.Done():
					}
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "appended"}}}, nil, nil
			})
			up := serveThrough(t, srv, nil, func() { close(quit) }, func(handler http.Handler, w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if r.Method == http.MethodPost && bytes.Contains(body, []byte(`"method":"tools/call"`)) {
					switch how {
					case "gateway timeout":
						// The server runs the call; the gateway gives up on its answer.
						handler.ServeHTTP(httptest.NewRecorder(), r)
						http.Error(w, "<html><body>504 Gateway Time-out</body></html>", http.StatusGatewayTimeout)
						return
					case "rate limited":
						// The gateway turns the call away: it never reaches the server.
						http.Error(w, "<html><body>429 Too Many Requests</body></html>", http.StatusTooManyRequests)
						return
					}
				}
				handler.ServeHTTP(w, r)
			})
			d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
			d.connectReady(ctx, t, remoteConfig("cut", "http", up.URL))

			called := make(chan error, 1)
			go func() {
				_, err := d.call(ctx, t, "mcp__cut__append", nil, 0)
				called <- err
			}()
			if how == "server gone" {
				<-running
				up.CloseClientConnections()
			}
			st := wantCode(t, <-called, codes.Unavailable)
			info := errorInfo(st)
			switch {
			case tt.wantMayHaveRun && (info.GetReason() != "CALL_MAY_HAVE_RUN" || info.GetMetadata()["tool"] != "append" || info.GetMetadata()["retried"] != "false"):
				t.Errorf("got %q with ErrorInfo %v, want reason CALL_MAY_HAVE_RUN for append, not retried", st.Message(), info)
			case !tt.wantMayHaveRun && info.GetReason() == "CALL_MAY_HAVE_RUN":
				t.Errorf("got %q with ErrorInfo %v, want no CALL_MAY_HAVE_RUN: the call may be repeated", st.Message(), info)
			}
			if strings.Contains(st.Message(), "<html>") {
				t.Errorf("the message %q quotes the gateway's page", st.Message())
			}
			if n := runs.Load(); n != tt.wantRuns {
				t.Errorf("the tool ran %d times, want %d", n, tt.wantRuns)
			}
		})
	}
}

// TestReadOnlyCallCutOffAsTheSessionEnds calls a read-only tool over
// Streamable HTTP, and the call's request reaches the server and runs, but
// its connection is cut before the answer, and the server forgets the
// session (a restart): the next request of the session gets 404. Nothing
// else tells mcpd that the session ended (its event stream stays open),
// so the call fails before the session is seen to end. The call is sent
// again on a new session all the same, as after any end of a session, and
// returns its result.
func TestReadOnlyCallCutOffAsTheSessionEnds(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "forgetful", Version: "0.0.1"}, nil)
	var runs atomic.Int32
	mcp.AddTool(srv, &mcp.Tool{Name: "look", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		runs.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "looked"}}}, nil, nil
	})
	var (
		mu        sync.Mutex
		forgotten string // the session the server no longer knows
		cut       bool
	)
	up := serveThrough(t, srv, nil, nil, func(handler http.Handler, w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		session := r.Header.Get("Mcp-Session-Id")
		mu.Lock()
		gone := session != "" && session == forgotten
		first := !cut && r.Method == http.MethodPost && bytes.Contains(body, []byte(`"method":"tools/call"`))
		if first {
			cut, forgotten = true, session
		}
		mu.Unlock()
		switch {
		case gone && r.Method != http.MethodDelete:
			http.Error(w, "session not found", http.StatusNotFound)
		case first:
			// The server runs the call, and the connection breaks before
			// its answer.
			handler.ServeHTTP(httptest.NewRecorder(), r)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close()
		default:
			handler.ServeHTTP(w, r)
		}
	})
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--keepalive-interval", "0"}})
	d.connectReady(ctx, t, remoteConfig("forgetful", "http", up.URL))

	answeredOnNewSession(ctx, t, d, "look", "looked", &runs, 2)
}

// waitInBackground calls the wait tool of server "proxied" on a goroutine
// of its own; the channel gets the call's error (one for an answer other
// than "waited") once it is answered.
func waitInBackground(ctx context.Context, t *testing.T, d *daemon) <-chan error {
	waiting := make(chan error, 1)
	go func() {
		resp, err := d.call(ctx, t, "mcp__proxied__wait", nil, 0)
		if err == nil && text(resp) != "waited" {
			err = fmt.Errorf("got %q, want waited", text(resp))
		}
		waiting <- err
	}()
	return waiting
}

// answeredOnNewSession calls tool of server "forgetful" and wants its answer,
// want, from the session that replaced the one it was first sent on: the
// tool run wantRuns times in all, and the server restarted once.
func answeredOnNewSession(ctx context.Context, t *testing.T, d *daemon, tool, want string, runs *atomic.Int32, wantRuns int32) {
	t.Helper()
	resp, err := d.call(ctx, t, "mcp__forgetful__"+tool, nil, 0)
	if err != nil || text(resp) != want {
		t.Fatalf("the call: %v %v, want %s, from the new session", resp, err, want)
	}
	if n := runs.Load(); n != wantRuns {
		t.Errorf("the tool ran %d times, want %d", n, wantRuns)
	}
	if s := d.waitServer(ctx, t, "forgetful", mcpdv1.ServerState_SERVER_STATE_READY); s.GetRestarts() != 1 {
		t.Errorf("restarts: got %d, want 1 (last_error %q)", s.GetRestarts(), s.GetLastError())
	}
}

// TestProxyRefusesOneCall: a proxy in front of a Streamable HTTP or
// legacy SSE server refuses one call's POST with a 4xx page of its own (a
// body over its size limit, a rule of its firewall): that call fails, with
// a code that says whether trying again can help, and the session goes
// on, the calls it runs meanwhile included. A JSON-RPC error sent with the
// 4xx is the server's own answer, and reaches the caller as such.
func TestProxyRefusesOneCall(t *testing.T) {
	t.Parallel()
	type refusal struct {
		kind     string // "http" or "sse"
		status   int
		rpcError bool // the refusal is a JSON-RPC error (-32602), not a page
		wantCode codes.Code
		wantText string // in the message
	}
	var cases []refusal
	for _, kind := range []string{"http", "sse"} {
		cases = append(cases,
			refusal{kind: kind, status: http.StatusRequestEntityTooLarge, wantCode: codes.ResourceExhausted, wantText: "413"},
			refusal{kind: kind, status: http.StatusForbidden, wantCode: codes.Unavailable, wantText: "403"},
			refusal{kind: kind, status: http.StatusBadRequest, rpcError: true, wantCode: codes.InvalidArgument, wantText: "arguments over the limit"},
		)
	}
	// The Streamable HTTP client of the SDK keeps the session on a 429 by
	// itself; the legacy SSE one does not.
	cases = append(cases, refusal{kind: "sse", status: http.StatusTooManyRequests, wantCode: codes.Unavailable, wantText: "429"})
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s %d rpc error %v", tc.kind, tc.status, tc.rpcError), func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			srv, releaseWait := serverBehindProxy()
			var runs atomic.Int32
			mcp.AddTool(srv, &mcp.Tool{Name: "store"}, func(context.Context, *mcp.CallToolRequest, struct {
				Data string `json:"data"`
			}) (*mcp.CallToolResult, any, error) {
				runs.Add(1)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stored"}}}, nil, nil
			})
			proxy := serveOverThrough(t, tc.kind, srv, releaseWait, func(handler http.Handler, w http.ResponseWriter, r *http.Request) {
				if r.ContentLength > 64<<10 && !tc.rpcError {
					http.Error(w, "<html><body>refused by the proxy</body></html>", tc.status)
					return
				}
				if r.ContentLength > 64<<10 {
					body, _ := io.ReadAll(r.Body)
					msg, err := jsonrpc.DecodeMessage(body)
					call, ok := msg.(*jsonrpc.Request)
					if err != nil || !ok {
						http.Error(w, "not a request", http.StatusInternalServerError)
						return
					}
					answer, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: call.ID, Error: &jsonrpc.Error{Code: -32602, Message: "arguments over the limit"}})
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.status)
					_, _ = w.Write(answer)
					return
				}
				handler.ServeHTTP(w, r)
			})
			d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
			d.connectReady(ctx, t, remoteConfig("proxied", tc.kind, proxy.URL))

			waiting := waitInBackground(ctx, t, d)
			_, err := d.call(ctx, t, "mcp__proxied__store", map[string]any{"data": strings.Repeat("x", 100<<10)}, 0)
			st, _ := status.FromError(err)
			if st.Code() != tc.wantCode {
				t.Errorf("the refused call: got %v %q, want %v", st.Code(), st.Message(), tc.wantCode)
			}
			if !strings.Contains(st.Message(), tc.wantText) || strings.Contains(st.Message(), "<html>") {
				t.Errorf("the refused call: %q, want %q in it and the proxy's page left out", st.Message(), tc.wantText)
			}
			if info := errorInfo(st); info.GetReason() == "CALL_MAY_HAVE_RUN" {
				t.Errorf("the refused call: ErrorInfo %v, want no CALL_MAY_HAVE_RUN: it never reached the server", info)
			}
			releaseWait()
			if err := <-waiting; err != nil {
				t.Errorf("the call in flight beside it: %v, want its result", err)
			}
			if resp, err := d.call(ctx, t, "mcp__proxied__store", map[string]any{"data": "small"}, 0); err != nil || text(resp) != "stored" {
				t.Errorf("the next call: %v %v, want stored", resp, err)
			}
			if s := d.waitServer(ctx, t, "proxied", mcpdv1.ServerState_SERVER_STATE_READY); s.GetRestarts() != 0 {
				t.Errorf("the server restarted %d times, want its session kept", s.GetRestarts())
			}
			if n := runs.Load(); n != 1 {
				t.Errorf("store ran %d times, want once (the small call)", n)
			}
		})
	}
}

// TestProxyRefusesOneMessage: a proxy in front of a server refuses, with a
// 4xx page of its own, the POST of a message of mcpd's that is no call:
// its answer to the server's roots/list, or the cancellation of a call.
// The message is lost, and said so in the log (the status, not the page);
// the session goes on, the call in flight beside it and the next call
// included. Over Streamable HTTP and the legacy HTTP+SSE transport.
func TestProxyRefusesOneMessage(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"http", "sse"} {
		for _, refuse := range []string{"answer", "cancellation"} {
			t.Run(kind+" "+refuse, func(t *testing.T) {
				t.Parallel()
				testProxyRefusesOneMessage(t, kind, refuse)
			})
		}
	}
}

func testProxyRefusesOneMessage(t *testing.T, kind, refuse string) {
	ctx := testContext(t)
	srv, releaseWait := serverBehindProxy()
	refused := make(chan struct{})
	refusedOnce := sync.OnceFunc(func() { close(refused) })
	// roots asks mcpd for its roots, and says whether the answer came.
	mcp.AddTool(srv, &mcp.Tool{Name: "roots"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		answered := make(chan error, 1)
		go func() {
			_, err := req.Session.ListRoots(ctx, nil)
			answered <- err
		}()
		got := "unanswered"
		select {
		case err := <-answered:
			got = fmt.Sprintf("answered (%v)", err)
		case <-refused:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: got}}}, nil, nil
	})
	holding := make(chan struct{}, 1)
	mcp.AddTool(srv, &mcp.Tool{Name: "hold"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		holding <- struct{}{}
		select {
		case <-ctx.Done():
		case <-refused: // the cancellation never comes
		}
		return &mcp.CallToolResult{}, nil, nil
	})
	proxy := serveOverThrough(t, kind, srv, releaseWait, func(handler http.Handler, w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Method == http.MethodPost {
			msg, err := jsonrpc.DecodeMessage(body)
			_, isAnswer := msg.(*jsonrpc.Response)
			note, _ := msg.(*jsonrpc.Request)
			if err == nil && (refuse == "answer" && isAnswer || refuse == "cancellation" && note != nil && note.Method == "notifications/cancelled") {
				http.Error(w, "<html><body>refused by the proxy</body></html>", http.StatusForbidden)
				refusedOnce()
				return
			}
		}
		handler.ServeHTTP(w, r)
	})
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	d.connectReady(ctx, t, remoteConfig("proxied", kind, proxy.URL))

	waiting := waitInBackground(ctx, t, d)
	switch refuse {
	case "answer":
		resp, err := d.call(ctx, t, "mcp__proxied__roots", nil, 0)
		if err != nil || text(resp) != "unanswered" {
			t.Errorf("the call whose roots/list answer was refused: %v %v, want unanswered", resp, err)
		}
	case "cancellation":
		callCtx, cancel := context.WithCancel(ctx)
		held := make(chan error, 1)
		go func() {
			_, err := d.call(callCtx, t, "mcp__proxied__hold", nil, 0)
			held <- err
		}()
		select {
		case <-holding:
		case <-ctx.Done():
			t.Fatal("the hold tool never ran")
		}
		cancel()
		wantCode(t, <-held, codes.Canceled)
		select {
		case <-refused:
		case <-ctx.Done():
			t.Fatal("no cancellation reached the proxy")
		}
	}
	releaseWait()
	if err := <-waiting; err != nil {
		t.Errorf("the call in flight beside it: %v, want its result", err)
	}
	if resp, err := d.call(ctx, t, "mcp__proxied__wait", nil, 0); err != nil || text(resp) != "waited" {
		t.Errorf("the next call: %v %v, want waited", resp, err)
	}
	if s := d.waitServer(ctx, t, "proxied", mcpdv1.ServerState_SERVER_STATE_READY); s.GetRestarts() != 0 {
		t.Errorf("the server restarted %d times, want its session kept (last_error %q)", s.GetRestarts(), s.GetLastError())
	}
	lost := `"lost":"notifications/cancelled"`
	if refuse == "answer" {
		lost = `"lost":"mcpd's answer to the server's request"`
	}
	poll(ctx, t, "a warning of the lost message", func() (bool, error) {
		for line := range strings.Lines(d.log.String()) {
			if strings.Contains(line, `"status":403`) && strings.Contains(line, lost) {
				return true, nil
			}
		}
		return false, nil
	})
	if strings.Contains(d.log.String(), "refused by the proxy") {
		t.Error("the log quotes the proxy's page")
	}
}

// TestSSESessionForgotten: a legacy SSE server forgets a session whose
// event stream stays open (a POST that reaches an instance behind a load
// balancer that never had it, a server that dropped it): it answers the
// session's POSTs 404, as the go-sdk does, or 400 saying it has no such
// session, as many TypeScript servers do. That ends the session, as it
// does over Streamable HTTP, and the call it answered so (which did not
// run) is sent on the new session: it is not a refusal of that one call.
func TestSSESessionForgotten(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		page   string
	}{
		{http.StatusNotFound, "session not found"},
		{http.StatusBadRequest, "No transport found for sessionId"},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			srv := mcp.NewServer(&mcp.Implementation{Name: "forgetful-sse", Version: "0.0.1"}, nil)
			var runs atomic.Int32
			mcp.AddTool(srv, &mcp.Tool{Name: "note"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				runs.Add(1)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "noted"}}}, nil, nil
			})
			var (
				mu        sync.Mutex
				seen      []string // the sessions of the POSTs so far
				forgotten []string
			)
			forget := func() {
				mu.Lock()
				defer mu.Unlock()
				forgotten = slices.Clone(seen)
			}
			proxy := serveOverThrough(t, "sse", srv, nil, func(handler http.Handler, w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					session := r.URL.Query().Get("sessionid")
					mu.Lock()
					seen = append(seen, session)
					gone := slices.Contains(forgotten, session)
					mu.Unlock()
					if gone {
						http.Error(w, tc.page, tc.status)
						return
					}
				}
				handler.ServeHTTP(w, r)
			})
			d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--keepalive-interval", "0"}})
			d.connectReady(ctx, t, remoteConfig("forgetful", "sse", proxy.URL))
			forget()

			answeredOnNewSession(ctx, t, d, "note", "noted", &runs, 1) // not run on the forgotten session
		})
	}
}
