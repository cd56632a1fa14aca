package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// testStopGrace keeps ordered stops of misbehaving children quick.
	testStopGrace = 200 * time.Millisecond
	// gracefulStopGrace is for tests that expect a graceful exit on stdin
	// EOF: a stop that goes well never waits for it, and a slow machine
	// cannot turn the graceful exit into a SIGTERM.
	gracefulStopGrace = 20 * time.Second
)

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func testExecutable(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	return exe
}

// startFake starts the named fake server (see fakeServer) and stops it when
// the test ends.
func startFake(t *testing.T, name string, env map[string]string, opts *ProcessOptions) *Process {
	t.Helper()
	spec := StdioSpec{Command: testExecutable(t), Env: fakeEnv(name)}
	maps.Copy(spec.Env, env)
	var o ProcessOptions
	if opts != nil {
		o = *opts
	}
	if o.StopGrace == 0 {
		o.StopGrace = testStopGrace
	}
	p, err := StartProcess(spec, &o)
	if err != nil {
		t.Fatalf("StartProcess(%s): %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return p
}

// fakeEnv is the environment that selects a fake server. Under -race the
// race runtime sleeps a second at exit by default, which would make every
// graceful exit look like one that needs SIGTERM.
func fakeEnv(name string) map[string]string {
	return map[string]string{
		fakeServerEnv: name,
		"GORACE":      strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0"),
	}
}

func connectProcess(t *testing.T, ctx context.Context, p *Process) mcp.Connection {
	t.Helper()
	conn, err := p.Connect(ctx)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return conn
}

// readMethod reads one message and returns its method; it fails the test on
// an error or a response.
func readMethod(t *testing.T, ctx context.Context, conn mcp.Connection) string {
	t.Helper()
	msg, err := conn.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		t.Fatalf("Read: got %T, want *jsonrpc.Request", msg)
	}
	return req.Method
}

// syncBuffer is a log sink safe for the Process's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// entries decodes the JSON log lines written so far.
func (s *syncBuffer) entries(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for line := range bytes.Lines(s.b.Bytes()) {
		var e map[string]any
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// hasEntry reports whether a log entry has all the given string fields.
func hasEntry(entries []map[string]any, fields map[string]string) bool {
	for _, e := range entries {
		match := true
		for k, v := range fields {
			if s, _ := e[k].(string); s != v {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// liveGroupMembers returns the processes in group pgid that have not exited.
// kill(-pgid, 0) alone is not enough: it also counts zombies, and a killed
// grandchild is reparented to PID 1, which in some containers never reaps.
func liveGroupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return nil
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	var live []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// "pid (comm) state ppid pgrp ..."; comm may contain anything.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) || f[0] == "Z" || f[0] == "X" {
			continue
		}
		live = append(live, pid)
	}
	return live
}

// waitNoLiveMembers polls until group pgid has no live process or ctx ends.
func waitNoLiveMembers(t *testing.T, ctx context.Context, pgid int) {
	t.Helper()
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	for {
		live := liveGroupMembers(t, pgid)
		if len(live) == 0 {
			return
		}
		select {
		case <-ticker.C:
		case <-ctx.Done():
			t.Fatalf("process group %d: got live members %v after Stop, want none", pgid, live)
		}
	}
}
