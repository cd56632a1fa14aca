package main

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestReload rewrites the config file and sends SIGHUP: mcpd restarts only
// the servers whose entry changed, starts new ones, drops removed ones,
// and leaves servers added over the API alone. A malformed file keeps
// everything running.
func TestReload(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	demo := func(args ...string) map[string]any {
		return map[string]any{"command": mcpdBinary(t), "args": append([]string{"demo-server"}, args...)}
	}
	path := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"keep":   demo(),
		"change": demo(),
		"drop":   demo(),
		"fixed":  map[string]any{"command": "${MCPD_E2E_NEVER_SET}"},
	}}))
	metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{config: path, args: []string{"--metrics-listen", metrics}})
	before := map[string]*mcpdv1.Server{}
	for _, name := range []string{"keep", "change", "drop"} {
		before[name] = d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
	}
	d.waitServer(ctx, t, "fixed", mcpdv1.ServerState_SERVER_STATE_FAILED)
	before["api"] = d.connectFake(ctx, t, "api", fakeNoisy)

	// A field mcpd ignores changes no setting: "keep" runs on, and shows
	// the new warning.
	described := demo()
	described["description"] = "the demo server"
	replaceFile(t, path, mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"keep":   described,
		"change": demo("v2"),
		"fixed":  demo(),
		"added":  demo(),
	}}))
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}

	var changed *mcpdv1.Server
	poll(ctx, t, "the changed server runs with its new args", func() (bool, error) {
		resp, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "change"})
		if err != nil {
			return false, err
		}
		changed = resp.GetServer()
		return changed.GetState() == mcpdv1.ServerState_SERVER_STATE_READY && slices.Contains(changed.GetArgs(), "v2"), nil
	})
	if changed.GetPid() == before["change"].GetPid() {
		t.Errorf("changed server: got the same pid %d, want a new process", changed.GetPid())
	}
	d.waitServer(ctx, t, "added", mcpdv1.ServerState_SERVER_STATE_READY)
	d.waitServer(ctx, t, "fixed", mcpdv1.ServerState_SERVER_STATE_READY)
	poll(ctx, t, "the dropped server is gone", func() (bool, error) {
		_, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "drop"})
		return err != nil, err
	})
	_, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "drop"})
	wantCode(t, err, codes.NotFound)
	for _, name := range []string{"keep", "api"} {
		s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
		if s.GetPid() != before[name].GetPid() || s.GetRestarts() != before[name].GetRestarts() {
			t.Errorf("server %s: got pid %d restarts %d, want it untouched (pid %d restarts %d)",
				name, s.GetPid(), s.GetRestarts(), before[name].GetPid(), before[name].GetRestarts())
		}
	}
	if w := d.waitServer(ctx, t, "keep", mcpdv1.ServerState_SERVER_STATE_READY).GetConfigWarnings(); !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, `"description"`) }) {
		t.Errorf("server keep: config warnings %q, want one about the ignored field \"description\"", w)
	}

	// A file that no longer parses changes nothing, and the metrics say so.
	configFiles := map[string]string{"files": "config"}
	good := scrapeMetrics(ctx, t, metrics)
	good.want(t, "mcpd_config_last_reload_successful", configFiles, 1)
	if _, ok := good.value("mcpd_config_last_reload_successful", map[string]string{"files": "callers"}); ok {
		t.Error("mcpd_config_last_reload_successful: a series for a callers file mcpd was not given")
	}
	replaceFile(t, path, `{"mcpServers": {`)
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "mcpd logs the failed reload", func() (bool, error) {
		return findLogLine(d.log.String(), func(m map[string]any) bool { return m["level"] == "error" }), nil
	})
	broken := scrapeMetrics(ctx, t, metrics)
	broken.want(t, "mcpd_config_last_reload_successful", configFiles, 0)
	goodAt, _ := good.value("mcpd_config_last_reload_success_timestamp_seconds", configFiles)
	brokenAt, _ := broken.value("mcpd_config_last_reload_success_timestamp_seconds", configFiles)
	if goodAt == 0 || brokenAt != goodAt {
		t.Errorf("mcpd_config_last_reload_success_timestamp_seconds: %v at the last good reload, %v after a failed one; want it set and kept", goodAt, brokenAt)
	}
	list, err := d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.GetServers() {
		names = append(names, s.GetName())
		if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
			t.Errorf("after a bad reload: server %s is %v, want READY", s.GetName(), s.GetState())
		}
	}
	if want := []string{"added", "api", "change", "fixed", "keep"}; !slices.Equal(names, want) {
		t.Errorf("servers after a bad reload: got %v, want %v", names, want)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// replaceFile replaces path's content atomically, so that mcpd never reads
// half a file.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestEarlyHangup sends SIGHUP while mcpd is still starting: it must not
// kill the daemon.
func TestEarlyHangup(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	sock := filepath.Join(shortTempDir(t), "mcpd.sock")
	cmd := exec.CommandContext(ctx, mcpdBinary(t), "--listen", "unix://"+sock, "--config", emptyConfig(t), "--log-level", "debug")
	cmd.Env = daemonEnv()
	log := &syncBuffer{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// A signal that arrives before the Go runtime has run main cannot be
	// caught by any program; mcpd catches SIGHUP first thing in main, so
	// wait for its first log line, written before it reads its config or
	// listens.
	poll(ctx, t, "mcpd to start", func() (bool, error) {
		return strings.Contains(log.String(), "mcpd starting"), nil
	})
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The hangup is handled (or ignored) once mcpd listens; then SIGTERM
	// must end it cleanly.
	var dialer net.Dialer
	poll(ctx, t, "mcpd listens after an early SIGHUP", func() (bool, error) {
		select {
		case err := <-exited:
			t.Fatalf("mcpd exited after an early SIGHUP: %v", err)
		default:
		}
		c, err := dialer.DialContext(ctx, "unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil, err
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Errorf("mcpd after an early SIGHUP and a SIGTERM: got %v, want exit status 0", err)
	}
}

// TestStopDuringReload: a reload stops servers slow to stop side by side,
// and does not hold up SIGTERM. The servers ignore SIGTERM, so each stop
// takes twice --stop-grace; mcpd must begin shutting down while the
// reload's stops are still under way, and still leave no process behind.
func TestStopDuringReload(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := shortTempDir(t)
	mark := func(n string) string { return filepath.Join(dir, n+".stopping") }
	names := []string{"s1", "s2", "s3"}
	servers := map[string]any{}
	for _, n := range names {
		servers[n] = map[string]any{"command": testBinary(t), "env": map[string]string{fakeServerEnv: fakeStubborn, fakeMarkEnv: mark(n)}}
	}
	path := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": servers}))
	d := startDaemon(ctx, t, daemonOptions{config: path, args: []string{"--stop-grace", "3s"}})
	pids := map[string]int{}
	for _, n := range names {
		pids[n] = int(d.waitServer(ctx, t, n, mcpdv1.ServerState_SERVER_STATE_READY).GetPid())
	}

	replaceFile(t, path, `{"mcpServers": {}}`)
	d.send(t, syscall.SIGHUP)
	// The servers stop side by side: each is told to stop while the others
	// are still stopping (one after another, only the last would be).
	poll(ctx, t, "the reload stops every server", func() (bool, error) {
		for _, n := range names {
			if _, err := os.Stat(mark(n)); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if alive := countAlive(pids); alive < 2 {
		t.Errorf("when the last server was told to stop, %d of %d were still stopping: they stop one after another", alive, len(pids))
	}
	d.send(t, syscall.SIGTERM)
	poll(ctx, t, "mcpd begins shutting down", func() (bool, error) {
		return strings.Contains(d.log.String(), "shutting down"), nil
	})
	if countAlive(pids) == 0 {
		t.Errorf("mcpd began shutting down only after the reload had stopped every server")
	}
	if code := d.wait(t, syscall.SIGTERM); code != 0 {
		t.Errorf("mcpd exit code %d, want 0", code)
	}
	for n, pid := range pids {
		if !processGone(pid) {
			t.Errorf("server %s (pid %d) outlived mcpd", n, pid)
		}
	}
}

// countAlive counts the processes that still run.
func countAlive(pids map[string]int) int {
	n := 0
	for _, pid := range pids {
		if !processGone(pid) {
			n++
		}
	}
	return n
}

// TestStackSignal: SIGUSR1 makes mcpd write every goroutine's stack to
// its stderr, and it serves on.
func TestStackSignal(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	if err := d.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "the stacks in mcpd's log", func() (bool, error) {
		log := d.log.String()
		return strings.Contains(log, "mcpd: goroutine stacks at") && strings.Contains(log, "main.run("), nil
	})
	d.waitHealth(ctx, t, healthpb.HealthCheckResponse_SERVING)
}

// TestReloadLetsCallsFinish: a reload that changes a server's entry lets
// the call running on the old process finish, with its result, before it
// stops that process; the new process starts only then, and a call that
// arrives meanwhile waits for it. The tool is neither read-only nor
// idempotent: cut off, the call would fail with CALL_MAY_HAVE_RUN.
func TestReloadLetsCallsFinish(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()
	entry := func(env map[string]string) map[string]any {
		env[fakeServerEnv], env[fakeGateDirEnv] = fakeGated, dir
		return map[string]any{"command": testBinary(t), "env": env}
	}
	path := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{"gated": entry(map[string]string{})}}))
	d := startDaemon(ctx, t, daemonOptions{config: path})
	oldPid := int(d.waitServer(ctx, t, "gated", mcpdv1.ServerState_SERVER_STATE_READY).GetPid())

	type outcome struct {
		resp *mcpdv1.CallToolResponse
		err  error
	}
	call := func(tag string) <-chan outcome {
		out := make(chan outcome, 1)
		go func() {
			resp, err := d.call(ctx, t, "mcp__gated__"+gatedPlain, map[string]any{"tag": tag}, time.Minute)
			out <- outcome{resp, err}
		}()
		return out
	}
	startedOn := func(tag string) int {
		t.Helper()
		pid := 0
		poll(ctx, t, "call "+tag+" started", func() (bool, error) {
			starts, err := readGatedStarts(dir)
			for _, s := range starts {
				if s.tag == tag {
					pid = s.pid
				}
			}
			return pid != 0, err
		})
		return pid
	}

	before := call("before")
	startedOn("before")
	replaceFile(t, path, mustJSON(t, map[string]any{"mcpServers": map[string]any{"gated": entry(map[string]string{fakeValueEnv: "v2"})}}))
	d.send(t, syscall.SIGHUP)
	poll(ctx, t, "the reload takes the new entry", func() (bool, error) {
		resp, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "gated"})
		return slices.Contains(resp.GetServer().GetEnvNames(), fakeValueEnv), err
	})
	after := call("after")

	// The old process still runs the first call: the new one has not
	// started, and the second call waits for it.
	resp, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "gated"})
	if err != nil {
		t.Fatal(err)
	}
	if s := resp.GetServer(); s.GetState() != mcpdv1.ServerState_SERVER_STATE_CONNECTING || s.GetPid() != 0 {
		t.Errorf("while the old process runs a call: server %v with pid %d, want CONNECTING with no process yet", s.GetState(), s.GetPid())
	}
	if err := releaseGated(dir, oldPid, 1); err != nil {
		t.Fatal(err)
	}
	r := <-before
	if r.err != nil {
		t.Fatalf("call in flight during the reload: got %v, want its result", r.err)
	}
	if got := text(r.resp); got != "before" {
		t.Errorf("call in flight during the reload: got %q, want %q", got, "before")
	}

	newPid := startedOn("after")
	if newPid == oldPid {
		t.Fatalf("the call made during the reload ran on the old process %d", oldPid)
	}
	if !processGone(oldPid) {
		t.Errorf("old process %d runs on beside the new one %d", oldPid, newPid)
	}
	if err := releaseGated(dir, newPid, 1); err != nil {
		t.Fatal(err)
	}
	if r := <-after; r.err != nil || text(r.resp) != "after" {
		t.Errorf("call made during the reload: got %v %v, want its result", r.resp, r.err)
	}
	if s := d.waitServer(ctx, t, "gated", mcpdv1.ServerState_SERVER_STATE_READY); int(s.GetPid()) != newPid {
		t.Errorf("server pid %d after the reload, want %d", s.GetPid(), newPid)
	}
}

