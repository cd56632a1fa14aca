package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// Host sessions, and what bounds them. A legacy host holds a session from
// initialize until it ends it, it idles past Options.SessionTimeout, or
// mcpd stops; a 2026-07-28 subscriptions/listen stream is a session of its
// own for as long as the stream is open. What the gateway keeps for a
// session (its subscriptions, its log level) goes when the SDK reports the
// session ended, not on a timer, so nothing a session started can be
// released while it lives.

// DefaultMaxSessions bounds the legacy host sessions open at once when
// Options.MaxSessions is 0.
const DefaultMaxSessions = 256

// maxSubscriptionsPerSession bounds the resources one host session (or one
// listen stream) follows at once: each holds an upstream subscription.
const maxSubscriptionsPerSession = 1024

// hostSession is what the gateway tracks of one session.
type hostSession struct {
	// counted: a legacy session admitted by initialize, which counts
	// against Options.MaxSessions.
	counted bool
	// uris are the URIs of this session's subscriptions in g.subs.
	uris map[string]bool
}

// trackLocked returns the record of ss, creating it, and a goroutine that
// forgets it once the session ends, the first time. g.mu must be held.
// A session that ended already is forgotten at once, with what was added
// for it in the meantime.
func (g *Gateway) trackLocked(ss *mcp.ServerSession) *hostSession {
	if ss == nil {
		return &hostSession{} // not a session of the SDK's: nothing to wait for
	}
	h, ok := g.hosts[ss]
	if !ok {
		h = &hostSession{}
		g.hosts[ss] = h
		go func() {
			_ = ss.Wait()
			g.sessionEnded(ss)
		}()
	}
	return h
}

// admit counts a legacy session in at its initialize, or refuses it when
// Options.MaxSessions are open already (the SDK then drops the session).
func (g *Gateway) admit(ss *mcp.ServerSession) error {
	if ss == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return wireError(mcpclient.ErrUnavailable)
	}
	return g.admitLocked(ss)
}

// admitLocked counts ss in against Options.MaxSessions, unless it is
// counted already. g.mu must be held.
func (g *Gateway) admitLocked(ss *mcp.ServerSession) error {
	if h, ok := g.hosts[ss]; ok && h.counted {
		return nil // a repeated initialize, another subscription of a listen stream
	}
	if g.sessions >= g.opts.MaxSessions {
		g.log.Warn().Int("sessions", g.sessions).Msg("MCP endpoint: session or listen stream refused at --mcp-max-sessions")
		return wireError(fmt.Errorf("%w: the MCP endpoint is at its limit of %d open sessions and listen streams (--mcp-max-sessions); end one, or wait for an idle session to time out",
			mcpclient.ErrResourceExhausted, g.sessions))
	}
	g.trackLocked(ss).counted = true
	g.sessions++
	return nil
}

// admitSubscription checks that key's session may follow one resource
// more: within maxSubscriptionsPerSession, and, for a 2026-07-28 listen
// stream (a session of its own, with no initialize), counted against
// Options.MaxSessions from its first subscription.
func (g *Gateway) admitSubscription(key subscription) error {
	if key.session == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return wireError(mcpclient.ErrUnavailable)
	}
	if err := g.admitLocked(key.session); err != nil {
		return err
	}
	h := g.hosts[key.session]
	if _, had := g.subs[key]; !had && len(h.uris) >= maxSubscriptionsPerSession {
		return tooManySubscriptions()
	}
	return nil
}

// sessionEnded forgets ss and releases the upstream subscriptions it held.
func (g *Gateway) sessionEnded(ss *mcp.ServerSession) {
	var released []func()
	var uris []string
	g.mu.Lock()
	if h, ok := g.hosts[ss]; ok {
		if h.counted {
			g.sessions--
		}
		for uri := range h.uris {
			uris = append(uris, uri)
			k := subscription{session: ss, uri: uri}
			if held, ok := g.subs[k]; ok {
				released = append(released, held.release)
				delete(g.subs, k)
			}
		}
		delete(g.hosts, ss)
	}
	delete(g.levels, ss)
	g.mu.Unlock()
	for _, release := range released {
		release()
	}
	g.sweepURIs(uris)
}

// sweepTimeout bounds the gateway's own requests to the SDK server in
// memory (sweepURIs): they wait for nothing but its lock.
const sweepTimeout = 5 * time.Second

// sweepURIs drops what the SDK server keeps of the URIs an ended session
// followed. The SDK (v1.8.0) takes an ended session out of each URI's
// subscribers but keeps the URI's entry, empty, for good, and an
// unsubscribe of the URI by any session drops an empty entry. Hosts come
// and go for the months a daemon runs, each following URIs of its own, so
// the gateway keeps one session of its own with the SDK server, over an
// in-memory pipe, and unsubscribes it from those URIs. A URI that another
// session follows keeps its entry. The guard lets the session's requests
// through: it is no host's.
func (g *Gateway) sweepURIs(uris []string) {
	if len(uris) == 0 {
		return
	}
	cs := g.sweeperClient()
	if cs == nil {
		return
	}
	for _, uri := range uris {
		ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
		err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
		cancel()
		if err != nil {
			g.log.Debug().Str("error", err.Error()).Msg("MCP endpoint: forgetting the URIs of an ended session")
			return
		}
	}
}

// sweeperClient returns the gateway's own session (see sweepURIs),
// connecting it the first time; nil once the gateway closed, or if it
// does not connect.
func (g *Gateway) sweeperClient() *mcp.ClientSession {
	g.sweepMu.Lock()
	defer g.sweepMu.Unlock()
	if g.sweeper != nil {
		return g.sweeper
	}
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := g.srv.Connect(ctx, st, nil)
	if err != nil {
		g.log.Warn().Str("error", err.Error()).Msg("MCP endpoint: connecting its own session")
		return nil
	}
	// Known before its initialize, which the guard lets through.
	g.sweeperSession.Store(ss)
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpd-gateway", Version: "0"}, nil)
	// An initialize-era session: resources/unsubscribe is of that era.
	cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: sweeperVersion})
	if err != nil {
		_ = ss.Close()
		g.log.Warn().Str("error", err.Error()).Msg("MCP endpoint: connecting its own session")
		return nil
	}
	g.sweeper = cs
	return cs
}

// sweeperVersion is the protocol revision of the gateway's own session.
const sweeperVersion = "2025-11-25"

// tooManySubscriptions is the error of a subscription over
// maxSubscriptionsPerSession.
func tooManySubscriptions() error {
	return wireError(fmt.Errorf("%w: this session follows %d resources, the most one session may; unsubscribe from one first",
		mcpclient.ErrResourceExhausted, maxSubscriptionsPerSession))
}
