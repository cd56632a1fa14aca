package server

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"connectrpc.com/vanguard/vanguardgrpc"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// The HTTP listener serves the same services as the gRPC one, over the
// Connect protocol (JSON and binary), gRPC-Web and gRPC, on HTTP/1.1 and
// HTTP/2 (h2c in clear text). It holds no handler of its own: a unary
// MCPHub call runs the gRPC server's method handler, interceptor chain
// and stats handler directly (http_unary.go), and every other request
// (streams, health, reflection) is turned by the transcoder into a gRPC
// call of the very grpc.Server behind the gRPC listener. Either way every
// interceptor (authentication, permissions, audit, logging, metrics) and
// the one error mapping apply unchanged.

const (
	// HTTPReadHeaderTimeout bounds how long a client of any of mcpd's
	// HTTP listeners may take to send its request headers.
	HTTPReadHeaderTimeout = 10 * time.Second
	// HTTPIdleTimeout closes a keep-alive connection (HTTP/1.1, or HTTP/2
	// with no stream open) of any of mcpd's HTTP listeners that has been
	// idle this long, so that idle connections cannot pile up: a client
	// that sent nothing more is otherwise kept forever.
	HTTPIdleTimeout = 2 * time.Minute
)

// NewHTTPServer is the http.Server of one of mcpd's HTTP listeners, lis:
// h behind LoopbackOnly, with the header and idle timeouts above. With a
// positive keepalive, an HTTP/2 connection that brought nothing for that
// long is pinged, and closed when the ping goes unanswered as long again
// (see Options.ClientKeepalive); HTTP/1.1 has no ping.
func NewHTTPServer(lis net.Listener, h http.Handler, keepalive time.Duration) *http.Server {
	hs := &http.Server{
		Handler:           LoopbackOnly(lis, h),
		ReadHeaderTimeout: HTTPReadHeaderTimeout,
		IdleTimeout:       HTTPIdleTimeout,
	}
	if keepalive > 0 {
		hs.HTTP2 = &http.HTTP2Config{SendPingTimeout: keepalive, PingTimeout: keepalive}
	}
	return hs
}

// transcodeBufferFactor sizes the transcoder's message buffer against the
// largest message mcpd accepts: JSON takes up to a few times the bytes of
// the protobuf it stands for.
const transcodeBufferFactor = 4

// HTTPOptions configure ServeHTTP.
type HTTPOptions struct {
	// MaxMessageBytes bounds one message a client sends (the body of a
	// unary request, or one message of a stream), as MaxRecvMsgSize does
	// on the gRPC listener; 0 means the transcoder's default.
	MaxMessageBytes int
	// ClientKeepalive pings quiet HTTP/2 connections, as
	// Options.ClientKeepalive does on the gRPC listener; 0: never.
	ClientKeepalive time.Duration
}

// ServeHTTP serves the MCPHub API on lis over HTTP until Shutdown, which
// lets its requests finish (after ending the long-lived streams) before
// the gRPC server stops. A TLS listener (tls.NewListener, with "h2" and
// "http/1.1" offered) serves HTTPS; any other serves HTTP/1.1 and h2c.
func (s *Server) ServeHTTP(lis net.Listener, opts *HTTPOptions) error {
	if opts == nil {
		opts = &HTTPOptions{}
	}
	var svcOpts []vanguard.ServiceOption
	transOpts := []vanguard.TranscoderOption{vanguard.WithCodec(compactJSON)}
	if opts.MaxMessageBytes > 0 {
		// The transcoder decompresses a message it must convert (JSON)
		// without any bound of its own: a few MiB of gzip would become
		// GiBs in memory. Its buffer limit bounds the compressed size only.
		limit := min(int64(opts.MaxMessageBytes)*transcodeBufferFactor, math.MaxUint32)
		transOpts = append(transOpts, vanguard.WithCompression("gzip",
			func() connect.Compressor { return gzip.NewWriter(io.Discard) },
			func() connect.Decompressor { return &boundedGzip{limit: limit} }))
		// The gRPC server's own limit refuses a message over it with
		// RESOURCE_EXHAUSTED. The transcoder's buffer (a JSON message is
		// held whole while it becomes protobuf) only bounds memory, so it
		// is set well above: reaching it is an error of another code.
		svcOpts = append(svcOpts, vanguard.WithMaxMessageBufferBytes(uint32(min(int64(opts.MaxMessageBytes)*transcodeBufferFactor, math.MaxUint32))))
	}
	handler, err := vanguardgrpc.NewTranscoder(s.grpc,
		append(transOpts, vanguard.WithDefaultServiceOptions(svcOpts...))...)
	if err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true)
	direct := s.unaryHTTPHandlers(&mcpdv1.MCPHub_ServiceDesc, mcpdv1.File_mcpd_v1_mcpd_proto.Services().ByName("MCPHub"), opts.MaxMessageBytes)
	route := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := direct[r.URL.Path]; ok {
			h.ServeHTTP(w, r)
			return
		}
		handler.ServeHTTP(headersAtOnce{w}, r)
	})
	hs := NewHTTPServer(lis, connectWithoutHeader(connectRequestForm(route)), opts.ClientKeepalive)
	hs.Protocols = &protocols
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return nil // shut down before it began: nothing to serve
	}
	s.http = append(s.http, hs)
	s.mu.Unlock()
	if err := hs.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// shutdownHTTP lets the HTTP listeners' requests finish until ctx ends,
// then closes what is left.
func (s *Server) shutdownHTTP(ctx context.Context) {
	s.mu.Lock()
	s.stopping = true
	servers := s.http
	s.mu.Unlock()
	for _, hs := range servers {
		if err := hs.Shutdown(ctx); err != nil {
			_ = hs.Close()
		}
	}
}