// TestReloadHoldsNoOtherServer: while a reload waits for a server that
// ignores SIGTERM to stop, ConnectServer of another server goes ahead.
// TestReloadRetriesFailedServers: a reload starts again a server that
// gave up (FAILED: it could not start, or crash-looped) though its entry
// is unchanged, as an operator who fixed what it lacked expects of
// `systemctl reload`; a server that runs is left alone.
func TestReloadRetriesFailedServers(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ready := filepath.Join(shortTempDir(t), "ready")
	path := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"keep": map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}},
		"needs-file": map[string]any{
			"command": "sh",
			"args":    []string{"-c", `test -e "$1" || { echo "$1 is missing" >&2; exit 3; }; exec "$0" demo-server`, mcpdBinary(t), ready},
		},
	}}))
	d := startDaemon(ctx, t, daemonOptions{config: path})
	keep := d.waitServer(ctx, t, "keep", mcpdv1.ServerState_SERVER_STATE_READY)
	d.waitServer(ctx, t, "needs-file", mcpdv1.ServerState_SERVER_STATE_FAILED)

	if err := os.WriteFile(ready, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d.send(t, syscall.SIGHUP)
	d.waitServer(ctx, t, "needs-file", mcpdv1.ServerState_SERVER_STATE_READY)
	if now := d.waitServer(ctx, t, "keep", mcpdv1.ServerState_SERVER_STATE_READY); now.GetPid() != keep.GetPid() {
		t.Errorf("server keep: pid %d after the reload, want it untouched (%d)", now.GetPid(), keep.GetPid())
	}
}

