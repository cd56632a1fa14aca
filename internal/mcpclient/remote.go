package mcpclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/oauth"
	"github.com/mcpd-project/mcpd/internal/telemetry"
	"github.com/mcpd-project/mcpd/internal/transport"
)

// Remote servers are reached with the SDK's own client transports:
// Streamable HTTP (both protocol eras: session id, MCP-Protocol-Version and
// the 2026-07-28 request headers, the standalone GET stream of legacy
// sessions, DELETE on close) and the legacy HTTP+SSE transport (the
// endpoint event, POSTs to the session endpoint). What mcpd adds sits in an
// http.RoundTripper, because the Streamable HTTP connection cannot be
// wrapped (the SDK updates it through an unexported interface): static
// headers, a bound on message size, and turning "unknown session" answers
// into the SDK's session-loss error, a 4xx to one message into the failure
// of that message alone (refusedAlone), and recording whether a request
// was sent at all (transport.SendRecord).

// Defaults of RemoteOptions.
const (
	defaultMaxMessageBytes = 16 << 20
	// defaultStreamRetries keeps a brief network blip from costing a legacy
	// session its standalone stream, yet gives a dead server up within a
	// few seconds (the SDK waits about 1-2s, then 1.5-3s), after which
	// mcpd rebuilds the session with its own backoff.
	defaultStreamRetries = 2
	// defaultPostTimeout is RemoteOptions.PostTimeout's default: as long
	// as a write to a stdio server without a deadline may wait.
	defaultPostTimeout = time.Minute
	// sessionErrorPeek bounds how much of a 400 answer is read to see
	// whether it is about the session.
	sessionErrorPeek = 4 << 10
	// streamHeld is how long an event stream must have been open for its
	// end to count as a stream that worked (see resumeBody): far below
	// any proxy's idle timeout, yet long enough that a server that closes
	// every stream at once still has it given up by the SDK's retries.
	streamHeld = time.Second
	// maxTrackedLine bounds the part of an event stream's line kept to
	// read an id field; a longer id turns the stream's end marking off.
	maxTrackedLine = 1 << 10
)

// RemoteOptions configure NewRemoteDialer. The zero value of each field
// selects its default.
type RemoteOptions struct {
	// Logger receives the wire trace of Streamable HTTP servers whose
	// config says "trace"; default: none.
	Logger zerolog.Logger
	// HTTPClient is the base of every session's client: its Transport
	// sends the requests (wrapped per session), its Jar and CheckRedirect
	// are kept. Its Timeout must stay zero: streams live as long as their
	// session, and each request is bounded by its own context. Default: a
	// client with dial, TLS handshake and idle timeouts and no overall
	// timeout. A server with a tls block gets a copy of the Transport
	// with the block's settings (and another for its OAuth requests to
	// other origins), so the Transport must then be an *http.Transport
	// (or nil, for http.DefaultTransport).
	HTTPClient *http.Client
	// Telemetry, if set and tracing, adds the trace context of each MCP
	// request to its HTTP request as traceparent headers.
	Telemetry *telemetry.Telemetry
	// MaxMessageBytes bounds one message from a server: a JSON response
	// body, or one server-sent event including its few bytes of framing.
	// A JSON body over it fails its request with a *MessageTooLargeError
	// and the session goes on; an event over it ends the session, since
	// the stream cannot be read past it. Default 16 MiB; negative disables
	// the bound.
	MaxMessageBytes int
	// StreamRetries is how often the SDK reconnects a dropped stream of a
	// legacy Streamable HTTP session (its standalone GET, or a resumable
	// response) before it ends the session, counting the drops of streams
	// that brought nothing new. A GET stream that stayed open for a while
	// (streamHeld) and then ended, as a proxy's idle timeout ends it,
	// counts as having brought something: its reconnects never run out.
	// Default 2; negative for none.
	StreamRetries int
	// OAuth, if set, authorizes requests to servers that have an oauth
	// block or no static Authorization header. The metadata,
	// registration and token requests of a server with a tls block go
	// through copies of HTTPClient's Transport with the block's settings
	// (see tlsTransports), not through the Manager's own client.
	OAuth *oauth.Manager
	// PostTimeout bounds the POST of a message the SDK sends on a context
	// that never ends: its answers to a server's own requests (roots,
	// sampling, elicitation) and some notifications. A server that never
	// answers such a POST would otherwise hold a goroutine, and the
	// session's close, for ever. Default 1 minute.
	PostTimeout time.Duration

	// tls holds the HTTP transports of servers with a tls block.
	tls *tlsTransports
}

