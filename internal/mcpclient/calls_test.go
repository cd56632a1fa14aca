package mcpclient

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/config"
)

// TestCallsAcrossRestart restarts a stdio server while a call is in
// flight: a call to an idempotent tool is sent again on the new session and
// succeeds; a call to a plain tool fails with a CallInterruptedError.
func TestCallsAcrossRestart(t *testing.T) {
	tests := []struct {
		tool       string
		repeatable bool
	}{
		{"hold_idempotent", true},
		{"hold", false},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			m, _ := newTestManager(t)
			if _, err := m.Connect(ctx, fakeServer("f", "serve"), false); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(t.TempDir(), "held")
			done := goCall(ctx, m, "mcp__f__"+tt.tool, map[string]any{"marker": marker}, CallOptions{})
			eventually(ctx, t, "the call held by the server", func() bool {
				st, _ := m.Get("f")
				return slices.Contains(st.StderrTail, "holding "+marker)
			})
			if _, err := m.Restart(ctx, "f"); err != nil {
				t.Fatal(err)
			}
			r := <-done
			var interrupted *CallInterruptedError
			switch {
			case tt.repeatable && r.err != nil:
				t.Fatalf("got %v, want the call sent again and answered", r.err)
			case tt.repeatable:
				if got := r.res.Content[0].(*mcp.TextContent).Text; got != "done" {
					t.Errorf("got %q, want done", got)
				}
			case !errors.As(r.err, &interrupted) || !errors.Is(r.err, ErrUnavailable):
				t.Fatalf("got %v, want a CallInterruptedError of kind ErrUnavailable", r.err)
			case interrupted.Server != "f" || interrupted.Tool != "hold" || interrupted.Retried || interrupted.Repeatable:
				t.Errorf("got %+v, want server f, tool hold, neither repeatable nor retried", interrupted)
			case !strings.Contains(r.err.Error(), `server "f" was restarted`):
				t.Errorf("got %q, want it to say that the server was restarted", r.err)
			}
		})
	}
}

// TestConnectionClosedByAStop: a request whose connection a stop closed
// before the stop ended the request's context says how the server was
// stopped, as the context would have; a connection that closed by itself
// says so.
func TestConnectionClosedByAStop(t *testing.T) {
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	r := &run{ctx: runCtx, cancel: stopRun}
	u := &upstream{cfg: config.Server{Name: "f"}, run: r}
	ctx, unbind := u.bindRun(context.Background())
	defer unbind()
	if err := u.classify(ctx, nil, "tools/call hold", mcp.ErrConnectionClosed); !strings.Contains(err.Error(), `server "f" closed the connection`) {
		t.Errorf("running: got %q, want the connection closed", err)
	}
	u.mu.Lock()
	r.ended = "restarted" // as stopLocked sets it, before it cancels the run
	u.mu.Unlock()
	err := u.classify(ctx, nil, "tools/call hold", mcp.ErrConnectionClosed)
	if !strings.Contains(err.Error(), `server "f" was restarted`) || !errors.Is(err, ErrUnavailable) {
		t.Errorf("restarted: got %q, want ErrUnavailable saying the server was restarted", err)
	}
}

