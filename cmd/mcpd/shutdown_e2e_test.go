package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/oauth"
)

// reapTimeout bounds the wait for a process that was killed to be marked
// dead by the kernel.
const reapTimeout = 5 * time.Second

// TestShutdown stops mcpd with SIGTERM or SIGINT and checks that it exits
// with status 0 and leaves no process behind: neither its servers nor a
// grandchild that one of them started.
func TestShutdown(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			dir := shortTempDir(t)
			pidFile := filepath.Join(dir, "grandchild.pid")
			cfg := map[string]any{"mcpServers": map[string]any{
				"demo": map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}},
				"parent": map[string]any{
					"command": testBinary(t),
					"env":     map[string]string{fakeServerEnv: fakeGrandchild, fakePidFileEnv: pidFile},
				},
			}}
			d := startDaemon(ctx, t, daemonOptions{config: writeConfig(t, mustJSON(t, cfg))})

			var pids []int
			for _, name := range []string{"demo", "parent"} {
				s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
				if s.GetPid() <= 0 {
					t.Fatalf("server %s: got pid %d, want > 0", name, s.GetPid())
				}
				pids = append(pids, int(s.GetPid()))
			}
			// The fake writes the file before it serves, so it is there now.
			raw, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatalf("grandchild pid: %v", err)
			}
			grandchild, err := strconv.Atoi(strings.TrimSpace(string(raw)))
			if err != nil {
				t.Fatalf("grandchild pid %q: %v", raw, err)
			}
			pids = append(pids, grandchild)
			t.Cleanup(func() {
				// Do not leak the grandchild when mcpd failed to kill it.
				if !processGone(grandchild) {
					_ = syscall.Kill(grandchild, syscall.SIGKILL)
				}
			})
			for _, pid := range pids {
				if processGone(pid) {
					t.Fatalf("process %d is gone before shutdown; the test would prove nothing", pid)
				}
			}

			if code := d.signal(t, sig); code != 0 {
				t.Fatalf("mcpd exit code after %v: got %d, want 0", sig, code)
			}
			// mcpd reaped its children before exiting; the grandchild is an
			// orphan that mcpd must have killed before it exited, so it is
			// dead or about to be marked so: a short bound suffices.
			reapCtx, cancel := context.WithTimeout(ctx, reapTimeout)
			defer cancel()
			for _, pid := range pids {
				poll(reapCtx, t, "process "+strconv.Itoa(pid)+" is gone", func() (bool, error) {
					return processGone(pid), nil
				})
			}
			if !logHasLine(d.log.String(), "mcpd stopped") {
				t.Errorf("mcpd log: no 'mcpd stopped' line")
			}
		})
	}
}

// TestShutdownDrains stops mcpd while a tool call runs: a health watcher
// hears NOT_SERVING and its stream ends, the call still ends with its
// result, and mcpd exits 0. With a shutdown timeout shorter than the call, the call is cut off
// with UNAVAILABLE instead, and mcpd still exits 0.
func TestShutdownDrains(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		timeout  string // --shutdown-timeout
		steps    int    // of the slow tool, 200 ms each
		wantCode codes.Code
	}{
		{"Finishes", "30s", 3, codes.OK},
		{"CutOff", "2s", 1000, codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			d := startDaemon(ctx, t, daemonOptions{args: []string{"--shutdown-timeout", tc.timeout}})
			d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

			// Shorter than Finishes' shutdown timeout: a watch that held
			// the graceful stop open would end only with that timeout.
			watch := d.watchServing(ctx, t, 10*time.Second)
			call, err := d.hub.CallToolStream(ctx, &mcpdv1.CallToolStreamRequest{
				Name:      "mcp__demo__slow",
				Arguments: mustStruct(t, map[string]any{"steps": tc.steps, "delay_ms": 200}),
			})
			if err != nil {
				t.Fatal(err)
			}
			// The first progress says the call is running on the server.
			if msg, err := call.Recv(); err != nil || msg.GetProgress() == nil {
				t.Fatalf("first message: got %v, %v; want progress", msg, err)
			}

			d.send(t, syscall.SIGTERM)
			if h, err := watch.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Errorf("health after SIGTERM: got %v, %v; want NOT_SERVING", h.GetStatus(), err)
			}
			// The watch ends rather than hold the graceful stop open.
			if _, err := watch.Recv(); status.Code(err) != codes.Unavailable {
				t.Errorf("health watch after NOT_SERVING: got %v, want UNAVAILABLE", err)
			} else if r := errorInfo(status.Convert(err)).GetReason(); r != "SHUTTING_DOWN" {
				// mcpd ended it, which a client tells from a lost connection by the reason.
				t.Errorf("health watch after NOT_SERVING: reason %q, want SHUTTING_DOWN: %v", r, err)
			}
			var result *mcpdv1.CallToolResponse
			for {
				msg, err := call.Recv()
				if err != nil {
					if err != io.EOF {
						result = nil
						if got := status.Code(err); got != tc.wantCode {
							t.Errorf("call during shutdown: got %v, want code %v", err, tc.wantCode)
						}
					}
					break
				}
				if r := msg.GetResult(); r != nil {
					result = r
				}
			}
			if tc.wantCode == codes.OK && (result == nil || result.GetIsError()) {
				t.Errorf("call during shutdown: got result %v, want the tool's result", result)
			}
			if code := d.wait(t, syscall.SIGTERM); code != 0 {
				t.Errorf("mcpd exit code: got %d, want 0", code)
			}
		})
	}
}