func (o *RemoteOptions) withDefaults() *RemoteOptions {
	var out RemoteOptions
	if o != nil {
		out = *o
	}
	if out.HTTPClient == nil {
		out.HTTPClient = newRemoteHTTPClient()
	}
	if out.MaxMessageBytes == 0 {
		out.MaxMessageBytes = defaultMaxMessageBytes
	}
	if out.StreamRetries == 0 {
		out.StreamRetries = defaultStreamRetries
	}
	if out.PostTimeout <= 0 {
		out.PostTimeout = defaultPostTimeout
	}
	out.tls = &tlsTransports{byBlock: make(map[config.TLS]*tlsBlock)}
	return &out
}

// newRemoteHTTPClient returns a client whose connection setup is bounded
// but whose requests are not: a response stream lasts as long as its
// session, and every request carries its caller's deadline. No response
// header timeout either: a server answering with JSON sends its headers
// only when a (possibly long) tool call is done.
func newRemoteHTTPClient() *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          100,
		// Calls to one server run concurrently, each its own POST.
		MaxIdleConnsPerHost: 16,
	}}
}

// MessageTooLargeError is a message from a server over
// RemoteOptions.MaxMessageBytes.
type MessageTooLargeError struct {
	// Limit is the bound in bytes.
	Limit int
}

func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("upstream message exceeds %d bytes", e.Limit)
}

// Unwrap makes the error match transport.ErrMessageTooLarge, as an
// oversized line from a stdio server does.
func (e *MessageTooLargeError) Unwrap() error { return transport.ErrMessageTooLarge }

// NewRemoteDialer returns a Dialer for servers reached by URL: cfg.Kind
// TransportHTTP gets the SDK's Streamable HTTP client transport, and
// TransportSSE its legacy HTTP+SSE one. cfg.Headers go on every request to
// the server's origin (scheme, host and port of cfg.URL) and never
// elsewhere, so that a redirect to another host does not carry a token;
// they never replace a header the SDK sets itself.
func NewRemoteDialer(opts *RemoteOptions) Dialer {
	o := opts.withDefaults()
	return func(ctx context.Context, cfg config.Server) (mcp.Transport, error) {
		t, err := o.transport(cfg, listenEndedFrom(ctx), cutFrom(ctx))
		if err == nil {
			if f := sendsTrackedFrom(ctx); f != nil {
				f() // remoteRoundTripper marks every request's SendRecord
			}
		}
		return t, err
	}
}

// sendsTrackedKey carries, in the context given to a Dialer, what to call
// when the transport marks each request's transport.SendRecord, so that a
// request it never sent is known not to have run.
type sendsTrackedKey struct{}

func withSendsTracked(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, sendsTrackedKey{}, f)
}

func sendsTrackedFrom(ctx context.Context) func() {
	f, _ := ctx.Value(sendsTrackedKey{}).(func())
	return f
}

// listenEndedKey carries, in the context given to a Dialer, what to call
// when a subscriptions/listen stream of the session ends on its own.
type listenEndedKey struct{}

// withListenEnded asks the remote dialer to call f when a
// subscriptions/listen response stream ends without mcpd having cancelled
// it. On a 2026-07-28 server that is the only sign of a restart: the SDK
// neither waits on that stream nor reopens it, so without f resource
// updates would silently stop.
func withListenEnded(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, listenEndedKey{}, f)
}

func listenEndedFrom(ctx context.Context) func() {
	f, _ := ctx.Value(listenEndedKey{}).(func())
	return f
}

// cutKey carries, in the context given to a Dialer, a context whose end
// cuts off every HTTP request of the session, those the SDK sends on
// contexts nobody can end included: the DELETE and the messages its Close
// waits for. See upstream.closeSession.
type cutKey struct{}

func withCut(ctx context.Context, cut context.Context) context.Context {
	return context.WithValue(ctx, cutKey{}, cut)
}

func cutFrom(ctx context.Context) context.Context {
	cut, _ := ctx.Value(cutKey{}).(context.Context)
	return cut
}

// errCut fails a request of a session whose requests were cut off.
var errCut = errors.New("the session's requests were cut off: its server is being stopped")

