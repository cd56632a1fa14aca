package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Exit codes of `mcpd mcp-stdio`.
const (
	stdioDone = 0 // stdin ended, or SIGTERM or SIGINT stopped the bridge
	// stdioError: stdin could not be read (a read error, or a line over
	// stdioMaxLine). mcpd out of reach is not one: the host's requests get
	// error answers instead.
	stdioError = 1
	stdioUsage = 2 // bad flags
)

// stdioMaxLine bounds one message from the host or from mcpd.
const stdioMaxLine = 64 << 20

// stdioQueue bounds the lines read from stdin and not yet sent to mcpd:
// past it the host waits to write, as with any busy stdio server.
const stdioQueue = 64

// stdioReasonMax bounds the reason a made-up error quotes from a refusal
// of mcpd's that carries no JSON-RPC answer.
const stdioReasonMax = 200

// stdioOrderWait bounds how long a message waits for mcpd to take the one
// before it (see bridge.send): an mcpd that is slow to take a message, or
// out of reach, must not hold up all that follows for good. Past it, the
// message goes out, and may overtake the one it waited for.
const stdioOrderWait = 5 * time.Second

// stdioRetry is the pause before the standalone stream is opened again
// after mcpd closed it.
const stdioRetry = time.Second

// runMCPStdio is `mcpd mcp-stdio`: it bridges an MCP host that starts
// stdio servers to a running mcpd's MCP endpoint (--mcp-listen). Each
// newline-delimited message (or JSON-RPC batch) from stdin is POSTed to
// the endpoint, in the host's order (see send); each message mcpd answers
// with, as JSON or as server-sent events, and each message on the
// session's standalone stream, is written to stdout (the answers to a
// batch as one batch). The bridge reads the messages only to learn the
// session id and protocol version, which Streamable HTTP carries in
// headers, to track requests, and to gather a batch's answers; it works
// for both protocol eras. MCPD_API_TOKEN, if set, is sent as the bearer
// token. SIGTERM and SIGINT stop it as the end of stdin does, but without
// waiting for the requests in flight.
func runMCPStdio(args []string, lookup func(string) (string, bool), stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcpd mcp-stdio", flag.ContinueOnError)
	fs.SetOutput(stderr)
	connect := fs.String("connect", "", "mcpd's MCP endpoint: its URL (http://127.0.0.1:PORT/mcp, https://...), host:port, or unix:///path/to.sock (default MCPD_MCP_CONNECT)")
	var tlsOpts tlsFlags
	tlsOpts.register(fs, "--connect")
	if v, ok := lookup("MCPD_MCP_CONNECT"); ok {
		*connect = v
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return stdioDone
		}
		return stdioUsage
	}
	if fs.NArg() > 0 || *connect == "" {
		fmt.Fprintln(stderr, "mcpd mcp-stdio: usage: mcpd mcp-stdio --connect http://127.0.0.1:PORT/mcp | unix:///path/to.sock")
		return stdioUsage
	}
	endpoint, client, err := mcpTarget(*connect, &tlsOpts)
	if err != nil {
		fmt.Fprintln(stderr, "mcpd mcp-stdio:", err)
		return stdioUsage
	}
	token, _ := lookup("MCPD_API_TOKEN")
	if err := checkAPIToken(token); err != nil {
		// Sent as it is, it would only be refused, as if mcpd were away.
		fmt.Fprintln(stderr, "mcpd mcp-stdio:", err)
		return stdioUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal stops the bridge in order; a second one, should
	// that hang, kills it.
	context.AfterFunc(ctx, stop)
	b := &bridge{endpoint: endpoint, client: client, token: token, out: stdout, stderr: stderr, orderWait: stdioOrderWait}
	if err := b.run(ctx, stdin); err != nil {
		fmt.Fprintln(stderr, "mcpd mcp-stdio:", err)
		return stdioError
	}
	return stdioDone
}

