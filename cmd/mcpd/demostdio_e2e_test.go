package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// demoSession is a client's side of one 2025-11-25 session with the demo
// server: it initializes, then asks echo to repeat the message.
var demoSession = strings.Join([]string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stdio-test","version":"1"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"over stdio"}}}`,
}, "\n") + "\n"

// TestDemoServerStdio runs `mcpd demo-server` directly, with no mcpd in
// front, on each kind of stdout it may be given, and checks that it answers
// and how it chose to read: through the poller, on one thread, from pipes;
// with Go's blocking reads and default threads otherwise. The pipes are
// blocking ones, as a parent not written in Go makes them, and the test
// keeps its own copies of the server's ends: they must still be blocking
// after the server is gone.
func TestDemoServerStdio(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("the demo server polls stdio through /proc/self/fd, which this system lacks")
	}
	_, goMaxProcsSet := os.LookupEnv("GOMAXPROCS")
	for _, tc := range []struct {
		name       string
		stdoutFile bool // a regular file, which the poller cannot wait on; it stands for a terminal too
		env        []string
		wantPolled bool
		wantProcs  int // 0: Go's default
	}{
		{name: "pipes", wantPolled: true, wantProcs: 1},
		{name: "pipes with GOMAXPROCS", env: []string{"GOMAXPROCS=3"}, wantPolled: true, wantProcs: 3},
		{name: "stdout a regular file", stdoutFile: true, wantPolled: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if goMaxProcsSet && tc.env == nil {
				t.Skip("GOMAXPROCS is set for the test, and the server honours it")
			}
			ctx := testContext(t)
			cmd := exec.CommandContext(ctx, mcpdBinary(t), "demo-server")
			dieWithTest(cmd)
			cmd.Env = append(os.Environ(), tc.env...)
			var stderr syncBuffer
			cmd.Stderr = &stderr
			serverStdin, stdin := blockingPipe(t, "the server's stdin", "the test's end of it")
			cmd.Stdin = serverStdin
			serverEnds := []*os.File{serverStdin}
			var answer func() string
			if tc.stdoutFile {
				name := filepath.Join(t.TempDir(), "stdout.jsonl")
				f, err := os.Create(name)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				cmd.Stdout = f
				answer = func() string {
					var out []byte
					poll(ctx, t, "the answer to echo in the stdout file", func() (bool, error) {
						out, err = os.ReadFile(name)
						return bytes.Contains(out, []byte(`"id":2`)), err
					})
					return echoAnswer(t, bufio.NewScanner(bytes.NewReader(out)))
				}
			} else {
				stdout, serverStdout := blockingPipe(t, "the test's end of it", "the server's stdout")
				cmd.Stdout = serverStdout
				serverEnds = append(serverEnds, serverStdout)
				// Read through a non-blocking descriptor of the test's own,
				// which can give up at the test's deadline.
				out, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", stdout.Fd()), os.O_RDONLY|syscall.O_NONBLOCK, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer out.Close()
				if deadline, ok := ctx.Deadline(); ok {
					_ = out.SetReadDeadline(deadline)
				}
				answer = func() string { return echoAnswer(t, bufio.NewScanner(out)) }
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(stdin, demoSession); err != nil {
				t.Fatalf("write session: %v", err)
			}

			if got := answer(); got != "over stdio" {
				t.Errorf("echo answered %q, want %q", got, "over stdio")
			}
			stdin.Close() // the client goes away: the server ends
			if err := cmd.Wait(); err != nil {
				t.Fatalf("demo server: %v; stderr:\n%s", err, stderr.String())
			}
			for _, f := range serverEnds {
				flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_GETFL, 0)
				if errno != 0 {
					t.Fatalf("fcntl %s: %v", f.Name(), errno)
				}
				if flags&syscall.O_NONBLOCK != 0 {
					t.Errorf("%s was left non-blocking for everyone holding it", f.Name())
				}
			}

			wantProcs := tc.wantProcs
			if wantProcs == 0 {
				// Go's default for the server, as for this process (unless
				// go test -cpu changed it, which the Makefile does not).
				wantProcs = runtime.GOMAXPROCS(0)
			}
			if !findLogLine(stderr.String(), func(m map[string]any) bool {
				return m["message"] == "demo server serving on stdio" &&
					m["polled"] == tc.wantPolled && m["procs"] == float64(wantProcs)
			}) {
				t.Errorf("no \"demo server serving on stdio\" log line with polled %v and procs %d; stderr:\n%s",
					tc.wantPolled, wantProcs, stderr.String())
			}
		})
	}
}

// blockingPipe returns a pipe in blocking mode (os.Pipe makes non-blocking
// ones), closed when the test ends.
func blockingPipe(t *testing.T, rName, wName string) (r, w *os.File) {
	t.Helper()
	fds := make([]int, 2)
	if err := syscall.Pipe(fds); err != nil {
		t.Fatal(err)
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	r, w = os.NewFile(uintptr(fds[0]), rName), os.NewFile(uintptr(fds[1]), wName)
	t.Cleanup(func() {
		r.Close()
		w.Close()
	})
	return r, w
}

// echoAnswer reads the server's stdout up to the answer to request 2 and
// returns the text it carries.
func echoAnswer(t *testing.T, out *bufio.Scanner) string {
	t.Helper()
	for out.Scan() {
		var msg struct {
			ID     int `json:"id"`
			Result struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"result"`
			Error *struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal(out.Bytes(), &msg); err != nil {
			t.Fatalf("stdout line %q: %v", out.Text(), err)
		}
		if msg.ID != 2 {
			continue
		}
		if msg.Error != nil {
			t.Fatalf("echo: %s", msg.Error.Message)
		}
		if len(msg.Result.Content) != 1 {
			t.Fatalf("echo answered %s, want one content block", out.Text())
		}
		return msg.Result.Content[0].Text
	}
	t.Fatalf("stdout ended before the answer to echo: %v", out.Err())
	return ""
}