// TestShutdownWithMCPCallInFlight stops mcpd while a host's tool call runs
// on the MCP endpoint: the gRPC side still turns NOT_SERVING, and refuses
// new calls, as soon as the shutdown begins, not once the MCP endpoint's
// requests have drained.
func TestShutdownWithMCPCallInFlight(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// Longer than the test: a drain that held up the rest of the shutdown
	// shows as a health watch that never hears NOT_SERVING.
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--mcp-listen", addr, "--shutdown-timeout", "5m"}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	progress := make(chan struct{}, 1)
	cs := connectMCP(ctx, t, "http://"+addr+"/mcp", mcpEras[0], "", &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- struct{}{}:
			default:
			}
		},
	})
	callCtx, cancelCall := context.WithCancel(ctx)
	defer cancelCall()
	callDone := make(chan struct{})
	go func() {
		defer close(callDone)
		params := &mcp.CallToolParams{Name: "mcp__demo__slow", Arguments: map[string]any{"steps": 1000, "delay_ms": 200}}
		params.SetProgressToken("t")
		_, _ = cs.CallTool(callCtx, params)
	}()
	select {
	case <-progress: // the call runs on the server
	case <-ctx.Done():
		t.Fatal("no progress from the slow call")
	}

	// Generous, and far below the shutdown timeout.
	watch := d.watchServing(ctx, t, 20*time.Second)
	d.send(t, syscall.SIGTERM)
	if h, err := watch.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health after SIGTERM with an MCP call in flight: got %v, %v; want NOT_SERVING", h.GetStatus(), err)
	}
	if _, err := d.hub.ListServers(watch.Context(), &mcpdv1.ListServersRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("a new RPC after SIGTERM: got %v, want UNAVAILABLE", err)
	}
	cancelCall()
	<-callDone
	if code := d.wait(t, syscall.SIGTERM); code != 0 {
		t.Errorf("mcpd exit code: got %d, want 0", code)
	}
}

// TestShutdownCutsOffMCPCall stops mcpd while a host's tool call runs on
// the MCP endpoint, longer than --shutdown-timeout and with no deadline of
// its own that would end it sooner: the call is cut off when the drain
// ends, as a gRPC call is, and mcpd exits 0.
func TestShutdownCutsOffMCPCall(t *testing.T) {
	t.Parallel()
	for _, era := range mcpEras {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			d := startDaemon(ctx, t, daemonOptions{args: []string{"--mcp-listen", addr, "--shutdown-timeout", "1s", "--call-timeout", "10m"}})
			d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
			progress := make(chan struct{}, 1)
			cs := connectMCP(ctx, t, "http://"+addr+"/mcp", era, "", &mcp.ClientOptions{
				ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
					select {
					case progress <- struct{}{}:
					default:
					}
				},
			})
			callDone := make(chan struct{})
			go func() {
				defer close(callDone)
				params := &mcp.CallToolParams{Name: "mcp__demo__slow", Arguments: map[string]any{"steps": 1000, "delay_ms": 1000}}
				params.SetProgressToken("t")
				_, _ = cs.CallTool(ctx, params)
			}()
			select {
			case <-progress: // the call runs on the server
			case <-ctx.Done():
				t.Fatal("no progress from the slow call")
			}
			if code := d.signal(t, syscall.SIGTERM); code != 0 {
				t.Errorf("mcpd exit code: got %d, want 0", code)
			}
			select {
			case <-callDone:
			case <-ctx.Done():
				t.Error("the host's call still runs after mcpd exited")
			}
			if !logHasLine(d.log.String(), "mcpd stopped") {
				t.Errorf("mcpd log: no 'mcpd stopped' line")
			}
		})
	}
}

