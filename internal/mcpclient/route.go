package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK hands notifications to a handler goroutine while responses are
// delivered by the reading goroutine, so a call's last progress message can
// arrive after its result. A routed connection gives progress and log
// notifications to the streamed calls on the reading goroutine instead:
// strictly in wire order, before the response that follows them.
//
// It also keeps the SDK's handler queue short. The SDK reads every message
// as soon as it arrives and queues notifications for its handler goroutine
// without limit, so a server that writes notifications faster than they
// are handled grows that queue, and mcpd's memory, for as long as it
// writes. A routed connection therefore handles log and progress
// notifications itself, on the reading goroutine, and never queues them;
// drops notifications the SDK has no handler for; and lets at most
// maxQueuedNotifications others wait in the SDK's queue, reading nothing
// more until one of them is handled. The server then blocks on a full
// pipe: backpressure instead of memory.

// A routed connection also carries mcpd's keepalive probes of 2026-07-28
// stdio sessions. That era has no ping, and the SDK sends server/discover
// only to connect, so mcpd writes the probe, a server/discover request,
// itself (see discover), and Read takes its answer off the stream: the SDK
// never sees an answer to a request it did not send.

// routed wraps t so that the upstream's calls get their notifications in
// order. The SDK's Streamable HTTP connection needs session updates through
// an unexported interface a wrapper cannot forward, so it is left as it is
// and its calls get notifications from the SDK's handlers.
func (u *upstream) routed(t mcp.Transport) mcp.Transport {
	if _, ok := t.(*mcp.StreamableClientTransport); ok {
		return t
	}
	return &routedTransport{Transport: t, u: u}
}

type routedTransport struct {
	mcp.Transport
	u    *upstream
	conn *routedConn // set by Connect, which the SDK calls once
}

func (t *routedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if t.u.tracer != nil {
		c = &tracedConn{Connection: c, t: t.u.tracer}
	}
	t.conn = &routedConn{Connection: c, u: t.u, queued: make(chan struct{}, maxQueuedNotifications)}
	return t.conn, nil
}

const (
	// maxQueuedNotifications bounds the notifications a routed connection
	// lets wait in the SDK's handler queue.
	maxQueuedNotifications = 256
	// queueStallReset is how long Read waits for a queued notification to
	// be handled before it assumes the SDK dropped them without calling
	// mcpd (a cancellation, or params the SDK rejects) and starts counting
	// afresh. Handlers never block, so a full queue drains far sooner.
	queueStallReset = 100 * time.Millisecond
)

// sdkNotifications are the notifications the SDK's client handles; it
// ignores any other. Log and progress notifications are not listed: a
// routed connection handles them itself.
var sdkNotifications = map[string]bool{
	"notifications/cancelled":                  true,
	"notifications/tools/list_changed":         true,
	"notifications/prompts/list_changed":       true,
	"notifications/resources/list_changed":     true,
	"notifications/resources/updated":          true,
	"notifications/elicitation/complete":       true,
	"notifications/subscriptions/acknowledged": true,
}

type routedConn struct {
	mcp.Connection
	u *upstream
	// queued holds a token for each notification handed to the SDK and not
	// yet handled (see notificationHandled).
	queued chan struct{}
	// readErr is the error that ended reading, once one did (see ended).
	readErr atomic.Pointer[error]

	// discoverMeta is the _meta of the SDK's own server/discover, which
	// a keepalive probe repeats; nil until the SDK sent one.
	discoverMeta atomic.Pointer[json.RawMessage]
	probeSeq     atomic.Uint64
	probeMu      sync.Mutex
	probes       map[string]chan struct{} // probes awaiting their answer, by id; under probeMu
}

// keepAliveIDPrefix starts the id of every keepalive probe. The SDK numbers
// its requests with integers, so a string id never names one of its own.
const keepAliveIDPrefix = "mcpd-keepalive-"

const methodDiscover = "server/discover"

// Write notes the _meta of the SDK's server/discover for the keepalive
// probes, and writes msg.
func (c *routedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == methodDiscover {
		var params struct {
			Meta json.RawMessage `json:"_meta"`
		}
		if json.Unmarshal(req.Params, &params) == nil && len(params.Meta) > 0 {
			c.discoverMeta.Store(&params.Meta)
		}
	}
	return c.Connection.Write(ctx, msg)
}

// canDiscover says whether discover has a _meta to send.
func (c *routedConn) canDiscover() bool { return c.discoverMeta.Load() != nil }