// headersAtOnce sends a stream's response headers as soon as the
// transcoder writes them, which it does when the handler sends them
// (Subscribe's AfterSequenceHeader, at the stream's start); by itself it
// flushes only with a message, and a quiet stream's client would not see
// them until its first event.
type headersAtOnce struct{ http.ResponseWriter }

func (w headersAtOnce) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	w.Flush()
}

func (w headersAtOnce) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is for http.ResponseController.
func (w headersAtOnce) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// connectWithoutHeader lets a Connect unary POST without the optional
// Connect-Protocol-Version header through as Connect, as connect-go's own
// handlers do: `curl -H 'content-type: application/json' -d ...` is the
// plainest client there is. The transcoder would otherwise take it for a
// REST call, which mcpd does not map.
func connectWithoutHeader(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Connect-Protocol-Version") == "" {
			switch ct := r.Header.Get("Content-Type"); {
			case ct == "application/json", ct == "application/proto",
				strings.HasPrefix(ct, "application/json;"), strings.HasPrefix(ct, "application/proto;"):
				r.Header.Set("Connect-Protocol-Version", "1")
			}
		}
		h.ServeHTTP(w, r)
	})
}

// connectRequestForm refuses, with invalid_argument, a Connect request
// whose form the protocol does not allow where connect-go and the
// transcoder take it for something else: a Connect-Timeout-Ms that is
// not 1 to 10 ASCII digits (connect-go takes "-5" as a deadline already
// past, DEADLINE_EXCEEDED, and "+5" as 5), and a GET whose base64
// message does not decode (connect-go fails it as UNKNOWN, 500, while
// reading it). Requests of gRPC and gRPC-Web, which carry their timeout
// in grpc-timeout, pass as they are.
func connectRequestForm(h http.Handler) http.Handler {
	errs := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			h.ServeHTTP(w, r)
			return
		}
		var err error
		if timeout := r.Header.Get("Connect-Timeout-Ms"); timeout != "" && !connectTimeout(timeout) {
			err = errors.New("the Connect-Timeout-Ms header must be 1 to 10 digits")
		} else if r.Method == http.MethodGet && !connectGetMessage(r.URL.Query()) {
			err = errors.New("the message query parameter is not URL-safe base64, which base64=1 says it is")
		}
		if err != nil {
			_ = errs.Write(w, r, connect.NewError(connect.CodeInvalidArgument, err))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// connectTimeout reports whether v is a Connect-Timeout-Ms value: "a
// positive integer as ASCII string of at most 10 digits" in the Connect
// protocol's words (0 is taken too, as connect-go takes it: a deadline
// that has passed).
func connectTimeout(v string) bool {
	if len(v) > 10 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// connectGetMessage reports whether a Connect GET's query holds a
// message connect-go can read: any, unless base64=1 says it is base64,
// which must then decode, padded or not, as connect-go reads it.
func connectGetMessage(query url.Values) bool {
	if query.Get("base64") != "1" {
		return true
	}
	msg := query.Get("message")
	enc := base64.URLEncoding
	if len(msg)%4 != 0 {
		enc = base64.RawURLEncoding
	}
	_, err := enc.DecodeString(msg)
	return err == nil
}

// LoopbackOnly is next, refusing with 403, when lis is a loopback TCP
// listener, a request that names another host or comes from a page of
// another origin. A web page whose name an attacker points at 127.0.0.1
// (DNS rebinding) is otherwise same-origin with the listener, and could
// call whatever a caller without a token may. The MCP endpoint has the
// same check from the SDK. Other listeners are returned as they are: a
// Unix socket is out of a browser's reach, and mcpd serves beyond
// loopback only with TLS and a credential.
func LoopbackOnly(lis net.Listener, next http.Handler) http.Handler {
	if a, ok := lis.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !IsLoopbackHost(r.Host) {
			http.Error(w, "Forbidden: the Host header names no loopback address", http.StatusForbidden)
			return
		}
		// A browser sends no Origin with a GET of mode no-cors (an <img
		// src> of another site's page): the Fetch Metadata header says
		// where it came from. A request with an Origin (a local web
		// client's fetch, cross-site between localhost and 127.0.0.1) is
		// the Origin check's.
		if r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			http.Error(w, "Forbidden: a request from another site", http.StatusForbidden)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			if u, err := url.Parse(origin); err != nil || !IsLoopbackHost(u.Host) {
				http.Error(w, "Forbidden: a request from another origin", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// IsLoopbackHost reports whether host (with or without a port) is
// localhost or a loopback IP address: the names mcpd takes as this
// machine's, for its listeners and for requests to them.
func IsLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// boundedGzip is a gzip decompressor that fails, with RESOURCE_EXHAUSTED,
// once it has produced more than limit bytes.
type boundedGzip struct {
	gz       *gzip.Reader
	limit, n int64
}

func (d *boundedGzip) Read(p []byte) (int, error) {
	if d.gz == nil {
		return 0, io.EOF
	}
	n, err := d.gz.Read(p)
	d.n += int64(n)
	if d.n > d.limit {
		return n, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("decompressed message larger than max (%d bytes)", d.limit))
	}
	return n, err
}

func (d *boundedGzip) Reset(r io.Reader) error {
	d.n = 0
	if d.gz == nil {
		gz, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		d.gz = gz
		return nil
	}
	return d.gz.Reset(r)
}

func (d *boundedGzip) Close() error {
	if d.gz == nil {
		return nil
	}
	return d.gz.Close()
}
