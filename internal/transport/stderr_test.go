package transport

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
)

// TestStderrLogRateLimit floods stderr with many times a pipe's buffer:
// the child runs to its end (mcpd drains the pipe whatever the rate), the
// log gets the default burst and then the default rate, a warning counts
// every line the log did not get, and the tail still ends with the last
// line.
func TestStderrLogRateLimit(t *testing.T) {
	ctx := testContext(t)
	const lines = 20000 // about 300 KB; a pipe holds 64 KiB
	var logs syncBuffer
	var counted atomic.Int64
	start := time.Now()
	p := startFake(t, "script", map[string]string{fakeFloodEnv: strconv.Itoa(lines), fakeExitEnv: "0"},
		&ProcessOptions{Logger: zerolog.New(&logs), StopGrace: gracefulStopGrace, OnStderrLine: func() { counted.Add(1) }})
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatal("the child did not exit: blocked on its stderr?")
	}
	if err := p.Stop(ctx); err != nil { // waits for the stderr reader
		t.Fatalf("Stop: %v", err)
	}
	// The bucket refilled for no longer than the test ran: a bound that a
	// slow machine raises, never one it can break.
	elapsed := time.Since(start)

	logged, dropped, warnings := 0, 0, 0
	for _, e := range logs.entries(t) {
		switch {
		case e["stream"] == "stderr":
			logged++
		case e["level"] == "warn" && e["dropped"] != nil:
			warnings++
			n, _ := e["dropped"].(float64)
			dropped += int(n)
		}
	}
	if most := DefaultStderrLogBurst + int(DefaultStderrLogRate*elapsed.Seconds()) + 1; logged > most {
		t.Errorf("stderr lines logged: got %d of %d in %v, want at most %d (the burst, then %d a second)",
			logged, lines, elapsed, most, DefaultStderrLogRate)
	}
	if logged < DefaultStderrLogBurst {
		t.Errorf("stderr lines logged: got %d, want at least the burst of %d", logged, DefaultStderrLogBurst)
	}
	if logged+dropped != lines || warnings == 0 {
		t.Errorf("logged %d and reported %d dropped in %d warnings, want %d lines in all, the dropped ones reported",
			logged, dropped, warnings, lines)
	}
	if got := counted.Load(); got != lines {
		t.Errorf("OnStderrLine: called %d times, want every line (%d)", got, lines)
	}
	if tail := p.StderrTail(); len(tail) == 0 || tail[len(tail)-1] != "stderr line "+strconv.Itoa(lines) {
		t.Errorf("StderrTail ends with %q, want the last line", tail[max(0, len(tail)-3):])
	}
}

// TestStderrLogLimitShared runs two processes on one limiter, as a server
// and its restart: the second gets what the first left of the burst.
func TestStderrLogLimitShared(t *testing.T) {
	limit := rate.NewLimiter(0, 5) // a burst of 5 that never refills
	var dropped atomic.Int64
	var logged []int
	for range 2 {
		logged = append(logged, stderrLinesLogged(t, 3, limit, func() { dropped.Add(1) }))
	}
	if diff := cmp.Diff([]int{3, 2}, logged); diff != "" {
		t.Errorf("stderr lines logged by each process (-want +got):\n%s", diff)
	}
	if got := dropped.Load(); got != 1 {
		t.Errorf("OnStderrLineDropped: called %d times, want 1", got)
	}
	// rate.Inf logs every line.
	if n := stderrLinesLogged(t, 1000, rate.NewLimiter(rate.Inf, 0), nil); n != 1000 {
		t.Errorf("without a limit: %d stderr lines logged, want 1000", n)
	}
}

// stderrLinesLogged runs a child that writes lines to stderr and exits,
// with limit as its log limit, and counts the stderr lines logged.
func stderrLinesLogged(t *testing.T, lines int, limit *rate.Limiter, onDrop func()) int {
	t.Helper()
	var logs syncBuffer
	p := startFake(t, "script", map[string]string{fakeFloodEnv: strconv.Itoa(lines), fakeExitEnv: "0"}, &ProcessOptions{
		Logger: zerolog.New(&logs), StopGrace: gracefulStopGrace,
		StderrLogLimit: limit, OnStderrLineDropped: onDrop,
	})
	<-p.Done()
	if err := p.Stop(testContext(t)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	n := 0
	for _, e := range logs.entries(t) {
		if e["stream"] == "stderr" {
			n++
		}
	}
	return n
}

// fakeTimers stands in for time.AfterFunc.
type fakeTimers struct {
	delays []time.Duration
	funcs  []func()
	stops  int
}

func (f *fakeTimers) after(d time.Duration, fn func()) func() bool {
	f.delays = append(f.delays, d)
	f.funcs = append(f.funcs, fn)
	return func() bool { f.stops++; return true }
}

// TestStderrGate drives the gate on a fake clock: the burst, the refill,
// one report per period whatever the lines dropped meanwhile, and the
// report of the rest at close, after which a late timer reports nothing.
func TestStderrGate(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var timers fakeTimers
	var reports []int
	drops := 0
	g := newLogGate(rate.NewLimiter(2, 3), func(n int) { reports = append(reports, n) }, func() { drops++ })
	g.now = func() time.Time { return now }
	g.after = timers.after

	admitted := func(lines int) int {
		n := 0
		for range lines {
			if g.admit() {
				n++
			}
		}
		return n
	}
	if got := admitted(10); got != 3 {
		t.Errorf("a burst of 10 lines: %d admitted, want 3", got)
	}
	if len(timers.funcs) != 1 || timers.delays[0] != stderrDropReport {
		t.Fatalf("after the first drop: timers %v, want one of %v", timers.delays, stderrDropReport)
	}
	now = now.Add(time.Second)
	if got := admitted(5); got != 2 {
		t.Errorf("a second later: %d of 5 lines admitted, want 2", got)
	}
	if len(timers.funcs) != 1 || len(reports) != 0 {
		t.Errorf("before the report is due: %d timers and reports %v, want 1 and none", len(timers.funcs), reports)
	}
	timers.funcs[0]()
	if diff := cmp.Diff([]int{10}, reports); diff != "" {
		t.Errorf("reports when due (-want +got):\n%s", diff)
	}
	// Once the flood eases, lines get through again; no drop, no report.
	now = now.Add(10 * time.Second)
	if got := admitted(3); got != 3 {
		t.Errorf("after a quiet while: %d of 3 lines admitted, want 3", got)
	}
	if got := admitted(2); got != 0 {
		t.Errorf("past the burst again: %d of 2 lines admitted, want 0", got)
	}
	if len(timers.funcs) != 2 {
		t.Fatalf("after the next drop: %d timers, want 2", len(timers.funcs))
	}
	g.close()
	if timers.stops != 1 {
		t.Errorf("close: %d timers stopped, want 1", timers.stops)
	}
	timers.funcs[1]() // fired before close could stop it
	if diff := cmp.Diff([]int{10, 2}, reports); diff != "" {
		t.Errorf("reports after close (-want +got):\n%s", diff)
	}
	if drops != 12 {
		t.Errorf("onDrop: called %d times, want 12", drops)
	}
}
