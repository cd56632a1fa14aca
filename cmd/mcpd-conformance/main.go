// Command mcpd-conformance is the client under test that the MCP project's
// conformance suite (@modelcontextprotocol/conformance) runs to measure
// mcpd as an MCP client.
//
// The suite starts a mock MCP server per scenario and runs
//
//	mcpd-conformance [flags] <server-url>
//
// with MCP_CONFORMANCE_SCENARIO (the scenario), MCP_CONFORMANCE_PROTOCOL_VERSION
// (the revision whose wire the scenario runs at) and, for some scenarios,
// MCP_CONFORMANCE_CONTEXT (JSON with scenario data such as tool calls). The
// driver starts a private bin/mcpd on a Unix socket with no configured
// servers, connects the URL through MCPHub.ConnectServer with the protocol
// version forced, performs the scenario's client actions through MCPHub RPCs
// (answering sampling and elicitation through HandleServerRequests with fixed
// replies, and completing OAuth consents the way an agent does: see
// auth.go), stops mcpd with SIGTERM and exits 0 or 1. The suite judges what
// reached its mock server; the driver never speaks MCP itself.
//
// The driver prints one verdict line on stdout ("mcpd-conformance: PASS" or
// "mcpd-conformance: FAIL: <reason>"), which the suite keeps in the
// scenario's stdout.txt; mcpd's log goes to stderr.
//
// "mcpd-conformance front" runs the suite's server scenarios against
// mcpd's MCP endpoint instead (see front.go).
//
// "mcpd-conformance report" reads the suite's result directories (-o) of one
// or more requirement sets and compares them with an expected-failures
// baseline; `make conformance` runs it after the suite.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// Environment the suite sets for the client under test.
const (
	envScenario        = "MCP_CONFORMANCE_SCENARIO"
	envProtocolVersion = "MCP_CONFORMANCE_PROTOCOL_VERSION"
	envContext         = "MCP_CONFORMANCE_CONTEXT"
	// envMCPD names the mcpd binary when -mcpd is not given.
	envMCPD = "MCPD_BIN"
)

// verdictPrefix starts the one line the driver prints on stdout; report
// looks for it in the suite's stdout.txt.
const verdictPrefix = "mcpd-conformance: "

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(mainExit(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// mainExit runs the driver or the report and returns the exit code.
func mainExit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "front" {
		code, err := runFront(ctx, args[1:], stdout, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "mcpd-conformance front: %v\n", err)
		}
		return code
	}
	if len(args) > 0 && args[0] == "report" {
		ok, err := runReport(args[1:], stdout)
		if err != nil {
			fmt.Fprintf(stderr, "mcpd-conformance report: %v\n", err)
			return 2
		}
		if !ok {
			return 1
		}
		return 0
	}
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "mcpd-conformance: %v\n", err)
		fmt.Fprintf(stdout, "%sFAIL: %v\n", verdictPrefix, err)
		return 2
	}
	if err := run(ctx, cfg, stderr); err != nil {
		fmt.Fprintf(stderr, "mcpd-conformance: scenario %s: %v\n", cfg.scenario, err)
		fmt.Fprintf(stdout, "%sFAIL: %v\n", verdictPrefix, err)
		return 1
	}
	fmt.Fprintf(stdout, "%sPASS\n", verdictPrefix)
	return 0
}

// config is one driver run.
type config struct {
	mcpd            string         // the mcpd binary
	url             string         // the scenario's server URL
	scenario        string         // MCP_CONFORMANCE_SCENARIO
	protocolVersion string         // forced revision; "" lets mcpd negotiate
	context         map[string]any // MCP_CONFORMANCE_CONTEXT, or nil
	transport       string         // "http" or "remote"
	dir             string         // the private mcpd's directory, for files the driver writes
	timeout         time.Duration  // bounds the whole run
	logLevel        string         // mcpd's --log-level
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("mcpd-conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s=<scenario> mcpd-conformance [flags] <server-url>\n"+
			"       mcpd-conformance report -h\n", envScenario)
		fs.PrintDefaults()
	}
	c := &config{}
	fs.StringVar(&c.mcpd, "mcpd", os.Getenv(envMCPD), "mcpd binary to run (default $"+envMCPD+", else mcpd next to this binary)")
	fs.StringVar(&c.transport, "transport", "http", "ServerConfig transport for the URL: http or remote")
	// The suite kills the client after its own --timeout (30s by default);
	// ending a little earlier leaves a verdict and mcpd's log behind.
	fs.DurationVar(&c.timeout, "timeout", 25*time.Second, "bound on the whole run, mcpd start and stop included")
	fs.StringVar(&c.logLevel, "log-level", "debug", "mcpd's --log-level (its log goes to stderr)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return nil, fmt.Errorf("want one argument, the server URL; got %d", fs.NArg())
	}
	c.url = fs.Arg(0)
	if c.transport != "http" && c.transport != "remote" {
		return nil, fmt.Errorf("-transport %q: want http or remote", c.transport)
	}
	if c.timeout <= 0 {
		return nil, fmt.Errorf("-timeout %v: want a positive duration", c.timeout)
	}
	c.scenario = os.Getenv(envScenario)
	if c.scenario == "" {
		return nil, fmt.Errorf("%s is not set", envScenario)
	}
	c.protocolVersion = os.Getenv(envProtocolVersion)
	if raw := os.Getenv(envContext); raw != "" {
		if err := json.Unmarshal([]byte(raw), &c.context); err != nil {
			return nil, fmt.Errorf("%s: %w", envContext, err)
		}
	}
	if c.mcpd == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find mcpd next to this binary: %w", err)
		}
		c.mcpd = filepath.Join(filepath.Dir(self), "mcpd")
	}
	return c, nil
}
