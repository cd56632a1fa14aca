package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestMisbehavingServers connects fake stdio servers (this test binary in
// a fake mode) that crash, ignore or die on the era probe, print noise, or
// are slow, and checks what an agent sees of each.
func TestMisbehavingServers(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--probe-timeout", "1s"}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	t.Run("ExitAtStart", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t) // its own: a parallel subtest may wait for a slot
		s := d.connectFake(ctx, t, "exit-at-start", fakeExitAtStart)
		if s.GetState() != mcpdv1.ServerState_SERVER_STATE_FAILED {
			t.Errorf("state: got %v, want FAILED", s.GetState())
		}
		if !strings.Contains(s.GetLastError(), "exit status 3") {
			t.Errorf("last_error: got %q, want it to mention exit status 3", s.GetLastError())
		}
		if !strings.Contains(strings.Join(s.GetStderrTail(), "\n"), fakeStartupError) {
			t.Errorf("stderr_tail: got %q, want the line %q", s.GetStderrTail(), fakeStartupError)
		}
		// Its health says so, its tools are not listed, and calling one is
		// UNAVAILABLE.
		h, err := d.health.Check(ctx, &healthpb.HealthCheckRequest{Service: "mcpd.server/exit-at-start"})
		if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("health of a failed server: got %v, %v; want NOT_SERVING", h.GetStatus(), err)
		}
		_, err = d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "exit-at-start"})
		wantCode(t, err, codes.Unavailable)
		_, err = d.call(ctx, t, "mcp__exit-at-start__echo", map[string]any{"text": "x"}, 0)
		wantCode(t, err, codes.Unavailable)
	})

	t.Run("RejectsInitialize", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t) // its own: a parallel subtest may wait for a slot
		s := d.connectFake(ctx, t, "reject-all", fakeRejectAll)
		if s.GetState() != mcpdv1.ServerState_SERVER_STATE_FAILED {
			t.Errorf("state: got %v, want FAILED", s.GetState())
		}
		if !strings.Contains(s.GetLastError(), rejectMessage+" initialize") {
			t.Errorf("last_error: got %q, want the server's answer %q", s.GetLastError(), rejectMessage+" initialize")
		}
	})

	t.Run("ExitMidCall", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t) // its own: a parallel subtest may wait for a slot
		s := d.connectFake(ctx, t, "exit-mid-call", fakeExitMidCall)
		if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
			t.Fatalf("state: got %v (%s), want READY", s.GetState(), s.GetLastError())
		}
		// A long call timeout: the crash, not a deadline, must end the call
		// (the test context catches a hang).
		_, err := d.call(ctx, t, "mcp__exit-mid-call__crash", nil, time.Minute)
		wantCode(t, err, codes.Unavailable)
		s = d.waitServer(ctx, t, "exit-mid-call", mcpdv1.ServerState_SERVER_STATE_FAILED, mcpdv1.ServerState_SERVER_STATE_RECONNECTING)
		if !strings.Contains(s.GetLastError(), "exit status 1") {
			t.Errorf("last_error: got %q, want it to mention exit status 1", s.GetLastError())
		}
		if !strings.Contains(strings.Join(s.GetStderrTail(), "\n"), "crashing mid-call") {
			t.Errorf("stderr_tail: got %q, want the crash line", s.GetStderrTail())
		}
	})

	// Servers that do not speak 2026-07-28 are reached with initialize.
	for _, tc := range []struct{ name, mode, stderr string }{
		{"ignore-discover", fakeIgnoreDiscover, "fake: ignoring server/discover"},
		{"die-on-discover", fakeDieOnDiscover, "fake: unknown first message server/discover, exiting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t) // its own: a parallel subtest may wait for a slot
			s := d.connectFake(ctx, t, tc.name, tc.mode)
			if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
				t.Fatalf("state: got %v (%s), want READY", s.GetState(), s.GetLastError())
			}
			if s.GetProtocolVersion() != "2025-11-25" {
				t.Errorf("protocol_version: got %q, want the legacy 2025-11-25", s.GetProtocolVersion())
			}
			resp := d.mustCall(ctx, t, "mcp__"+tc.name+"__echo", map[string]any{"text": "legacy"})
			if text(resp) != "legacy" {
				t.Errorf("echo: got %q, want %q", text(resp), "legacy")
			}
			// The probe really reached the fake, which misbehaved: its
			// stderr line is in mcpd's log under the server's name.
			if !logHasLine(d.log.String(), `"server":"`+tc.name+`"`, tc.stderr) {
				t.Errorf("mcpd log: no line of server %s with %q", tc.name, tc.stderr)
			}
		})
	}

	t.Run("Noisy", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t) // its own: a parallel subtest may wait for a slot
		s := d.connectFake(ctx, t, "noisy", fakeNoisy)
		if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
			t.Fatalf("state: got %v (%s), want READY", s.GetState(), s.GetLastError())
		}
		for _, msg := range []string{"one", "two"} {
			resp := d.mustCall(ctx, t, "mcp__noisy__echo", map[string]any{"text": msg})
			if text(resp) != msg {
				t.Errorf("echo: got %q, want %q", text(resp), msg)
			}
		}
		// The noise reached mcpd, which skipped it (and says so).
		if !logHasLine(d.log.String(), `"server":"noisy"`, fakeNoise) {
			t.Errorf("mcpd log: no line of server noisy with %q", fakeNoise)
		}
	})

	t.Run("Slow", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t) // its own: a parallel subtest may wait for a slot
		s := d.connectFake(ctx, t, "slow", fakeSlow)
		if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
			t.Fatalf("state: got %v (%s), want READY", s.GetState(), s.GetLastError())
		}
		_, err := d.call(ctx, t, "mcp__slow__sleep", map[string]any{"ms": 30000, "tag": "timeout"}, 100*time.Millisecond)
		wantCode(t, err, codes.DeadlineExceeded)
		// The timeout reached the server as a cancellation.
		d.waitStderr(ctx, t, "slow", fakeSleepCancelled+" timeout")
		resp, err := d.call(ctx, t, "mcp__slow__sleep", map[string]any{"ms": 1}, 0)
		if err != nil || text(resp) != "slept 1ms" {
			t.Errorf("sleep after a timeout: got %q, %v; want %q", text(resp), err, "slept 1ms")
		}

		// So does a caller that goes away mid-call.
		args, err := structpb.NewStruct(map[string]any{"ms": 30000, "tag": "caller"})
		if err != nil {
			t.Fatal(err)
		}
		callCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := d.hub.CallTool(callCtx, &mcpdv1.CallToolRequest{Name: "mcp__slow__sleep", Arguments: args})
			errc <- err
		}()
		d.waitStderr(ctx, t, "slow", fakeSleepStarted+" caller")
		cancel()
		wantCode(t, <-errc, codes.Canceled)
		d.waitStderr(ctx, t, "slow", fakeSleepCancelled+" caller")
		if s := d.waitServer(ctx, t, "slow", mcpdv1.ServerState_SERVER_STATE_READY); s.GetPid() == 0 {
			t.Errorf("pid: got 0 for a ready server")
		}
	})

	t.Run("CommandNotFound", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t) // its own: a parallel subtest may wait for a slot
		s := d.connect(ctx, t, "missing", "/nonexistent/mcpd-e2e-no-such-server", nil, nil)
		if s.GetState() != mcpdv1.ServerState_SERVER_STATE_FAILED {
			t.Errorf("state: got %v, want FAILED", s.GetState())
		}
		if le := s.GetLastError(); !strings.Contains(le, "/nonexistent/mcpd-e2e-no-such-server") || !strings.Contains(le, "no such file") {
			t.Errorf("last_error: got %q, want the command and 'no such file'", le)
		}
	})

	t.Run("InvalidName", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t) // its own: a parallel subtest may wait for a slot
		for _, name := range []string{"bad name", "a__b", "ends_", ""} {
			_, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{
				Server: stdioConfig(name, testBinary(t), nil, map[string]string{fakeServerEnv: fakeNoisy}),
			})
			wantCode(t, err, codes.InvalidArgument)
			// Nothing was added under the name (a missing name is itself
			// a bad request).
			_, err = d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: name})
			if name == "" {
				wantCode(t, err, codes.InvalidArgument)
			} else {
				wantCode(t, err, codes.NotFound)
			}
		}
		_, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{Name: "no-transport"}})
		wantCode(t, err, codes.InvalidArgument)
	})

	t.Run("Duplicate", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t) // its own: a parallel subtest may wait for a slot
		before, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "demo"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{
			Server: stdioConfig("demo", testBinary(t), nil, map[string]string{fakeServerEnv: fakeNoisy}),
		})
		wantCode(t, err, codes.AlreadyExists)
		after, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "demo"})
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(before.GetServer(), after.GetServer()) {
			t.Errorf("demo changed after a refused duplicate:\nbefore %v\nafter  %v", before.GetServer(), after.GetServer())
		}
		resp := d.mustCall(ctx, t, "mcp__demo__echo", map[string]any{"message": "still demo"})
		if text(resp) != "still demo" {
			t.Errorf("demo echo: got %q", text(resp))
		}
	})

	t.Run("Replace", func(t *testing.T) {
		t.Parallel()
		ctx := testContext(t) // its own: a parallel subtest may wait for a slot
		first := d.connectFake(ctx, t, "replaced", fakeNoisy)
		resp, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{
			Server:  stdioConfig("replaced", testBinary(t), nil, map[string]string{fakeServerEnv: fakeSlow}),
			Replace: true,
		})
		if err != nil {
			t.Fatalf("ConnectServer replace: %v", err)
		}
		second := resp.GetServer()
		if second.GetState() != mcpdv1.ServerState_SERVER_STATE_READY || second.GetPid() == first.GetPid() {
			t.Errorf("replaced: got state %v pid %d, want READY with a new pid (old %d)", second.GetState(), second.GetPid(), first.GetPid())
		}
		if second.GetServerInfo().GetName() != "fake-slow" {
			t.Errorf("replaced server_info: got %q, want fake-slow", second.GetServerInfo().GetName())
		}
		// Replacing stops the old process before the new one starts.
		reapCtx, cancel := context.WithTimeout(ctx, reapTimeout)
		defer cancel()
		poll(reapCtx, t, "old process of the replaced server exits", func() (bool, error) {
			return processGone(int(first.GetPid())), nil
		})
	})
}

