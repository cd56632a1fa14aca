package main

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/access"
)

// mcpEndpointPath is where --mcp-listen serves the MCP endpoint.
const mcpEndpointPath = "/mcp"

// mcpReadHeaderTimeout bounds how long an MCP host may take to send its
// request headers, so that idle connections cannot pile up.
const mcpReadHeaderTimeout = 10 * time.Second

// listenMCP opens the MCP endpoint's listener under the rules of the gRPC
// one, with TLS when the gRPC listener has it.
func listenMCP(c *config, token string, log zerolog.Logger) (net.Listener, error) {
	lis, err := listenFor("--mcp-listen", c.mcpListen, guardedBeyondLoopback(c, token))
	if err != nil {
		return nil, err
	}
	if c.tlsCert == "" {
		return lis, nil
	}
	cfg, err := access.NewServerTLS(access.TLSFiles{Cert: c.tlsCert, Key: c.tlsKey, ClientCA: c.tlsClientCA},
		&access.TLSOptions{Logger: log, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		lis.Close()
		return nil, err
	}
	return tls.NewListener(lis, cfg), nil
}

// newMCPServer serves the MCP endpoint h at /mcp.
func newMCPServer(h http.Handler) *http.Server {
	mux := http.NewServeMux()
	mux.Handle(mcpEndpointPath, h)
	return &http.Server{Handler: mux, ReadHeaderTimeout: mcpReadHeaderTimeout}
}
