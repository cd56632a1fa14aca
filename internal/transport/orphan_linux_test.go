//go:build linux

package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// waitGone polls until pid is no longer a live process (gone, or a zombie
// nobody reaps) or ctx ends.
func waitGone(t *testing.T, ctx context.Context, pid int, what string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for slices.Contains(liveGroupMembers(t, pid), pid) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%s (pid %d) still running", what, pid)
		}
	}
}

// killLater kills pid, a process this test caused but cannot reap (a
// grandchild), when the test ends, and waits for it to go.
func killLater(t *testing.T, pid int) {
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		waitGone(t, ctx, pid, "killed process")
	})
}

// TestServerDiesWithDaemon: a daemon killed with SIGKILL cannot stop its
// servers; the kernel does it (the parent-death signal). A server that
// ignores stdin EOF and SIGTERM would otherwise run on, adopted by init. It
// must also outlive OS threads of the daemon that end meanwhile: the
// signal follows the thread that forked it.
func TestServerDiesWithDaemon(t *testing.T) {
	ctx := testContext(t)
	daemon := exec.Command(testExecutable(t))
	daemon.Env = append(os.Environ(), fakeServerEnv+"=spawner", "GORACE="+fakeEnv("")["GORACE"])
	daemon.Stderr = os.Stderr
	out, err := daemon.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = daemon.Process.Kill()
		_ = daemon.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the daemon's report: %v", err)
	}
	word, num, _ := strings.Cut(strings.TrimSpace(line), " ")
	pid, err := strconv.Atoi(num)
	if err != nil {
		t.Fatalf("daemon's report %q: %v", line, err)
	}
	killLater(t, pid)
	if word != "alive" || !slices.Contains(liveGroupMembers(t, pid), pid) {
		t.Fatalf("server %d died while the daemon lived on (report %q): an ended thread of the daemon killed it", pid, line)
	}

	if err := daemon.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = daemon.Wait()
	waitGone(t, ctx, pid, "server of a daemon killed with SIGKILL")
}

// escapedPid reads the escaper fake's first message and returns the pid
// of the grandchild that left the group, to be killed when the test ends.
func escapedPid(t *testing.T, ctx context.Context, conn mcp.Connection) int {
	t.Helper()
	msg, err := conn.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "escaped" {
		t.Fatalf("first message: got %+v, want the escaped notification", msg)
	}
	var params struct{ Pid int }
	if err := json.Unmarshal(req.Params, &params); err != nil || params.Pid == 0 {
		t.Fatalf("escaped notification %s: %v", req.Params, err)
	}
	killLater(t, params.Pid)
	return params.Pid
}

// readAsync reads one message in the background.
func readAsync(ctx context.Context, conn mcp.Connection) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := conn.Read(ctx)
		done <- err
	}()
	return done
}

// TestHeldStdoutEndsConnection: a server exits while a process that left
// its group (setsid) holds its stdout open. No EOF comes, yet the
// connection ends, saying how the server exited, so that the session ends
// and the server is started again.
func TestHeldStdoutEndsConnection(t *testing.T) {
	ctx := testContext(t)
	p := startFake(t, "escaper", nil, nil)
	conn := connectProcess(t, ctx, p)
	escaped := escapedPid(t, ctx, conn)

	select {
	case err := <-readAsync(ctx, conn):
		if !errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "exit status 3") {
			t.Errorf("Read after the exit: got %v, want io.EOF and the exit status", err)
		}
	case <-ctx.Done():
		t.Fatal("Read still blocked after the server exited")
	}
	if !slices.Contains(liveGroupMembers(t, escaped), escaped) {
		t.Errorf("the process holding stdout (pid %d) is gone: the test proved nothing", escaped)
	}
	if err := conn.Write(ctx, &jsonrpc.Request{Method: "notifications/late"}); !errors.Is(err, mcp.ErrConnectionClosed) {
		t.Errorf("Write after the connection ended: got %v, want ErrConnectionClosed", err)
	}
}

// TestHeldStdoutKeepsUnreadOutput: what the server wrote before it exited
// is still delivered when the reader comes late, while the stdout it left
// behind is held open.
func TestHeldStdoutKeepsUnreadOutput(t *testing.T) {
	ctx := testContext(t)
	p := startFake(t, "escaper", map[string]string{fakeBigEnv: "30000"}, nil)
	conn := connectProcess(t, ctx, p)
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatal("the fake did not exit")
	}
	// Wait until the grace passed with output unread: the connection then
	// waits for another grace instead of ending.
	first := p.heldOutput.Load()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for p.heldOutput.Load() == first {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("the grace after the exit never passed")
		}
	}
	escapedPid(t, ctx, conn)
	if got := readMethod(t, ctx, conn); got != "big" {
		t.Errorf("second message: got %q, want big", got)
	}
	select {
	case err := <-readAsync(ctx, conn):
		if !errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "exit status 3") {
			t.Errorf("Read after the output: got %v, want io.EOF and the exit status", err)
		}
	case <-ctx.Done():
		t.Fatal("Read still blocked after the server exited")
	}
}