// TestTooLargeAnswerNotSentAgain calls an idempotent tool whose answer is
// a line over MaxLineBytes: the line ends the session, and the call is not
// sent again, for its answer would end the next session too. The server
// ran it, so its error says it may have run; so does that of a call that
// was in flight on the session when the line came (mcpd cannot tell whose
// answer the line was).
func TestTooLargeAnswerNotSentAgain(t *testing.T) {
	ctx := testContext(t)
	m := closingManager(t, &Options{ProbeTimeout: 20 * time.Second, StopGrace: 500 * time.Millisecond, MaxLineBytes: 4 << 10})
	if _, err := m.Connect(ctx, fakeServer("f", "serve"), false); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "held")
	held := make(chan error, 1)
	go func() {
		_, err := m.CallTool(ctx, "mcp__f__hold", map[string]any{"marker": marker}, CallOptions{Timeout: time.Hour})
		held <- err
	}()
	eventually(ctx, t, "the call held by the server", func() bool {
		st, _ := m.Get("f")
		return slices.Contains(st.StderrTail, "holding "+marker)
	})

	_, err := m.CallTool(ctx, "mcp__f__big_idempotent", map[string]any{"size": 64 << 10}, CallOptions{})
	var interrupted *CallInterruptedError
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "exceeds") || !errors.As(err, &interrupted) {
		t.Fatalf("got %v, want a CallInterruptedError of kind ErrUnavailable saying the answer exceeds the limit", err)
	}
	if !interrupted.Repeatable || interrupted.Retried {
		t.Errorf("got %+v, want a repeatable tool, not sent again", interrupted)
	}
	if err := <-held; !errors.Is(err, ErrUnavailable) || !errors.As(err, &interrupted) || interrupted.Tool != "hold" {
		t.Errorf("the call in flight beside it: got %v, want a CallInterruptedError of kind ErrUnavailable", err)
	}
	if st, _ := m.Get("f"); st.Restarts > 1 {
		t.Errorf("restarts %d, want at most 1: the call ended one session", st.Restarts)
	}
	// The server's status says what ended the session: the line, not the
	// exit of the process mcpd stopped because of it.
	eventually(ctx, t, "the server ready again", func() bool {
		st, _ := m.Get("f")
		return st.State == StateReady && st.Restarts == 1
	})
	if st, _ := m.Get("f"); !strings.Contains(st.LastError, "exceeds 4096 bytes") {
		t.Errorf("last error %q, want the line over the limit", st.LastError)
	}
}

// TestCallMeetsForgottenSession calls a remote server that restarted and
// forgot mcpd's session, before mcpd noticed: the server refuses the call
// (404, or 400 for an unknown session), so it did not run, and mcpd sends
// it on a new session.
func TestCallMeetsForgottenSession(t *testing.T) {
	tests := []struct {
		name      string
		restarted func(srv *mcp.Server, h http.Handler) http.Handler
	}{
		{"404 unknown session", func(_ *mcp.Server, h http.Handler) http.Handler { return h }},
		{"400 unknown session", unknownSession400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			old := newRemoteMCPServer(legacyVersions)
			obs := newObserver(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return old }, nil))
			ts := serveRemote(t, obs)
			t.Cleanup(func() { closeSessions(old) })

			m, _, _ := remoteManager(t, nil)
			if st, err := m.Connect(ctx, remoteConfig("r", config.TransportHTTP, ts.URL), false); err != nil || st.State != StateReady {
				t.Fatalf("connect: %v %v (%s)", st.State, err, st.LastError)
			}
			// The old server's streams stay open: only the call tells
			// mcpd that the session is gone.
			fresh := newRemoteMCPServer(legacyVersions)
			t.Cleanup(func() { closeSessions(fresh) })
			obs.swap(tt.restarted(fresh, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fresh }, nil)))

			res, err := m.CallTool(ctx, "mcp__r__echo", map[string]any{"message": "again"}, CallOptions{})
			if err != nil {
				t.Fatalf("call that met the forgotten session: %v", err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; got != "again" {
				t.Errorf("got %q, want again", got)
			}
			if st, _ := m.Get("r"); st.Restarts < 1 {
				t.Errorf("after the call: restarts %d, want a new session", st.Restarts)
			}
		})
	}
}

// TestKeepAliveEndsHungSession: a server that stops answering (SIGSTOP)
// fails its keepalive pings; the call it was running when it stopped ends
// at its deadline, and then the session ends with the pings and the server
// comes back.
func TestKeepAliveEndsHungSession(t *testing.T) {
	ctx := testContext(t)
	m := newKeepAliveManager(t, zerolog.Nop())
	cfg := fakeServer("f", "serve")
	cfg.ProtocolVersion = "2025-11-25" // keepalive pings are for initialize-era sessions
	if _, err := m.Connect(ctx, cfg, false); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "held")
	done := make(chan error, 1)
	go func() {
		_, err := m.CallTool(ctx, "mcp__f__hold", map[string]any{"marker": marker}, CallOptions{Timeout: time.Second})
		done <- err
	}()
	hung := stopWhenSaid(ctx, t, m, "f", "holding "+marker)

	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the call in flight: got %v, want its deadline", err)
	}
	eventually(ctx, t, "the server back, in a new process", func() bool {
		st, _ := m.Get("f")
		return st.State == StateReady && st.Pid != hung
	})
	if st, _ := m.Get("f"); !strings.Contains(st.LastError, "keepalive") && st.Restarts < 1 {
		t.Errorf("got restarts %d, last error %q; want a restart after the failed pings", st.Restarts, st.LastError)
	}
	if _, err := m.CallTool(ctx, "mcp__f__echo", map[string]any{"message": "hi"}, CallOptions{}); err != nil {
		t.Errorf("a call after the restart: %v", err)
	}
}