// mcpTarget turns --connect into the endpoint URL and the HTTP client
// that reaches it. An https:// URL, or a TLS flag, makes it HTTPS (on a
// Unix socket too, as mcpd serves its MCP listener with --tls-cert).
func mcpTarget(target string, tlsOpts *tlsFlags) (string, *http.Client, error) {
	useTLS := tlsOpts.set() || strings.HasPrefix(target, "https://")
	if useTLS && strings.HasPrefix(target, "http://") {
		return "", nil, fmt.Errorf("--connect %q: the --tls flags need an https:// URL", target)
	}
	// A transport of its own, whose idle connections the bridge closes
	// when it ends.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	scheme := "http://"
	if useTLS {
		cfg, err := tlsOpts.config()
		if err != nil {
			return "", nil, err
		}
		tr.TLSClientConfig = cfg
		scheme = "https://"
	}
	client := &http.Client{Transport: tr}
	if path, ok := strings.CutPrefix(target, "unix://"); ok {
		if path == "" {
			return "", nil, errors.New("--connect unix:// needs a path, e.g. unix:///run/mcpd-mcp.sock")
		}
		var d net.Dialer
		tr.Proxy = nil
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		}
		if useTLS && tr.TLSClientConfig.ServerName == "" {
			tr.TLSClientConfig.ServerName = "localhost"
		}
		return scheme + "mcpd" + mcpEndpointPath, client, nil
	}
	if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
		return target, client, nil
	}
	if _, _, err := net.SplitHostPort(target); err != nil {
		return "", nil, fmt.Errorf("--connect %q: want an http(s) URL, host:port or unix:///path", target)
	}
	return scheme + target + mcpEndpointPath, client, nil
}

// bridge relays one host's messages to mcpd and back.
type bridge struct {
	endpoint string
	client   *http.Client
	token    string
	// orderWait bounds how long a message waits for the one before it
	// (stdioOrderWait; tests shorten it).
	orderWait time.Duration

	outMu sync.Mutex
	out   io.Writer
	// stderr is where the bridge says what the host cannot see: a session
	// mcpd lost and opened again, or could not open again. Nil: nowhere.
	stderr io.Writer

	mu       sync.Mutex
	session  string // Mcp-Session-Id, once mcpd gave one
	version  string // the negotiated protocol version (initialize era)
	standing bool   // the standalone stream was started
	// hello is the host's initialize, which opens a new session when mcpd
	// lost the host's (see renew).
	hello *jsonrpc.Request
	// renewMu makes one renewal at a time; renewals numbers their ids.
	renewMu  sync.Mutex
	renewals int
	// inflight are the POSTs of requests not answered yet, by the request's
	// id: a 2026-07-28 request is cancelled by ending its POST, and a
	// subscriptions/listen ends with stdin.
	inflight map[string]*inflightPost
}

// inflightPost is one request's POST under way.
type inflightPost struct {
	method string
	cancel context.CancelFunc
}

// run relays until stdin ends and the requests in flight are answered,
// then ends the session. A subscriptions/listen, which is never answered,
// ends with stdin. When ctx ends (SIGTERM, SIGINT) it stops at once, stdin
// open or not: the requests in flight end unanswered (the host is going
// away), and the session ends.
func (b *bridge) run(ctx context.Context, stdin io.Reader) error {
	defer b.client.CloseIdleConnections()
	// The standalone stream lives until stdin ends; requests until they
	// are answered.
	streamCtx, endStreams := context.WithCancel(ctx)
	defer endStreams()
	var streams, posts sync.WaitGroup
	defer streams.Wait()
	// stdin is read on a goroutine of its own, so that a signal is heard
	// while the host keeps stdin open. After a signal that goroutine may
	// stay blocked in its read until stdin closes or the process exits:
	// nothing can interrupt a read of a blocking stdin.
	queue := make(chan outgoing, stdioQueue)
	readErr := make(chan error, 1)
	go func() {
		readErr <- b.read(ctx, stdin, queue)
		close(queue)
	}()
	var err error
sending:
	for ctx.Err() == nil {
		select {
		case m, ok := <-queue:
			if !ok {
				err = <-readErr
				break sending
			}
			b.send(ctx, m, &posts, streamCtx, &streams)
		case <-ctx.Done():
		}
	}
	// The host is gone: a listen would never end; other requests are
	// still answered, unless ctx ended them.
	b.endListens()
	posts.Wait()
	endStreams()
	b.endSession()
	if err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	return nil
}