// discover sends a keepalive probe: a server/discover request with the
// _meta of the SDK's own (the protocol version, client info and client
// capabilities that 2026-07-28 requires of every request; no log level,
// so the server logs nothing for it), under an id of keepAliveIDPrefix.
// It returns nil once the server answers, with a result or a JSON-RPC
// error alike: either proves that it reads and answers. Otherwise it
// returns the write's error, or ctx's once ctx ends. Write is safe to
// call alongside the SDK's writes (mcp.Connection requires it; the stdio
// connection takes a write lock), and a probe's line never interleaves
// with theirs.
func (c *routedConn) discover(ctx context.Context) error {
	meta := c.discoverMeta.Load()
	if meta == nil {
		return errors.New("keepalive: the SDK sent no server/discover to repeat")
	}
	id := keepAliveIDPrefix + strconv.FormatUint(c.probeSeq.Add(1), 10)
	rid, err := jsonrpc.MakeID(id)
	if err != nil {
		return err
	}
	answered := make(chan struct{})
	c.probeMu.Lock()
	if c.probes == nil {
		c.probes = make(map[string]chan struct{})
	}
	c.probes[id] = answered
	c.probeMu.Unlock()
	defer func() {
		c.probeMu.Lock()
		delete(c.probes, id)
		c.probeMu.Unlock()
	}()
	params := append(append([]byte(`{"_meta":`), *meta...), '}')
	if err := c.Connection.Write(ctx, &jsonrpc.Request{ID: rid, Method: methodDiscover, Params: params}); err != nil {
		return err
	}
	select {
	case <-answered:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// probeAnswered reports the answer to a keepalive probe to its waiting
// discover, if it still waits.
func (c *routedConn) probeAnswered(id string) {
	c.probeMu.Lock()
	answered := c.probes[id]
	delete(c.probes, id)
	c.probeMu.Unlock()
	if answered != nil {
		close(answered)
	}
}

// ended returns the error that ended the connection's reading, or nil
// while it reads on.
func (c *routedConn) ended() error {
	if p := c.readErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (c *routedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			// Recorded before the SDK hears of it, and so before it fails
			// the requests in flight with it.
			c.readErr.Store(&err)
			c.u.connFailed(c, err)
			return msg, err
		}
		if resp, ok := msg.(*jsonrpc.Response); ok {
			// A keepalive probe's answer, even one that came too late, is
			// mcpd's alone.
			if id, ok := resp.ID.Raw().(string); ok && strings.HasPrefix(id, keepAliveIDPrefix) {
				c.probeAnswered(id)
				continue
			}
			return msg, nil
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || req.IsCall() {
			return msg, nil
		}
		switch req.Method {
		case "notifications/progress":
			var p mcp.ProgressNotificationParams
			if json.Unmarshal(req.Params, &p) != nil {
				return msg, nil // the SDK rejects it
			}
			c.u.toSinkProgress(&p)
		case "notifications/message":
			var p mcp.LoggingMessageParams
			if json.Unmarshal(req.Params, &p) != nil {
				return msg, nil
			}
			c.u.publishLog(&p)
			c.u.toSinkLog(&p)
		default:
			if !sdkNotifications[req.Method] {
				continue // the SDK would ignore it too
			}
			c.waitQueueRoom()
			return msg, nil
		}
	}
}

// waitQueueRoom takes a token for one more notification in the SDK's
// queue, waiting while the queue is full.
func (c *routedConn) waitQueueRoom() {
	select {
	case c.queued <- struct{}{}:
		return
	default:
	}
	timer := time.NewTimer(queueStallReset)
	defer timer.Stop()
	select {
	case c.queued <- struct{}{}:
	case <-timer.C:
		for len(c.queued) > 0 {
			select {
			case <-c.queued:
			default:
			}
		}
		c.queued <- struct{}{}
	}
}

// notificationHandled returns the token of a notification the SDK handed
// to one of mcpd's handlers. A notification of a previous connection may
// return one of the current connection's: that only lets one more in.
func (u *upstream) notificationHandled() {
	u.mu.Lock()
	c := u.liveConn
	u.mu.Unlock()
	if c != nil {
		select {
		case <-c.queued:
		default:
		}
	}
}

// toSinkProgress hands progress to the call that owns its token.
func (u *upstream) toSinkProgress(p *mcp.ProgressNotificationParams) {
	token := fmt.Sprint(p.ProgressToken)
	u.mu.Lock()
	s := u.sinks[token]
	u.mu.Unlock()
	if s != nil && s.onProgress != nil {
		s.onProgress(p)
	}
}

// toSinkLog hands a log message to every streamed call in flight: MCP does
// not say which request a log message belongs to, so each call streams
// what the server logged while it ran.
func (u *upstream) toSinkLog(p *mcp.LoggingMessageParams) {
	// The callbacks run outside the lock, like toSinkProgress's: a slow
	// one must not hold up every caller of this server.
	u.mu.Lock()
	var calls []func(*mcp.LoggingMessageParams)
	for _, s := range u.sinks {
		if s.onLog != nil {
			calls = append(calls, s.onLog)
		}
	}
	u.mu.Unlock()
	for _, f := range calls {
		f(p)
	}
}

// connFailed marks a ready server as reconnecting the moment its
// connection fails, before the SDK fails the calls in flight: those calls
// then explain why, and calls that come next wait for the new session
// instead of meeting the dead one.
func (u *upstream) connFailed(c *routedConn, err error) {
	u.mu.Lock()
	live := u.liveConn == c && u.state == StateReady
	r := u.run
	u.mu.Unlock()
	if !live || r == nil || r.ctx.Err() != nil {
		return // an older connection, or mcpd is closing it
	}
	u.setState(StateReconnecting, "connection lost: "+err.Error())
}