// transport builds a fresh transport, and its own http.Client, for one
// session with cfg's server. The end of cut, if not nil, ends every
// request of the session.
func (o *RemoteOptions) transport(cfg config.Server, listenEnded func(), cut context.Context) (mcp.Transport, error) {
	if cfg.Kind != config.TransportHTTP && cfg.Kind != config.TransportSSE {
		return nil, errorf(ErrInvalidArgument, "server %q: %s is not a remote transport (want http or sse)", cfg.Name, cfg.Kind)
	}
	// The URL is not quoted in errors: it may carry a token.
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errorf(ErrInvalidArgument, "server %q: url is not an absolute http(s) URL", cfg.Name)
	}
	wire := o.HTTPClient.Transport
	// The OAuth requests of a server with a tls block use the block too;
	// nil leaves those of the others to the oauth.Manager's own client.
	var oauthVia *oauth.Transports
	if cfg.TLS != nil {
		t, elsewhere, err := o.tls.get(cfg.TLS, wire)
		if err != nil {
			return nil, fmt.Errorf("server %q: %w", cfg.Name, err)
		}
		wire = t
		oauthVia = &oauth.Transports{Own: t, Other: elsewhere}
	}
	rt := &remoteRoundTripper{
		base:        o.Telemetry.HTTPTransport(wire),
		origin:      origin(u),
		headers:     make(http.Header, len(cfg.Headers)),
		maxBytes:    o.MaxMessageBytes,
		listenEnded: listenEnded,
		streamable:  cfg.Kind == config.TransportHTTP,
		resumeTag:   "mcpd-" + rand.Text()[:8] + ".",
		postTimeout: o.PostTimeout,
		cut:         cut,
		log:         o.Logger.With().Str("server", cfg.Name).Logger(),
	}
	if rt.base == nil {
		rt.base = http.DefaultTransport
	}
	for k, v := range cfg.Headers {
		if http.CanonicalHeaderKey(k) == "Host" {
			rt.host = v
			continue
		}
		rt.headers.Set(k, v)
	}
	// The OAuth layer sits between rt's bounds and its send: a token
	// renewal before a request is bounded and cut off with the request.
	rt.next = sender{rt}
	if o.OAuth != nil && (cfg.OAuth != nil || !hasHeader(cfg.Headers, "Authorization")) {
		rt.next = o.OAuth.Transport(cfg.Name, cfg.URL, cfg.OAuth, rt.next, oauthVia)
	}
	var base http.RoundTripper = rt
	if cfg.Trace && cfg.Kind == config.TransportHTTP {
		// Stdio and SSE sessions are traced on their connection.
		base = &traceRoundTripper{base: base, t: newTracer(cfg, o.Logger.With().Str("server", cfg.Name).Logger())}
	}
	client := &http.Client{
		Transport:     base,
		CheckRedirect: keepMethod(o.HTTPClient.CheckRedirect),
		Jar:           o.HTTPClient.Jar,
		Timeout:       o.HTTPClient.Timeout,
	}
	retries := o.StreamRetries
	if retries < 0 {
		retries = -1 // the SDK's "none"; its 0 means its own default
	}
	if cfg.Kind == config.TransportHTTP {
		return &mcp.StreamableClientTransport{
			Endpoint:   cfg.URL,
			HTTPClient: client,
			MaxRetries: retries,
			// The SDK bounds each event of a response stream itself, and
			// ends the session when one is too large.
			MaxEventSize: o.MaxMessageBytes,
		}, nil
	}
	// The legacy SSE client ends its stream silently on an oversized
	// event, so mcpd counts event sizes itself to say why the session
	// ended; the SDK's own bound stays as a backstop.
	st := &sseState{}
	if o.MaxMessageBytes > 0 {
		rt.sse = st
	}
	return &sseTransport{
		inner: &mcp.SSEClientTransport{
			Endpoint:     cfg.URL,
			HTTPClient:   client,
			MaxEventSize: backstop(o.MaxMessageBytes),
		},
		state: st,
	}, nil
}

// hasHeader reports whether headers set name, in any case.
func hasHeader(headers map[string]string, name string) bool {
	for k := range headers {
		if http.CanonicalHeaderKey(k) == name {
			return true
		}
	}
	return false
}

// backstop is the SDK's event bound behind mcpd's own count: larger, so
// that mcpd's clearer error comes first.
func backstop(limit int) int {
	if limit <= 0 {
		return -1
	}
	return 2*limit + 1024
}

