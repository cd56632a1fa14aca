package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Exit codes of `mcpd health`.
const (
	healthServing    = 0 // the service is SERVING
	healthNotServing = 1 // any other status, or mcpd did not answer
	healthUsage      = 2 // bad flags, or TLS files that do not load
)

// runHealth is `mcpd health`: it asks a running mcpd for the
// grpc.health.v1 status of a service and exits 0 only for SERVING. It is
// what a Kubernetes exec probe runs when mcpd listens on a Unix socket or
// serves TLS, neither of which the kubelet's own gRPC probe can reach, and
// the image has no shell or other client to run instead. --listen (or
// MCPD_LISTEN) names the daemon's address the way the daemon takes it.
// Its TLS flags are those of tlsFlags.
func runHealth(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcpd health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:50051", "address of the mcpd to check: host:port or unix:///path/to.sock (default MCPD_LISTEN, then 127.0.0.1:50051)")
	service := fs.String("service", "", `health service to check: "" for mcpd as a whole, "mcpd.server/NAME" for one server`)
	timeout := fs.Duration("timeout", time.Second, "how long to wait for the answer")
	var h tlsFlags
	h.register(fs, "--listen")
	if v, ok := lookup("MCPD_LISTEN"); ok {
		*listen = v
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return healthServing
		}
		return healthUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcpd health: unexpected argument %q\n", fs.Arg(0))
		return healthUsage
	}
	// A probe that cannot succeed is a mistake in the manifest: said as
	// such (2), not as a daemon that does not answer (1).
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "mcpd health: --timeout %v: want a duration above 0\n", *timeout)
		return healthUsage
	}
	if err := checkAddress("--listen", *listen); err != nil {
		fmt.Fprintf(stderr, "mcpd health: %v\n", err)
		return healthUsage
	}
	creds, err := h.credentials()
	if err != nil {
		fmt.Fprintf(stderr, "mcpd health: %v\n", err)
		return healthUsage
	}
	target := *listen
	if !strings.HasPrefix(target, "unix://") {
		// Dial the address as given: no name resolution beyond the dialer's.
		target = "passthrough:///" + target
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		fmt.Fprintf(stderr, "mcpd health: %s: %v\n", *listen, err)
		return healthUsage
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: *service})
	if err != nil {
		fmt.Fprintf(stderr, "mcpd health: %s: %v\n", *listen, err)
		return healthNotServing
	}
	fmt.Fprintln(stdout, resp.GetStatus())
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return healthNotServing
	}
	return healthServing
}

// credentials returns plaintext credentials unless a TLS flag is set.
func (c *tlsFlags) credentials() (credentials.TransportCredentials, error) {
	if !c.set() {
		return insecure.NewCredentials(), nil
	}
	cfg, err := c.config()
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}

// checkAddress checks that addr is an address as the daemon's flag takes
// it: host:port, or unix:// with a path.
func checkAddress(flag, addr string) error {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		if path == "" {
			return fmt.Errorf("%s unix:// needs a path, e.g. unix:///run/mcpd.sock", flag)
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%s %q: want host:port or unix:///path: %w", flag, addr, err)
	}
	return nil
}