// TestKeepAliveEndsSessionHungInRefresh: a server that hangs while mcpd
// lists its tools again after a tools/list_changed fails its pings, and
// the session ends with them, not once the listing's own timeout (the call
// timeout, here an hour) has passed.
func TestKeepAliveEndsSessionHungInRefresh(t *testing.T) {
	ctx := testContext(t)
	m := newKeepAliveManager(t, zerolog.Nop())
	cfg := fakeServer("f", "hang-on-relist")
	cfg.ProtocolVersion = "2025-11-25"
	st, err := m.Connect(ctx, cfg, false)
	if err != nil || st.State != StateReady {
		t.Fatalf("connect: %v %v (%s)", st.State, err, st.LastError)
	}
	if _, err := m.CallTool(ctx, "mcp__f__add_tool", nil, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the server to hang in the listing", func() bool {
		st, _ := m.Get("f")
		return slices.Contains(st.StderrTail, "hanging on tools/list")
	})
	eventually(ctx, t, "the server back, in a new process", func() bool {
		now, _ := m.Get("f")
		return now.State == StateReady && now.Pid != st.Pid
	})
	if now, _ := m.Get("f"); !strings.Contains(now.LastError, "keepalive") {
		t.Errorf("last error %q: want the failed keepalive pings", now.LastError)
	}
}

// TestKeepAliveKeepsBusySession: a server that answers nothing while it
// runs a call (stopped here, as a server whose tool runs on the thread
// that reads its input) fails its pings (its server/discover probes, in
// the 2026-07-28 era), but its session is kept until the call ends, and
// the call gets its result.
func TestKeepAliveKeepsBusySession(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) { testKeepAliveKeepsBusySession(t, version) })
	}
}