func origin(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

// remoteRoundTripper adds static headers, bounds response bodies, and makes
// an "unknown session" answer look like the 404 the SDK understands. Its
// RoundTrip bounds a request (PostTimeout, the cut) and hands it to next,
// which ends in send; what lies between (the OAuth layer, which may renew
// a token first) is under the same bounds.
type remoteRoundTripper struct {
	// next sends a request on RoundTrip's bounds: sender{rt}, or the OAuth
	// layer in front of it.
	next     http.RoundTripper
	base     http.RoundTripper
	origin   string
	headers  http.Header // static headers, canonical keys
	host     string      // a static Host header, if any
	maxBytes int
	sse      *sseState // non-nil for legacy SSE: count event sizes
	// streamable: the requests are of a Streamable HTTP session.
	streamable bool
	// listenEnded, if set, is called when a subscriptions/listen stream
	// ends while its request is still wanted.
	listenEnded func()
	// resumeTag starts the event ids resumeBody makes up, and resumes
	// numbers them.
	resumeTag string
	resumes   atomic.Uint64
	// postTimeout bounds a POST made on a context that never ends (see
	// RemoteOptions.PostTimeout).
	postTimeout time.Duration
	// cut, if not nil, ends every request once it ends (see withCut).
	cut context.Context
	log zerolog.Logger
}

func (rt *remoteRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.Context().Done() == nil && !carriesCall(req) {
		return rt.roundTripBounded(req)
	}
	if rt.cut != nil {
		return rt.roundTripCut(req)
	}
	return rt.next.RoundTrip(req)
}

// sender sends a request with its remoteRoundTripper's send, under the
// bounds that the remoteRoundTripper's RoundTrip set.
type sender struct{ rt *remoteRoundTripper }

func (s sender) RoundTrip(req *http.Request) (*http.Response, error) { return s.rt.send(req) }

// roundTripCut sends req until it is done or rt.cut ends.
func (rt *remoteRoundTripper) roundTripCut(req *http.Request) (*http.Response, error) {
	if rt.cut.Err() != nil {
		return nil, errCut
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(rt.cut, cancel)
	release := func() {
		stop()
		cancel()
	}
	resp, err := rt.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		release()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: release}
	return resp, nil
}

// send sends req with the session's headers and bounds, and notes that it
// was sent.
func (rt *remoteRoundTripper) send(req *http.Request) (*http.Response, error) {
	// resumedFrom is the server's own id of the event a GET resumes after.
	var resumedFrom string
	if rt.streamable && req.Method == http.MethodGet {
		resumedFrom = req.Header.Get("Last-Event-ID")
		if own, ok := rt.ownEventID(resumedFrom); ok {
			resumedFrom = own
			req = req.Clone(req.Context())
			if own == "" {
				req.Header.Del("Last-Event-ID")
			} else {
				req.Header.Set("Last-Event-ID", own)
			}
		}
	}
	if (len(rt.headers) > 0 || rt.host != "") && origin(req.URL) == rt.origin {
		req = req.Clone(req.Context())
		for k, v := range rt.headers {
			if _, set := req.Header[k]; !set {
				req.Header[k] = slices.Clone(v)
			}
		}
		if rt.host != "" {
			req.Host = rt.host
		}
	}
	rec := transport.SendRecordFrom(req.Context())
	if rec != nil {
		// A request whose headers were never written (a refused
		// connection, say) cannot have reached the server.
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{WroteHeaders: rec.MarkSent}))
	}
	resp, err := rt.base.RoundTrip(req)
	opened := time.Now() // a stream is held from its answer on, not from the request
	if err != nil {
		return nil, err
	}
	// The SDK gives a session's event stream up for good when its GET is
	// answered with anything but an event stream, a transient 503 from a
	// load balancer included: the session would stay ready and never see
	// a notification again. As an error, the SDK retries the GET with its
	// backoff, and ends the session if the server stays away.
	if rt.streamable && req.Method == http.MethodGet && (resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests) {
		resp.Body.Close()
		return nil, fmt.Errorf("event stream: server answered %s", resp.Status)
	}
	// Only the POST that carries the request says it was refused unrun:
	// the SDK resumes a broken answer stream with a GET made with the
	// request's context, and a 404 to that GET comes after the server
	// took the request. A 429 or 503 turns the request away before it
	// runs (a 502 or 504 may come after a gateway passed it on).
	lost := req.Header.Get("Mcp-Session-Id") != "" && req.Header.Get("Mcp-Protocol-Version") < statelessProtocolVersion && sessionLost(resp)
	turnedAway := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
	if rec != nil && req.Method == http.MethodPost && (lost || turnedAway) {
		// Only the POST of the call itself: the SDK sends the call's
		// cancellation with the call's context, and so its record.
		if call, _ := callIn(req); call != nil {
			rec.MarkRefused()
		}
	}
	if !rt.streamable && req.Method == http.MethodPost && resp.StatusCode >= 400 && resp.StatusCode < 500 {
		// A legacy SSE session's messages go to an endpoint that names the
		// session: a 404, or a 400 naming the session, says the server no
		// longer knows it (an instance behind a load balancer that never
		// had it, a server that dropped it), as over Streamable HTTP. The
		// call it answered so did not run.
		if msg, known := messageIn(req); known && !isHandshake(msg) && sessionLost(resp) {
			if call, ok := msg.(*jsonrpc.Request); ok && call.IsCall() && rec != nil {
				rec.MarkRefused()
			}
			return nil, errSessionForgotten
		}
	}
	if req.Method == http.MethodPost && resp.StatusCode >= 400 && resp.StatusCode < 500 {
		if msg, known := messageIn(req); known {
			refused, err := rt.refusedAlone(resp, msg)
			if err != nil || refused != resp {
				if call, ok := msg.(*jsonrpc.Request); ok && call.IsCall() && rec != nil {
					rec.MarkRefused()
				}
				if err != nil {
					return nil, err
				}
				resp = refused
			}
		}
	}
	resp, err = rt.bound(resp)
	if err == nil && rt.listenEnded != nil && req.Header.Get("Mcp-Method") == "subscriptions/listen" {
		resp.Body = &listenBody{rc: resp.Body, req: req.Context(), ended: rt.listenEnded}
	}
	if err == nil && rt.streamable && req.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
		if media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); media == "text/event-stream" {
			resp.Body = &resumeBody{rc: resp.Body, req: req.Context(), opened: opened, lastID: resumedFrom, boundary: true, mint: rt.mintEventID}
		}
	}
	return resp, err
}