// outgoing is one line of the host's, on its way to mcpd.
type outgoing struct {
	msgs  []jsonrpc.Message
	batch bool   // msgs came as a JSON-RPC batch
	body  []byte // the line, sent as it is
	ctx   context.Context
	done  func() // ends the tracking of a request
}

// read decodes the host's lines and queues them, in order, for the
// sender, until stdin ends or ctx does. A request is tracked, and a
// notifications/cancelled takes effect, as soon as it is read, so that a
// cancellation does not wait behind the messages queued before it.
func (b *bridge) read(ctx context.Context, stdin io.Reader, queue chan<- outgoing) error {
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 0, 64<<10), stdioMaxLine)
	for sc.Scan() {
		m, ok := b.decode(ctx, bytes.TrimSpace(sc.Bytes()))
		if !ok {
			continue
		}
		select {
		case queue <- m:
		case <-ctx.Done():
			m.done()
			return nil
		}
	}
	return sc.Err()
}

// decode turns a line of the host's into what goes to mcpd, or reports
// false when it holds no message.
func (b *bridge) decode(ctx context.Context, line []byte) (outgoing, bool) {
	if len(line) == 0 {
		return outgoing{}, false
	}
	m := outgoing{body: bytes.Clone(line), ctx: ctx, done: func() {}}
	if line[0] == '[' {
		// A JSON-RPC batch (2025-03-26 only): mcpd answers it as one,
		// or refuses it for a later revision. mcpd refuses a batch with
		// a message that does not parse; the requests that do are then
		// answered.
		msgs, ok := decodeBatch(line)
		if !ok {
			b.refuse(line)
			return outgoing{}, false
		}
		m.msgs, m.batch = msgs, true
		return m, true
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		b.refuse(line)
		return outgoing{}, false
	}
	m.msgs = []jsonrpc.Message{msg}
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method != "initialize" {
		if req.Method == "notifications/cancelled" {
			b.cancelRequest(req)
		}
		m.ctx, m.done = b.track(ctx, req)
	}
	return m, true
}

// refuse answers a line of the host's that holds no JSON-RPC message, as
// JSON-RPC 2.0 says, with id null: parse error for a line that is not
// JSON, invalid request for JSON that is no message (an id that is
// neither a string nor a number, no "jsonrpc": "2.0", an empty batch).
// What looks like a response (result or error, no method) is never
// answered, however wrong.
func (b *bridge) refuse(line []byte) {
	werr := &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: `invalid request: not a JSON-RPC 2.0 message ("jsonrpc": "2.0", a method, an id that is a string or a number)`}
	if !json.Valid(line) {
		werr = &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "parse error: the line is not JSON"}
	} else {
		var resp struct {
			Method *json.RawMessage `json:"method"`
			Result json.RawMessage  `json:"result"`
			Error  json.RawMessage  `json:"error"`
		}
		if json.Unmarshal(line, &resp) == nil && resp.Method == nil && (resp.Result != nil || resp.Error != nil) {
			return
		}
	}
	data, err := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      *int           `json:"id"` // null: no id could be read
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", nil, werr})
	if err == nil {
		b.writeLine(data)
	}
}

