package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/config"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fakeServer describes the test binary re-executed as a stdio server.
func fakeServer(name, mode string) config.Server {
	return config.Server{
		Name:    name,
		Kind:    config.TransportStdio,
		Command: os.Args[0],
		Env:     map[string]string{fakeServerEnv: mode, "GORACE": "atexit_sleep_ms=0"},
	}
}

// stateRecorder collects OnStateChange calls.
type stateRecorder struct {
	mu     sync.Mutex
	states map[string][]State
}

func (r *stateRecorder) record(name string, s State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states[name] = append(r.states[name], s)
}

func (r *stateRecorder) get(name string) []State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]State(nil), r.states[name]...)
}

// closingManager returns a Manager that is closed when the test ends,
// failing the test if its servers do not stop within 10s.
func closingManager(t *testing.T, opts *Options) *Manager {
	t.Helper()
	m := NewManager(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

// newTestManager returns a Manager whose era probe waits probe: long for
// servers that answer it (a loaded machine must not turn them legacy),
// short for those that ignore it.
func newTestManager(t *testing.T, probe ...time.Duration) (*Manager, *stateRecorder) {
	rec := &stateRecorder{states: make(map[string][]State)}
	timeout := 20 * time.Second
	if len(probe) > 0 {
		timeout = probe[0]
	}
	m := closingManager(t, &Options{
		ProbeTimeout:  timeout,
		StopGrace:     500 * time.Millisecond,
		OnStateChange: rec.record,
	})
	return m, rec
}

func TestEraProbe(t *testing.T) {
	tests := []struct {
		mode  string
		probe time.Duration
		want  string
	}{
		{"serve", 20 * time.Second, "2026-07-28"},
		{"ignore-discover", time.Second, "2025-11-25"},
		{"die-on-discover", 20 * time.Second, "2025-11-25"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			m, _ := newTestManager(t, tt.probe)
			ctx := testContext(t)
			st, err := m.Connect(ctx, fakeServer("fake", tt.mode), false)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != StateReady || st.ProtocolVersion != tt.want {
				t.Fatalf("got %v %q (%s), want ready %q", st.State, st.ProtocolVersion, st.LastError, tt.want)
			}
			res, err := m.CallTool(ctx, "mcp__fake__echo", map[string]any{"message": "hello"}, CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Content) != 1 {
				t.Fatalf("echo: got %d content blocks, want 1", len(res.Content))
			}
		})
	}
}

// TestEraKeptAcrossRestarts: once a server answered only initialize, a
// restart connects to it that way at once, without the server/discover
// probe, which costs a process start (or the probe's timeout) every time.
func TestEraKeptAcrossRestarts(t *testing.T) {
	m, _ := newTestManager(t, 20*time.Second)
	ctx := testContext(t)
	starts := filepath.Join(t.TempDir(), "starts")
	cfg := fakeServer("fake", "die-on-discover")
	cfg.Env[fakeStartsEnv] = starts
	startCount := func() int {
		data, _ := os.ReadFile(starts)
		return strings.Count(string(data), "\n")
	}
	st, err := m.Connect(ctx, cfg, false)
	if err != nil || st.State != StateReady || st.ProtocolVersion != "2025-11-25" {
		t.Fatalf("connect: %v %q (%s), %v; want ready at 2025-11-25", st.State, st.ProtocolVersion, st.LastError, err)
	}
	if n := startCount(); n != 2 {
		t.Fatalf("the first connect started %d processes, want 2 (the probe, then initialize)", n)
	}
	for i := range 2 {
		st, err := m.Restart(ctx, "fake")
		if err != nil || st.State != StateReady || st.ProtocolVersion != "2025-11-25" {
			t.Fatalf("restart %d: %v %q (%s), %v; want ready at 2025-11-25", i+1, st.State, st.ProtocolVersion, st.LastError, err)
		}
	}
	if n := startCount(); n != 4 {
		t.Errorf("after two restarts %d processes started, want 4: one per restart, the era known", n)
	}
}

func TestForcedProtocolVersion(t *testing.T) {
	m, _ := newTestManager(t)
	cfg := fakeServer("fake", "serve")
	cfg.ProtocolVersion = "2025-06-18"
	st, err := m.Connect(testContext(t), cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.ProtocolVersion != "2025-06-18" {
		t.Errorf("got protocol version %q, want the forced 2025-06-18", st.ProtocolVersion)
	}
}

func TestExitAtStart(t *testing.T) {
	m, rec := newTestManager(t)
	st, err := m.Connect(testContext(t), fakeServer("bad", "exit-at-start"), false)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateFailed {
		t.Fatalf("got state %v, want failed", st.State)
	}
	if !strings.Contains(st.LastError, "exit status 3") {
		t.Errorf("last error %q does not mention the exit status", st.LastError)
	}
	if len(st.StderrTail) == 0 || !strings.Contains(strings.Join(st.StderrTail, "\n"), "missing API key") {
		t.Errorf("stderr tail %q does not hold the server's message", st.StderrTail)
	}
	if got := rec.get("bad"); len(got) != 2 || got[0] != StateConnecting || got[1] != StateFailed {
		t.Errorf("state changes: got %v, want [connecting failed]", got)
	}
	_, err = m.CallTool(testContext(t), "mcp__bad__echo", nil, CallOptions{})
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("call on a failed server: got %v, want ErrUnavailable", err)
	}
}

// TestBrokenPipeNamesTheExit: a server whose stdin is closed when mcpd
// writes to it in the handshake (it is exiting) fails with how its
// process ended, as one whose stdout closed does, not with the write's
// broken pipe.
func TestBrokenPipeNamesTheExit(t *testing.T) {
	m, _ := newTestManager(t)
	cfg := fakeServer("f", "close-stdin-on-initialize")
	cfg.ProtocolVersion = "2025-11-25" // an initialize, not a probe, comes first
	st, err := m.Connect(testContext(t), cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateFailed || !strings.Contains(st.LastError, "server process exited: exit status 3") || strings.Contains(st.LastError, "broken pipe") {
		t.Errorf("got %v, last error %q; want failed, saying how the process exited", st.State, st.LastError)
	}
}

// TestSessionEndsWhileSettingUp: a session that ends while mcpd sets it
// up (its tools/list answer is over MaxLineBytes, or the server exits when
// asked for its tools) never served: on the first start the server is
// FAILED at once, never READY, and last_error says what ended it, not
// that mcpd stopped the process afterwards.
func TestSessionEndsWhileSettingUp(t *testing.T) {
	tests := []struct {
		mode string
		want string
	}{
		{"big-tools", "exceeds 4096 bytes"},
		{"die-on-list", "exit status 4"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			rec := &stateRecorder{states: make(map[string][]State)}
			m := closingManager(t, &Options{ProbeTimeout: 20 * time.Second, StopGrace: 500 * time.Millisecond, MaxLineBytes: 4 << 10, OnStateChange: rec.record})
			st, err := m.Connect(testContext(t), fakeServer("f", tt.mode), false)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != StateFailed || !strings.Contains(st.LastError, tt.want) {
				t.Errorf("got %v, last error %q; want failed, saying %q", st.State, st.LastError, tt.want)

			}
			if got := rec.get("f"); !slices.Equal(got, []State{StateConnecting, StateFailed}) {
				t.Errorf("state changes: got %v, want [connecting failed]", got)
			}
			if st.Pid != 0 {
				t.Errorf("pid %d, want no process", st.Pid)
			}
		})
	}
}

// TestStdoutClosedNamedInLastError: a stdio server that closes its stdout
// but runs on is stopped by mcpd, and last_error says that it closed its
// stdout, whether it did so in the handshake, while mcpd set the session
// up, or once it was ready; not how the process ended, which is by mcpd's
// own SIGTERM.
func TestStdoutClosedNamedInLastError(t *testing.T) {
	tests := []struct {
		mode  string
		state State // once the session ended
	}{
		{"close-stdout-on-initialize", StateFailed},
		{"close-stdout-on-list", StateFailed},
		{"close-stdout-on-call", StateReconnecting},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			// No second attempt within the test: last_error stays the
			// first session's.
			m := closingManager(t, &Options{ProbeTimeout: 20 * time.Second, StopGrace: 200 * time.Millisecond, RestartBackoff: time.Hour})
			cfg := fakeServer("f", tt.mode)
			cfg.ProtocolVersion = "2025-11-25" // an initialize, not a probe, comes first
			if _, err := m.Connect(ctx, cfg, false); err != nil {
				t.Fatal(err)
			}
			if tt.state == StateReconnecting { // ready: a call makes it close stdout
				_, _ = m.CallTool(ctx, "mcp__f__echo", map[string]any{"message": "x"}, CallOptions{})
			}
			// Once the process is gone and the reason of the end is set:
			// the connection's failure is noted first, as "connection lost".
			eventually(ctx, t, "the session to end", func() bool {
				st, _ := m.Get("f")
				return st.State == tt.state && st.Pid == 0 && st.LastError != "" && !strings.HasPrefix(st.LastError, "connection lost")
			})
			st, _ := m.Get("f")
			if !strings.Contains(st.LastError, "closed stdout") || strings.Contains(st.LastError, "signal") {
				t.Errorf("last error %q: want it to say the server closed stdout, not how mcpd stopped it", st.LastError)
			}
		})
	}
}