// mintEventID makes up an event id that stands for the server's own id
// last (empty if the server gave none), for ownEventID to turn back.
func (rt *remoteRoundTripper) mintEventID(last string) string {
	return fmt.Sprintf("%s%d.%s", rt.resumeTag, rt.resumes.Add(1), last)
}

// ownEventID returns the server's own event id that id, one mintEventID
// made, stands for.
func (rt *remoteRoundTripper) ownEventID(id string) (own string, ok bool) {
	rest, ok := strings.CutPrefix(id, rt.resumeTag)
	if !ok {
		return "", false
	}
	_, own, ok = strings.Cut(rest, ".")
	return own, ok
}

// roundTripBounded sends req, a POST of a message on a context that never
// ends, for at most rt.postTimeout. The SDK sends its answers to a
// server's own requests that way: a server that took the POST and never
// answered it would hold the SDK's handler goroutine for ever, and with
// it the session's close. Given up, the message is lost: the SDK takes
// the failed POST of a Streamable HTTP session for a message that never
// left, and the session goes on; a legacy SSE session's writes fail from
// then on, and its keepalive pings rebuild it.
func (rt *remoteRoundTripper) roundTripBounded(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), rt.postTimeout)
	resp, err := rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			rt.log.Warn().Dur("timeout", rt.postTimeout).Msg("the server did not answer the POST of mcpd's answer to its request (or of a notification): gave up, the message is lost")
		}
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// carriesCall reports whether req's body is a JSON-RPC request that wants
// an answer (whose answer stream must outlive any bound), or cannot be
// read again to tell.
func carriesCall(req *http.Request) bool {
	call, known := callIn(req)
	return call != nil || !known
}

// callIn returns the JSON-RPC request that wants an answer that req's body
// holds, nil for another message; known is false when the body cannot be
// read again to tell.
func callIn(req *http.Request) (call *jsonrpc.Request, known bool) {
	msg, known := messageIn(req)
	if call, ok := msg.(*jsonrpc.Request); ok && call.IsCall() {
		return call, true
	}
	return nil, known
}

// messageIn returns the JSON-RPC message that req's body holds; known is
// false when the body cannot be read again, or holds no one message.
func messageIn(req *http.Request) (msg jsonrpc.Message, known bool) {
	if req.GetBody == nil {
		return nil, false
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, false
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, false
	}
	msg, err = jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, false
	}
	return msg, true
}

// codeRefusedByHTTP is the JSON-RPC code of the error refusedAlone puts in
// place of a call's HTTP refusal.
const codeRefusedByHTTP = -32098

// rejectedByTransport marks the failed write of a message that failed
// alone: the SDK's connection goes on after it (its jsonrpc2.ErrRejected,
// which errors.Is matches by code).
var rejectedByTransport = &jsonrpc.Error{Code: codeRejectedByTransport, Message: "rejected by transport"}

// refusal fails the POST of a call of a legacy SSE session that the server,
// or a proxy in front of it, refused alone (see refusedAlone); the
// connection's Write fails the call with answer (see sseConn.Write).
type refusal struct{ answer *jsonrpc.Error }

func (r *refusal) Error() string { return r.answer.Message }