// send hands m to mcpd, and returns when the next message may go, so
// that mcpd gets the host's messages in the host's order. After an
// initialize, that is once it is answered: what follows needs its
// session. After a notification or response, once mcpd has taken it (202:
// the SDK has queued it to the session, in order). After a request, once
// its POST is written: mcpd says nothing of a request it took until it
// answers, which may take long, so the answer is awaited on a goroutine
// of posts, and mcpd may start the request after a message sent later.
// Either wait is bounded by orderWait.
func (b *bridge) send(ctx context.Context, m outgoing, posts *sync.WaitGroup, streamCtx context.Context, streams *sync.WaitGroup) {
	if req, ok := lone(m); ok && req.Method == "initialize" {
		b.mu.Lock()
		b.hello = req
		b.mu.Unlock()
		b.post(m.ctx, m.msgs, m.batch, m.body, nil)
		b.startStandalone(streamCtx, streams)
		return
	}
	// turn ends when the next message may go: a notification or response
	// taken, a request written.
	turn := make(chan struct{})
	posts.Go(func() {
		defer m.done()
		if hasCall(m.msgs) {
			b.post(m.ctx, m.msgs, m.batch, m.body, turn)
			return
		}
		defer close(turn)
		b.post(m.ctx, m.msgs, m.batch, m.body, nil)
	})
	wait := b.orderWait
	if wait <= 0 {
		wait = stdioOrderWait
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-turn:
	case <-timer.C:
	case <-ctx.Done():
	}
}

// lone returns the request m is, when it is one and not a batch.
func lone(m outgoing) (*jsonrpc.Request, bool) {
	if m.batch || len(m.msgs) != 1 {
		return nil, false
	}
	req, ok := m.msgs[0].(*jsonrpc.Request)
	return req, ok
}

// hasCall reports whether msgs hold a request that wants an answer.
func hasCall(msgs []jsonrpc.Message) bool {
	for _, msg := range msgs {
		if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
			return true
		}
	}
	return false
}

// track registers the POST of a request (a call with an id), and returns
// its context and what ends the tracking.
func (b *bridge) track(ctx context.Context, req *jsonrpc.Request) (context.Context, func()) {
	if req == nil || !req.IsCall() {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	key, post := idKey(req.ID), &inflightPost{method: req.Method, cancel: cancel}
	b.mu.Lock()
	if b.inflight == nil {
		b.inflight = make(map[string]*inflightPost)
	}
	b.inflight[key] = post
	b.mu.Unlock()
	return ctx, func() {
		b.mu.Lock()
		// The host may reuse the id once it has the answer, before this runs.
		if b.inflight[key] == post {
			delete(b.inflight, key)
		}
		b.mu.Unlock()
		cancel()
	}
}

// cancelRequest ends the POST of the request a notifications/cancelled
// names: mcpd cancels a request whose HTTP request goes away (the only way
// for a 2026-07-28 request; a session's request also hears of the
// notification itself, which is sent on).
func (b *bridge) cancelRequest(note *jsonrpc.Request) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(note.Params, &p) != nil {
		return
	}
	// Made as the SDK makes a request's id (a number is an int64), so
	// that both give the same key.
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	b.mu.Lock()
	post, ok := b.inflight[idKey(id)]
	b.mu.Unlock()
	if ok {
		post.cancel()
	}
}

// endListens ends the subscriptions/listen requests under way.
func (b *bridge) endListens() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, post := range b.inflight {
		if post.method == "subscriptions/listen" {
			post.cancel()
		}
	}
}

// idKey is a request id as a map key: numbers and strings apart.
func idKey(id jsonrpc.ID) string {
	if s, ok := id.Raw().(string); ok {
		return "s:" + s
	}
	return fmt.Sprintf("n:%d", id.Raw())
}

// decodeBatch returns the messages of a JSON-RPC batch that parse, or
// false when line is not a batch (an empty one included).
func decodeBatch(line []byte) ([]jsonrpc.Message, bool) {
	var raw []json.RawMessage
	if json.Unmarshal(line, &raw) != nil || len(raw) == 0 {
		return nil, false
	}
	var msgs []jsonrpc.Message
	for _, r := range raw {
		if msg, err := jsonrpc.DecodeMessage(r); err == nil {
			msgs = append(msgs, msg)
		}
	}
	return msgs, true
}