// TestShutdownSecondSignal: a second SIGTERM or SIGINT ends a shutdown
// that would otherwise wait out --shutdown-timeout and --stop-grace (both
// far longer than the test): a call in flight is cut off, a server that
// ignores the end of its stdin and SIGTERM is killed, and mcpd exits 0
// with nothing left running, whether the second signal comes while RPCs
// drain or while servers stop.
func TestShutdownSecondSignal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		callRunning bool // a call is in flight: the second signal comes during the drain
		second      syscall.Signal
	}{
		{"DuringDrain", true, syscall.SIGINT},
		{"DuringServerStop", false, syscall.SIGTERM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			mark := filepath.Join(shortTempDir(t), "stubborn.stopping")
			cfg := map[string]any{"mcpServers": map[string]any{
				"demo":     map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}},
				"stubborn": map[string]any{"command": testBinary(t), "env": map[string]string{fakeServerEnv: fakeStubborn, fakeMarkEnv: mark}},
			}}
			d := startDaemon(ctx, t, daemonOptions{
				config: writeConfig(t, mustJSON(t, cfg)),
				args:   []string{"--shutdown-timeout", "10m", "--stop-grace", "10m"},
			})
			d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
			stubborn := int(d.waitServer(ctx, t, "stubborn", mcpdv1.ServerState_SERVER_STATE_READY).GetPid())
			t.Cleanup(func() {
				if !processGone(stubborn) {
					_ = syscall.Kill(-stubborn, syscall.SIGKILL)
				}
			})

			var call mcpdv1.MCPHub_CallToolStreamClient
			if tc.callRunning {
				var err error
				call, err = d.hub.CallToolStream(ctx, &mcpdv1.CallToolStreamRequest{
					Name:      "mcp__demo__slow",
					Arguments: mustStruct(t, map[string]any{"steps": 1000, "delay_ms": 1000}),
				})
				if err != nil {
					t.Fatal(err)
				}
				if msg, err := call.Recv(); err != nil || msg.GetProgress() == nil {
					t.Fatalf("first message: got %v, %v; want progress", msg, err)
				}
			}
			watch := d.watchServing(ctx, t, time.Minute)
			d.send(t, syscall.SIGTERM)
			if h, err := watch.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Fatalf("health after SIGTERM: got %v, %v; want NOT_SERVING", h.GetStatus(), err)
			}
			if !tc.callRunning {
				poll(ctx, t, "mcpd begins stopping the stubborn server", func() (bool, error) {
					_, err := os.Stat(mark)
					return err == nil, nil
				})
			}
			d.send(t, tc.second)
			if call != nil {
				for {
					if _, err := call.Recv(); err != nil {
						if status.Code(err) != codes.Unavailable {
							t.Errorf("the call after the second signal: got %v, want UNAVAILABLE", err)
						}
						break
					}
				}
			}
			if code := d.wait(t, tc.second); code != 0 {
				t.Errorf("mcpd exit code: got %d, want 0", code)
			}
			if !processGone(stubborn) {
				t.Errorf("the stubborn server (pid %d) outlived mcpd", stubborn)
			}
			if !logHasLine(d.log.String(), "second signal") {
				t.Errorf("mcpd log: no line about the second signal")
			}
		})
	}
}

// watchServing opens a watch of mcpd's overall health, which ends within
// timeout, and checks that its first status is SERVING.
func (d *daemon) watchServing(ctx context.Context, t *testing.T, timeout time.Duration) healthpb.Health_WatchClient {
	t.Helper()
	watchCtx, cancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancel)
	watch, err := d.health.Watch(watchCtx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := watch.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before shutdown: got %v, %v; want SERVING", h.GetStatus(), err)
	}
	return watch
}