// waitStderr polls GetServer until the server's stderr tail holds line.
func (d *daemon) waitStderr(ctx context.Context, t *testing.T, server, line string) {
	t.Helper()
	poll(ctx, t, fmt.Sprintf("stderr line %q of server %q", line, server), func() (bool, error) {
		resp, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: server})
		if err != nil {
			return false, err
		}
		return slices.Contains(resp.GetServer().GetStderrTail(), line), nil
	})
}

// logHasLine reports whether one line of log contains every one of parts.
func logHasLine(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// TestDisconnectDuringCall disconnects a server while a call to it is in
// flight: the call must end with an error instead of holding the
// disconnect until the tool finishes.
func TestDisconnectDuringCall(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	errc := make(chan error, 1)
	go func() {
		// Not d.call: t must not be used to fail from this goroutine.
		args, _ := structpb.NewStruct(map[string]any{"steps": 1, "delay_ms": 20000})
		_, err := d.hub.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__demo__slow", Arguments: args})
		errc <- err
	}()
	// Let the call reach the server; not a timing assertion.
	timer := time.NewTimer(300 * time.Millisecond)
	select {
	case <-timer.C:
	case err := <-errc:
		t.Fatalf("slow call ended early: %v", err)
	}
	if _, err := d.hub.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: "demo"}); err != nil {
		t.Fatalf("DisconnectServer: %v", err)
	}
	err := <-errc
	wantCode(t, err, codes.Unavailable)
	_, err = d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "demo"})
	wantCode(t, err, codes.NotFound)
}

// TestIconsReachAgent: a server's description and icons, and its tools'
// icons, reach the agent.
func TestIconsReachAgent(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	info := d.connectFake(ctx, t, "f", fakeNote).GetServerInfo()
	want := &mcpdv1.Icon{Src: fakeIcons[0].Source, MimeType: "image/png", Sizes: []string{"48x48"}, Theme: "dark"}
	if info.GetDescription() != fakeDescription || len(info.GetIcons()) != 1 || !proto.Equal(info.GetIcons()[0], want) {
		t.Errorf("server_info: got %v, want the description %q and the icon %v", info, fakeDescription, want)
	}
	tools, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "f"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.GetTools() {
		if tool.GetToolName() == "echo" && (len(tool.GetIcons()) != 1 || !proto.Equal(tool.GetIcons()[0], want)) {
			t.Errorf("echo's icons: got %v, want %v", tool.GetIcons(), want)
		}
	}
}
