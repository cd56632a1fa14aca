package transport

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// Fake servers are this test binary re-executed with fakeServerEnv naming
// the behaviour (the go-sdk mcp/cmd_test.go trick).
const (
	fakeServerEnv = "MCPD_TRANSPORT_FAKE_SERVER"
	// Knobs read by the fake servers.
	fakeStdoutEnv = "FAKE_STDOUT"       // written to stdout first
	fakeStderrEnv = "FAKE_STDERR"       // written to stderr first
	fakeFloodEnv  = "FAKE_STDERR_LINES" // then this many lines "stderr line <i>" to stderr, i from 1
	fakeBigEnv    = "FAKE_BIG"          // then a notification whose params hold this many bytes
	fakeExitEnv   = "FAKE_EXIT"         // then exit with this code; unset: wait for stdin EOF
	fakeNoiseEnv  = "FAKE_NOISE"        // mcp server: print a banner to stdout first

	readyLine = `{"jsonrpc":"2.0","method":"ready"}` + "\n"
)

func TestMain(m *testing.M) {
	if name := os.Getenv(fakeServerEnv); name != "" {
		os.Unsetenv(fakeServerEnv)
		run := fakeServer(name)
		if run == nil {
			fmt.Fprintf(os.Stderr, "unknown fake server %q\n", name)
			os.Exit(2)
		}
		os.Exit(run())
	}
	goleak.VerifyTestMain(m)
}

func fakeServer(name string) func() int {
	switch name {
	case "mcp":
		return runMCPServer
	case "script":
		return runScript
	case "echo":
		return runEcho
	case "env":
		return runEnv
	case "stubborn":
		return runStubborn
	case "ignore-stdin":
		return runIgnoreStdin
	case "parent":
		return runParent
	case "sleeper":
		return runSleeper
	case "escaper":
		return runEscaper
	case "spawner":
		return runSpawner
	}
	return nil
}

type echoArgs struct {
	Text string `json:"text"`
}

// runMCPServer is a go-sdk server with an "echo" tool on stdin/stdout.
func runMCPServer() int {
	if os.Getenv(fakeNoiseEnv) != "" {
		fmt.Println("Starting echo server...")
		fmt.Fprintln(os.Stderr, "echo server: listening on stdio")
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "fake", Version: "v0.0.1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "echoes text"},
		func(_ context.Context, _ *mcp.CallToolRequest, args echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: args.Text}}}, nil, nil
		})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "server run:", err)
	}
	return 0
}

