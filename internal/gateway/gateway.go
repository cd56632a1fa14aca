// Package gateway serves mcpd's servers as one MCP server: the Streamable
// HTTP endpoint of --mcp-listen, built on the go-sdk server, for MCP hosts
// (editors, coding-agent CLIs) that speak MCP rather than gRPC.
//
// Every connected server's tools appear under their qualified names
// (mcp__<server>__<tool>), its prompts likewise, and its resources and
// resource templates under URIs prefixed with the server's name
// (mcpd://<server>/<original-uri>, see [ResourceURI]). Every request goes
// through the Manager methods the gRPC edge uses, and through the same
// access check: the HTTP request's bearer token or client certificate
// names the caller, and lists show only what that caller may use. The
// Manager's event bus keeps the SDK server's lists in step, so hosts get
// list_changed notifications, and resource updates reach the hosts that
// subscribed. A server's sampling, elicitation and roots requests made
// while a host's request runs go to that host: on the request's stream for
// the initialize era, as input-required results for 2026-07-28 (input.go).
// With Options.ToolSearch the tools are listed only once a search_tools
// call has found them (search.go). With tracing on, every request is a
// span in the host's trace: the trace context of its _meta (SEP-414), or
// of its HTTP headers.
package gateway

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// Options configure a Gateway.
type Options struct {
	// Logger receives the gateway's logs; default none.
	Logger zerolog.Logger
	// Access authenticates and authorizes every request; default: every
	// request is the anonymous caller with every permission.
	Access *access.Authorizer
	// Audit, if set, receives an audit line per tool call, resource read
	// and prompt get, and per refused request.
	Audit *access.Auditor
	// Implementation names the endpoint to hosts; default "mcpd".
	Implementation *mcp.Implementation
	// MaxMessageBytes bounds a request body; 0 means the SDK's default.
	MaxMessageBytes int64
	// SessionTimeout closes a legacy session idle this long; default 30m.
	SessionTimeout time.Duration
	// MaxSessions bounds the legacy sessions open at once; an initialize
	// beyond it is refused. Default DefaultMaxSessions.
	MaxSessions int
	// Network is how hosts reach the endpoint, "tcp" (the default) or
	// "unix": the network.transport of its spans.
	Network string
	// ToolSearch lists the one tool search_tools instead of every
	// server's tools, and publishes the tools it finds (search.go).
	ToolSearch bool
}

// Gateway is the MCP endpoint. Create it with New, serve Handler, run Run
// in a goroutine of its own, and Close it when done.
type Gateway struct {
	mgr  *mcpclient.Manager
	opts Options
	log  zerolog.Logger
	srv  *mcp.Server
	// The SDK serves the initialize-based revisions with sessions
	// (stateful) and 2026-07-28 only without (stateless): one handler each.
	stateful, stateless http.Handler
	callers             callerRefs

	// toolsMu serialises the refreshes of the published tools, which
	// both Run and search_tools make.
	toolsMu sync.Mutex

	mu        sync.Mutex
	loaded    map[string]string                       // the tools search_tools loaded: qualified name -> server
	published map[string]*serverItems                 // by server name
	subs      map[subscription]held                   // the upstream subscription of each
	levels    map[*mcp.ServerSession]mcp.LoggingLevel // set by legacy hosts
	hosts     map[*mcp.ServerSession]*hostSession     // sessions with something to forget when they end (sessions.go)
	sessions  int                                     // legacy sessions admitted and not ended
	suspended map[string]*suspended                   // by requestState (input.go)
	closed    bool

	// sweeper is the gateway's own session with srv, made when first
	// needed, and sweeperSession its end in srv (sweepURIs, sessions.go).
	sweepMu        sync.Mutex
	sweeper        *mcp.ClientSession
	sweeperSession atomic.Pointer[mcp.ServerSession]

	// cutOffCtx ends when the requests in flight are to end (cutOff):
	// see cutOffRequests.
	cutOffCtx context.Context
	cutOff    context.CancelFunc
}

// serverItems is what the SDK server holds of one upstream server, by the
// names the hosts see, with the upstream definition each was made from.
type serverItems struct {
	tools     map[string]*mcp.Tool
	prompts   map[string]*mcp.Prompt
	resources map[string]*mcp.Resource
	templates map[string]*mcp.ResourceTemplate
}

// subscription is one host session's interest in one resource (by the
// URI the host sees).
type subscription struct {
	session *mcp.ServerSession
	uri     string
}

