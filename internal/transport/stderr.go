package transport

import (
	"bufio"
	"bytes"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The defaults of the token bucket that bounds the stderr lines of one
// server that reach the log (ProcessOptions.StderrLogLimit). The burst
// lets a start-up through whole (an npx or uvx install, a banner, a
// Python traceback of a failed import: tens to a hundred-odd lines) and
// most of one crash's stack trace; the rate is above what a healthy server
// writes at its default log level, yet holds a flood (a crash loop, a
// debug flag, a loop printing a warning) to about 20 KiB/s of log per
// server, lines being at most maxStderrLineBytes, instead of as fast as
// the child writes and mcpd can copy, which is megabytes a second and a
// core.
const (
	DefaultStderrLogRate  = 20 // lines per second
	DefaultStderrLogBurst = 200
)

// stderrDropReport is the least time between two warnings that stderr
// lines were dropped from the log: a flood is reported once per period
// while it lasts, and at most this long after it ends.
const stderrDropReport = 5 * time.Second

// readStderr re-emits the child's stderr to the log line by line and keeps
// the bounded tail. It returns at EOF (every holder of the pipe exited) or
// when Stop closes our read end. It reads on whatever the rate: a line over
// the log's rate limit is dropped from the log, never left in the pipe,
// where it would block the child.
func (p *Process) readStderr() {
	defer close(p.stderrDone)
	defer p.stderrLog.close()
	r := bufio.NewReaderSize(p.stderr, 4*maxStderrLineBytes)
	var long [maxStderrLineBytes]byte
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// Keep the head of an overlong line and drop the rest of it.
			n := copy(long[:], line)
			for err == bufio.ErrBufferFull {
				_, err = r.ReadSlice('\n')
			}
			line = long[:n]
		}
		p.stderrLine(line)
		if err != nil {
			return
		}
	}
}

func (p *Process) stderrLine(line []byte) {
	line = bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if len(line) > maxStderrLineBytes {
		line = line[:maxStderrLineBytes]
	}
	// Truncation may split a rune; drop the fragment rather than log garbage.
	s := strings.ToValidUTF8(string(line), "")
	p.tail.add(s)
	if p.onStderr != nil {
		p.onStderr()
	}
	if p.stderrLog.admit() {
		p.log.Info().Str("stream", "stderr").Msg(s)
	}
}

// logGate decides which lines of one output of a process (its stderr
// lines, or the stdout lines its connection skips) reach the log, by a
// token bucket that the server's successive processes may share, and
// reports the lines it kept out: once per stderrDropReport at most, the
// report due stderrDropReport after the first line dropped since the last
// one, and a last report when the output ends (close).
type logGate struct {
	limit *rate.Limiter
	now   func() time.Time
	// after runs f once d has passed (time.AfterFunc); stop cancels that.
	after func(d time.Duration, f func()) (stop func() bool)
	// report logs that n lines were dropped; it is called with mu held,
	// so that none comes after close.
	report func(n int)
	// onDrop, if set, counts one dropped line; it must not block.
	onDrop func()

	mu      sync.Mutex
	dropped int         // lines dropped since the last report
	stop    func() bool // cancels the report due; nil when none is
	closed  bool
}

func newLogGate(limit *rate.Limiter, report func(n int), onDrop func()) *logGate {
	return &logGate{
		limit:  limit,
		now:    time.Now,
		after:  func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop },
		report: report,
		onDrop: onDrop,
	}
}

// admit reports whether a line that arrives now goes to the log. One
// that does not is counted, and reported later.
func (g *logGate) admit() bool {
	if g.limit.AllowN(g.now(), 1) {
		return true
	}
	if g.onDrop != nil {
		g.onDrop()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dropped++
	if g.stop == nil && !g.closed {
		g.stop = g.after(stderrDropReport, g.due)
	}
	return false
}

// due runs when a report is due.
func (g *logGate) due() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return // close reported it
	}
	g.stop = nil
	g.reportLocked()
}

// close reports the lines dropped since the last report, if any, and
// cancels the report due: nothing is reported once it returns. The
// stderr reader calls it when it returns.
func (g *logGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	if g.stop != nil {
		g.stop()
		g.stop = nil
	}
	g.reportLocked()
}

func (g *logGate) reportLocked() {
	if g.dropped > 0 {
		g.report(g.dropped)
		g.dropped = 0
	}
}

// lineTail is a ring of the last n lines.
type lineTail struct {
	mu    sync.Mutex
	lines []string // len grows to cap, then next wraps
	next  int
}

func newLineTail(n int) *lineTail {
	return &lineTail{lines: make([]string, 0, n)}
}

func (t *lineTail) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) < cap(t.lines) {
		t.lines = append(t.lines, s)
		return
	}
	t.lines[t.next] = s
	t.next = (t.next + 1) % len(t.lines)
}

// snapshot returns the lines oldest first.
func (t *lineTail) snapshot() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.lines))
	out = append(out, t.lines[t.next:]...)
	return append(out, t.lines[:t.next]...)
}
