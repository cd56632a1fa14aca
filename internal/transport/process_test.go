package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"
)

func TestStartProcessErrors(t *testing.T) {
	const secret = "s3cr3t-value"
	notExecutable := filepath.Join(t.TempDir(), "server.sh")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		spec StdioSpec
		want string // in the error
	}{
		{name: "command not found", spec: StdioSpec{Command: "mcpd-no-such-command"}, want: "mcpd-no-such-command"},
		{name: "not executable", spec: StdioSpec{Command: notExecutable}, want: notExecutable},
		{name: "missing working dir", spec: StdioSpec{Command: testExecutable(t), Dir: "/nonexistent/mcpd"}, want: "/nonexistent/mcpd"},
		{name: "working dir is a file", spec: StdioSpec{Command: testExecutable(t), Dir: notExecutable}, want: "is not a directory"},
		{name: "empty command", spec: StdioSpec{}, want: "empty command"},
		{name: "bad env name", spec: StdioSpec{Command: testExecutable(t), Env: map[string]string{"A=B": secret}}, want: "A=B"},
		{name: "not on the server's PATH", spec: StdioSpec{Command: "mcpd-no-such-command", Env: map[string]string{"PATH": t.TempDir(), "TOKEN": secret}}, want: "server's PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.spec.Env == nil {
				tt.spec.Env = map[string]string{"TOKEN": secret}
			}
			p, err := StartProcess(tt.spec, nil)
			if err == nil {
				p.Stop(testContext(t))
				t.Fatal("StartProcess: got nil error, want one")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error: got %q, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error: got %q, which leaks an env value", err)
			}
		})
	}
}