// runScript writes canned output, then exits or waits for stdin EOF.
func runScript() int {
	os.Stdout.WriteString(os.Getenv(fakeStdoutEnv))
	os.Stderr.WriteString(os.Getenv(fakeStderrEnv))
	if n, err := strconv.Atoi(os.Getenv(fakeFloodEnv)); err == nil {
		w := bufio.NewWriter(os.Stderr)
		for i := 1; i <= n; i++ {
			fmt.Fprintf(w, "stderr line %d\n", i)
		}
		w.Flush()
	}
	if n, err := strconv.Atoi(os.Getenv(fakeBigEnv)); err == nil {
		os.Stdout.WriteString(bigLine(n))
	}
	if code, err := strconv.Atoi(os.Getenv(fakeExitEnv)); err == nil {
		return code
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// bigLine is a JSON-RPC notification line whose params hold n bytes.
func bigLine(n int) string {
	return `{"jsonrpc":"2.0","method":"big","params":{"s":"` + strings.Repeat("x", n) + `"}}` + "\n"
}

// runEcho copies stdin to stdout line by line.
func runEcho() int {
	r := bufio.NewReader(os.Stdin)
	w := bufio.NewWriter(os.Stdout)
	for {
		line, err := r.ReadBytes('\n')
		w.Write(line)
		if r.Buffered() == 0 {
			w.Flush()
		}
		if err != nil {
			w.Flush()
			return 0
		}
	}
}

// runEnv reports two variables and its working directory.
func runEnv() int {
	wd, _ := os.Getwd()
	fmt.Printf(`{"jsonrpc":"2.0","method":"env","params":{"daemon":%q,"spec":%q,"cwd":%q}}`+"\n",
		os.Getenv("MCPD_TEST_DAEMON_VAR"), os.Getenv("MCPD_TEST_SPEC_VAR"), wd)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// runStubborn ignores stdin and SIGTERM: only SIGKILL ends it.
func runStubborn() int {
	signal.Ignore(syscall.SIGTERM)
	os.Stdout.WriteString(readyLine)
	time.Sleep(time.Hour)
	return 0
}

// runIgnoreStdin ignores stdin but dies of SIGTERM.
func runIgnoreStdin() int {
	os.Stdout.WriteString(readyLine)
	time.Sleep(time.Hour)
	return 0
}

// runParent starts a grandchild that ignores SIGTERM and holds stdout and
// stderr, then exits on stdin EOF (or never, with FAKE_STUBBORN).
func runParent() int {
	stubborn := os.Getenv("FAKE_STUBBORN") != ""
	if stubborn {
		signal.Ignore(syscall.SIGTERM)
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	gc := exec.Command(exe)
	gc.Env = append(os.Environ(), fakeServerEnv+"=sleeper")
	gc.Stdout, gc.Stderr = os.Stdout, os.Stderr
	if err := gc.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Stdout.WriteString(readyLine)
	if stubborn {
		time.Sleep(time.Hour)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

func runSleeper() int {
	signal.Ignore(syscall.SIGTERM)
	time.Sleep(time.Hour)
	return 0
}

// runEscaper starts a grandchild that leaves the process group (setsid)
// holding stdout and stderr, the way a daemonising helper or a detached
// Node spawn does, and names it in an "escaped" notification. Then it
// writes FAKE_BIG bytes of output, if set, and exits with status 3: the
// server is gone, yet its stdout stays open.
func runEscaper() int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	gc := exec.Command(exe)
	gc.Env = append(os.Environ(), fakeServerEnv+"=sleeper")
	gc.Stdout, gc.Stderr = os.Stdout, os.Stderr
	gc.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := gc.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf(`{"jsonrpc":"2.0","method":"escaped","params":{"pid":%d}}`+"\n", gc.Process.Pid)
	if n, err := strconv.Atoi(os.Getenv(fakeBigEnv)); err == nil {
		os.Stdout.WriteString(bigLine(n))
	}
	return 3
}

// runSpawner is a daemon in miniature. From a goroutine other than the
// main one (as the daemon does), it starts a stubborn server (it ignores
// stdin EOF and SIGTERM) through StartProcess; then it ends OS threads the
// way the Go runtime does (a goroutine locked to its thread returns), and
// prints "alive <pid>" if the server outlived that, "dead <pid>" if not.
// Then it waits to be killed.
func runSpawner() int {
	// The main thread never ends (the runtime parks it instead): keep it
	// here, so that the server is forked from a thread that can.
	runtime.LockOSThread()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	started := make(chan *Process)
	go func() {
		p, err := StartProcess(StdioSpec{Command: exe, Env: fakeEnv("stubborn")}, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			close(started)
			return
		}
		// This goroutine's thread, which forked the server, goes on to run
		// others: the ones below that end their threads among them.
		endThreads()
		started <- p
	}()
	p, ok := <-started
	if !ok {
		return 1
	}
	endThreads()
	// A parent-death signal sent by an ended thread arrives at once; this
	// only lets the reap be seen. (A late one makes the check weaker, not
	// flaky.)
	timer := time.NewTimer(500 * time.Millisecond)
	select {
	case <-p.Done():
		fmt.Println("dead", p.Pid())
	case <-timer.C:
		fmt.Println("alive", p.Pid())
	}
	time.Sleep(time.Hour)
	return 0
}

// endThreads ends a few OS threads: goroutines that return locked to their
// thread take it with them.
func endThreads() {
	for range 8 {
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { runtime.LockOSThread() })
		}
		wg.Wait()
	}
}