// held is the upstream subscription a host's subscription holds, and
// whose it is: each update is checked against the caller's permissions in
// force when it is sent (screenUpdates).
type held struct {
	caller  access.Caller
	server  string // the server the host's URI resolved to
	uri     string // the server's own URI
	release func()
}

// New returns a Gateway in front of mgr. Its lists are empty until Run
// has synchronised them.
func New(mgr *mcpclient.Manager, opts *Options) *Gateway {
	g := &Gateway{mgr: mgr, published: make(map[string]*serverItems), subs: make(map[subscription]held),
		levels: make(map[*mcp.ServerSession]mcp.LoggingLevel), hosts: make(map[*mcp.ServerSession]*hostSession),
		loaded: make(map[string]string)}
	g.cutOffCtx, g.cutOff = context.WithCancel(context.Background())
	if opts != nil {
		g.opts = *opts
	}
	g.log = g.opts.Logger
	if g.opts.Access == nil {
		g.opts.Access, _ = access.New(nil) // no file to read: cannot fail
	}
	// The servers' own asks (toolsAsk) are read from mgr's configs, as
	// server.New sets them for the gRPC edge on the same Authorizer.
	g.opts.Access.SetServerAsks(mgr.ToolAsk)
	impl := g.opts.Implementation
	if impl == nil {
		impl = &mcp.Implementation{Name: "mcpd", Version: "dev"}
	}
	if g.opts.SessionTimeout <= 0 {
		g.opts.SessionTimeout = 30 * time.Minute
	}
	if g.opts.MaxSessions <= 0 {
		g.opts.MaxSessions = DefaultMaxSessions
	}
	if g.opts.Network == "" {
		g.opts.Network = "tcp"
	}
	instructions := "mcpd: the tools, prompts and resources of every MCP server this daemon is connected to. " +
		"Tools and prompts are named mcp__<server>__<name>; resource URIs are mcpd://<server>/<the server's own URI>."
	if g.opts.ToolSearch {
		instructions += " Tools are listed once found: call " + searchToolName + " with the task in plain words, then call the tools it returns."
	}
	g.srv = mcp.NewServer(impl, &mcp.ServerOptions{
		Instructions: instructions,
		// Logging as the SDK's default has it; and the instance of this
		// mcpd, so that it does not take this endpoint, reached again,
		// for a server of its own (mcpclient.InstanceCapability).
		Capabilities: &mcp.ServerCapabilities{
			Logging:      &mcp.LoggingCapabilities{},
			Experimental: map[string]any{mcpclient.InstanceCapability: map[string]any{"id": mgr.InstanceID()}},
		},
		// Declared from the start: servers come and go, and a host that
		// saw no capability would never ask again.
		HasTools:           true,
		HasPrompts:         true,
		HasResources:       true,
		CompletionHandler:  g.complete,
		SubscribeHandler:   g.subscribe,
		UnsubscribeHandler: g.unsubscribe,
		SetCacheable:       func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { privateCache(c) },
	})
	if g.opts.ToolSearch {
		g.srv.AddTool(searchTool, g.searchTools)
	}
	g.srv.AddReceivingMiddleware(g.guard)
	// Resource updates go only where the permissions in force let them.
	g.srv.AddSendingMiddleware(g.screenUpdates)
	// A span per request, child of the host's trace context, as the gRPC
	// edge makes one per RPC; around the guard, so that a refusal has one.
	g.srv.AddReceivingMiddleware(mgr.Telemetry().ServerMiddleware(g.opts.Network))
	g.srv.AddReceivingMiddleware(g.cutOffRequests)
	// Outermost: a panic in a handler fails its request, not mcpd (the
	// SDK runs handlers on goroutines without a recover), and the cause of
	// an internal error is logged.
	g.srv.AddReceivingMiddleware(g.internalErrors)
	server := func(*http.Request) *mcp.Server { return g.srv }
	g.stateful = mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{
		MaxRequestBodyBytes: g.opts.MaxMessageBytes,
		SessionTimeout:      g.opts.SessionTimeout,
	})
	g.stateless = mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{
		MaxRequestBodyBytes: g.opts.MaxMessageBytes,
		Stateless:           true,
	})
	return g
}

// Handler is the HTTP handler of the MCP endpoint: every request is
// authenticated, then served by the SDK's Streamable HTTP handler of its
// era (see routeEra).
func (g *Gateway) Handler() http.Handler { return g.authenticate(http.HandlerFunc(g.routeEra)) }