// TestCommandOnTheServersPath: a command without a slash is looked up in
// the PATH of the server's own env, when it sets one (as other MCP clients
// do), not in mcpd's; a relative directory in it does not count.
func TestCommandOnTheServersPath(t *testing.T) {
	ctx := testContext(t)
	dir := t.TempDir()
	const name = "mcpd-test-server-on-path"
	if err := os.Symlink(testExecutable(t), filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	spec := StdioSpec{Command: name, Env: fakeEnv("env")}
	spec.Env["PATH"] = "relative/bin" + string(filepath.ListSeparator) + dir
	p, err := StartProcess(spec, &ProcessOptions{StopGrace: testStopGrace})
	if err != nil {
		t.Fatalf("StartProcess: %v", err)
	}
	t.Cleanup(func() { p.Stop(context.Background()) })
	if _, err := connectProcess(t, ctx, p).Read(ctx); err != nil {
		t.Fatalf("Read: %v", err)
	}

	// Only in a relative directory of the server's PATH: not found.
	rel := t.TempDir()
	if err := os.Mkdir(filepath.Join(rel, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testExecutable(t), filepath.Join(rel, "bin", name)); err != nil {
		t.Fatal(err)
	}
	spec = StdioSpec{Command: name, Env: fakeEnv("env"), Dir: rel}
	spec.Env["PATH"] = "bin"
	if p, err := StartProcess(spec, &ProcessOptions{StopGrace: testStopGrace}); err == nil {
		p.Stop(context.Background())
		t.Error("StartProcess found the command in a relative directory of the server's PATH")
	}
}

func TestEnvAndDir(t *testing.T) {
	ctx := testContext(t)
	t.Setenv("MCPD_TEST_DAEMON_VAR", "from-daemon")
	t.Setenv("MCPD_TEST_SPEC_VAR", "overridden")
	dir := t.TempDir()
	spec := StdioSpec{Command: testExecutable(t), Env: fakeEnv("env"), Dir: dir}
	spec.Env["MCPD_TEST_SPEC_VAR"] = "from-spec"
	p, err := StartProcess(spec, &ProcessOptions{StopGrace: testStopGrace})
	if err != nil {
		t.Fatalf("StartProcess: %v", err)
	}
	t.Cleanup(func() { p.Stop(context.Background()) })
	conn := connectProcess(t, ctx, p)
	msg, err := conn.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	var got struct{ Daemon, Spec, Cwd string }
	if err := json.Unmarshal(msg.(*jsonrpc.Request).Params, &got); err != nil {
		t.Fatalf("params: %v", err)
	}
	if want := "from-daemon"; got.Daemon != want {
		t.Errorf("daemon var: got %q, want %q", got.Daemon, want)
	}
	if want := "from-spec"; got.Spec != want {
		t.Errorf("spec var: got %q, want %q", got.Spec, want)
	}
	wantDir, _ := filepath.EvalSymlinks(dir)
	gotDir, _ := filepath.EvalSymlinks(got.Cwd)
	if gotDir != wantDir {
		t.Errorf("working dir: got %q, want %q", gotDir, wantDir)
	}
}

func TestMergeEnv(t *testing.T) {
	got, err := mergeEnv([]string{"A=1", "B=2", "C=3"}, map[string]string{"B": "x", "Z": "z", "D": ""}, nil)
	if err != nil {
		t.Fatalf("mergeEnv: %v", err)
	}
	want := []string{"A=1", "C=3", "B=x", "D=", "Z=z"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mergeEnv (-want +got):\n%s", diff)
	}

	// Withheld variables are left out of the base, but one that extra
	// sets explicitly reaches the child.
	secret := func(k string) bool { return strings.HasPrefix(k, "S_") }
	got, err = mergeEnv([]string{"A=1", "S_TOKEN=t", "S_KEY=k"}, map[string]string{"S_KEY": "given"}, secret)
	if err != nil {
		t.Fatalf("mergeEnv: %v", err)
	}
	want = []string{"A=1", "S_KEY=given"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mergeEnv with withhold (-want +got):\n%s", diff)
	}
}

func TestStopOrder(t *testing.T) {
	tests := []struct {
		name     string
		server   string
		env      map[string]string
		grace    time.Duration
		wantExit string // ExitError text; "" for nil
	}{
		// Exits 0 on its own: it got no signal at all. The long grace keeps a
		// slow machine from turning this into a SIGTERM; the test does not
		// wait for it.
		{name: "exits when stdin closes", server: "script", env: map[string]string{fakeStdoutEnv: readyLine}, grace: gracefulStopGrace},
		// A grace long enough for SIGTERM to land on a busy machine.
		{name: "ignores stdin, dies of SIGTERM", server: "ignore-stdin", grace: time.Second, wantExit: "signal: terminated"},
		{name: "ignores stdin and SIGTERM", server: "stubborn", wantExit: "signal: killed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			p := startFake(t, tt.server, tt.env, &ProcessOptions{StopGrace: tt.grace})
			conn := connectProcess(t, ctx, p)
			if got := readMethod(t, ctx, conn); got != "ready" { // signal handling is set up
				t.Fatalf("first message: got %q, want ready", got)
			}
			if err := p.Stop(ctx); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			select {
			case <-p.Done():
			default:
				t.Fatal("Done not closed after Stop")
			}
			got := ""
			if err := p.ExitError(); err != nil {
				got = err.Error()
			}
			if got != tt.wantExit {
				t.Errorf("ExitError: got %q, want %q", got, tt.wantExit)
			}
		})
	}
}

func TestStopKillsGrandchildren(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{name: "parent exits when stdin closes"},
		{name: "parent needs SIGKILL", env: map[string]string{"FAKE_STUBBORN": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			p := startFake(t, "parent", tt.env, nil)
			conn := connectProcess(t, ctx, p)
			if got := readMethod(t, ctx, conn); got != "ready" { // the grandchild is started
				t.Fatalf("first message: got %q, want ready", got)
			}
			if live := liveGroupMembers(t, p.Pid()); len(live) < 2 {
				t.Fatalf("before Stop: got live group members %v, want the child and a grandchild", live)
			}
			if err := p.Stop(ctx); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			waitNoLiveMembers(t, ctx, p.Pid())
		})
	}
}