// TestShutdownRemoteServerHung stops mcpd while a remote server hangs: it
// took a tool call (and, in Asked, asked mcpd to sample before) and
// answers no request from then on, the messages that close its session
// (a cancellation, mcpd's answer, the Streamable HTTP DELETE) included.
// Closing the session gets the stop grace, as a stdio server's exit
// does; then its requests are cut off, and mcpd exits 0 within its
// bound.
func TestShutdownRemoteServerHung(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, kind string
		from       hangFrom
	}{
		{"HTTP", "http", hangOnCall},
		{"HTTPAsked", "http", hangOnAnswer},
		{"SSE", "sse", hangOnCall},
		{"SSEAsked", "sse", hangOnAnswer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			url, hanging := hungRemote(t, tc.kind, tc.from)
			d := startDaemon(ctx, t, daemonOptions{
				config: emptyConfig(t),
				args:   []string{"--shutdown-timeout", "1s", "--stop-grace", "200ms"},
			})
			d.connectReady(ctx, t, remoteConfig("hung", tc.kind, url))
			go func() { _, _ = d.hub.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__hung__hang"}) }()
			awaitClosed(ctx, t, hanging, "the server did not begin to hang")
			d.stopCleanly(t)
		})
	}
}

// TestShutdownRemoteServerConnecting stops mcpd while it connects to a
// Streamable HTTP server that answered initialize and takes the session's
// standalone GET, and then its DELETE, without answering them: giving up
// the connection gets the stop grace too, and mcpd exits 0 within its
// bound.
func TestShutdownRemoteServerConnecting(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	url, hanging := hungRemote(t, "http", hangOnStream)
	cfg := map[string]any{"mcpServers": map[string]any{"hung": map[string]any{"type": "http", "url": url}}}
	d := startDaemon(ctx, t, daemonOptions{
		config:  writeConfig(t, mustJSON(t, cfg)),
		args:    []string{"--shutdown-timeout", "1s", "--stop-grace", "200ms", "--connect-timeout", "10m"},
		unready: true,
	})
	awaitClosed(ctx, t, hanging, "the server did not begin to hang")
	d.stopCleanly(t)
}

// TestShutdownOAuthRenewalHung stops an OAuth-protected server whose
// tokens are about to expire from the moment they are issued, so that
// mcpd renews the token before each request, while the authorization
// server takes every renewal and never answers it. The close of the
// session sends its DELETE on a context nobody ends, and so waits for
// that renewal; the stop grace bounds the renewal as it bounds the
// request itself, and mcpd exits 0 within its bound: on shutdown, and
// after DisconnectServer, which returns within the drain.
func TestShutdownOAuthRenewalHung(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		// begin, if set, begins to stop the server once renewals hang;
		// end checks how that went once mcpd exited.
		begin func(ctx context.Context, t *testing.T, d *daemon, up *oauthUpstream) (end func())
	}{
		{"Shutdown", []string{"--shutdown-timeout", "1s", "--stop-grace", "200ms"}, nil},
		{"Disconnect", []string{"--shutdown-timeout", "1s", "--stop-grace", "200ms"}, func(ctx context.Context, t *testing.T, d *daemon, up *oauthUpstream) func() {
			disconnected := make(chan error, 1)
			go func() {
				_, err := d.hub.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: "protected"})
				disconnected <- err
			}()
			awaitClosed(ctx, t, up.refreshHung, "mcpd renewed no token")
			return func() {
				// The stop grace is shorter than the drain: the RPC ends
				// on its own, not cut off by the shutdown.
				if err := <-disconnected; err != nil {
					t.Errorf("DisconnectServer: %v", err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			up := newOAuthUpstream(t, nil)
			// Within mcpd's renewal margin: every request renews first.
			up.setExpiresIn(1)
			d := startDaemon(ctx, t, daemonOptions{
				config: emptyConfig(t),
				args:   append([]string{"--oauth-state-dir", filepath.Join(shortTempDir(t), "oauth")}, tc.args...),
			})
			resp, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: httpServerConfig("protected", up.url(), nil)})
			if err != nil {
				t.Fatalf("ConnectServer: %v", err)
			}
			if st := resp.GetServer().GetState(); st != mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED {
				t.Fatalf("ConnectServer: got state %v (%s), want AUTHORIZATION_REQUIRED", st, resp.GetServer().GetLastError())
			}
			redirect := approve(ctx, t, resp.GetServer().GetAuthorizationUrl())
			if r := httpGet(ctx, t, http.DefaultClient, redirect); r.StatusCode != http.StatusOK {
				t.Fatalf("the redirect listener: got HTTP %d, want 200", r.StatusCode)
			}
			d.waitServer(ctx, t, "protected", mcpdv1.ServerState_SERVER_STATE_READY)
			d.mustCall(ctx, t, "mcp__protected__echo", map[string]any{"message": "hi"})
			if up.grantCount("refresh_token") == 0 {
				t.Fatal("mcpd renewed no token before its requests; the test would prove nothing")
			}
			up.hangRefresh()
			end := func() {}
			if tc.begin != nil {
				end = tc.begin(ctx, t, d, up)
			}
			d.stopCleanly(t)
			end()
			if !up.tookRefreshHung() {
				t.Error("the close of the session renewed no token; the test proves nothing")
			}
			if !logHasLine(d.log.String(), "its requests are cut off") {
				t.Errorf("mcpd log: no line about the session's requests being cut off")
			}
		})
	}
}