// refusedAlone turns a 4xx answer of the server, or of a proxy in front of
// it, to the POST of msg (a body too large for the proxy, a firewall's
// rule) into one that fails msg alone: the SDK would end the whole session
// on it (Streamable HTTP) or fail every write after it (legacy SSE),
// cutting off every call the session runs. A call gets a JSON-RPC error
// answering it: as the answer to its POST over Streamable HTTP, and as the
// POST's error (a *refusal) over SSE, whose answers come on the stream.
// Another message (mcpd's answer to a server's request, a notification) is
// lost: its POST is taken as accepted, and a warning names the status (the
// server's or proxy's page may quote what it was sent). Left as they are
// (resp itself, nil): 401 and a challenge (WWW-Authenticate: the OAuth
// layer's), 404 (a lost session), 429 of Streamable HTTP (which the SDK
// takes for transient), the handshake's messages, and a JSON-RPC error of
// the server's own over Streamable HTTP, which the SDK passes on (a
// call's answer; any other message's write fails alone).
func (rt *remoteRoundTripper) refusedAlone(resp *http.Response, msg jsonrpc.Message) (*http.Response, error) {
	req, _ := msg.(*jsonrpc.Request)
	call := req
	if req != nil && !req.IsCall() {
		call = nil
	}
	switch {
	case resp.StatusCode < 400 || resp.StatusCode >= 500,
		resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound,
		resp.StatusCode == http.StatusTooManyRequests && rt.streamable,
		resp.Header.Get("WWW-Authenticate") != "",
		// The handshake says whether the session works at all, and which
		// era the server speaks.
		isHandshake(msg):
		return resp, nil
	}
	peek, _ := io.ReadAll(io.LimitReader(resp.Body, sessionErrorPeek))
	var own *jsonrpc.Error
	if m, err := jsonrpc.DecodeMessage(peek); err == nil {
		if r, ok := m.(*jsonrpc.Response); ok && r.Error != nil {
			errors.As(r.Error, &own)
		}
	}
	if own != nil && rt.streamable {
		resp.Body = &struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(peek), resp.Body), resp.Body}
		return resp, nil
	}
	resp.Body.Close()
	if call == nil {
		what := "mcpd's answer to the server's request"
		if req != nil {
			what = req.Method
		}
		rt.log.Warn().Int("status", resp.StatusCode).Str("lost", what).
			Msg("the server, or a proxy in front of it, refused a message of mcpd's that is no call: the message is lost, the session goes on")
		out := *resp
		out.StatusCode, out.Status = http.StatusAccepted, "202 Accepted"
		out.Header = resp.Header.Clone()
		out.Header.Del("Content-Type")
		out.Header.Del("Content-Length")
		out.Body, out.ContentLength = http.NoBody, 0
		return &out, nil
	}
	answer := own // the server's own error, over SSE
	if answer == nil {
		answer = &jsonrpc.Error{
			Code:    codeRefusedByHTTP,
			Message: fmt.Sprintf("HTTP %s (from the server, or a proxy in front of it)", resp.Status),
			Data:    json.RawMessage(strconv.Itoa(resp.StatusCode)),
		}
	}
	if !rt.streamable {
		return nil, &refusal{answer: answer}
	}
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: call.ID, Error: answer})
	if err != nil {
		return nil, fmt.Errorf("encode the refusal of %s: %w", call.Method, err)
	}
	out := *resp
	out.Header = resp.Header.Clone()
	out.Header.Set("Content-Type", "application/json")
	out.Header.Del("Content-Length")
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(data)), int64(len(data))
	return &out, nil
}

// isHandshake says whether msg is one of the messages that set a session
// up: a refusal of one fails the attempt to connect.
func isHandshake(msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	return ok && (req.Method == "initialize" || req.Method == "server/discover" || req.Method == "notifications/initialized")
}

// errSessionForgotten fails the POST of a message of a legacy SSE session
// that the server no longer knows (see send): the SDK's session-loss
// error, which has the session rebuilt and the call it failed sent on the
// new one (the SDK's own SSE client knows no such answer, and would fail
// the write with the bare status).
var errSessionForgotten = fmt.Errorf("the server no longer knows the session: %w", mcp.ErrSessionMissing)

// cancelBody cancels its request's context once the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// listenBody reports the end of a subscriptions/listen stream that mcpd
// did not cancel: the server closed it, or went away.
type listenBody struct {
	rc    io.ReadCloser
	req   context.Context
	ended func()
	once  sync.Once
}

func (b *listenBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && b.req.Err() == nil {
		b.once.Do(b.ended)
	}
	return n, err
}

func (b *listenBody) Close() error { return b.rc.Close() }