func TestStopConcurrent(t *testing.T) {
	ctx := testContext(t)
	p := startFake(t, "stubborn", nil, nil)
	conn := connectProcess(t, ctx, p)
	if got := readMethod(t, ctx, conn); got != "ready" {
		t.Fatalf("first message: got %q, want ready", got)
	}
	const stoppers = 4
	errs := make([]error, stoppers+1)
	var wg sync.WaitGroup
	for i := range stoppers {
		wg.Go(func() { errs[i] = p.Stop(ctx) })
	}
	wg.Go(func() { errs[stoppers] = conn.Close() })
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Stop %d: %v", i, err)
		}
	}
	if got, want := fmt.Sprint(p.ExitError()), "signal: killed"; got != want {
		t.Errorf("ExitError: got %q, want %q", got, want)
	}
}

func TestStopCancelledSkipsToKill(t *testing.T) {
	ctx := testContext(t)
	// A grace far beyond the test timeout: only the cancelled ctx can make
	// Stop finish.
	p := startFake(t, "stubborn", nil, &ProcessOptions{StopGrace: 1 << 40})
	conn := connectProcess(t, ctx, p)
	if got := readMethod(t, ctx, conn); got != "ready" {
		t.Fatalf("first message: got %q, want ready", got)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.Stop(cancelled); err == nil {
		t.Error("Stop with a cancelled ctx: got nil error, want the ctx error")
	}
	if got, want := fmt.Sprint(p.ExitError()), "signal: killed"; got != want {
		t.Errorf("ExitError: got %q, want %q", got, want)
	}
}

// TestHurryReachesEveryStop: a stop begun without a context of its own
// (closing the connection, as the SDK does when a handshake fails) waits
// out the grace periods like any other, until the Hurry context of the
// options ends; then it skips to SIGKILL.
func TestHurryReachesEveryStop(t *testing.T) {
	ctx := testContext(t)
	hurry, hurryUp := context.WithCancel(ctx)
	// A grace far beyond the test timeout: only the hurry can end Close.
	p := startFake(t, "stubborn", nil, &ProcessOptions{StopGrace: 1 << 40, Hurry: hurry})
	conn := connectProcess(t, ctx, p)
	if got := readMethod(t, ctx, conn); got != "ready" {
		t.Fatalf("first message: got %q, want ready", got)
	}
	closed := make(chan error, 1)
	go func() { closed <- conn.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned before the hurry (%v): the stop grace was skipped", err)
	case <-time.After(100 * time.Millisecond):
	}
	hurryUp()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close: still waiting out the stop grace after the hurry")
	}
	if got, want := fmt.Sprint(p.ExitError()), "signal: killed"; got != want {
		t.Errorf("ExitError: got %q, want %q", got, want)
	}
}

func TestStderrTail(t *testing.T) {
	ctx := testContext(t)
	var stderr strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&stderr, "line %d\n", i)
	}
	long := strings.Repeat("L", 5000)
	stderr.WriteString(long + "\r\n\n   \nlast") // no newline at EOF
	var logs syncBuffer
	p := startFake(t, "script", map[string]string{fakeStderrEnv: stderr.String(), fakeExitEnv: "0"},
		&ProcessOptions{StderrTailLines: 10, Logger: zerolog.New(&logs), StopGrace: gracefulStopGrace})

	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatal("the child did not exit")
	}
	if err := p.Stop(ctx); err != nil { // waits for the stderr reader
		t.Fatalf("Stop: %v", err)
	}
	var want []string
	for i := 93; i <= 100; i++ {
		want = append(want, fmt.Sprint("line ", i))
	}
	want = append(want, long[:maxStderrLineBytes], "last")
	if diff := cmp.Diff(want, p.StderrTail()); diff != "" {
		t.Errorf("StderrTail (-want +got):\n%s", diff)
	}
	entries := logs.entries(t)
	for _, msg := range []string{"line 1", "last"} {
		if !hasEntry(entries, map[string]string{"level": "info", "stream": "stderr", "message": msg}) {
			t.Errorf("logs: no stderr entry %q", msg)
		}
	}
}
