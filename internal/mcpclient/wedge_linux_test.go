//go:build linux

package mcpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/mcpd-project/mcpd/internal/config"
)

// wedgeServerEnv selects one of this file's fake stdio servers. They are
// picked in init, which runs before TestMain, so that they stay next to
// the tests that use them.
const wedgeServerEnv = "MCPD_MCPCLIENT_WEDGE_SERVER"

func init() {
	switch os.Getenv(wedgeServerEnv) {
	case "":
		return
	case "roots":
		os.Exit(runRootsWedge())
	case "escape":
		os.Exit(runEscapeServer())
	case "sleep":
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, "unknown wedge server")
	os.Exit(2)
}

// wedgeServer describes the test binary re-executed as one of this file's
// fake servers.
func wedgeServer(name, mode string) config.Server {
	return config.Server{
		Name:    name,
		Kind:    config.TransportStdio,
		Command: os.Args[0],
		Env:     map[string]string{wedgeServerEnv: mode, "GORACE": "atexit_sleep_ms=0"},
		// The fakes speak the initialize era only.
		ProtocolVersion: legacyProtocolVersion,
	}
}

// runRootsWedge speaks just enough of the initialize era to become ready;
// once the client has listed its tools, it asks for the client's roots and
// never reads its stdin again, like a server stuck in a blocking task.
func runRootsWedge() int {
	r := bufio.NewReader(os.Stdin)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return 0
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		_ = json.Unmarshal(line, &m)
		switch m.Method {
		case "initialize":
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"wedge","version":"1"}}}`+"\n", m.ID, m.Params.ProtocolVersion)
		case "tools/list":
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`+"\n", m.ID)
			fmt.Print(`{"jsonrpc":"2.0","id":"wedge-1","method":"roots/list"}` + "\n")
			time.Sleep(time.Hour)
		default:
			if len(m.ID) > 0 {
				fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", m.ID)
			}
		}
	}
}

// runEscapeServer serves a tool "escape" that starts a process which
// leaves the process group (setsid) holding stdout and stderr, writes its
// pid to the file the call names, and exits with status 3: the server is
// dead, yet its stdout stays open.
func runEscapeServer() int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "escape", Version: "0.1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "escape"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Pidfile string `json:"pidfile"`
	}) (*mcp.CallToolResult, any, error) {
		gc := exec.Command(os.Args[0])
		gc.Env = append(os.Environ(), wedgeServerEnv+"=sleep")
		gc.Stdout, gc.Stderr = os.Stdout, os.Stderr
		gc.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := gc.Start(); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(in.Pidfile, []byte(strconv.Itoa(gc.Process.Pid)), 0o600); err != nil {
			return nil, nil, err
		}
		os.Exit(3)
		return nil, nil, nil
	})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "escape server:", err)
		return 1
	}
	return 0
}

// wedgeContext bounds a test whose calls have deadlines far beyond it:
// only an operation that does not wait for them lets the test pass.
func wedgeContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// stdinFull reports whether the pipe that is process pid's stdin holds as
// much as it can: a write to it blocks.
func stdinFull(t *testing.T, pid int) bool {
	t.Helper()
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/fd/0", pid), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open the stdin of %d: %v", pid, err)
	}
	defer unix.Close(fd)
	queued, err := unix.IoctlGetInt(fd, unix.TIOCINQ)
	if err != nil {
		t.Fatal(err)
	}
	size, err := unix.FcntlInt(uintptr(fd), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatal(err)
	}
	return queued >= size
}

// awaitOp waits for an operation run in the background.
func awaitOp[T any](t *testing.T, ctx context.Context, what string, done <-chan T) T {
	t.Helper()
	select {
	case v := <-done:
		return v
	case <-ctx.Done():
		t.Fatalf("%s: still waiting when the test's deadline came", what)
		var zero T
		return zero
	}
}

// processGone reports whether pid is gone, or a zombie.
func processGone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || len(stat) < i+3 || stat[i+2] == 'Z' || stat[i+2] == 'X'
}

