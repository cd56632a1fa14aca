package main

import (
	"net"
	"net/http"
	"time"

	"github.com/mcpd-project/mcpd/internal/server"
)

// mcpEndpointPath is where --mcp-listen serves the MCP endpoint.
const mcpEndpointPath = "/mcp"

// newMCPServer serves the MCP endpoint h at /mcp on lis. On loopback it
// refuses a request from a web page of another origin, as the MCP spec
// asks of local servers (the SDK checks the Host header itself), and
// closes idle connections as every listener of mcpd does.
func newMCPServer(lis net.Listener, h http.Handler, keepalive time.Duration) *http.Server {
	mux := http.NewServeMux()
	mux.Handle(mcpEndpointPath, h)
	return server.NewHTTPServer(lis, mux, keepalive)
}
