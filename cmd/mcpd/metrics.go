package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/mcpclient"
	"github.com/mcpd-project/mcpd/internal/server"
)

// traceFlushTimeout bounds the export of the spans still buffered at exit:
// a collector that is away must not hold up the daemon's stop.
const traceFlushTimeout = 5 * time.Second

// listenMetrics opens the metrics listener under the rules of the gRPC
// one: a TCP address must be loopback unless it is guarded (the metrics
// name servers and tools; see metricsGuarded), and a Unix socket is mode
// 0600. With tlsConfig, the listener serves TLS (mutual TLS when the
// config asks for client certificates), as the gRPC listener does.
func listenMetrics(addr string, guarded bool, tlsConfig *tls.Config) (net.Listener, error) {
	if !strings.HasPrefix(addr, "unix://") {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("--metrics-listen %q: want host:port or unix:///path: %w", addr, err)
		}
		if !server.IsLoopbackHost(host) && !guarded {
			return nil, fmt.Errorf("--metrics-listen %q is not a loopback address: to serve metrics beyond this machine, use TLS (--tls-cert, --tls-key) with MCPD_API_TOKEN or --api-token-file, or mutual TLS (--tls-client-ca)", addr)
		}
	}
	lis, err := listenFor("--metrics-listen", addr, true)
	if err != nil {
		return nil, err // it names --metrics-listen
	}
	if tlsConfig != nil {
		lis = tls.NewListener(lis, tlsConfig)
	}
	return lis, nil
}

// metricsGuarded reports whether the metrics listener may serve beyond
// this machine. Like the gRPC listener it needs TLS, so that the token does
// not cross the network in clear text; and a credential the scrape itself
// presents: the API token, or a client certificate. Callers' tokens do not
// open the metrics, so a callers file alone is not enough.
func metricsGuarded(c *config, token string) bool {
	return c.tlsCert != "" && (token != "" || c.tlsClientCA != "")
}

// newMetricsServer serves h at /metrics on lis. With an API token, a
// scrape must present it as "Authorization: Bearer <token>", as RPCs do;
// on loopback, a web page cannot read it (server.LoopbackOnly).
func newMetricsServer(lis net.Listener, h http.Handler, token string) *http.Server {
	if token != "" {
		h = requireBearer(h, token)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	// A scrape is one short request: nothing to keep alive.
	return server.NewHTTPServer(lis, mux, 0)
}

// requireBearer lets through only requests with the token, read as the
// other wires read it (the scheme in any case, RFC 9110) and compared as
// hashes in constant time, so neither its content nor its length shows in
// the answer's timing.
func requireBearer(h http.Handler, token string) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(got))
		if !strings.EqualFold(scheme, "bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "missing or invalid bearer token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// markReadyWhenStarted turns the daemon's health to SERVING once every
// configured server has had its first start (ready or failed). The
// returned stop ends the wait, if it is still going, and waits for it.
func markReadyWhenStarted(ctx context.Context, mgr *mcpclient.Manager, health *server.Health, log zerolog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.WaitStarted(ctx); err != nil {
			return
		}
		health.SetServing(true)
		log.Info().Msg("configured servers started: ready")
	}()
	return func() {
		cancel()
		<-done
	}
}
