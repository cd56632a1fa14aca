package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// Fault injection through the real binary: each test breaks an upstream
// and checks what an agent sees, and that mcpd recovers.

// TestKilledServerRestarts kills a server's process during a call to a
// tool the server does not mark idempotent: the call fails at once with
// UNAVAILABLE saying that it may have run, mcpd restarts the server, the
// state changes are published, and the next call succeeds.
func TestKilledServerRestarts(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	dir := t.TempDir()
	s := d.connect(ctx, t, "gated", testBinary(t), nil, map[string]string{fakeServerEnv: fakeGated, fakeGateDirEnv: dir})
	if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("gated server: %v %s", s.GetState(), s.GetLastError())
	}

	after := uint64(0)
	states, err := d.hub.Subscribe(ctx, &mcpdv1.SubscribeRequest{
		Servers: []string{"gated"}, Kinds: []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_SERVER_STATE}, AfterSequence: &after,
	})
	if err != nil {
		t.Fatal(err)
	}

	callErr := make(chan error, 1)
	go func() {
		// The server holds the call until released, which it never is,
		// with a timeout far beyond the test's: only a prompt failure ends
		// it in time.
		_, err := d.call(ctx, t, "mcp__gated__"+gatedPlain, map[string]any{"tag": "killed"}, time.Hour)
		callErr <- err
	}()
	poll(ctx, t, "the call started by the server", func() (bool, error) {
		starts, err := readGatedStarts(dir)
		return len(starts) == 1, err
	})
	if err := syscall.Kill(int(s.GetPid()), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := wantCode(t, <-callErr, codes.Unavailable)
	if !strings.Contains(st.Message(), "gated") || !strings.Contains(st.Message(), "may have run") {
		t.Errorf("error %q does not name the server and say the call may have run", st.Message())
	}

	resp := d.mustCall(ctx, t, "mcp__gated__echo", map[string]any{"text": "after the crash"})
	if text(resp) != "after the crash" {
		t.Errorf("echo after restart: got %q", text(resp))
	}
	s2 := d.waitServer(ctx, t, "gated", mcpdv1.ServerState_SERVER_STATE_READY)
	if s2.GetRestarts() != 1 || s2.GetPid() == s.GetPid() {
		t.Errorf("after the crash: restarts %d, pid %d (was %d); want 1 and a new process", s2.GetRestarts(), s2.GetPid(), s.GetPid())
	}
	if !strings.Contains(s2.GetLastError(), "signal: killed") {
		t.Errorf("last_error %q does not say how the process ended", s2.GetLastError())
	}
	if starts, err := readGatedStarts(dir); err != nil || len(starts) != 1 {
		t.Errorf("calls the servers started: %v %v; want the killed call only, never sent again", starts, err)
	}

	var seen []mcpdv1.ServerState
	for !containsState(seen, mcpdv1.ServerState_SERVER_STATE_RECONNECTING) || seen[len(seen)-1] != mcpdv1.ServerState_SERVER_STATE_READY {
		m, err := states.Recv()
		if err != nil {
			t.Fatalf("state events %v: %v", seen, err)
		}
		seen = append(seen, m.GetEvent().GetServerState().GetState())
	}
}

func containsState(states []mcpdv1.ServerState, want mcpdv1.ServerState) bool {
	for _, s := range states {
		if s == want {
			return true
		}
	}
	return false
}

// TestCrashLoopEndsFailed starts a server that dies shortly after every
// start: after --crash-loop-restarts failures it is FAILED with the reason
// and its stderr tail, and RestartServer starts over.
func TestCrashLoopEndsFailed(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{
		"--crash-loop-restarts", "3", "--crash-loop-window", "1m", "--restart-backoff", "20ms",
	}})
	if s := d.connectFake(ctx, t, "loop", fakeCrashSoon); s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("first start: %v %s", s.GetState(), s.GetLastError())
	}
	s := d.waitServer(ctx, t, "loop", mcpdv1.ServerState_SERVER_STATE_FAILED)
	if !strings.Contains(s.GetLastError(), "crash loop") || !strings.Contains(s.GetLastError(), "exit status 5") {
		t.Errorf("last_error %q, want the crash loop and the exit status", s.GetLastError())
	}
	if !strings.Contains(strings.Join(s.GetStderrTail(), "\n"), "dying on purpose") {
		t.Errorf("stderr_tail %q lacks the server's last words", s.GetStderrTail())
	}
	_, err := d.call(ctx, t, "mcp__loop__echo", map[string]any{"text": "x"}, 0)
	wantCode(t, err, codes.Unavailable)

	r, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "loop"})
	if err != nil || r.GetServer().GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Errorf("RestartServer after the crash loop: %v %v", r.GetServer().GetState(), err)
	}
}