func TestReloadHoldsNoOtherServer(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	mark := filepath.Join(shortTempDir(t), "stopping")
	entry := func(env map[string]string) map[string]any {
		env[fakeServerEnv], env[fakeMarkEnv] = fakeStubborn, mark
		return map[string]any{"command": testBinary(t), "env": env}
	}
	path := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{"stubborn": entry(map[string]string{})}}))
	// The stop takes twice the grace: long enough to be caught in it.
	d := startDaemon(ctx, t, daemonOptions{config: path, args: []string{"--stop-grace", "12s"}})
	pid := int(d.waitServer(ctx, t, "stubborn", mcpdv1.ServerState_SERVER_STATE_READY).GetPid())

	replaceFile(t, path, mustJSON(t, map[string]any{"mcpServers": map[string]any{"stubborn": entry(map[string]string{fakeValueEnv: "v2"})}}))
	d.send(t, syscall.SIGHUP)
	poll(ctx, t, "the reload stops the server", func() (bool, error) {
		_, err := os.Stat(mark)
		return err == nil, nil
	})
	other := d.connectFake(ctx, t, "other", fakeNoisy)
	if other.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Errorf("server added during the reload: %v %s, want READY", other.GetState(), other.GetLastError())
	}
	if processGone(pid) {
		t.Errorf("ConnectServer of another server answered only once the reload had stopped the stubborn server")
	}
	// Stop now: a second signal kills the stubborn server at once.
	d.send(t, syscall.SIGTERM)
	poll(ctx, t, "mcpd begins shutting down", func() (bool, error) {
		return strings.Contains(d.log.String(), "shutting down"), nil
	})
	d.send(t, syscall.SIGTERM)
	d.wait(t, syscall.SIGTERM)
}