func testKeepAliveKeepsBusySession(t *testing.T, version string) {
	ctx := testContext(t)
	var logs lockedBuffer
	m := newKeepAliveManager(t, zerolog.New(&logs))
	cfg := fakeServer("f", "serve")
	cfg.ProtocolVersion = version
	if _, err := m.Connect(ctx, cfg, false); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "busy")
	done := goCall(ctx, m, "mcp__f__await", map[string]any{"marker": marker}, CallOptions{Timeout: time.Hour})
	busy := stopWhenSaid(ctx, t, m, "f", "awaiting "+marker)
	// Enough failed pings to end a session that runs nothing.
	var ended *heldCall
	eventually(ctx, t, "the pings to fail while the call runs", func() bool {
		select {
		case o := <-done:
			ended = &o
			return true
		default:
			return strings.Contains(logs.String(), "the session is kept until that request ends")
		}
	})
	if ended != nil {
		t.Fatalf("the call ended while the server was busy: %v, %v", ended.res, ended.err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(busy, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil || len(o.res.Content) == 0 || o.res.Content[0].(*mcp.TextContent).Text != "released" {
		t.Fatalf("the call: got %v, %v; want its result", o.res, o.err)
	}
	if st, _ := m.Get("f"); st.Pid != busy || st.State != StateReady {
		t.Errorf("after the call: pid %d, state %v; want the same process, ready", st.Pid, st.State)
	}
}

// TestKeepAliveEndsHungStatelessSession: a 2026-07-28 stdio server that
// stops reading (its process runs on) fails the server/discover probes
// mcpd sends in place of pings, and the session ends with them: the
// server comes back in a new process.
func TestKeepAliveEndsHungStatelessSession(t *testing.T) {
	ctx := testContext(t)
	m := newKeepAliveManager(t, zerolog.Nop())
	st, err := m.Connect(ctx, fakeServer("f", "freeze"), false)
	if err != nil || st.State != StateReady || st.ProtocolVersion != "2026-07-28" {
		t.Fatalf("connect: %v %q %v (%s); want a ready 2026-07-28 session", st.State, st.ProtocolVersion, err, st.LastError)
	}
	if _, err := m.CallTool(ctx, "mcp__f__freeze", nil, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the server back, in a new process", func() bool {
		now, _ := m.Get("f")
		return now.State == StateReady && now.Pid != st.Pid
	})
	if now, _ := m.Get("f"); !strings.Contains(now.LastError, "keepalive") || now.Restarts < 1 {
		t.Errorf("got restarts %d, last error %q; want a restart after the failed keepalive probes", now.Restarts, now.LastError)
	}
	res, err := m.CallTool(ctx, "mcp__f__echo", map[string]any{"message": "back"}, CallOptions{})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "back" {
		t.Errorf("a call after the restart: %v, %v", res, err)
	}
}

// TestKeepAliveKeepsIdleStatelessSession: a healthy 2026-07-28 stdio
// server that is probed over several intervals answers the probes, and its
// session is kept: same process, no restart, calls work. (Probes whose
// answers did not come back to mcpd would end it after three.)
func TestKeepAliveKeepsIdleStatelessSession(t *testing.T) {
	ctx := testContext(t)
	m := newKeepAliveManagerEvery(t, zerolog.Nop(), 300*time.Millisecond, 3)
	st, err := m.Connect(ctx, fakeServer("f", "freeze"), false)
	if err != nil || st.State != StateReady || st.ProtocolVersion != "2026-07-28" {
		t.Fatalf("connect: %v %q %v (%s); want a ready 2026-07-28 session", st.State, st.ProtocolVersion, err, st.LastError)
	}
	// The connect sent one server/discover; six more are probes.
	eventually(ctx, t, "six keepalive probes", func() bool {
		now, _ := m.Get("f")
		return slices.Contains(now.StderrTail, "server/discover 7")
	})
	res, err := m.CallTool(ctx, "mcp__f__echo", map[string]any{"message": "still here"}, CallOptions{})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "still here" {
		t.Errorf("a call between the probes: %v, %v", res, err)
	}
	if now, _ := m.Get("f"); now.Pid != st.Pid || now.Restarts != 0 || now.State != StateReady {
		t.Errorf("after the probes: pid %d (was %d), restarts %d, state %v; want the same session", now.Pid, st.Pid, now.Restarts, now.State)
	}
}

// heldCall is what a call made by goCall returned.
type heldCall struct {
	res *mcp.CallToolResult
	err error
}

// goCall makes a call on a goroutine of its own; its outcome arrives on
// the returned channel.
func goCall(ctx context.Context, m *Manager, tool string, args map[string]any, opts CallOptions) <-chan heldCall {
	done := make(chan heldCall, 1)
	go func() {
		res, err := m.CallTool(ctx, tool, args, opts)
		done <- heldCall{res, err}
	}()
	return done
}

// stopWhenSaid waits until server's stderr has the line, then stops its
// process (SIGSTOP, killed when the test ends) and returns its pid.
func stopWhenSaid(ctx context.Context, t *testing.T, m *Manager, server, line string) int {
	t.Helper()
	eventually(ctx, t, line, func() bool {
		st, _ := m.Get(server)
		return slices.Contains(st.StderrTail, line)
	})
	st, _ := m.Get(server)
	if err := syscall.Kill(st.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(st.Pid, syscall.SIGKILL) })
	return st.Pid
}

// newKeepAliveManager is a Manager that pings every 100ms and ends a
// session after two failed pings in a row. Its call timeout (and so that
// of a listing of the tools) is longer than any test: what the keepalive
// does must not be mistaken for a timeout.
func newKeepAliveManager(t *testing.T, log zerolog.Logger) *Manager {
	return newKeepAliveManagerEvery(t, log, 100*time.Millisecond, 2)
}

// newKeepAliveManagerEvery is newKeepAliveManager, pinging every interval
// and ending a session after failures failed pings in a row.
func newKeepAliveManagerEvery(t *testing.T, log zerolog.Logger, interval time.Duration, failures int) *Manager {
	return closingManager(t, &Options{Logger: log, ProbeTimeout: 20 * time.Second, StopGrace: 200 * time.Millisecond,
		CallTimeout: time.Hour, KeepAlive: interval, KeepAliveFailures: failures, RestartBackoff: 10 * time.Millisecond})
}
