package transport

import (
	"bufio"
	"bytes"
	"strings"
	"sync"
)

// readStderr re-emits the child's stderr to the log line by line and keeps
// the bounded tail. It returns at EOF (every holder of the pipe exited) or
// when Stop closes our read end.
func (p *Process) readStderr() {
	defer close(p.stderrDone)
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
	p.log.Info().Str("stream", "stderr").Msg(s)
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
