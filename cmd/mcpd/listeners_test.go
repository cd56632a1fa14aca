package main

import (
	"net"
	"net/http"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/server"
)

// TestListenersCloseIdleConnections: every HTTP listener of mcpd bounds
// the wait for request headers and closes idle keep-alive connections, so
// that a client (one refused with 401 too) cannot hold connections open
// forever.
func TestListenersCloseIdleConnections(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	_, redirect, err := startOAuth("", false, "127.0.0.1:0", zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer redirect.stop(t.Context())
	for name, srv := range map[string]*http.Server{
		"mcp":            newMCPServer(lis, http.NotFoundHandler(), 0),
		"metrics":        newMetricsServer(lis, http.NotFoundHandler(), ""),
		"oauth redirect": redirect.srv,
	} {
		if srv.ReadHeaderTimeout != server.HTTPReadHeaderTimeout || srv.IdleTimeout != server.HTTPIdleTimeout {
			t.Errorf("%s listener: ReadHeaderTimeout %v, IdleTimeout %v; want %v and %v", name,
				srv.ReadHeaderTimeout, srv.IdleTimeout, server.HTTPReadHeaderTimeout, server.HTTPIdleTimeout)
		}
	}
}