// TestConnectTimeoutNamesStdoutNoise: a server that writes lines that
// are not JSON-RPC to stdout (its logging on the wrong stream) and never
// answers fails at the connect timeout with an error that says what it
// wrote, not only that it did not answer.
func TestConnectTimeoutNamesStdoutNoise(t *testing.T) {
	m := closingManager(t, &Options{ConnectTimeout: 3 * time.Second, StopGrace: 500 * time.Millisecond})
	cfg := fakeServer("f", "stdout-logger")
	cfg.ProtocolVersion = "2025-11-25" // one process, asked once: no probe
	st, err := m.Connect(testContext(t), cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateFailed || !strings.Contains(st.LastError, "connect timeout") || !strings.Contains(st.LastError, "DEBUG handling a request") {
		t.Errorf("got %v, last error %q; want failed at the connect timeout, quoting what the server wrote to stdout", st.State, st.LastError)

	}
}

func TestCommandNotFound(t *testing.T) {
	m, _ := newTestManager(t)
	cfg := fakeServer("nope", "serve")
	cfg.Command = "/nonexistent/mcp-server"
	st, err := m.Connect(testContext(t), cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateFailed || !strings.Contains(st.LastError, "/nonexistent/mcp-server") {
		t.Errorf("got %v %q, want failed naming the command", st.State, st.LastError)
	}
}

func TestExitMidCallFailsAtOnceThenRestarts(t *testing.T) {
	m, rec := newTestManager(t)
	ctx := testContext(t)
	if _, err := m.Connect(ctx, fakeServer("fake", "serve"), false); err != nil {
		t.Fatal(err)
	}
	// The call's own timeout is far beyond the test's: only a prompt
	// failure lets the test pass.
	_, err := m.CallTool(ctx, "mcp__fake__crash", nil, CallOptions{Timeout: time.Hour})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	// The next call waits for the automatic restart and succeeds.
	res, err := m.CallTool(ctx, "mcp__fake__echo", map[string]any{"message": "back"}, CallOptions{})
	if err != nil {
		t.Fatalf("call after the crash: %v", err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("got %d content blocks", len(res.Content))
	}
	st, _ := m.Get("fake")
	if st.Restarts != 1 || st.State != StateReady || !strings.Contains(st.LastError, "exit status 7") {
		t.Errorf("got restarts %d state %v last error %q; want 1, ready, the exit status", st.Restarts, st.State, st.LastError)
	}
	if got := rec.get("fake"); !slices.Contains(got, StateReconnecting) {
		t.Errorf("states %v never went through reconnecting", got)
	}
}

// TestStderrTailOfTheFailedStart: when a restart cannot start the command
// at all (it went away), the status shows no stderr lines: those of the
// process before are not this failure's.
func TestStderrTailOfTheFailedStart(t *testing.T) {
	m, _ := newTestManager(t)
	cfg := fakeServer("gone", "exit-at-start")
	cfg.Command = filepath.Join(t.TempDir(), "server")
	if err := os.Symlink(os.Args[0], cfg.Command); err != nil {
		t.Fatal(err)
	}
	st, err := m.Connect(testContext(t), cfg, false)
	if err != nil || st.State != StateFailed || !strings.Contains(strings.Join(st.StderrTail, "\n"), "missing API key") {
		t.Fatalf("first start: got %v, tail %q, %v; want failed with the server's message", st.State, st.StderrTail, err)
	}
	if err := os.Remove(cfg.Command); err != nil {
		t.Fatal(err)
	}
	st, err = m.Restart(testContext(t), "gone")
	if err != nil || st.State != StateFailed || !strings.Contains(st.LastError, "no such file") {
		t.Fatalf("restart of a command that went away: got %v, %q, %v; want failed, saying so", st.State, st.LastError, err)
	}
	if len(st.StderrTail) != 0 {
		t.Errorf("restart of a command that went away: stderr tail %q, want none (those lines are the process before's)", st.StderrTail)
	}
}

func TestCrashLoopEndsFailed(t *testing.T) {
	rec := &stateRecorder{states: make(map[string][]State)}
	m := NewManager(&Options{
		ProbeTimeout:      20 * time.Second,
		StopGrace:         500 * time.Millisecond,
		RestartBackoff:    10 * time.Millisecond,
		CrashLoopRestarts: 3,
		CrashLoopWindow:   time.Minute,
		OnStateChange:     rec.record,
	})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	ctx := testContext(t)
	st, err := m.Connect(ctx, fakeServer("loop", "crash-soon"), false)
	if err != nil || st.State != StateReady {
		t.Fatalf("first start: %v %v", st.State, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, _ = m.Get("loop")
		if st.State == StateFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %v after %d restarts, want failed by the crash loop", st.State, st.Restarts)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(st.LastError, "crash loop") || !strings.Contains(st.LastError, "exit status 5") {
		t.Errorf("last error %q, want the crash loop and the exit status", st.LastError)
	}
	if !slices.ContainsFunc(st.StderrTail, func(l string) bool { return strings.Contains(l, "dying on purpose") }) {
		t.Errorf("stderr tail %q lacks the server's last words", st.StderrTail)
	}
	if st.Restarts != 2 {
		t.Errorf("restarts: got %d, want 2 (3 failures)", st.Restarts)
	}
	// RestartServer starts over.
	if st, err := m.Restart(ctx, "loop"); err != nil || st.State != StateReady {
		t.Errorf("restart after the crash loop: %v %v", st.State, err)
	}
}

func TestCloseStopsProcesses(t *testing.T) {
	m := NewManager(&Options{StopGrace: 500 * time.Millisecond})
	ctx := testContext(t)
	var pids []int
	for _, name := range []string{"a", "b"} {
		st, err := m.Connect(ctx, fakeServer(name, "serve"), false)
		if err != nil || st.Pid == 0 {
			t.Fatalf("connect %s: %v pid %d", name, err, st.Pid)
		}
		pids = append(pids, st.Pid)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after Close (kill: %v)", pid, err)
		}
	}
	if _, err := m.Connect(ctx, fakeServer("c", "serve"), false); !errors.Is(err, ErrUnavailable) {
		t.Errorf("connect after Close: got %v, want ErrUnavailable", err)
	}
}

func TestAddFailedAndDuplicates(t *testing.T) {
	m, _ := newTestManager(t)
	ctx := testContext(t)
	if err := m.AddFailed("broken", errors.New("variable TOKEN is not set")); err != nil {
		t.Fatal(err)
	}
	st, err := m.Get("broken")
	if err != nil || st.State != StateFailed || st.LastError != "variable TOKEN is not set" {
		t.Fatalf("got %+v %v, want failed with the reason", st, err)
	}
	if _, err := m.Restart(ctx, "broken"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("restart of an unusable entry: got %v, want ErrInvalidArgument", err)
	}
	if _, err := m.Connect(ctx, fakeServer("broken", "serve"), false); !errors.Is(err, ErrAlreadyExists) {
		t.Errorf("connect over it without replace: got %v, want ErrAlreadyExists", err)
	}
	if st, err := m.Connect(ctx, fakeServer("broken", "serve"), true); err != nil || st.State != StateReady {
		t.Errorf("connect over it with replace: got %v %v, want ready", st.State, err)
	}
}

func TestSetEnabled(t *testing.T) {
	m, _ := newTestManager(t)
	ctx := testContext(t)
	if _, err := m.Connect(ctx, fakeServer("a", "serve"), false); err != nil {
		t.Fatal(err)
	}
	if err := m.SetEnabled("a", false); err != nil {
		t.Fatalf("disable: %v", err)
	}
	st, err := m.Get("a")
	if err != nil || st.State != StateDisabled || st.Pid != 0 {
		t.Fatalf("after disable: got %v pid %d (%v), want disabled and no process", st.State, st.Pid, err)
	}
	if _, err := m.Tools("a"); !errors.Is(err, ErrDisabled) {
		t.Errorf("tools of a disabled server: got %v, want ErrDisabled", err)
	}
	if _, err := m.Restart(ctx, "a"); !errors.Is(err, ErrDisabled) {
		t.Errorf("restart of a disabled server: got %v, want ErrDisabled", err)
	}
	if err := m.SetEnabled("a", true); err != nil {
		t.Fatalf("enable: %v", err)
	}
	if st, err := m.Await(ctx, "a"); err != nil || st.State != StateReady {
		t.Errorf("after enable: got %v %v, want ready", st.State, err)
	}
	if err := m.SetEnabled("nope", true); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown server: got %v, want ErrNotFound", err)
	}

	// Registered disabled with an unusable config: enabling fails it.
	if err := m.AddStopped(config.Server{Name: "parked"}, StateDisabled, errors.New("no command"), false); err != nil {
		t.Fatal(err)
	}
	_ = m.SetEnabled("parked", true)
	if st, _ := m.Get("parked"); st.State != StateFailed || st.LastError != "no command" {
		t.Errorf("enabling an unusable entry: got %v %q, want failed with its reason", st.State, st.LastError)
	}
}

func TestSplitQualifiedToolName(t *testing.T) {
	tests := []struct {
		in           string
		server, tool string
		ok           bool
	}{
		{"mcp__demo__echo", "demo", "echo", true},
		{"mcp__demo__get__thing", "demo", "get__thing", true},
		{"mcp__a-b_c__x", "a-b_c", "x", true},
		{"echo", "", "", false},
		{"mcp__demo", "", "", false},
		{"mcp____echo", "", "", false},
		{"mcp__demo__", "", "", false},
	}
	for _, tt := range tests {
		server, tool, ok := SplitQualifiedToolName(tt.in)
		if server != tt.server || tool != tt.tool || ok != tt.ok {
			t.Errorf("SplitQualifiedToolName(%q) = %q, %q, %v; want %q, %q, %v", tt.in, server, tool, ok, tt.server, tt.tool, tt.ok)
		}
		if ok && QualifiedToolName(server, tool) != tt.in {
			t.Errorf("QualifiedToolName does not invert the split of %q", tt.in)
		}
	}
}

// TestStderrLogLimitPerServer: a server's processes share its stderr log
// limit, so that a crash loop does not get a new burst at every start;
// the lines kept out of the log are counted in warnings, and the tail
// still has them.
func TestStderrLogLimitPerServer(t *testing.T) {
	var logs lockedBuffer
	m := closingManager(t, &Options{
		Logger:         zerolog.New(&logs).Level(zerolog.DebugLevel),
		ProbeTimeout:   20 * time.Second,
		StopGrace:      500 * time.Millisecond,
		StderrLogBurst: 2,
		StderrLogRate:  1e-9, // a refill no test lives to see
	})
	ctx := testContext(t)
	const line = "fatal: missing API key" // one line per process
	// Each start runs the server twice: for the era probe, which it does
	// not survive, and for initialize.
	st, err := m.Connect(ctx, fakeServer("gone", "exit-at-start"), false)
	if err != nil || st.State != StateFailed {
		t.Fatalf("start: got %v, %v; want failed", st.State, err)
	}
	st, err = m.Restart(ctx, "gone")
	if err != nil || st.State != StateFailed {
		t.Fatalf("restart: got %v, %v; want failed", st.State, err)
	}
	if !slices.Contains(st.StderrTail, line) {
		t.Errorf("stderr tail %q, want the line the log did not get", st.StderrTail)
	}
	// Each process's stderr reader reports its dropped line as it ends,
	// at the latest when the Manager stops the process.
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	started, logged, dropped := 0, 0, 0
	for l := range strings.Lines(logs.String()) {
		var e struct {
			Stream, Level, Message string
			Dropped                int
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		switch {
		case e.Message == "server process started":
			started++
		case e.Stream == "stderr" && e.Message == line:
			logged++
		case e.Level == "warn":
			dropped += e.Dropped
		}
	}
	if started < 3 || logged != 2 || dropped != started-2 {
		t.Errorf("of %d processes' line: %d logged and %d reported dropped, want 2 logged (the burst), the rest dropped", started, logged, dropped)
	}
}