// TestReloadAnnouncesChangedTools: a reload that changes which tools a
// server offers (here its toolsDeny) is a change of its tool list, as a
// tools/list_changed from the server would be: a stream of tool list
// changes hears of it once the server is ready again. A restart that
// brings back the same tools announces nothing.
func TestReloadAnnouncesChangedTools(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	demo := map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}}
	path := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{"demo": demo}}))
	d := startDaemon(ctx, t, daemonOptions{config: path})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	sub, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{
		Servers: []string{"demo"},
		Kinds:   []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_TOOLS_CHANGED, mcpdv1.EventKind_EVENT_KIND_SERVER_STATE},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Header(); err != nil { // the stream is open: what follows is on it
		t.Fatal(err)
	}
	untilReady := func() {
		t.Helper()
		for {
			m, err := sub.Recv()
			if err != nil {
				t.Fatalf("waiting for demo to be ready: %v", err)
			}
			if m.GetEvent().GetServerState().GetState() == mcpdv1.ServerState_SERVER_STATE_READY {
				return
			}
		}
	}
	// The next event after a restart: a restart's first state comes after
	// whatever the previous session published when it became ready.
	nextAfterRestart := func() *mcpdv1.Event {
		t.Helper()
		if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "demo"}); err != nil {
			t.Fatalf("RestartServer: %v", err)
		}
		m, err := sub.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return m.GetEvent()
	}

	denied := maps.Clone(demo)
	denied["toolsDeny"] = []string{"weather"}
	replaceFile(t, path, mustJSON(t, map[string]any{"mcpServers": map[string]any{"demo": denied}}))
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	untilReady()
	if ev := nextAfterRestart(); ev.GetToolsChanged() == nil {
		t.Errorf("after a reload that denied a tool: got %v, want tools_changed", ev)
	}
	tools, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.GetTools() {
		if tool.GetToolName() == "weather" {
			t.Errorf("ListTools after the reload lists the denied tool %s", tool.GetName())
		}
	}
	untilReady()
	if ev := nextAfterRestart(); ev.GetServerState().GetState() != mcpdv1.ServerState_SERVER_STATE_CONNECTING {
		t.Errorf("after a restart with the same tools: got %v, want the next restart's CONNECTING and no tools_changed", ev)
	}
}