// TestClosedStdoutInLastError: a server that closes its stdout but runs
// on is stopped by mcpd, and GetServer's last_error says that the server
// closed its stdout, not that the process was ended by mcpd's own SIGTERM.
func TestClosedStdoutInLastError(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	// No second start within the test: last_error stays the first
	// session's.
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--restart-backoff", "1h"}})
	if s := d.connectFake(ctx, t, "closer", fakeCloseStdout); s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("start: %v %s", s.GetState(), s.GetLastError())
	}
	// Asked to call a tool, it closes its stdout.
	_, _ = d.hub.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__closer__echo", Arguments: mustStruct(t, map[string]any{"message": "x"})})
	var s *mcpdv1.Server
	// The failed read is noted first ("connection lost: ..."); the reason
	// of the end follows once the process is stopped.
	poll(ctx, t, "the session to end and the process to be stopped", func() (bool, error) {
		r, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "closer"})
		s = r.GetServer()
		return err == nil && s.GetState() == mcpdv1.ServerState_SERVER_STATE_RECONNECTING && s.GetPid() == 0 &&
			!strings.HasPrefix(s.GetLastError(), "connection lost"), err
	})
	if !strings.Contains(s.GetLastError(), "closed stdout") || strings.Contains(s.GetLastError(), "signal") {
		t.Errorf("last_error %q: want it to say the server closed stdout, not how mcpd stopped it", s.GetLastError())
	}
}

// TestHungServerRecovers freezes a server of each era: calls time out,
// the keepalive checks (pings, or server/discover in 2026-07-28) fail,
// mcpd rebuilds the session, and calls work again.
func TestHungServerRecovers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ mode, version string }{
		{fakeFreeze, "2025-11-25"},
		{fakeFreeze2026, "2026-07-28"},
	} {
		t.Run(tt.version, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{
				"--keepalive-interval", "1s", "--keepalive-failures", "2",
			}})
			s := d.connectFake(ctx, t, "frozen", tt.mode)
			if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY || s.GetProtocolVersion() != tt.version {
				t.Fatalf("start: %v %q %s", s.GetState(), s.GetProtocolVersion(), s.GetLastError())
			}
			d.mustCall(ctx, t, "mcp__frozen__freeze", nil)
			_, err := d.call(ctx, t, "mcp__frozen__echo", map[string]any{"text": "anyone?"}, 300*time.Millisecond)
			if c := status.Code(err); c != codes.DeadlineExceeded && c != codes.Unavailable {
				t.Fatalf("call to a hung server: got %v, want DEADLINE_EXCEEDED (or UNAVAILABLE once the checks gave up)", err)
			}
			var now *mcpdv1.Server
			poll(ctx, t, "the hung server to be restarted", func() (bool, error) {
				r, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "frozen"})
				now = r.GetServer()
				return err == nil && now.GetRestarts() >= 1 && now.GetState() == mcpdv1.ServerState_SERVER_STATE_READY, err
			})
			if now.GetPid() == s.GetPid() || !strings.Contains(now.GetLastError(), "keepalive") {
				t.Errorf("after the restart: pid %d (was %d), last_error %q; want a new process, restarted by the keepalive checks", now.GetPid(), s.GetPid(), now.GetLastError())
			}
			if got := text(d.mustCall(ctx, t, "mcp__frozen__echo", map[string]any{"text": "back"})); got != "back" {
				t.Errorf("echo after recovery: got %q", got)
			}
		})
	}
}