// TestRestartWhileWriteBlocked: a server stops reading its stdin while a
// call's large arguments are being written to it. Restarting the server
// returns, and the call ends, long before the call's deadline.
func TestRestartWhileWriteBlocked(t *testing.T) {
	m, _ := newTestManager(t)
	ctx := wedgeContext(t)
	st, err := m.Connect(ctx, fakeServer("f", "serve"), false)
	if err != nil {
		t.Fatal(err)
	}
	hung := st.Pid
	if err := syscall.Kill(hung, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(hung, syscall.SIGKILL) })

	called := make(chan error, 1)
	go func() {
		// Larger than any pipe's buffer.
		_, err := m.CallTool(ctx, "mcp__f__echo", map[string]any{"message": strings.Repeat("x", 4<<20)}, CallOptions{Timeout: 10 * time.Minute})
		called <- err
	}()
	eventually(ctx, t, "the call's write blocked on the full pipe", func() bool { return stdinFull(t, hung) })

	restarted := make(chan error, 1)
	go func() {
		_, err := m.Restart(ctx, "f")
		restarted <- err
	}()
	if err := awaitOp(t, ctx, "RestartServer", restarted); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if st, _ := m.Get("f"); st.State != StateReady || st.Pid == hung {
		t.Errorf("after the restart: got %v pid %d, want ready in a new process", st.State, st.Pid)
	}
	awaitOp(t, ctx, "the call in flight", called)
	eventually(ctx, t, "the stopped server gone", func() bool { return processGone(hung) })
}

// TestStopWithAnswerBlocked: the SDK writes its answer to a server's own
// request (here roots/list, with more roots than the pipe holds) with no
// deadline at all. The server reads none of it. Restarting it, and then
// removing it, do not wait for the write.
func TestStopWithAnswerBlocked(t *testing.T) {
	m, _ := newTestManager(t)
	// Shorter than the transport's one-minute bound on such a write, which
	// would end it too in the end.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var roots []*mcp.Root
	for i := range 10000 {
		roots = append(roots, &mcp.Root{URI: fmt.Sprintf("file:///projects/a/rather/long/path/to/project/number/%06d", i), Name: fmt.Sprintf("project %d", i)})
	}
	if err := m.SetRoots("", roots); err != nil {
		t.Fatal(err)
	}
	var pids []int
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	wedged := func(st Status) {
		t.Helper()
		if st.State != StateReady || st.Pid == 0 {
			t.Fatalf("got %v pid %d, want ready", st.State, st.Pid)
		}
		pids = append(pids, st.Pid)
		eventually(ctx, t, "the answer to roots/list blocked on the full pipe", func() bool { return stdinFull(t, st.Pid) })
	}
	st, err := m.Connect(ctx, wedgeServer("w", "roots"), false)
	if err != nil {
		t.Fatal(err)
	}
	wedged(st)

	type result struct {
		st  Status
		err error
	}
	restarted := make(chan result, 1)
	go func() {
		st, err := m.Restart(ctx, "w")
		restarted <- result{st, err}
	}()
	r := awaitOp(t, ctx, "RestartServer", restarted)
	if r.err != nil {
		t.Fatalf("restart: %v", r.err)
	}
	wedged(r.st)

	removed := make(chan error, 1)
	go func() { removed <- m.Disconnect(ctx, "w") }()
	if err := awaitOp(t, ctx, "DisconnectServer", removed); err != nil {
		t.Fatalf("disconnect: %v", err)
	}
	for _, pid := range pids {
		eventually(ctx, t, fmt.Sprintf("server process %d gone", pid), func() bool { return processGone(pid) })
	}
}

// TestExitWithHeldStdoutRestarts: a server exits while a process that left
// its group (setsid) keeps its stdout open. The session still ends, the
// call in flight fails long before its deadline, and the server comes back
// in a new process, its last error saying how the old one ended.
func TestExitWithHeldStdoutRestarts(t *testing.T) {
	m, _ := newTestManager(t)
	ctx := wedgeContext(t)
	st, err := m.Connect(ctx, wedgeServer("e", "escape"), false)
	if err != nil {
		t.Fatal(err)
	}
	dead := st.Pid
	pidfile := filepath.Join(t.TempDir(), "escaped")
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidfile); err == nil {
			if pid, err := strconv.Atoi(string(b)); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})

	called := make(chan error, 1)
	go func() {
		_, err := m.CallTool(ctx, "mcp__e__escape", map[string]any{"pidfile": pidfile}, CallOptions{Timeout: 10 * time.Minute})
		called <- err
	}()
	if err := awaitOp(t, ctx, "the call to the server that exits", called); !errors.Is(err, ErrUnavailable) {
		t.Errorf("the call in flight: got %v, want ErrUnavailable", err)
	}
	eventually(ctx, t, "the server back, in a new process", func() bool {
		st, _ := m.Get("e")
		return st.State == StateReady && st.Pid != dead
	})
	if st, _ := m.Get("e"); !strings.Contains(st.LastError, "exit status 3") {
		t.Errorf("last error %q, want the old process's exit status", st.LastError)
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	if pid, _ := strconv.Atoi(string(b)); processGone(pid) || slices.Contains([]int{0, dead}, pid) {
		t.Errorf("the process holding stdout (pid %d) is gone: the test proved nothing", pid)
	}
}
