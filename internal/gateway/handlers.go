package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// callNotes bounds the progress and log messages waiting to be sent to the
// host during one tool call; beyond it they are dropped, so that a slow
// host never blocks the upstream session.
const callNotes = 256

// noteRelay hands an upstream call's progress and log messages to the
// host request that waits for the call: the one that began it or, for a
// 2026-07-28 host, the retry that resumed it after an input round (the
// upstream call keeps the callbacks it began with). Between rounds, when
// no request waits, they are dropped. Attaching to a nil relay does
// nothing.
type noteRelay struct {
	mu sync.Mutex
	to *noteSink
}

// noteSink is one host request's queue of messages to send it.
type noteSink struct {
	ctx   context.Context
	ss    *mcp.ServerSession
	token any // the request's progress token; nil: it wants no progress
	notes chan func()
}

func newNoteSink(ctx context.Context, ss *mcp.ServerSession, token any) *noteSink {
	return &noteSink{ctx: ctx, ss: ss, token: token, notes: make(chan func(), callNotes)}
}

// attach makes sink the receiver of the relay's messages, until detach.
func (r *noteRelay) attach(sink *noteSink) (detach func()) {
	if r == nil || sink == nil {
		return func() {}
	}
	r.mu.Lock()
	r.to = sink
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		if r.to == sink {
			r.to = nil
		}
		r.mu.Unlock()
	}
}

// send queues a message for the receiver, if there is one, under the lock:
// nothing is queued once detach has returned.
func (r *noteRelay) send(msg func(*noteSink) func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.to == nil {
		return
	}
	if f := msg(r.to); f != nil {
		select {
		case r.to.notes <- f:
		default:
		}
	}
}

// progress is the upstream call's OnProgress: it relays under the
// receiver's own progress token.
func (r *noteRelay) progress(p *mcp.ProgressNotificationParams) {
	r.send(func(to *noteSink) func() {
		if to.token == nil {
			return nil
		}
		np := &mcp.ProgressNotificationParams{ProgressToken: to.token, Progress: p.Progress, Total: p.Total, Message: p.Message}
		return func() { _ = to.ss.NotifyProgress(to.ctx, np) }
	})
}

// log is the upstream call's OnLog.
func (r *noteRelay) log(l *mcp.LoggingMessageParams) {
	lp := *l
	r.send(func(to *noteSink) func() {
		return func() { _ = to.ss.Log(to.ctx, &lp) }
	})
}

// callTool calls a server's tool for a host: through Manager.CallTool,
// with the host's progress token honoured, the server's log messages
// relayed, and the server's requests sent to this host while the call
// runs. Cancelling the host's request cancels the upstream call.
func (g *Gateway) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args map[string]any
	if len(req.Params.Arguments) > 0 && string(req.Params.Arguments) != "null" {
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, invalidParams("arguments must be a JSON object")
		}
		// As on the gRPC listener: the SDK decodes up to 1000 levels, far
		// deeper than many servers' decoders, which end the session.
		if mcpclient.JSONTooDeep(args) {
			return nil, invalidParams(fmt.Sprintf("arguments: nested more than %d levels deep (objects and arrays)", mcpclient.MaxJSONDepth))
		}
	}
	server, _, _ := SplitQualifiedName(req.Params.Name) // qualified by the guard
	caller := g.callerOf(req)
	stateless := statelessHost(req.ProtocolVersion())
	if !stateless {
		var stop func()
		ctx, stop = g.answerServerRequests(ctx, req.Session, caller, server)
		defer stop()
	}

	sink := newNoteSink(ctx, req.Session, req.Params.GetProgressToken())
	relay := &noteRelay{}
	// Progress is relayed to the host request that waits for the call
	// and wants it: a 2026-07-28 call that needs input is resumed by a
	// retry, which may want progress when the first request did not.
	opts := mcpclient.CallOptions{Meta: g.forwardedMeta(req.Session, req.Params.Meta), OnProgress: relay.progress, OnLog: relay.log}
	call := func(ctx context.Context) (mcp.Result, error) {
		res, err := g.mgr.CallTool(ctx, req.Params.Name, args, opts)
		if err != nil {
			return nil, err
		}
		return res, nil
	}
	type outcome struct {
		res    mcp.Result
		inputs mcp.InputRequestMap
		state  string
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		if stateless {
			key := inputKey("tools/call", req.Params.Name, caller)
			res, inputs, state, err := g.withInput(ctx, req.ClientCapabilities(), caller, server, key, req.Params.RequestState, req.Params.InputResponses, call, relay, sink)
			done <- outcome{res, inputs, state, err}
			return
		}
		detach := relay.attach(sink)
		res, err := call(ctx)
		detach()
		done <- outcome{res: res, err: err}
	}()
	for {
		select {
		case send := <-sink.notes:
			send()
		case o := <-done:
			// What arrived before the result goes out before it.
			for len(sink.notes) > 0 {
				(<-sink.notes)()
			}
			switch {
			case o.err != nil:
				return toolError(o.err)
			case o.inputs != nil:
				return &mcp.CallToolResult{InputRequests: o.inputs, RequestState: o.state}, nil
			}
			res, _ := o.res.(*mcp.CallToolResult)
			return resultForHost(server, res), nil
		}
	}
}

