package transport

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
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
	fakeStdoutEnv = "FAKE_STDOUT" // written to stdout first
	fakeStderrEnv = "FAKE_STDERR" // written to stderr first
	fakeBigEnv    = "FAKE_BIG"    // then a notification whose params hold this many bytes
	fakeExitEnv   = "FAKE_EXIT"   // then exit with this code; unset: wait for stdin EOF
	fakeNoiseEnv  = "FAKE_NOISE"  // mcp server: print a banner to stdout first

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