// TestCutWriteRestartsServer freezes a server, then sends it requests
// larger than its stdin pipe holds: the request's deadline cuts the line
// short, and mcpd starts the server again instead of writing the next
// message after half of one. Keepalive pings are off, so only the cut
// write can restart it.
func TestCutWriteRestartsServer(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	// A long stop grace: the frozen server ignores stdin closing, so its
	// stop takes at least that long.
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--keepalive-interval", "0", "--stop-grace", "5s"}})
	frozen := d.connectFake(ctx, t, "frozen", fakeFreeze)
	d.mustCall(ctx, t, "mcp__frozen__freeze", nil)

	// The server leaves READY when the write fails, not after its
	// process has been stopped: the first state change comes while the
	// old process still runs.
	states := d.subscribe(ctx, t, "frozen", mcpdv1.EventKind_EVENT_KIND_SERVER_STATE)
	type change struct {
		state      string
		err        string
		oldRunning bool
	}
	firstChange := make(chan change, 1)
	go func() {
		m, err := states.Recv()
		if err != nil {
			firstChange <- change{err: err.Error()}
			return
		}
		st := m.GetEvent().GetServerState()
		firstChange <- change{state: st.GetState().String(), err: st.GetError(), oldRunning: !processGone(int(frozen.GetPid()))}
	}()
	// The frozen server's SDK has one message in hand when it stops; a
	// later one fills the pipe and is cut.
	big := map[string]any{"text": strings.Repeat("x", 2<<20)} // more than any pipe buffer
	for range 3 {
		_, err := d.call(ctx, t, "mcp__frozen__echo", big, 2*time.Second)
		switch status.Code(err) {
		case codes.DeadlineExceeded, codes.Unavailable:
		case codes.OK:
			// Only the restarted server answers; the poll below says so.
		default:
			t.Fatalf("call to a frozen server: got %v, want DEADLINE_EXCEEDED (or UNAVAILABLE once restarting)", err)
		}
	}
	select {
	case c := <-firstChange:
		if c.state != mcpdv1.ServerState_SERVER_STATE_RECONNECTING.String() || !strings.Contains(c.err, "cut short") || !c.oldRunning {
			t.Errorf("first state change: got %+v, want RECONNECTING saying the write was cut short while the old process still ran", c)
		}
	case <-ctx.Done():
		t.Fatal("no state change after the cut write")
	}
	poll(ctx, t, "the server to be restarted after the cut write", func() (bool, error) {
		r, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "frozen"})
		s := r.GetServer()
		return err == nil && s.GetRestarts() >= 1 && s.GetState() == mcpdv1.ServerState_SERVER_STATE_READY, err
	})
	s := d.waitServer(ctx, t, "frozen", mcpdv1.ServerState_SERVER_STATE_READY)
	if !strings.Contains(s.GetLastError(), "cut short") {
		t.Errorf("last_error: got %q, want it to say the write was cut short", s.GetLastError())
	}
	if got := text(d.mustCall(ctx, t, "mcp__frozen__echo", map[string]any{"text": "back"})); got != "back" {
		t.Errorf("echo after the restart: got %q", got)
	}
}