// forwardedMeta is the host's _meta for the upstream call: without its
// progress token (mcpd sets its own), and with the log level a legacy host
// set on its session, as the 2026-07-28 revision carries it in every
// request, so that the server sends the call's log messages the host
// wants. (A legacy server ignores that field and logs as it would.)
func (g *Gateway) forwardedMeta(ss *mcp.ServerSession, m mcp.Meta) map[string]any {
	out := maps.Clone(map[string]any(m))
	if out == nil {
		out = map[string]any{}
	}
	delete(out, "progressToken")
	// A 2026-07-28 host's version and identity are not the upstream
	// request's: mcpd's client sets those for its session. Its
	// capabilities are kept: they tell a 2026-07-28 server what it may ask
	// of the host this call goes back to.
	for _, k := range hostMetaKeys {
		delete(out, k)
	}
	if _, ok := out[mcp.MetaKeyLogLevel]; !ok {
		g.mu.Lock()
		level := g.levels[ss]
		g.mu.Unlock()
		if level != "" {
			out[mcp.MetaKeyLogLevel] = string(level)
		}
	}
	return out
}

// checkSetLevel refuses a logging/setLevel whose level MCP does not
// define, with invalid params as SetLogLevel's INVALID_ARGUMENT.
func checkSetLevel(req mcp.Request) error {
	r, ok := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams])
	if !ok || r.Params == nil {
		return nil // the SDK answers what it cannot read
	}
	if err := mcpclient.CheckLogLevel(r.Params.Level); err != nil {
		return wireError(err)
	}
	return nil
}

// setLogLevel remembers the log level a legacy host sets on its session,
// and sets it on every server the caller may manage, as SetLogLevel does
// over gRPC: a legacy server sends log messages only once its client set a
// level, and the level is the server's, shared by every caller. A host
// without the manage permission only filters what it receives.
func (g *Gateway) setLogLevel(ctx context.Context, caller access.Caller, req mcp.Request) {
	r, ok := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams])
	if !ok || r.Params == nil || r.Session == nil {
		return
	}
	g.mu.Lock()
	if !g.closed {
		g.trackLocked(r.Session)
		g.levels[r.Session] = r.Params.Level
	}
	g.mu.Unlock()
	for _, st := range g.mgr.List() {
		if g.allowed(caller, access.Action{Verb: access.ManageServers, Server: st.Config.Name}) {
			_ = g.mgr.SetLogLevel(ctx, st.Config.Name, r.Params.Level)
		}
	}
}

// privateCache is the endpoint's cache decision for every 2026-07-28
// result that carries cache fields: lists are filtered per caller, and
// what a server answers may be its answer to the credentials mcpd holds
// for it, so no cache shared between users may keep a result. A server's
// time to live stands.
func privateCache(c *mcp.Cacheable) { c.CacheScope = "private" }

// resultForHost rewrites the resource URIs in a server's tool result to
// the ones the host can read through the gateway.
//
// This and the other results for a host are new values, not copies of the
// server's: a copy would keep the resultType a 2026-07-28 server sent,
// which the SDK sets for a host of that revision (readResultTyped does for
// resources/read) and leaves out for an earlier one only on values it did
// not decode. TestResultFieldsCopied
// names every field, so that an SDK upgrade that adds one fails it.
func resultForHost(server string, res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil {
		return &mcp.CallToolResult{Content: []mcp.Content{}}
	}
	return &mcp.CallToolResult{
		Meta:              withoutServerInfo(res.Meta),
		Content:           contentForHost(server, res.Content),
		StructuredContent: res.StructuredContent,
		IsError:           res.IsError,
		InputRequests:     res.InputRequests,
		RequestState:      res.RequestState,
	}
}

