package main

import (
	"net/http"
	"time"
)

// mcpEndpointPath is where --mcp-listen serves the MCP endpoint.
const mcpEndpointPath = "/mcp"

// mcpReadHeaderTimeout bounds how long an MCP host may take to send its
// request headers, so that idle connections cannot pile up.
const mcpReadHeaderTimeout = 10 * time.Second

// newMCPServer serves the MCP endpoint h at /mcp.
func newMCPServer(h http.Handler) *http.Server {
	mux := http.NewServeMux()
	mux.Handle(mcpEndpointPath, h)
	return &http.Server{Handler: mux, ReadHeaderTimeout: mcpReadHeaderTimeout}
}