// TestResponseTooLarge sends a response over --max-message-bytes: the call
// fails with an error that says so, and the server is started again. A
// request over the limit is RESOURCE_EXHAUSTED.
func TestResponseTooLarge(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--max-message-bytes", "65536"}})
	d.connectFake(ctx, t, "big", fakeBig)
	if got := text(d.mustCall(ctx, t, "mcp__big__big", map[string]any{"bytes": 1000})); len(got) != 1000 {
		t.Fatalf("a small response: got %d bytes", len(got))
	}
	_, err := d.call(ctx, t, "mcp__big__big", map[string]any{"bytes": 200000}, 0)
	st := wantCode(t, err, codes.Unavailable)
	if !strings.Contains(st.Message(), "exceeds 65536 bytes") {
		t.Errorf("error %q does not explain the limit", st.Message())
	}
	// The server ran the call: its answer was the line.
	if info := errorInfo(st); info.GetReason() != "CALL_MAY_HAVE_RUN" {
		t.Errorf("error details %v, want reason CALL_MAY_HAVE_RUN", info)
	}
	if got := text(d.mustCall(ctx, t, "mcp__big__big", map[string]any{"bytes": 10})); got != "xxxxxxxxxx" {
		t.Errorf("after the oversized response: got %q", got)
	}
	// The server's status says what ended its session: the line, not the
	// exit of the process mcpd stopped for it.
	if s := d.waitServer(ctx, t, "big", mcpdv1.ServerState_SERVER_STATE_READY); !strings.Contains(s.GetLastError(), "exceeds 65536 bytes") {
		t.Errorf("last_error %q does not explain the limit", s.GetLastError())
	}
	// A request over the limit is refused by mcpd's gRPC server; the
	// upstream goes on.
	_, err = d.call(ctx, t, "mcp__big__echo", map[string]any{"text": strings.Repeat("y", 100000)}, 0)
	// No ErrorInfo: unlike a queue timeout (QUEUE_TIMEOUT), it fails the
	// same way again.
	if info := errorInfo(wantCode(t, err, codes.ResourceExhausted)); info != nil {
		t.Errorf("a request over the limit: got ErrorInfo %v, want none", info)
	}
	if got := text(d.mustCall(ctx, t, "mcp__big__echo", map[string]any{"text": "small"})); got != "small" {
		t.Errorf("after the oversized request: got %q", got)
	}
}

// TestManyCallsAcrossRestarts makes 1,000 concurrent calls while the server
// is restarted twice: none hangs, and since the demo's echo is read-only,
// every call ends with a result, unless both restarts interrupted it: only
// such a call fails, with UNAVAILABLE saying it was sent twice and may have
// run.
func TestManyCallsAcrossRestarts(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--max-inflight-calls", "0"}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	const calls = 1000
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok       int
		failures = map[codes.Code]int{}
	)
	start := make(chan struct{})
	for i := range calls {
		wg.Go(func() {
			<-start
			resp, err := d.hub.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__demo__echo", Arguments: mustStruct(t, map[string]any{"message": "m"})})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && text(resp) == "m":
				ok++
			case err == nil:
				t.Errorf("call %d: wrong result %v", i, resp)
			default:
				st, _ := status.FromError(err)
				failures[st.Code()]++
				info := errorInfo(st)
				if st.Code() != codes.Unavailable || info.GetReason() != "CALL_MAY_HAVE_RUN" || info.GetMetadata()["retried"] != "true" {
					t.Errorf("call %d: got %v (%v), want a result or UNAVAILABLE for a call sent twice", i, err, info)
				}
			}
		})
	}
	close(start)
	for range 2 {
		if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "demo"}); err != nil {
			t.Fatalf("RestartServer: %v", err)
		}
	}
	wg.Wait()
	t.Logf("%d calls: %d results, failures by code %v", calls, ok, failures)
	if ok == 0 {
		t.Error("no call succeeded")
	}
	// The daemon is still whole.
	if got := text(d.mustCall(ctx, t, "mcp__demo__echo", map[string]any{"message": "still"})); got != "still" {
		t.Errorf("after the storm: got %q", got)
	}
}

// TestExpiringCallsKeepServer sends waves of concurrent calls whose
// deadlines run out while they wait their turn on the server's stdin. Each
// one ends with a result or DEADLINE_EXCEEDED, and the server goes on
// answering on the same session: a request that never went out must not
// be taken for a broken pipe.
func TestExpiringCallsKeepServer(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--max-inflight-calls", "0"}})
	before := d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	const waves, callers = 20, 64
	args := mustStruct(t, map[string]any{"message": "m"})
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		byCode = map[codes.Code]int{}
	)
	for wave := range waves {
		for i := range callers {
			wg.Go(func() {
				// Deadlines from 0.5 ms to 32 ms: some calls finish, some
				// expire before mcpd writes them, some while the server works.
				callCtx, cancel := context.WithTimeout(ctx, time.Duration(i+1)*500*time.Microsecond)
				defer cancel()
				_, err := d.hub.CallTool(callCtx, &mcpdv1.CallToolRequest{Name: "mcp__demo__echo", Arguments: args})
				code := status.Code(err)
				mu.Lock()
				defer mu.Unlock()
				byCode[code]++
				if code != codes.OK && code != codes.DeadlineExceeded {
					t.Errorf("wave %d call %d: got %v, want a result or DEADLINE_EXCEEDED", wave, i, err)
				}
			})
		}
		wg.Wait()
	}
	t.Logf("%d calls by code: %v", waves*callers, byCode)

	if got := text(d.mustCall(ctx, t, "mcp__demo__echo", map[string]any{"message": "still"})); got != "still" {
		t.Errorf("after the waves: got %q", got)
	}
	after := d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	if after.GetRestarts() != before.GetRestarts() || after.GetPid() != before.GetPid() {
		t.Errorf("server: restarts %d -> %d, pid %d -> %d; want the same session throughout (last error %q)",
			before.GetRestarts(), after.GetRestarts(), before.GetPid(), after.GetPid(), after.GetLastError())
	}
}