// withoutServerInfo drops the upstream server's identity from a result's
// _meta: the endpoint's answers name mcpd, which the SDK adds.
func withoutServerInfo(m mcp.Meta) mcp.Meta {
	if _, ok := m[metaKeyServerInfo]; !ok {
		return m
	}
	out := maps.Clone(m)
	delete(out, metaKeyServerInfo)
	return out
}

// hostMetaKeys are the _meta fields of a 2026-07-28 request that describe
// the host's session, not the request.
var hostMetaKeys = []string{mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientInfo}

// metaKeyServerInfo is where a 2026-07-28 result names its server.
const metaKeyServerInfo = "io.modelcontextprotocol/serverInfo"

func contentForHost(server string, content []mcp.Content) []mcp.Content {
	out := make([]mcp.Content, 0, len(content))
	for _, c := range content {
		out = append(out, oneContentForHost(server, c))
	}
	return out
}

func oneContentForHost(server string, c mcp.Content) mcp.Content {
	switch c := c.(type) {
	case *mcp.ResourceLink:
		cp := *c
		cp.URI = ResourceURI(server, c.URI)
		return &cp
	case *mcp.EmbeddedResource:
		cp := *c
		if c.Resource != nil {
			rc := *c.Resource
			rc.URI = ResourceURI(server, rc.URI)
			cp.Resource = &rc
		}
		return &cp
	}
	return c
}

// readResource reads a resource by the URI the host sees, or by the
// server's own URI; the contents carry URIs of the same kind.
func (g *Gateway) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	server, uri, bare, err := g.resolveURI(g.visibleTo(g.callerOf(req)), req.Params.URI)
	if err != nil {
		return nil, err
	}
	read := func(ctx context.Context) (mcp.Result, error) {
		res, err := g.mgr.ReadResource(ctx, server, uri)
		if err != nil {
			return nil, err
		}
		return res, nil
	}
	key := inputKey("resources/read", req.Params.URI, g.callerOf(req))
	out, inputs, state, err := g.maybeWithInput(ctx, req, server, key, req.Params.RequestState, req.Params.InputResponses, read)
	stateless := statelessHost(req.ProtocolVersion())
	switch {
	case err != nil:
		return nil, wireError(err)
	case inputs != nil:
		return readResultTyped(&mcp.ReadResourceResult{InputRequests: inputs, RequestState: state}, stateless), nil
	}
	res, ok := out.(*mcp.ReadResourceResult)
	if !ok {
		return nil, internalError("resources/read")
	}
	return readResultTyped(readResult(server, res, bare), stateless), nil
}

// readResultTyped gives a 2026-07-28 host's resources/read result its
// resultType, which that revision requires ("input_required" is what
// makes a host answer the input requests). The SDK sets it on what its
// handlers return, but the guard answers resources/read itself; and only
// the type's UnmarshalJSON sets the field.
func readResultTyped(res *mcp.ReadResourceResult, stateless bool) *mcp.ReadResourceResult {
	if !stateless {
		return res
	}
	typ := `{"resultType":"complete"}`
	if res.InputRequests != nil {
		typ = `{"resultType":"input_required"}`
	}
	var out mcp.ReadResourceResult
	if err := json.Unmarshal([]byte(typ), &out); err != nil {
		return res // cannot happen: a constant the type reads
	}
	out.Meta, out.Cacheable, out.Contents = res.Meta, res.Cacheable, res.Contents
	out.InputRequests, out.RequestState = res.InputRequests, res.RequestState
	return &out
}

// readResult is a server's resources/read result for a host: with the
// gateway's URIs unless the host asked by the server's own URI (bare).
func readResult(server string, res *mcp.ReadResourceResult, bare bool) *mcp.ReadResourceResult {
	// A new value, not a copy: see resultForHost.
	cp := &mcp.ReadResourceResult{
		Meta:          withoutServerInfo(res.Meta),
		Cacheable:     res.Cacheable,
		Contents:      res.Contents,
		InputRequests: res.InputRequests,
		RequestState:  res.RequestState,
	}
	// The guard answers resources/read itself, past the SDK's
	// SetCacheable: the server's own cacheScope ("public" by default)
	// must not reach the host.
	privateCache(&cp.Cacheable)
	if bare {
		return cp
	}
	cp.Contents = make([]*mcp.ResourceContents, 0, len(res.Contents))
	for _, c := range res.Contents {
		rc := *c
		rc.URI = ResourceURI(server, c.URI)
		cp.Contents = append(cp.Contents, &rc)
	}
	return cp
}