// resumeBody ends an event stream of a GET (the standalone stream of a
// legacy Streamable HTTP session, or a response stream resumed) that
// stayed open for streamHeld with one more event, which carries only an
// id that mcpd made up: a stream that the server or a proxy closed after
// a while is thereby one that brought something new. The SDK reconnects
// a dropped stream only so often without that, over the session's whole
// life, and then ends the session: behind a proxy with an idle timeout
// (60 seconds is common) an idle session would end every few minutes,
// cutting off the calls it runs. The id goes back to the server as the
// Last-Event-ID of the reconnecting GET, which RoundTrip turns into the
// server's own last id again (or drops, if the server gave none).
type resumeBody struct {
	rc     io.ReadCloser
	req    context.Context
	opened time.Time
	mint   func(last string) string
	// lastID is the id of the last complete event with one, else the id
	// the GET resumed after.
	lastID string
	// pendingID is the id of the event being read, if it has one.
	pendingID  string
	hasPending bool
	line       []byte // the current line so far, up to maxTrackedLine
	lineLong   bool   // the current line is longer than that
	unknownID  bool   // an id line was too long to read: lastID is unknown
	boundary   bool   // what was read so far ends with a complete event
	tail       []byte // the made-up event still to be read
	err        error  // the stream's end, once tail is set
}

func (b *resumeBody) Read(p []byte) (int, error) {
	if b.err != nil {
		if len(b.tail) == 0 {
			return 0, b.err
		}
		n := copy(p, b.tail)
		b.tail = b.tail[n:]
		return n, nil
	}
	n, err := b.rc.Read(p)
	b.scan(p[:n])
	// Only at the end of a complete event: after part of one, the made-up
	// one would join it. Not when mcpd itself ended the stream.
	if err != nil && b.boundary && !b.unknownID && b.req.Err() == nil && time.Since(b.opened) >= streamHeld {
		b.tail, b.err = []byte("id: "+b.mint(b.lastID)+"\n\n"), err
		return n, nil
	}
	return n, err
}

// scan follows the lines of the stream as the SDK reads them: an event
// ends at an empty line, and its id field is "id:" and the value.
func (b *resumeBody) scan(p []byte) {
	for _, c := range p {
		if c != '\n' {
			b.boundary = false
			if len(b.line) < maxTrackedLine {
				b.line = append(b.line, c)
			} else {
				b.lineLong = true
			}
			continue
		}
		line := bytes.TrimRight(b.line, "\r")
		switch {
		case len(line) == 0 && !b.lineLong:
			if b.hasPending {
				b.lastID, b.hasPending = b.pendingID, false
			}
			b.boundary = true
		case bytes.HasPrefix(line, []byte("id:")):
			if b.lineLong {
				b.unknownID = true
			}
			b.pendingID, b.hasPending = strings.TrimSpace(string(line[len("id:"):])), true
		}
		b.line, b.lineLong = b.line[:0], false
	}
}

func (b *resumeBody) Close() error { return b.rc.Close() }

// sessionLost rewrites an answer to a request of a legacy session that
// says the session is gone into a bodiless 404, which the SDK takes for a
// lost session (ErrSessionMissing: the session ends, and no DELETE is
// sent). The SDK reads a 404 or 400 whose body is a JSON-RPC error as the
// failure of one call only, so without this a server that forgot the
// session (a restarted one) would fail every call while the session
// looked alive. Under legacy revisions a 404 means an unknown session; a 400
// counts when its body speaks of the session (for example "No valid
// session ID provided") or of an uninitialised server (one that knows no
// session at all). Sessionless 2026-07-28 requests are left alone: there a
// 404 means an unknown method. It reports whether resp said so.
func sessionLost(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusNotFound:
	case http.StatusBadRequest:
		peek, _ := io.ReadAll(io.LimitReader(resp.Body, sessionErrorPeek))
		text := strings.ToLower(string(peek))
		if !strings.Contains(text, "session") && !strings.Contains(text, "not initialized") {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(peek), resp.Body), resp.Body}
			return false
		}
	default:
		return false
	}
	resp.Body.Close()
	resp.StatusCode = http.StatusNotFound
	resp.Status = "404 Not Found"
	resp.Body = http.NoBody
	resp.ContentLength = 0
	resp.Header.Del("Content-Type")
	return true
}

// bound applies MaxMessageBytes to a response body. A JSON body is read
// here, so that an oversized one fails the request (and only it: the SDK
// keeps the session) with a MessageTooLargeError.
func (rt *remoteRoundTripper) bound(resp *http.Response) (*http.Response, error) {
	if rt.maxBytes <= 0 || resp.Body == nil || resp.Body == http.NoBody {
		return resp, nil
	}
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch media {
	case "text/event-stream":
		if rt.sse != nil {
			resp.Body = &eventLimitBody{rc: resp.Body, limit: rt.maxBytes, state: rt.sse}
		}
	case "application/json":
		data, err := io.ReadAll(io.LimitReader(resp.Body, int64(rt.maxBytes)+1))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read response: %w", err)
		}
		if len(data) > rt.maxBytes {
			return nil, &MessageTooLargeError{Limit: rt.maxBytes}
		}
		resp.Body = io.NopCloser(bytes.NewReader(data))
		resp.ContentLength = int64(len(data))
	default:
		resp.Body = &limitBody{rc: resp.Body, left: rt.maxBytes, limit: rt.maxBytes}
	}
	return resp, nil
}

