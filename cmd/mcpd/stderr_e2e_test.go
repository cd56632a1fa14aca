package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestStderrFlood connects a server that floods stderr as it starts:
// mcpd reads it all (the server gets to serve), logs the default burst
// and then the default rate of its lines, counts the others in warnings
// and in mcpd_server_stderr_lines_dropped_total, and still shows the
// newest lines in the stderr tail.
func TestStderrFlood(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--metrics-listen", addr}})
	start := time.Now()
	s := d.connectFake(ctx, t, "flood", fakeStderrFlood)
	if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("state: got %v (%s), want READY: mcpd stopped reading the flood?", s.GetState(), s.GetLastError())
	}
	_, dropped := wantLogRateLimited(ctx, t, "stderr lines", start, func() (int, int) { return stderrLogCounts(t, d.log.String(), "flood") })
	server := map[string]string{"server": "flood"}
	m := scrapeMetrics(ctx, t, addr)
	m.want(t, "mcpd_server_stderr_lines_total", server, fakeFloodLines)
	m.want(t, "mcpd_server_stderr_lines_dropped_total", server, float64(dropped))

	resp, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "flood"})
	if err != nil {
		t.Fatal(err)
	}
	tail := resp.GetServer().GetStderrTail()
	if len(tail) == 0 || tail[len(tail)-1] != fakeFloodLine(fakeFloodLines) {
		t.Errorf("stderr_tail ends with %q, want the last line %q", tail[max(0, len(tail)-3):], fakeFloodLine(fakeFloodLines))
	}
	// The server still answers.
	if got := text(d.mustCall(ctx, t, "mcp__flood__echo", map[string]any{"text": "after the flood"})); got != "after the flood" {
		t.Errorf("echo: got %q", got)
	}
}

// TestStderrLogRateOff: --stderr-log-rate 0 logs every stderr line.
func TestStderrLogRateOff(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--stderr-log-rate", "0"}})
	if s := d.connectFake(ctx, t, "flood", fakeStderrFlood); s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("state: got %v (%s), want READY", s.GetState(), s.GetLastError())
	}
	poll(ctx, t, "every stderr line logged", func() (bool, error) {
		logged, dropped := stderrLogCounts(t, d.log.String(), "flood")
		if dropped != 0 {
			t.Fatalf("%d stderr lines reported dropped with no limit", dropped)
		}
		return logged == fakeFloodLines, fmt.Errorf("%d of %d logged", logged, fakeFloodLines)
	})
}

// stderrLogCounts counts the stderr lines of server in mcpd's JSON log,
// and the lines its warnings report dropped.
func stderrLogCounts(t *testing.T, log, server string) (logged, dropped int) {
	t.Helper()
	for line := range strings.Lines(log) {
		if !strings.Contains(line, `"server":"`+server+`"`) {
			continue
		}
		var e struct {
			Server, Stream, Level string
			Dropped               int
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Server != server {
			continue // not mcpd's JSON: another process's line on the same output
		}
		switch {
		case e.Stream == "stderr":
			logged++
		case e.Level == "warn":
			dropped += e.Dropped
		}
	}
	return logged, dropped
}

// TestStdoutNoiseFlood connects a server that writes a flood of lines
// that are no JSON-RPC to stdout as it starts (its logging on the wrong
// stream): mcpd skips them all (the server gets to serve), and its log
// warns of them at the rate stderr lines reach it, a burst and then a rate,
// counting the others in a warning, rather than one warning per line as
// fast as the server writes.
func TestStdoutNoiseFlood(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	start := time.Now()
	s := d.connectFake(ctx, t, "noise", fakeStdoutFlood)
	if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("state: got %v (%s), want READY: mcpd stopped reading the flood?", s.GetState(), s.GetLastError())
	}
	wantLogRateLimited(ctx, t, "skipped stdout lines", start, func() (int, int) { return skippedLogCounts(t, d.log.String(), "noise") })
	if got := text(d.mustCall(ctx, t, "mcp__noise__echo", map[string]any{"text": "after the flood"})); got != "after the flood" {
		t.Errorf("echo: got %q", got)
	}
}

// skippedLogCounts counts the warnings of skipped stdout lines of server
// in mcpd's JSON log, and the lines its warnings report left out.
func skippedLogCounts(t *testing.T, log, server string) (logged, dropped int) {
	t.Helper()
	for line := range strings.Lines(log) {
		if !strings.Contains(line, `"server":"`+server+`"`) {
			continue
		}
		var e struct {
			Server, Stream, Level, Message string
			Dropped                        int
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Server != server || e.Level != "warn" {
			continue
		}
		switch {
		case e.Message == "skipping stdout line that is not JSON-RPC":
			logged++
		case e.Stream == "stdout":
			dropped += e.Dropped
		}
	}
	return logged, dropped
}

// wantLogRateLimited waits until each of a fake server's fakeFloodLines
// lines was logged or reported dropped (counts reads both from mcpd's
// log; the lines over the limit are reported when the flood has eased,
// within a few seconds), then checks that the log took them at the
// defaults of --stderr-log-burst and --stderr-log-rate: the burst, then
// the rate over the time since start. The bucket refilled for no longer
// than the test ran: a bound that a slow machine raises, never one it can
// break. It returns the counts.
func wantLogRateLimited(ctx context.Context, t *testing.T, what string, start time.Time, counts func() (logged, dropped int)) (logged, dropped int) {
	t.Helper()
	poll(ctx, t, "every one of the "+what+" logged or reported dropped", func() (bool, error) {
		logged, dropped = counts()
		return logged+dropped == fakeFloodLines, fmt.Errorf("%d logged, %d reported dropped of %d", logged, dropped, fakeFloodLines)
	})
	elapsed := time.Since(start)
	const burst, rate = 200, 20
	if most := burst + int(rate*elapsed.Seconds()) + 1; logged > most {
		t.Errorf("%s logged: got %d of %d in %v, want at most %d (a burst of %d, then %d a second)",
			what, logged, fakeFloodLines, elapsed, most, burst, rate)
	}
	if logged < burst {
		t.Errorf("%s logged: got %d, want at least the burst of %d", what, logged, burst)
	}
	return logged, dropped
}