// getPrompt renders a prompt by its qualified name.
func (g *Gateway) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	server, name, ok := SplitQualifiedName(req.Params.Name)
	if !ok {
		return nil, invalidParams("unknown prompt " + req.Params.Name)
	}
	get := func(ctx context.Context) (mcp.Result, error) {
		res, err := g.mgr.GetPrompt(ctx, server, name, req.Params.Arguments)
		if err != nil {
			return nil, err
		}
		return res, nil
	}
	key := inputKey("prompts/get", req.Params.Name, g.callerOf(req))
	out, inputs, state, err := g.maybeWithInput(ctx, req, server, key, req.Params.RequestState, req.Params.InputResponses, get)
	switch {
	case err != nil:
		return nil, wireError(err)
	case inputs != nil:
		return &mcp.GetPromptResult{InputRequests: inputs, RequestState: state}, nil
	}
	res, ok := out.(*mcp.GetPromptResult)
	if !ok {
		return nil, internalError("prompts/get")
	}
	return promptResult(server, res), nil
}

// promptResult is a server's prompts/get result for a host, with the
// gateway's URIs in its messages.
func promptResult(server string, res *mcp.GetPromptResult) *mcp.GetPromptResult {
	// A new value, not a copy: see resultForHost.
	cp := &mcp.GetPromptResult{
		Meta:          withoutServerInfo(res.Meta),
		Description:   res.Description,
		Messages:      make([]*mcp.PromptMessage, 0, len(res.Messages)),
		InputRequests: res.InputRequests,
		RequestState:  res.RequestState,
	}
	for _, m := range res.Messages {
		mm := *m
		mm.Content = oneContentForHost(server, m.Content)
		cp.Messages = append(cp.Messages, &mm)
	}
	return cp
}

// complete completes an argument of a prompt (by qualified name) or of a
// resource template (by the URI template the host sees).
func (g *Gateway) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	ref := *req.Params.Ref
	var server string
	var ok bool
	switch ref.Type {
	case "ref/prompt":
		server, ref.Name, ok = SplitQualifiedName(ref.Name)
	case "ref/resource":
		server, ref.URI, ok = SplitResourceURI(ref.URI)
	}
	if !ok {
		return nil, invalidParams("the reference names no prompt or resource template of mcpd")
	}
	params := *req.Params
	params.Ref = &ref
	res, err := g.mgr.Complete(ctx, server, &params)
	if err != nil {
		return nil, wireError(err)
	}
	return completeResult(res), nil
}

// completeResult is a server's completion/complete result for a host.
func completeResult(res *mcp.CompleteResult) *mcp.CompleteResult {
	// A new value, not a copy: see resultForHost. The SDK sets resultType
	// again for a 2026-07-28 host.
	return &mcp.CompleteResult{Meta: withoutServerInfo(res.Meta), Completion: res.Completion}
}

// subscribe subscribes upstream to a resource a host wants updates of. The
// interest is the host session's, until it unsubscribes or ends.
//
// The guard has authorized the subscription already, resolving a bare URI
// among the caller's servers; it resolves here among the same servers, so
// that the subscription goes where the check looked. The SDK calls this for
// subscriptions/listen too, without the HTTP request's caller: then a bare
// URI resolves among all servers.
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	// Among the servers the caller sees, as the guard resolved it: the SDK
	// calls this for subscriptions/listen without the request's Extra.
	caller := g.callerIn(ctx, req)
	server, uri, _, err := g.resolveURI(g.visibleTo(caller), req.Params.URI)
	if err != nil {
		return err
	}
	key := subscription{session: req.Session, uri: req.Params.URI}
	if err := g.admitSubscription(key); err != nil {
		return err
	}
	release, err := g.mgr.SubscribeResource(ctx, server, uri)
	if err != nil {
		return wireError(err)
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		release()
		return wireError(mcpclient.ErrUnavailable)
	}
	old, had := g.subs[key]
	h := g.trackLocked(req.Session)
	if !had && len(h.uris) >= maxSubscriptionsPerSession {
		// Concurrent subscriptions of one session got past the first check.
		g.mu.Unlock()
		release()
		return tooManySubscriptions()
	}
	if h.uris == nil {
		h.uris = make(map[string]bool)
	}
	h.uris[key.uri] = true
	g.subs[key] = held{caller: caller, server: server, uri: uri, release: release}
	g.mu.Unlock()
	if had {
		old.release()
	}
	return nil
}

func (g *Gateway) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	key := subscription{session: req.Session, uri: req.Params.URI}
	g.mu.Lock()
	h, had := g.subs[key]
	delete(g.subs, key)
	if host := g.hosts[req.Session]; host != nil {
		delete(host.uris, key.uri)
	}
	g.mu.Unlock()
	if had {
		h.release()
	}
	return nil
}
