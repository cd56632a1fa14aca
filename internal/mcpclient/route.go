package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK hands notifications to a handler goroutine while responses are
// delivered by the reading goroutine, so a call's last progress message can
// arrive after its result. A routed connection gives progress and log
// notifications to the streamed calls on the reading goroutine instead:
// strictly in wire order, before the response that follows them.

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
	t.conn = &routedConn{Connection: c, u: t.u}
	return t.conn, nil
}

type routedConn struct {
	mcp.Connection
	u *upstream
}

func (c *routedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		c.u.connFailed(c, err)
	}
	if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() {
		switch req.Method {
		case "notifications/progress":
			var p mcp.ProgressNotificationParams
			if json.Unmarshal(req.Params, &p) == nil {
				c.u.toSinkProgress(&p)
			}
		case "notifications/message":
			var p mcp.LoggingMessageParams
			if json.Unmarshal(req.Params, &p) == nil {
				c.u.toSinkLog(&p)
			}
		}
	}
	return msg, err
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
