package main

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestCallsAcrossServerKills makes many concurrent calls, more than
// --max-inflight-calls, to a server that holds every call until the test
// releases it, and SIGKILLs the server's process group twice while calls
// are in flight and others are queued. It counts how each call ended:
// calls to the read-only and the idempotent tool all succeed (the ones the
// kills interrupted were sent again on the next server), queued calls all
// succeed, and only the calls to the plain tool that a killed server had
// started fail, with UNAVAILABLE saying the call may have run. No call
// runs twice unless its tool is read-only or idempotent.
func TestCallsAcrossServerKills(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const (
		slots   = 24 // --max-inflight-calls
		perTool = 80
		server  = "gated"
	)
	tools := []string{gatedReadOnly, gatedIdempotent, gatedPlain}
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{
		"--max-inflight-calls", strconv.Itoa(slots), "--queue-timeout", "10m",
		"--restart-backoff", "20ms", "--crash-loop-restarts", "10",
	}})
	dir := t.TempDir()
	s := d.connect(ctx, t, server, testBinary(t), nil, map[string]string{fakeServerEnv: fakeGated, fakeGateDirEnv: dir})
	if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("gated server: %v %s", s.GetState(), s.GetLastError())
	}

	type outcome struct {
		tool, tag string
		resp      *mcpdv1.CallToolResponse
		err       error
	}
	total := len(tools) * perTool
	results := make(chan outcome, total)
	var pending atomic.Int64
	pending.Store(int64(total))
	for i := range perTool {
		for _, tool := range tools {
			tag := fmt.Sprintf("%s-%d", tool, i)
			go func() {
				defer pending.Add(-1)
				resp, err := d.call(ctx, t, "mcp__"+server+"__"+tool, map[string]any{"tag": tag}, 10*time.Minute)
				results <- outcome{tool: tool, tag: tag, resp: resp, err: err}
			}()
		}
	}

	// startsOn waits until process pid has started n calls and returns
	// them; calls that end early mean the calls were not waiting for it.
	startsOn := func(pid, n int) []gatedStart {
		t.Helper()
		var mine []gatedStart
		poll(ctx, t, fmt.Sprintf("%d calls started by server process %d", n, pid), func() (bool, error) {
			all, err := readGatedStarts(dir)
			if err != nil {
				t.Fatal(err)
			}
			mine = mine[:0]
			for _, s := range all {
				if s.pid == pid {
					mine = append(mine, s)
				}
			}
			if len(mine) > n {
				t.Fatalf("server process %d started %d calls, more than the %d expected", pid, len(mine), n)
			}
			if len(mine) < n && pending.Load() == 0 {
				t.Fatalf("every call ended while server process %d had started only %d of %d", pid, len(mine), n)
			}
			return len(mine) == n, fmt.Errorf("%d started", len(mine))
		})
		return mine
	}
	kill := func(pid int) int {
		t.Helper()
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill server process group %d: %v", pid, err)
		}
		var next int
		poll(ctx, t, "the server back with a new process", func() (bool, error) {
			resp, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: server})
			if err != nil {
				return false, err
			}
			s := resp.GetServer()
			next = int(s.GetPid())
			return s.GetState() == mcpdv1.ServerState_SERVER_STATE_READY && next != 0 && next != pid,
				fmt.Errorf("state %v, pid %d, last error %q", s.GetState(), next, s.GetLastError())
		})
		return next
	}

	// First kill: the first process holds exactly as many calls as there
	// are slots, all started; the rest are queued in mcpd.
	pid1 := int(s.GetPid())
	interrupted := startsOn(pid1, slots)
	pid2 := kill(pid1)
	// The second process gets the interrupted read-only and idempotent
	// calls again and queued calls in the freed slots. Once they have all
	// finished, it holds as many fresh calls; then it is killed too.
	startsOn(pid2, slots)
	if err := releaseGated(dir, pid2, slots); err != nil {
		t.Fatal(err)
	}
	for _, s := range startsOn(pid2, 2*slots) {
		if s.index >= slots {
			interrupted = append(interrupted, s)
		}
	}
	pid3 := kill(pid2)
	if err := releaseGated(dir, pid3, 1<<30); err != nil {
		t.Fatal(err)
	}

	killed := map[string]bool{}
	for _, s := range interrupted {
		killed[s.tag] = true
	}
	var ok, resent, failed int
	for range total {
		r := <-results
		repeatable := r.tool != gatedPlain
		if r.err == nil {
			ok++
			if got := text(r.resp); got != r.tag {
				t.Errorf("%s: got %q, want %q", r.tag, got, r.tag)
			}
			if killed[r.tag] && !repeatable {
				t.Errorf("%s: succeeded, but its server was killed while it ran and the tool is not idempotent", r.tag)
			}
			if killed[r.tag] {
				resent++
			}
			continue
		}
		failed++
		if repeatable || !killed[r.tag] {
			t.Errorf("%s (killed while running: %v): got %v, want a result", r.tag, killed[r.tag], r.err)
			continue
		}
		st := wantCode(t, r.err, codes.Unavailable)
		if !strings.Contains(st.Message(), "may have run") {
			t.Errorf("%s: message %q does not say the call may have run", r.tag, st.Message())
		}
		if info := errorInfo(st); info.GetReason() != "CALL_MAY_HAVE_RUN" || info.GetMetadata()["tool"] != gatedPlain || info.GetMetadata()["server"] != server {
			t.Errorf("%s: ErrorInfo %v, want reason CALL_MAY_HAVE_RUN naming the server and tool", r.tag, info)
		}
	}
	t.Logf("%d calls, %d in flight at a kill: %d results (%d of them sent again), %d failed", total, len(interrupted), ok, resent, failed)

	// A call runs twice only if a kill interrupted it and its tool is
	// read-only or idempotent; every call ran.
	all, err := readGatedStarts(dir)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, s := range all {
		runs[s.tag]++
	}
	for i := range perTool {
		for _, tool := range tools {
			tag := fmt.Sprintf("%s-%d", tool, i)
			want := 1
			if killed[tag] && tool != gatedPlain {
				want = 2
			}
			if runs[tag] != want {
				t.Errorf("%s ran %d times, want %d", tag, runs[tag], want)
			}
		}
	}
}

// errorInfo returns the status's ErrorInfo detail, or nil.
func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}