// post sends one message, or a batch of them (body is then the batch),
// and relays what mcpd answers, whatever the HTTP status (a 2026-07-28
// error comes with 400 or 404). A request mcpd leaves unanswered (mcpd
// unreachable, a refusal without a JSON-RPC answer, an answer that ended
// early) is answered with an error, so that the host does not wait for
// it. sent, if not nil, is closed once the POST is written (or failed).
func (b *bridge) post(ctx context.Context, msgs []jsonrpc.Message, batch bool, body []byte, sent chan<- struct{}) {
	if sent != nil {
		var once sync.Once
		wrote := func() { once.Do(func() { close(sent) }) }
		defer wrote()
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil { // else the transport may try again
				wrote()
			}
		}})
	}
	var req *jsonrpc.Request // a lone request, whose headers it sets
	if !batch && len(msgs) == 1 {
		req, _ = msgs[0].(*jsonrpc.Request)
	}
	waiting := newAnswers(msgs, batch)
	do := func() (*http.Response, string, error) {
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, b.endpoint, bytes.NewReader(body))
		if err != nil {
			return nil, "", err
		}
		hreq.Header.Set("Content-Type", "application/json")
		hreq.Header.Set("Accept", "application/json, text/event-stream")
		b.setHeaders(hreq, req)
		resp, err := b.client.Do(hreq)
		if err != nil {
			err = fmt.Errorf("mcpd is not reachable: %w", err)
		}
		return resp, hreq.Header.Get("Mcp-Session-Id"), err
	}
	resp, session, err := do()
	if err == nil && resp.StatusCode == http.StatusNotFound && session != "" && (req == nil || req.Method != "initialize") && b.renew(ctx, session) {
		// mcpd lost the session (it restarted): it never saw the message,
		// which goes again, in the new session.
		resp.Body.Close()
		resp, _, err = do()
	}
	if err != nil {
		if ctx.Err() == nil {
			b.settle(waiting, jsonrpc.CodeInternalError, err.Error())
		}
		return
	}
	defer resp.Body.Close()
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		b.mu.Lock()
		b.session = id
		b.mu.Unlock()
	}
	if resp.StatusCode == http.StatusAccepted {
		return
	}
	text := "mcpd's answer ended without one to this request"
	if resp.StatusCode >= 300 {
		text = fmt.Sprintf("mcpd answered HTTP %d", resp.StatusCode)
		if !carriesMessages(resp) {
			code := int64(jsonrpc.CodeInternalError)
			reason := refusalReason(resp)
			if resp.StatusCode == http.StatusBadRequest && strings.HasPrefix(reason, methodNotHandled) {
				code = jsonrpc.CodeMethodNotFound
			}
			if reason != "" {
				text += ": " + reason
			}
			b.settle(waiting, code, text)
			return
		}
	}
	b.relay(resp, req != nil && req.Method == "initialize", waiting)
	if ctx.Err() != nil {
		text = "" // the bridge is stopping, or the host cancelled: nothing is made up
	}
	b.settle(waiting, jsonrpc.CodeInternalError, text)
}

// methodNotHandled starts the plain-text refusal with which mcpd's
// endpoint (the Go SDK's handler) answers a request of an initialize-era
// session whose method it does not serve, with HTTP 400 and no JSON-RPC
// answer: the bridge makes it method not found, as a 2026-07-28 request
// gets it from mcpd itself.
const methodNotHandled = "JSON RPC not handled"

// carriesMessages reports whether resp's body holds JSON-RPC messages:
// JSON, or server-sent events.
func carriesMessages(resp *http.Response) bool {
	mediaType, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	switch strings.ToLower(strings.TrimSpace(mediaType)) {
	case "application/json", "text/event-stream":
		return true
	}
	return false
}

// refusalReason is the first line of a plain-text refusal, cut short and
// printable only (it may come from a proxy, not mcpd), or "".
func refusalReason(resp *http.Response) string {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		return ""
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, stdioReasonMax))
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '\uFFFD' {
			return -1
		}
		return r
	}, line)
	return strings.TrimSpace(line)
}