// TestReloadShowsNewTemplate moves a secret argument of a server's entry
// into a ${VAR} template, as an operator does on finding it in ListServers:
// after the reload, the server's status shows the template, not the
// secret it showed before, although the expanded value is the same.
func TestReloadShowsNewTemplate(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const secret = "s3cr3t-literal-token"
	entry := func(arg string, extra map[string]any) string {
		e := map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server", arg}}
		maps.Copy(e, extra)
		return mustJSON(t, map[string]any{"mcpServers": map[string]any{"s": e}})
	}
	path := writeConfig(t, entry(secret, nil))
	d := startDaemon(ctx, t, daemonOptions{config: path, env: []string{"MCPD_E2E_TOKEN=" + secret}})
	if s := d.waitServer(ctx, t, "s", mcpdv1.ServerState_SERVER_STATE_READY); !slices.Contains(s.GetArgs(), secret) {
		t.Fatalf("args: got %q, want the literal argument shown", s.GetArgs())
	}

	// The ignored field marks the reload as applied.
	replaceFile(t, path, entry("${MCPD_E2E_TOKEN}", map[string]any{"description": "reloaded"}))
	d.send(t, syscall.SIGHUP)
	var s *mcpdv1.Server
	poll(ctx, t, "the reload reaches the server", func() (bool, error) {
		resp, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "s"})
		s = resp.GetServer()
		return s.GetState() == mcpdv1.ServerState_SERVER_STATE_READY && len(s.GetConfigWarnings()) > 0, err
	})
	if slices.Contains(s.GetArgs(), secret) || !slices.Contains(s.GetArgs(), "${MCPD_E2E_TOKEN}") {
		t.Errorf("args after the reload: got %q, want the template ${MCPD_E2E_TOKEN} instead of its value", s.GetArgs())
	}
}