// syncKinds are the events that change what the gateway lists.
var syncKinds = []events.Kind{events.KindToolsChanged, events.KindPromptsChanged, events.KindResourcesChanged,
	events.KindServerState, events.KindResourceUpdated}

// Run keeps the SDK server's lists in step with the Manager's servers and
// forwards resource updates, until ctx ends or the event bus closes. The
// servers' lists are refreshed off the event loop (syncer), so that a
// server slow to list holds up neither the other servers' changes nor the
// resource updates.
func (g *Gateway) Run(ctx context.Context) {
	bus := g.mgr.Events()
	var sub *events.Subscription
	if bus != nil {
		// Subscribed before the first sync, so that no change slips
		// between the two.
		sub = bus.Subscribe(events.Filter{Kinds: syncKinds}, nil)
		defer sub.Close()
	}
	syncs := g.newSyncer(ctx)
	defer syncs.stop()
	for _, st := range g.mgr.List() {
		syncs.request(st.Config.Name, syncAll)
	}
	if sub == nil {
		<-ctx.Done()
		return
	}
	evs := make(chan events.Event)
	go func() {
		defer close(evs)
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				return
			}
			select {
			case evs <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			for range evs {
			}
			return
		case ev, ok := <-evs:
			if !ok {
				return
			}
			g.handle(ctx, syncs, ev)
		}
	}
}

// handle acts on one event: a change of a server's lists or state asks
// syncs to refresh that server; a resource update is forwarded at once.
func (g *Gateway) handle(ctx context.Context, syncs *syncer, ev events.Event) {
	switch ev.Kind {
	case events.KindToolsChanged:
		syncs.request(ev.Server, syncTools|toolsChanged)
	case events.KindPromptsChanged:
		syncs.request(ev.Server, syncPrompts|promptsChanged)
	case events.KindResourcesChanged:
		syncs.request(ev.Server, syncResources|resourcesChanged)
	case events.KindServerState:
		syncs.request(ev.Server, syncAll)
	case events.KindGap:
		// Events went by unseen (the bus's ring moved on while the loop
		// was slow): bring every server up to date, those gone included.
		g.resyncAll(syncs)
	case events.KindResourceUpdated:
		// Hosts that subscribed by the server's own URI hear of it by
		// that URI, if one of those URIs stood for this server; the SDK
		// tells only the subscribers of each, and screenUpdates only
		// those whose caller may still read the resource.
		_ = g.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: ResourceURI(ev.Server, ev.URI)})
		if g.bareStandsFor(ev.URI, ev.Server) {
			_ = g.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: ev.URI})
		}
	}
}

// bareStandsFor reports whether a host subscribed to the server's own
// URI uri where it resolved to server.
func (g *Gateway) bareStandsFor(uri, server string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, h := range g.subs {
		if k.uri == uri && h.server == server {
			return true
		}
	}
	return false
}

// resyncAll syncs every server the Manager has and every server the
// gateway publishes items of (a server gone has none afterwards).
func (g *Gateway) resyncAll(syncs *syncer) {
	names := map[string]bool{}
	for _, st := range g.mgr.List() {
		names[st.Config.Name] = true
	}
	g.mu.Lock()
	for name := range g.published {
		names[name] = true
	}
	g.mu.Unlock()
	for name := range names {
		syncs.request(name, syncAll)
	}
}

// Close ends every host session, cancelling the requests it runs, and
// releases the upstream subscriptions the hosts held. Close is
// idempotent.
func (g *Gateway) Close() {
	g.cutOff()
	g.close()
}

// Shutdown is Close, but the hosts' requests in flight may finish until
// ctx ends; then they are cancelled. A session's end waits for them, and
// a tool call may run for as long as its own deadline allows (which its
// progress may keep extending).
func (g *Gateway) Shutdown(ctx context.Context) {
	defer context.AfterFunc(ctx, g.cutOff)()
	g.close()
}

// cutOffRequests gives each request a context that ends once cutOff is
// called (Shutdown, Close).
func (g *Gateway) cutOffRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(g.cutOffCtx, cancel)()
		return next(ctx, method, req)
	}
}

func (g *Gateway) close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	subs := g.subs
	g.subs = nil
	g.mu.Unlock()
	g.releaseSuspended()
	g.sweepMu.Lock()
	if g.sweeper != nil {
		_ = g.sweeper.Close()
	}
	g.sweepMu.Unlock()
	for ss := range g.srv.Sessions() {
		_ = ss.Close()
	}
	for _, h := range subs {
		h.release()
	}
}
