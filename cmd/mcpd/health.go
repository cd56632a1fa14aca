package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
// The TLS flags have no MCPD_* fallback: in mcpd's own container
// MCPD_TLS_CERT and the like are the daemon's server files.
func runHealth(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcpd health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:50051", "address of the mcpd to check: host:port or unix:///path/to.sock (default MCPD_LISTEN, then 127.0.0.1:50051)")
	service := fs.String("service", "", `health service to check: "" for mcpd as a whole, "mcpd.server/NAME" for one server`)
	timeout := fs.Duration("timeout", time.Second, "how long to wait for the answer")
	var h healthTLS
	fs.BoolVar(&h.on, "tls", false, "connect with TLS, trusting the system's CAs unless --tls-ca is set (implied by the other --tls-* flags)")
	fs.StringVar(&h.caFile, "tls-ca", "", "PEM CA certificates that mcpd's certificate must chain to")
	fs.StringVar(&h.serverName, "tls-server-name", "", "name mcpd's certificate must hold (default the --listen host)")
	fs.StringVar(&h.certFile, "tls-client-cert", "", "PEM client certificate to present, for a mcpd with mutual TLS (needs --tls-client-key)")
	fs.StringVar(&h.keyFile, "tls-client-key", "", "PEM private key of --tls-client-cert")
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

// healthTLS are the TLS flags of `mcpd health`.
type healthTLS struct {
	on                 bool
	caFile, serverName string
	certFile, keyFile  string
}

// credentials returns plaintext credentials unless a TLS flag is set.
func (h *healthTLS) credentials() (credentials.TransportCredentials, error) {
	if !h.on && h.caFile == "" && h.serverName == "" && h.certFile == "" && h.keyFile == "" {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: h.serverName}
	if h.caFile != "" {
		pem, err := os.ReadFile(h.caFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificates", h.caFile)
		}
	}
	if (h.certFile == "") != (h.keyFile == "") {
		return nil, errors.New("--tls-client-cert and --tls-client-key go together")
	}
	if h.certFile != "" {
		pair, err := tls.LoadX509KeyPair(h.certFile, h.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-cert: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(cfg), nil
}