// limitBody fails a read past its limit.
type limitBody struct {
	rc    io.ReadCloser
	left  int
	limit int
}

func (b *limitBody) Read(p []byte) (int, error) {
	// Read one byte past the limit, to tell "exactly the limit" from "more".
	n, err := b.rc.Read(p[:min(len(p), b.left+1)])
	if n > b.left {
		n, b.left = b.left, 0
		return n, &MessageTooLargeError{Limit: b.limit}
	}
	b.left -= n
	return n, err
}

func (b *limitBody) Close() error { return b.rc.Close() }

// sseState remembers why a legacy SSE stream was cut, for the connection
// to report.
type sseState struct {
	mu  sync.Mutex
	err error
}

func (s *sseState) set(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *sseState) get() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// eventLimitBody fails a read once one server-sent event (the bytes up to
// the blank line that ends it) passes the limit.
type eventLimitBody struct {
	rc     io.ReadCloser
	limit  int
	state  *sseState
	size   int  // bytes of the current event so far
	bol    bool // at the beginning of a line
	prevCR bool // the previous byte was '\r'
}

func (b *eventLimitBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	for i, c := range p[:n] {
		prevCR := b.prevCR
		b.prevCR = c == '\r'
		switch {
		case c == '\n' && prevCR:
			// The second byte of a CRLF: the '\r' ended the line.
			if b.size == 0 {
				continue // of the blank line that ended an event
			}
		case c == '\n' || c == '\r':
			if b.bol {
				b.size = 0 // a blank line ends the event
				continue
			}
			b.bol = true
		default:
			b.bol = false
		}
		if b.size++; b.size > b.limit {
			tooLarge := &MessageTooLargeError{Limit: b.limit}
			b.state.set(tooLarge)
			return i, tooLarge
		}
	}
	return n, err
}

func (b *eventLimitBody) Close() error { return b.rc.Close() }

// sseTransport is the SDK's legacy SSE client transport with the stream
// freed from the connect context, and a read error that says why the
// stream ended when mcpd cut it.
type sseTransport struct {
	inner *mcp.SSEClientTransport
	state *sseState
}

// Connect opens the event stream. The SDK ties that stream to ctx, which
// is the connection attempt's and ends when the attempt does; the stream
// must last as long as the connection, so it gets a context of its own,
// cancelled by ctx only until the connection is up.
func (t *sseTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	conn, err := t.inner.Connect(streamCtx)
	if !stop() {
		// ctx ended during the attempt and cancelled the stream.
		if err == nil {
			_ = conn.Close()
		}
		cancel()
		return nil, fmt.Errorf("connect: %w", ctx.Err())
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &sseConn{Connection: conn, cancel: cancel, state: t.state}, nil
}

type sseConn struct {
	mcp.Connection
	cancel context.CancelFunc
	state  *sseState
}

// Write sends msg. A message that the server, or a proxy in front of it,
// refused alone (see refusedAlone) fails alone: the SDK takes any failed
// write for a broken connection, and fails every write after it.
func (c *sseConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	var refused *refusal
	switch {
	case errors.As(err, &refused):
		return fmt.Errorf("%w: %w", refused.answer, rejectedByTransport)
	case errors.Is(err, errSessionForgotten):
		// Without net/http's wrapper, which quotes the URL (it may hold a
		// token).
		return errSessionForgotten
	}
	return err
}

func (c *sseConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		if cut := c.state.get(); cut != nil {
			return nil, cut
		}
	}
	return msg, err
}

// Close ends the stream; it may be called more than once.
func (c *sseConn) Close() error {
	err := c.Connection.Close()
	c.cancel()
	return err
}

// keepMethod refuses a redirect that would change the request's method:
// net/http follows a 301 or 302 to a POST with a GET without its body,
// which an MCP endpoint answers with a puzzling 400 or 405. The error
// names where the server points, credentials masked, for the config to
// use instead. Other redirects go to next, or to net/http's default.
func keepMethod(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if orig := via[0]; req.Method != orig.Method {
			status := 0
			if req.Response != nil {
				status = req.Response.StatusCode
			}
			return fmt.Errorf("the server redirects with %d to %s, which would turn a %s into a %s: set url to where it redirects", status, config.RedactURL(req.URL.String()), orig.Method, req.Method)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}
