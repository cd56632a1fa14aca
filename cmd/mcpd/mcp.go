package main

import (
	"net"
	"net/http"
	"time"

	"github.com/mcpd-project/mcpd/internal/server"
)

// mcpEndpointPath is where --mcp-listen serves the MCP endpoint.
const mcpEndpointPath = "/mcp"

// mcpReadHeaderTimeout bounds how long an MCP host may take to send its
// request headers, so that idle connections cannot pile up.
const mcpReadHeaderTimeout = 10 * time.Second

// newMCPServer serves the MCP endpoint h at /mcp on lis. On loopback it
// refuses a request from a web page of another origin, as the MCP spec
// asks of local servers (the SDK checks the Host header itself).
func newMCPServer(lis net.Listener, h http.Handler) *http.Server {
	mux := http.NewServeMux()
	mux.Handle(mcpEndpointPath, h)
	return &http.Server{Handler: server.LoopbackOnly(lis, mux), ReadHeaderTimeout: mcpReadHeaderTimeout}
}