// holdDemoSlot starts a long call of the demo server's slow tool and
// returns once its first progress says it holds a slot of the server's
// --max-inflight-calls; cancel ends it (at the latest with the test).
func holdDemoSlot(ctx context.Context, t *testing.T, d *daemon) (long grpc.ServerStreamingClient[mcpdv1.CallToolStreamResponse], cancel context.CancelFunc) {
	t.Helper()
	longCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	long, err := d.hub.CallToolStream(longCtx, &mcpdv1.CallToolStreamRequest{
		Name:      "mcp__demo__slow",
		Arguments: mustStruct(t, map[string]any{"steps": 600, "delay_ms": 100}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := long.Recv(); err != nil || msg.GetProgress() == nil {
		t.Fatalf("long call: got %v, %v; want progress", msg, err)
	}
	return long, cancel
}

// TestInFlightCapNoWait: with --queue-timeout 0 a call that finds every
// slot taken is refused at once with QUEUE_TIMEOUT; it does not wait (0
// was taken as the 5s default, and a call whose own deadline came first
// ended DEADLINE_EXCEEDED).
func TestInFlightCapNoWait(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--max-inflight-calls", "1", "--queue-timeout", "0"}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	holdDemoSlot(ctx, t, d)
	// A deadline well short of the 5s default and well beyond a refusal.
	callCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := d.hub.CallTool(callCtx, &mcpdv1.CallToolRequest{Name: "mcp__demo__echo", Arguments: mustStruct(t, map[string]any{"message": "queued"})})
	if info := errorInfo(wantCode(t, err, codes.ResourceExhausted)); info.GetReason() != "QUEUE_TIMEOUT" {
		t.Errorf("queued call: got ErrorInfo %v, want reason QUEUE_TIMEOUT", info)
	}
}

// TestInFlightCap caps calls in flight to a server at one: while a long
// call holds the slot, another waits --queue-timeout and is refused with
// RESOURCE_EXHAUSTED and ErrorInfo reason QUEUE_TIMEOUT, on the gRPC and
// the HTTP listener alike (or DEADLINE_EXCEEDED when its own deadline is
// sooner); once the long call ends, calls go through again.
func TestInFlightCap(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--max-inflight-calls", "1", "--queue-timeout", "300ms", "--http-listen", addr}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	long, cancelLong := holdDemoSlot(ctx, t, d)

	_, err := d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "queued"}, 0)
	st := wantCode(t, err, codes.ResourceExhausted)
	if !strings.Contains(st.Message(), "in flight") {
		t.Errorf("queued call: got %q, want a message about calls in flight", st.Message())
	}
	if info := errorInfo(st); info.GetReason() != "QUEUE_TIMEOUT" || info.GetDomain() != "mcpd.v1" {
		t.Errorf("queued call: got ErrorInfo %v, want reason QUEUE_TIMEOUT, domain mcpd.v1", info)
	}
	// The HTTP listener: a Connect client reads the same ErrorInfo, and
	// the JSON error body shows it.
	api := newHTTPAPI(t, addr)
	call := rpc[mcpdv1.CallToolRequest, mcpdv1.CallToolResponse](api.http1, api.base, "CallTool")
	_, err = call.CallUnary(ctx, connect.NewRequest(&mcpdv1.CallToolRequest{Name: "mcp__demo__echo", Arguments: mustStruct(t, map[string]any{"message": "queued"})}))
	var reasons []string
	if ce := new(connect.Error); errors.As(err, &ce) {
		for _, detail := range ce.Details() {
			if info, derr := detail.Value(); derr == nil {
				if info, ok := info.(*errdetails.ErrorInfo); ok {
					reasons = append(reasons, info.GetDomain()+" "+info.GetReason())
				}
			}
		}
	}
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !slices.Equal(reasons, []string{"mcpd.v1 QUEUE_TIMEOUT"}) {
		t.Errorf("queued call over HTTP: got %v with ErrorInfo %q, want resource_exhausted with mcpd.v1 QUEUE_TIMEOUT", err, reasons)
	}
	code, body := api.postJSON(ctx, t, "CallTool", `{"name": "mcp__demo__echo", "arguments": {"message": "queued"}}`, nil)
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"reason":"QUEUE_TIMEOUT"`) {
		t.Errorf("queued call over HTTP, JSON: got %d %s, want 429 with reason QUEUE_TIMEOUT", code, body)
	}
	_, err = d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "impatient"}, 50*time.Millisecond)
	wantCode(t, err, codes.DeadlineExceeded)

	cancelLong()
	for {
		if _, err := long.Recv(); err != nil {
			if status.Code(err) != codes.Canceled {
				t.Errorf("long call after cancel: got %v, want CANCELLED", err)
			}
			break
		}
	}
	poll(ctx, t, "a call to go through once the slot is free", func() (bool, error) {
		resp, err := d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "free"}, 0)
		return err == nil && text(resp) == "free", err
	})
}

// TestCallTimeouts checks the daemon's call deadlines: --call-timeout ends
// a call that runs longer without news, each progress notification
// restarts it (up to --max-call-timeout), and a call's own timeout is
// never extended.
func TestCallTimeouts(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--call-timeout", "1s", "--max-call-timeout", "30s"}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	// 2s in all, with progress every 100ms.
	chatty := map[string]any{"steps": 20, "delay_ms": 100}
	resp, err := d.call(ctx, t, "mcp__demo__slow", chatty, 0)
	if err != nil || resp.GetIsError() {
		t.Errorf("a call that reports progress past --call-timeout: got %v, %v; want its result", resp, err)
	}
	_, err = d.call(ctx, t, "mcp__demo__slow", map[string]any{"steps": 1, "delay_ms": 3000}, 0)
	wantCode(t, err, codes.DeadlineExceeded)
	_, err = d.call(ctx, t, "mcp__demo__slow", chatty, 500*time.Millisecond)
	wantCode(t, err, codes.DeadlineExceeded)
}

// TestRetryFailuresPublished: a remote server that is not up yet is
// FAILED and tried again in the background; a subscriber hears each new
// reason it fails for (503, then 502) once, not once per attempt, and
// then that it is READY.
func TestRetryFailuresPublished(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	up := echoServer(t)
	var mode atomic.Int32 // 0: 503, 1: 502, 2: serves
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case 0:
			http.Error(w, "starting", http.StatusServiceUnavailable)
		case 1:
			http.Error(w, "no upstream", http.StatusBadGateway)
		default:
			up.Config.Handler.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(front.Close)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--restart-backoff", "20ms", "--restart-backoff-max", "40ms"}})
	states := d.subscribe(ctx, t, "away", mcpdv1.EventKind_EVENT_KIND_SERVER_STATE)
	resp, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: httpServerConfig("away", front.URL+"/mcp", nil)})
	if err != nil || resp.GetServer().GetState() != mcpdv1.ServerState_SERVER_STATE_FAILED {
		t.Fatalf("connect: got %v, %v; want FAILED", resp.GetServer(), err)
	}

	type change struct{ state, err string }
	var got []change
	// next reads state events until one in state whose error contains
	// part, and lets a few more attempts fail meanwhile.
	next := func(state mcpdv1.ServerState, part string) {
		t.Helper()
		for {
			m, err := states.Recv()
			if err != nil {
				t.Fatalf("waiting for %v with %q: %v; got %v", state, part, err, got)
			}
			st := m.GetEvent().GetServerState()
			got = append(got, change{st.GetState().String(), st.GetError()})
			if st.GetState() == state && strings.Contains(st.GetError(), part) {
				return
			}
		}
	}
	restartsAfter := func(n uint32) {
		t.Helper()
		poll(ctx, t, "more failed attempts", func() (bool, error) {
			r, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "away"})
			return err == nil && r.GetServer().GetRestarts() >= n, err
		})
	}
	next(mcpdv1.ServerState_SERVER_STATE_FAILED, "Service Unavailable")
	restartsAfter(5)
	mode.Store(1)
	next(mcpdv1.ServerState_SERVER_STATE_FAILED, "Bad Gateway")
	r, _ := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "away"})
	restartsAfter(r.GetServer().GetRestarts() + 5)
	mode.Store(2)
	next(mcpdv1.ServerState_SERVER_STATE_READY, "")
	for i := 1; i < len(got); i++ {
		if got[i] == got[i-1] {
			t.Errorf("event %d repeats the one before: %v (all: %v)", i, got[i], got)
		}
	}
}

// TestStopLetsServerFinishWriting stops a server that writes to stdout as
// it exits, once its stdin closes: mcpd's stop asks it to exit by closing
// its stdin and then waits, so the server must get to finish (its write
// taken, whatever it says) and exit by itself, rather than be killed by
// SIGPIPE (or, in Node or Python, fail with EPIPE) because mcpd stopped
// reading its stdout at the moment it asked it to exit.
func TestStopLetsServerFinishWriting(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	// A stop grace the server never needs, however slow the machine:
	// it exits as soon as it has written.
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--stop-grace", "1m"}})
	mark := filepath.Join(t.TempDir(), "exited")
	s := d.connect(ctx, t, "last", testBinary(t), nil, map[string]string{fakeServerEnv: fakeLastWords, fakeMarkEnv: mark})
	if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("state: got %v (%s), want READY", s.GetState(), s.GetLastError())
	}
	pid := s.GetPid()
	// DisconnectServer returns once the process is reaped.
	if _, err := d.hub.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: "last"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("the server did not get to finish its last write and exit: %v", err)
	}
	// mcpd logged the exit before the reply; the log reaches the test
	// through a pipe, a little later.
	want := fmt.Sprintf(`"pid":%d,"status":`, pid)
	var exited string
	poll(ctx, t, "the server's exit logged", func() (bool, error) {
		for line := range strings.Lines(d.log.String()) {
			if strings.Contains(line, `"server":"last"`) && strings.Contains(line, want) && strings.Contains(line, "server process exited") {
				exited = line
				return true, nil
			}
		}
		return false, errors.New("no line yet")
	})
	if !strings.Contains(exited, want+`"exit status 0"`) {
		t.Errorf("the server's exit: got %s, want exit status 0", strings.TrimSpace(exited))
	}
}

// TestStopGivesWrappedServerItsGrace stops a server that a shell wrapper
// runs (sh -c "server; ..."), and that does not exit when its stdin
// closes: the SIGTERM of the stop reaches the wrapper and the server, the
// wrapper dies of it at once, and the server must still get the stop
// grace to clean up and exit, rather than be killed with the rest of the
// process group the moment mcpd reaps the wrapper.
func TestStopGivesWrappedServerItsGrace(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	// The stop waits one grace for the server to exit on its own before
	// SIGTERM; the server's clean-up (a tenth of a second) fits the
	// second many times over.
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--stop-grace", "5s"}})
	mark := filepath.Join(t.TempDir(), "cleaned-up")
	s := d.connect(ctx, t, "wrapped", "sh", []string{"-c", `"$0"; echo wrapper done >&2`, testBinary(t)},
		map[string]string{fakeServerEnv: fakeSlowTerm, fakeMarkEnv: mark})
	if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("state: got %v (%s), want READY", s.GetState(), s.GetLastError())
	}
	// DisconnectServer returns once the stop is over.
	if _, err := d.hub.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: "wrapped"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("the wrapped server did not get to clean up after SIGTERM: %v", err)
	}
}