// answers tracks the requests of one POST until mcpd answers them; a
// batch's answers, which mcpd may send one by one as events, are held to
// go to the host as one batch.
type answers struct {
	batch   bool
	pending map[any]jsonrpc.ID // requests not answered yet, by ID.Raw()
	held    []jsonrpc.Message  // a batch's answers so far
}

func newAnswers(msgs []jsonrpc.Message, batch bool) *answers {
	a := &answers{batch: batch, pending: make(map[any]jsonrpc.ID)}
	for _, m := range msgs {
		if r, ok := m.(*jsonrpc.Request); ok && r.IsCall() {
			a.pending[r.ID.Raw()] = r.ID
		}
	}
	return a
}

// take notes msg if it answers a pending request, and reports whether it
// holds msg (a batch's answer) rather than letting it be written now.
func (a *answers) take(msg jsonrpc.Message) bool {
	r, ok := msg.(*jsonrpc.Response)
	if !ok {
		return false
	}
	if _, ok := a.pending[r.ID.Raw()]; !ok {
		return false
	}
	delete(a.pending, r.ID.Raw())
	if a.batch {
		a.held = append(a.held, msg)
	}
	return a.batch
}

// settle writes what a holds, with an error answer of code carrying text
// for each request still pending (none when text is empty), and forgets
// them.
func (b *bridge) settle(a *answers, code int64, text string) {
	out := a.held
	if text != "" {
		for _, id := range a.pending {
			out = append(out, &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: text}})
		}
		clear(a.pending)
	}
	a.held = nil
	if a.batch {
		b.writeBatch(out)
		return
	}
	for _, m := range out {
		b.write(m)
	}
}

