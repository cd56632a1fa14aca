// Command mcpd-bench measures what mcpd adds to an MCP tool call. For each
// upstream stdio server (the demo server and a minimal hand-written one) and
// each concurrency level it times `tools/call echo` three ways: a go-sdk
// client talking to the server directly, a gRPC client calling CallTool
// through a real mcpd (over loopback TCP and a Unix socket), and a bare gRPC
// round trip (grpc.health.v1 Check) against the same mcpd. It prints p50,
// p99 and calls/s per cell, the CPU each process spent per call, and the
// ratios behind mcpd's performance targets with a PASS or MISS line each.
// It is a report, not a test: a MISS does not change the exit status; a
// setup failure (mcpd not starting, a call failing) does.
//
// Usage:
//
//	mcpd-bench [flags]        run the benchmark (see -help)
//	mcpd-bench fast-server    serve the minimal MCP server on stdio
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcpd-project/mcpd/bench/fastserver"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "fast-server" {
		os.Exit(runFastServer())
	}
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpd-bench:", err)
		os.Exit(2)
	}
	// SIGPIPE too: output piped into `head` must not kill the bench before
	// it stops the processes it started and removes its work folder.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mcpd-bench:", err)
		os.Exit(1)
	}
}

// runFastServer serves fastserver on stdin and stdout until stdin closes.
func runFastServer() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := fastserver.Serve(ctx, os.Stdin, os.Stdout); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "mcpd-bench fast-server:", err)
		return 1
	}
	return 0
}

// config is the benchmark's settings.
type config struct {
	mcpd         string
	duration     time.Duration
	calls        int
	warmup       time.Duration
	rounds       int
	concurrency  []int
	listeners    []string
	upstreams    []string
	message      string
	mcpdLogLevel string
	mcpdProcs    int
	keep         bool
}

func parseFlags(args []string, out io.Writer) (*config, error) {
	fs := flag.NewFlagSet("mcpd-bench", flag.ContinueOnError)
	fs.SetOutput(out)
	c := &config{}
	var conc, listeners, upstreams string
	fs.StringVar(&c.mcpd, "mcpd", "bin/mcpd", "path of the mcpd binary to start (also runs the demo server)")
	fs.DurationVar(&c.duration, "duration", 2*time.Second, "how long each cell is measured (ignored when -calls is set)")
	fs.IntVar(&c.calls, "calls", 0, "measure a fixed number of calls per cell instead of a duration")
	fs.DurationVar(&c.warmup, "warmup", 500*time.Millisecond, "how long each cell runs unmeasured first")
	fs.IntVar(&c.rounds, "rounds", 4, "split each cell's duration or calls into this many rounds, interleaved with the other cells of the same concurrency")
	fs.StringVar(&conc, "concurrency", "1,16,64", "comma-separated numbers of concurrent callers")
	fs.StringVar(&listeners, "listen", "tcp,unix", "mcpd listeners to measure: tcp (loopback, the headline) and/or unix")
	fs.StringVar(&upstreams, "upstreams", "demo,fast", "upstream servers to measure: demo (go-sdk demo server) and/or fast (hand-written minimal server)")
	fs.StringVar(&c.message, "message", "hello, mcpd", "the message echoed by every call")
	fs.StringVar(&c.mcpdLogLevel, "mcpd-log-level", "info", "mcpd's --log-level (info is the daemon's default; debug logs one line per RPC)")
	fs.IntVar(&c.mcpdProcs, "mcpd-max-procs", 1, "mcpd's --max-procs (1 is the daemon's default; 0 is one thread per CPU)")
	fs.BoolVar(&c.keep, "keep", false, "keep the work folder (config and logs) and print its path")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (the only subcommand is fast-server)", fs.Arg(0))
	}
	var err error
	if c.concurrency, err = parseConcurrency(conc); err != nil {
		return nil, fmt.Errorf("-concurrency: %w", err)
	}
	if c.listeners, err = parseChoices(listeners, "tcp", "unix"); err != nil {
		return nil, fmt.Errorf("-listen: %w", err)
	}
	if c.upstreams, err = parseChoices(upstreams, upstreamDemo, upstreamFast); err != nil {
		return nil, fmt.Errorf("-upstreams: %w", err)
	}
	switch {
	case c.calls < 0:
		return nil, errors.New("-calls must not be negative")
	case c.calls == 0 && c.duration <= 0:
		return nil, errors.New("-duration must be positive (or set -calls)")
	case c.rounds < 1:
		return nil, errors.New("-rounds must be at least 1")
	case c.warmup < 0:
		return nil, errors.New("-warmup must not be negative")
	case c.mcpdProcs < 0:
		return nil, errors.New("-mcpd-max-procs must not be negative")
	}
	return c, nil
}

// mcpdArgs are the daemon flags the bench passes besides --listen and
// --config.
func (c *config) mcpdArgs() []string {
	return []string{"--log-level", c.mcpdLogLevel, "--max-procs", strconv.Itoa(c.mcpdProcs)}
}

// parseConcurrency parses "1,16,64" into distinct positive numbers, in the
// order given.
func parseConcurrency(s string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", part)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("want at least one number")
	}
	return out, nil
}

// parseChoices parses a comma-separated subset of allowed, keeping the
// order of allowed.
func parseChoices(s string, allowed ...string) ([]string, error) {
	picked := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		ok := false
		for _, a := range allowed {
			ok = ok || a == part
		}
		if !ok {
			return nil, fmt.Errorf("%q is not one of %s", part, strings.Join(allowed, ", "))
		}
		picked[part] = true
	}
	var out []string
	for _, a := range allowed {
		if picked[a] {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("want at least one of %s", strings.Join(allowed, ", "))
	}
	return out, nil
}
