package transport

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkRoundTrip measures a tools/call echo through a go-sdk client
// against the same re-executed go-sdk server, over this package's connection
// and over the SDK's CommandTransport.
func BenchmarkRoundTrip(b *testing.B) {
	exe := testExecutable(b)
	b.Run("transport", func(b *testing.B) {
		p, err := StartProcess(StdioSpec{Command: exe, Env: fakeEnv("mcp")},
			&ProcessOptions{StopGrace: testStopGrace})
		if err != nil {
			b.Fatalf("StartProcess: %v", err)
		}
		b.Cleanup(func() { p.Stop(context.Background()) })
		benchmarkCalls(b, p)
	})
	b.Run("CommandTransport", func(b *testing.B) {
		cmd := exec.Command(exe)
		cmd.Env = os.Environ()
		for k, v := range fakeEnv("mcp") {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		benchmarkCalls(b, &mcp.CommandTransport{Command: cmd, TerminateDuration: testStopGrace})
	})
}

func benchmarkCalls(b *testing.B, t mcp.Transport) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0.0.1"}, nil)
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		b.Fatalf("Connect: %v", err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}
	b.ReportAllocs()
	// Wall time per call is dominated by the server and, on a shared machine,
	// by the scheduler; the client's own CPU time per call isolates the cost
	// of the transport and the SDK client.
	before := cpuTime(b)
	for b.Loop() {
		if _, err := cs.CallTool(ctx, params); err != nil {
			b.Fatalf("CallTool: %v", err)
		}
	}
	b.ReportMetric(float64(cpuTime(b)-before)/float64(b.N), "client-cpu-ns/op")
}

// cpuTime is this process's user plus system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