// setHeaders adds the bearer token, the session id and the protocol
// version header that Streamable HTTP wants with a message.
func (b *bridge) setHeaders(h *http.Request, req *jsonrpc.Request) {
	if b.token != "" {
		h.Header.Set("Authorization", "Bearer "+b.token)
	}
	b.mu.Lock()
	session, version := b.session, b.version
	b.mu.Unlock()
	if session != "" {
		h.Header.Set("Mcp-Session-Id", session)
	}
	if req != nil && len(req.Params) > 0 {
		// A 2026-07-28 request names its version in its _meta; the header
		// must say the same, and that revision wants the method (and the
		// tool, prompt or resource) in headers too.
		var p struct {
			Meta map[string]any `json:"_meta"`
			Name string         `json:"name"`
			URI  string         `json:"uri"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			if v, ok := p.Meta[mcp.MetaKeyProtocolVersion].(string); ok {
				version = v
			}
		}
		if version >= statelessVersion {
			h.Header.Set("Mcp-Method", req.Method)
			switch req.Method {
			case "tools/call", "prompts/get":
				h.Header.Set("Mcp-Name", headerValue(p.Name))
			case "resources/read":
				h.Header.Set("Mcp-Name", headerValue(p.URI))
			}
		}
	}
	if version != "" {
		h.Header.Set("Mcp-Protocol-Version", version)
	}
}

// statelessVersion is the first protocol revision without sessions.
const statelessVersion = "2026-07-28"

// headerValue is v as a 2026-07-28 header carries it: as it is when it is
// printable ASCII, else base64 in the revision's =?base64?...?= form.
func headerValue(v string) string {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
		}
	}
	return v
}

// relay writes the messages of an answer, JSON or server-sent events, to
// stdout. From the answer to initialize it learns the protocol version.
// The answers to a batch's requests are held in waiting, and go out as
// one batch as soon as all have come.
func (b *bridge) relay(resp *http.Response, initialize bool, waiting *answers) {
	one := func(msg jsonrpc.Message) {
		if waiting.take(msg) {
			if len(waiting.pending) == 0 {
				b.settle(waiting, 0, "")
			}
			return
		}
		if r, ok := msg.(*jsonrpc.Response); ok && initialize && r.Error == nil {
			var res struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(r.Result, &res) == nil && res.ProtocolVersion != "" {
				b.mu.Lock()
				b.version = res.ProtocolVersion
				b.mu.Unlock()
			}
		}
		b.write(msg)
	}
	write := func(data []byte) {
		data = bytes.TrimSpace(data)
		if len(data) > 0 && data[0] == '[' {
			msgs, _ := decodeBatch(data)
			for _, msg := range msgs {
				one(msg)
			}
		} else if msg, err := jsonrpc.DecodeMessage(data); err == nil {
			one(msg)
		}
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data, err := io.ReadAll(io.LimitReader(resp.Body, stdioMaxLine))
		if err == nil && len(bytes.TrimSpace(data)) > 0 {
			write(data)
		}
		return
	}
	readEvents(resp.Body, write)
}

// readEvents calls fn with the data of each server-sent event in r.
func readEvents(r io.Reader, fn func([]byte)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), stdioMaxLine)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				fn(data)
			}
			data = nil
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, d...)
		}
	}
	if len(data) > 0 {
		fn(data)
	}
}

// startStandalone opens, once, the session's standalone stream, on which
// mcpd sends what belongs to no request (list changes, resource updates),
// and opens it again when mcpd ends it, until the session is gone.
func (b *bridge) startStandalone(ctx context.Context, wg *sync.WaitGroup) {
	b.mu.Lock()
	if b.standing || b.session == "" {
		b.mu.Unlock()
		return
	}
	b.standing = true
	b.mu.Unlock()
	wg.Go(func() {
		// renewed: the last turn opened a new session. A new session's
		// stream that mcpd forgets at once too waits stdioRetry before the
		// next renewal, as every other failure does.
		renewed := false
		for ctx.Err() == nil {
			h, err := http.NewRequestWithContext(ctx, http.MethodGet, b.endpoint, nil)
			if err != nil {
				return
			}
			h.Header.Set("Accept", "text/event-stream")
			b.setHeaders(h, nil)
			resp, err := b.client.Do(h)
			if err == nil {
				ok := resp.StatusCode == http.StatusOK
				if ok {
					readEvents(resp.Body, func(data []byte) {
						if msg, err := jsonrpc.DecodeMessage(data); err == nil {
							b.write(msg)
						}
					})
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusNotFound && b.renew(ctx, h.Header.Get("Mcp-Session-Id")) {
					if renewed = !renewed; renewed {
						continue // the stream of the new session, at once
					}
				} else if !ok {
					return // no stream for this session (405), or no session (404)
				} else {
					renewed = false
				}
			}
			t := time.NewTimer(stdioRetry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	})
}

// renew opens a new session with the host's initialize when mcpd answered
// 404 to a message of session old: mcpd restarted, or ended the session.
// A host that starts stdio servers knows nothing of sessions, and would
// get nothing but errors from then on. The host is told that every list
// may have changed; what it set up in the old session (resource
// subscriptions, a log level) is not set up again. It reports whether
// the bridge has a session other than old, this renewal's or another's.
func (b *bridge) renew(ctx context.Context, old string) bool {
	b.renewMu.Lock()
	defer b.renewMu.Unlock()
	b.mu.Lock()
	current, hello := b.session, b.hello
	b.renewals++
	n := b.renewals
	b.mu.Unlock()
	if current != old {
		return current != ""
	}
	if hello == nil {
		return false
	}
	id, err := jsonrpc.MakeID(fmt.Sprintf("mcpd-mcp-stdio-renew-%d", n))
	if err != nil {
		return false
	}
	session, version, err := b.initialize(ctx, &jsonrpc.Request{ID: id, Method: "initialize", Params: hello.Params})
	if err != nil {
		if ctx.Err() == nil {
			b.note("mcpd lost the session (it restarted, or ended it), and a new one could not be opened: %v", err)
		}
		return false
	}
	b.note("mcpd lost the session (it restarted, or ended it): a new one is open")
	b.mu.Lock()
	b.session, b.version = session, version
	b.mu.Unlock()
	// Sent as the host sent it after its own initialize; mcpd answers 202.
	if data, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage("{}")}); err == nil {
		if h, err := http.NewRequestWithContext(ctx, http.MethodPost, b.endpoint, bytes.NewReader(data)); err == nil {
			h.Header.Set("Content-Type", "application/json")
			h.Header.Set("Accept", "application/json, text/event-stream")
			b.setHeaders(h, nil)
			if resp, err := b.client.Do(h); err == nil {
				resp.Body.Close()
			}
		}
	}
	for _, method := range []string{"notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed"} {
		b.write(&jsonrpc.Request{Method: method, Params: json.RawMessage("{}")})
	}
	return true
}

// note writes one line to the bridge's stderr, which hosts keep in their
// logs of the server.
func (b *bridge) note(format string, args ...any) {
	if b.stderr != nil {
		fmt.Fprintf(b.stderr, "mcpd mcp-stdio: "+format+"\n", args...)
	}
}

// initialize sends the bridge's own initialize, and returns the session
// it opened and its protocol version.
func (b *bridge) initialize(ctx context.Context, req *jsonrpc.Request) (session, version string, err error) {
	data, err := jsonrpc.EncodeMessage(req)
	if err != nil {
		return "", "", err
	}
	h, err := http.NewRequestWithContext(ctx, http.MethodPost, b.endpoint, bytes.NewReader(data))
	if err != nil {
		return "", "", err
	}
	h.Header.Set("Content-Type", "application/json")
	h.Header.Set("Accept", "application/json, text/event-stream")
	if b.token != "" {
		h.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := b.client.Do(h)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	session = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" || !carriesMessages(resp) {
		return "", "", fmt.Errorf("initialize: HTTP %d", resp.StatusCode)
	}
	err = errors.New("initialize: no answer")
	one := func(data []byte) {
		msg, derr := jsonrpc.DecodeMessage(bytes.TrimSpace(data))
		r, ok := msg.(*jsonrpc.Response)
		if derr != nil || !ok || r.ID != req.ID {
			return
		}
		if r.Error != nil {
			err = r.Error
			return
		}
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if jerr := json.Unmarshal(r.Result, &res); jerr != nil {
			err = jerr
			return
		}
		version, err = res.ProtocolVersion, nil
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		readEvents(resp.Body, one)
	} else if data, rerr := io.ReadAll(io.LimitReader(resp.Body, stdioMaxLine)); rerr == nil {
		one(data)
	}
	if err != nil {
		return "", "", err
	}
	return session, version, nil
}

// endSession tells mcpd the host is gone, best effort.
func (b *bridge) endSession() {
	b.mu.Lock()
	session := b.session
	b.mu.Unlock()
	if session == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stdioRetry)
	defer cancel()
	h, err := http.NewRequestWithContext(ctx, http.MethodDelete, b.endpoint, nil)
	if err != nil {
		return
	}
	b.setHeaders(h, nil)
	if resp, err := b.client.Do(h); err == nil {
		resp.Body.Close()
	}
}

func (b *bridge) write(msg jsonrpc.Message) {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return
	}
	b.writeLine(data)
}

// writeBatch writes msgs as one JSON-RPC batch; none writes nothing.
func (b *bridge) writeBatch(msgs []jsonrpc.Message) {
	if len(msgs) == 0 {
		return
	}
	items := make([]json.RawMessage, 0, len(msgs))
	for _, m := range msgs {
		if data, err := jsonrpc.EncodeMessage(m); err == nil {
			items = append(items, data)
		}
	}
	if data, err := json.Marshal(items); err == nil {
		b.writeLine(data)
	}
}

func (b *bridge) writeLine(data []byte) {
	b.outMu.Lock()
	defer b.outMu.Unlock()
	_, _ = b.out.Write(append(data, '\n'))
}