// awaitClosed waits until ch is closed, and fails the test with failure
// if ctx ends first.
func awaitClosed(ctx context.Context, t *testing.T, ch <-chan struct{}, failure string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatal(failure)
	}
}

// hangFrom says from when hungRemote hangs.
type hangFrom int

const (
	hangOnCall   hangFrom = iota // once its tool "hang" runs
	hangOnAnswer                 // once the tool asked its client to sample, and the server took the answer
	hangOnStream                 // from the first GET (a Streamable HTTP session's stream)
)

// hungRemote serves an MCP server over kind ("http" or "sse") on loopback
// that, from the moment from says, takes every new request and never
// answers it (a stream opened before goes on), until the test ends.
// hanging is closed once it hangs.
func hungRemote(t *testing.T, kind string, from hangFrom) (url string, hanging <-chan struct{}) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "hung", Version: "0.0.1"}, nil)
	var hung atomic.Bool
	released, release := context.WithCancel(context.Background())
	hangs := make(chan struct{})
	var once sync.Once
	mcp.AddTool(srv, &mcp.Tool{Name: "hang"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(released, cancel)()
		hung.Store(true)
		if from == hangOnCall {
			once.Do(func() { close(hangs) })
		} else {
			_, _ = req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
				MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}},
			})
		}
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	path := "/mcp"
	if kind == "sse" {
		h, path = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil), "/sse"
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A stream opened before goes on; a request from now on hangs.
		if from == hangOnStream && r.Method != http.MethodPost {
			hung.Store(true)
			once.Do(func() { close(hangs) })
		}
		if hung.Load() {
			if from == hangOnAnswer && r.Method == http.MethodPost {
				once.Do(func() { close(hangs) }) // mcpd's answer, taken
			}
			select {
			case <-released.Done():
			case <-r.Context().Done():
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		release()
		hs.CloseClientConnections()
		hs.Close()
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
	})
	return hs.URL + path, hangs
}

// TestShutdownOAuthRedirectHeld stops mcpd while a request to its OAuth
// redirect listener is held open (it declares a body that never comes):
// the listener's requests drain within the shutdown timeout, as the
// API's do, then are cut off, and mcpd exits 0.
func TestShutdownOAuthRedirectHeld(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{
		config: emptyConfig(t),
		args:   []string{"--oauth-redirect-addr", addr, "--shutdown-timeout", "1s"},
	})
	var dialer net.Dialer
	c, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n", oauth.CallbackPath, addr); err != nil {
		t.Fatal(err)
	}
	d.stopCleanly(t)
}

// TestShutdownSilentConnection stops mcpd while a client holds a
// connection to its gRPC listener on which it sent nothing (no HTTP/2
// preface): the gRPC server's stop would wait for that handshake until
// its own connection timeout, two minutes; mcpd closes such connections
// when the drain ends, and exits 0.
func TestShutdownSilentConnection(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--shutdown-timeout", "1s"}})
	var dialer net.Dialer
	c, err := dialer.DialContext(ctx, d.net, d.dialTo)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A call answered after the connection was accepted: mcpd holds it.
	if _, err := d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{}); err != nil {
		t.Fatal(err)
	}
	d.stopCleanly(t)
}

// stopCleanly sends SIGTERM and checks that mcpd stops as it should: exit
// status 0, "mcpd stopped" in its log.
func (d *daemon) stopCleanly(t *testing.T) {
	t.Helper()
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("mcpd exit code: got %d, want 0", code)
	}
	if !logHasLine(d.log.String(), "mcpd stopped") {
		t.Errorf("mcpd log: no 'mcpd stopped' line")
	}
}
