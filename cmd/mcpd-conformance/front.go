package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"time"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// "mcpd-conformance front" measures mcpd as an MCP server: it starts a
// private mcpd whose one server is the conformance fixture (the server the
// suite's server scenarios expect: its tools, resources and prompts), with
// the MCP endpoint (--mcp-listen) on a free loopback port, waits until the
// fixture is READY, runs the command given after "--" with "--url
// <endpoint>" appended (the suite's `server` subcommand), and stops mcpd.
// It exits with the command's status.

// fixtureServer is the fixture's name in mcpd.
const fixtureServer = "fixture"

// frontReadyTimeout bounds mcpd's start and the fixture's first session.
const frontReadyTimeout = 30 * time.Second

func runFront(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("mcpd-conformance front", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mcpd := fs.String("mcpd", os.Getenv(envMCPD), "mcpd binary to run (default $"+envMCPD+")")
	fixture := fs.String("fixture", "", "the conformance fixture server's binary (stdio)")
	version := fs.String("protocol-version", "", "protocol version mcpd forces on the fixture's session; empty lets them negotiate")
	logLevel := fs.String("log-level", "warn", "mcpd's --log-level (its log goes to stderr)")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	if *mcpd == "" || *fixture == "" || fs.NArg() == 0 {
		return 2, errors.New("usage: mcpd-conformance front -mcpd BIN -fixture BIN [-protocol-version V] -- COMMAND...")
	}
	entry := map[string]any{"command": *fixture}
	if *version != "" {
		entry["protocolVersion"] = *version
	}
	config, err := json.Marshal(map[string]any{"mcpServers": map[string]any{fixtureServer: entry}})
	if err != nil {
		return 2, err
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return 2, err
	}
	startCtx, cancel := context.WithTimeout(ctx, frontReadyTimeout)
	defer cancel()
	d, conn, err := startDaemonWith(startCtx, *mcpd, *logLevel, stderr, string(config), "--mcp-listen", addr)
	if err != nil {
		return 1, err
	}
	defer conn.Close()
	defer func() {
		if err := d.stop(); err != nil {
			fmt.Fprintf(stderr, "mcpd-conformance front: %v\n", err)
		}
	}()
	s, err := mcpdv1.NewMCPHubClient(conn).GetServer(startCtx, &mcpdv1.GetServerRequest{Name: fixtureServer})
	if err != nil {
		return 1, fmt.Errorf("GetServer %s: %w", fixtureServer, err)
	}
	if s.GetServer().GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		return 1, fmt.Errorf("the fixture is %v, not READY: %s", s.GetServer().GetState(), s.GetServer().GetLastError())
	}
	fmt.Fprintf(stderr, "mcpd-conformance front: mcpd serves the fixture (protocol %s) at http://%s/mcp\n", s.GetServer().GetProtocolVersion(), addr)
	rest := fs.Args()
	cmd := exec.CommandContext(ctx, rest[0], append(rest[1:], "--url", "http://"+addr+"/mcp")...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// freeLoopbackAddr returns a loopback address whose port was free a moment
// ago.
func freeLoopbackAddr() (string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer lis.Close()
	return lis.Addr().String(), nil
}
