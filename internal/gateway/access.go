package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// This file is the MCP endpoint's one door to internal/access. Every HTTP
// request is authenticated (bearer token, or the verified client
// certificate) before the SDK sees it; guard then authorizes each MCP
// request with the caller's permissions and filters the lists, as the
// gRPC edge does.
//
// The SDK hands a request's handler the HTTP headers but not the HTTP
// request's context, so the caller travels as a reference: authenticate
// stores it, with the HTTP request's context, under a random key for the
// life of the HTTP request and puts the key in a header of mcpd's own,
// after deleting whatever a client sent under that name. guard ends a
// handler when its HTTP request ends: no answer could reach the host then
// (the endpoint keeps no events to resume from).

// callerHeader carries the reference to the request's caller from
// authenticate to the MCP handlers. A client cannot set it: authenticate
// overwrites it on every request.
const callerHeader = "Mcpd-Caller-Ref"

// callerRefs holds the callers of the HTTP requests in flight.
type callerRefs struct{ m sync.Map }

// httpRequest is what callerRefs holds of one HTTP request.
type httpRequest struct {
	caller access.Caller
	ctx    context.Context
}

func (r *callerRefs) add(c access.Caller, ctx context.Context) (ref string, done func()) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	ref = hex.EncodeToString(b[:])
	r.m.Store(ref, httpRequest{caller: c, ctx: ctx})
	return ref, func() { r.m.Delete(ref) }
}

func (r *callerRefs) get(ref string) (httpRequest, bool) {
	v, ok := r.m.Load(ref)
	if !ok {
		return httpRequest{}, false
	}
	return v.(httpRequest), true
}

// authenticate refuses an HTTP request whose credentials name no caller
// (401, with WWW-Authenticate: Bearer) and passes the others on with
// their caller's reference.
//
// Every request reaches the SDK with the caller as its bearer token's
// user, so that the SDK keeps each session to the caller who opened it
// (another caller who learns a session's id gets 403). A caller known by
// its certificate, or the anonymous caller, sent no token: the caller's
// reference stands in for one.
func (g *Gateway) authenticate(next http.Handler) http.Handler {
	owned := auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		hr, ok := g.callers.get(r.Header.Get(callerHeader))
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "caller:" + hr.caller.Name}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var creds access.Credentials
		if h := r.Header.Get("Authorization"); h != "" {
			// Read as the gRPC and HTTP wires read it: nothing trimmed.
			if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "bearer") {
				creds.Token = tok
			}
		}
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
			creds.Certificate = r.TLS.VerifiedChains[0][0]
		}
		caller, err := g.opts.Access.Authenticate(creds)
		if err != nil {
			g.opts.Audit.Log(access.Record{Method: "mcp " + r.Method, Code: "Unauthenticated"})
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcpd"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if g.opts.Access.Reloaded() != nil {
			// A reload that removes the caller ends its open requests,
			// the standalone stream of its session among them.
			ctx, cancel := context.WithCancelCause(r.Context())
			defer cancel(nil)
			go g.opts.Access.Watch(ctx, caller, creds, func() { cancel(errCallerRemoved) })
			r = r.WithContext(ctx)
		}
		ref, done := g.callers.add(caller, r.Context())
		defer done()
		r.Header.Del(callerHeader)
		r.Header.Set(callerHeader, ref)
		if creds.Token == "" {
			r.Header.Set("Authorization", "Bearer "+ref)
		}
		owned.ServeHTTP(w, r)
	})
}

// errCallerRemoved ends the requests of a caller that a reload of the
// callers file removed; audit lines name it Unauthenticated.
var errCallerRemoved = &jsonrpc.Error{Code: codePermissionDenied, Message: "the caller is no longer in the callers file with these credentials"}

// settle is the error a request that failed with err answers: the
// caller's removal, if that is what ended it, else err.
func settle(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errCallerRemoved) {
		return errCallerRemoved
	}
	return err
}

// callerOf returns the caller of an MCP request; a request that came
// another way (none does) is a caller with no permission.
func (g *Gateway) callerOf(req mcp.Request) access.Caller {
	return g.httpRequestOf(req).caller
}

// callerKey holds, in a request's context, the caller the guard checked.
type callerKey struct{}

// callerIn is the caller of a request the guard passed, from its context,
// or else from the request itself.
func (g *Gateway) callerIn(ctx context.Context, req mcp.Request) access.Caller {
	if caller, ok := ctx.Value(callerKey{}).(access.Caller); ok {
		return caller
	}
	return g.callerOf(req)
}

// httpRequestOf returns what authenticate kept of the HTTP request that
// carried req; its ctx is nil for a request that came another way.
func (g *Gateway) httpRequestOf(req mcp.Request) httpRequest {
	extra := req.GetExtra()
	if extra == nil || extra.Header == nil {
		return httpRequest{}
	}
	hr, _ := g.callers.get(extra.Header.Get(callerHeader))
	return hr
}

// withinHTTPRequest returns ctx, ended also when the HTTP request that
// carried req ends (with its cause: errCallerRemoved when a reload
// removed the caller), and the function that releases it. A notification
// is left alone: its HTTP request ends before it is handled.
func (g *Gateway) withinHTTPRequest(ctx context.Context, method string, req mcp.Request) (context.Context, func()) {
	hctx := g.httpRequestOf(req).ctx
	if hctx == nil || strings.HasPrefix(method, "notifications/") {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(hctx, func() { cancel(context.Cause(hctx)) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

func (g *Gateway) allowed(c access.Caller, act access.Action) bool {
	return g.opts.Access.Allowed(c, act)
}

// guard is the receiving middleware that authorizes every MCP request by
// the caller's permissions, audits the ones that act, filters the lists,
// and answers resources/read itself (any URI of a server, listed or not).
func (g *Gateway) guard(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ss, _ := req.GetSession().(*mcp.ServerSession); ss != nil && ss == g.sweeperSession.Load() {
			// The gateway's own session, no host's (sweepURIs).
			return next(ctx, method, req)
		}
		switch method {
		case "initialize":
			ss, _ := req.GetSession().(*mcp.ServerSession)
			if err := g.admit(ss); err != nil {
				return nil, err
			}
			return next(ctx, method, req)
		case "logging/setLevel":
			// It acts (on the servers the caller may manage), so it is
			// audited, as SetLogLevel is over gRPC. A level MCP does not
			// define is refused before anything keeps it.
			start := time.Now()
			caller := g.callerOf(req)
			var res mcp.Result
			err := checkSetLevel(req)
			if err == nil {
				res, err = next(ctx, method, req)
			}
			if err == nil {
				g.setLogLevel(ctx, caller, req)
			}
			g.opts.Audit.Log(access.Record{Caller: caller.Name, Method: "mcp " + method, Code: outcome(settle(ctx, err)), Duration: time.Since(start)})
			return res, err
		case "tools/list", "prompts/list", "resources/list", "resources/templates/list":
			res, err := next(ctx, method, req)
			if err == nil {
				g.filter(g.callerOf(req), res)
			}
			return res, err
		}
		start := time.Now()
		caller := g.callerOf(req)
		acts, rec, audited, err := g.describe(caller, method, req)
		if err != nil {
			// A name or URI that resolves to nothing, or to several
			// servers: refused, and audited as the gRPC edge audits it.
			g.refused(caller, method, rec, err, start)
			return nil, wireError(err)
		}
		// What the SDK calls on the request's behalf without its Extra
		// (SubscribeHandler for subscriptions/listen) finds the caller here,
		// and resolves names among the servers the guard checked.
		ctx = context.WithValue(ctx, callerKey{}, caller)
		ctx, release := g.withinHTTPRequest(ctx, method, req)
		defer release()
		if len(acts) == 0 && !audited {
			return next(ctx, method, req)
		}
		for _, act := range acts {
			err := g.opts.Access.Authorize(caller, act)
			var need *access.ApprovalRequiredError
			if errors.As(err, &need) {
				if g.resumesApproved(caller, method, req) {
					// A 2026-07-28 retry carrying the input a call asked
					// for: the call was approved when it began.
					err = nil
				} else {
					err = settle(ctx, g.approve(ctx, caller, need, act.Server, req))
					if err == nil {
						// A reload during the wait may deny the call now.
						err = g.opts.Access.Approved(caller, act)
					}
				}
			}
			if err != nil {
				g.refused(caller, method, rec, err, start)
				if act.Verb == access.CallTool && outcome(err) == "PermissionDenied" {
					// Counted as the gRPC edge counts its refusals.
					g.mgr.ToolCallRefused(act.Tool)
				}
				return nil, wireError(err)
			}
		}
		if method == "tools/call" && g.opts.ToolSearch {
			g.loadCalled(req.(*mcp.CallToolRequest).Params.Name)
		}
		var res mcp.Result
		switch {
		case method == "resources/read":
			res, err = g.readResource(ctx, req.(*mcp.ReadResourceRequest))
		case method == "tools/call" && !g.listsTool(req.(*mcp.CallToolRequest).Params.Name):
			// The SDK would answer as this does, but the audit line says
			// NotFound, as gRPC's CallTool of an unknown tool does.
			err = unknownItem("tool", req.(*mcp.CallToolRequest).Params.Name)
		case method == "prompts/get" && !g.listsPrompt(req.(*mcp.GetPromptRequest).Params.Name):
			// As for tools: NotFound, as gRPC's GetPrompt says.
			err = unknownItem("prompt", req.(*mcp.GetPromptRequest).Params.Name)
		default:
			res, err = next(ctx, method, req)
		}
		err = settle(ctx, err)
		if audited {
			rec.Caller = caller.Name
			rec.Method = "mcp " + method
			rec.Code = outcome(err)
			if r, ok := res.(*mcp.CallToolResult); ok && err == nil {
				isErr := r.IsError
				rec.IsError = &isErr
			}
			rec.Duration = time.Since(start)
			g.opts.Audit.Log(rec)
		}
		return res, err
	}
}

// listsTool reports whether the endpoint lists the tool of this qualified
// name (to the callers who may call it): one of a READY server, and, with
// tool search, loaded.
func (g *Gateway) listsTool(name string) bool {
	if g.opts.ToolSearch && name == searchToolName {
		return true
	}
	return g.lists(name, func(items *serverItems) bool { _, ok := items.tools[name]; return ok })
}

// listsPrompt reports whether the endpoint lists the prompt of this
// qualified name: one of a READY server.
func (g *Gateway) listsPrompt(name string) bool {
	return g.lists(name, func(items *serverItems) bool { _, ok := items.prompts[name]; return ok })
}

// lists reports whether has finds the item of this qualified name among
// the published items of its server.
func (g *Gateway) lists(name string, has func(*serverItems) bool) bool {
	server, _, _ := SplitQualifiedName(name)
	g.mu.Lock()
	defer g.mu.Unlock()
	items := g.published[server]
	return items != nil && has(items)
}

// refused writes the audit line of a request refused before its handler
// ran; rec names what it was about (as the host named it, when that
// resolved to nothing).
func (g *Gateway) refused(caller access.Caller, method string, rec access.Record, err error, start time.Time) {
	rec.Caller = caller.Name
	rec.Method = "mcp " + method
	rec.Code = outcome(err)
	rec.Denied = access.RefusedPermission(err)
	rec.Duration = time.Since(start)
	g.opts.Audit.Log(rec)
}

// resumesApproved reports a tool call that resumes, for its caller, a call
// suspended for input: one that passed the guard, its approval included.
func (g *Gateway) resumesApproved(caller access.Caller, method string, req mcp.Request) bool {
	call, ok := req.(*mcp.CallToolRequest)
	if method != "tools/call" || !ok || call.Params.RequestState == "" {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.suspended[call.Params.RequestState]
	return s != nil && s.of == inputKey(method, call.Params.Name, caller)
}

// outcome names an MCP request's outcome in an audit line. A server's own
// error answer is told apart from mcpd's by its type, not its code: the
// codes mcpd gives its own errors are codes servers use too.
func outcome(err error) string {
	var je *jsonrpc.Error
	var rpc *mcpclient.RPCError
	switch {
	case err == nil:
		return "OK"
	case errors.Is(err, errCallerRemoved):
		return "Unauthenticated"
	case errors.Is(err, mcpclient.ErrNotFound):
		return "NotFound"
	case errors.As(err, &rpc):
		if rpc.Code == jsonrpc.CodeInvalidParams {
			return "InvalidArgument"
		}
		return "Error"
	case errors.As(wireError(err), &je):
		switch je.Code {
		case jsonrpc.CodeInvalidParams:
			return "InvalidArgument"
		case codeUnavailable:
			return "Unavailable"
		case codePermissionDenied:
			return "PermissionDenied"
		case codeAuthorizationRequired, codeFailedPrecondition:
			return "FailedPrecondition"
		}
	}
	return "Error"
}

// describe is the one table from an MCP request to the actions it needs
// and its audit record; audited says the request acts on something. It
// resolves the bare names and URIs of the request first (see resolve.go):
// a tool call's and a prompt's name, and a completion's reference, are
// rewritten to the gateway's names, which the SDK dispatches on. When one
// does not resolve, the record names it as the host sent it.
func (g *Gateway) describe(caller access.Caller, method string, req mcp.Request) (acts []access.Action, rec access.Record, audited bool, err error) {
	visible := g.visibleTo(caller)
	readAction := func(uri string) (access.Action, error) {
		server, original, _, err := g.resolveURI(visible, uri)
		if err != nil {
			return access.Action{Verb: access.ReadResource, URI: uri}, err
		}
		return access.Action{Verb: access.ReadResource, Server: server, URI: original}, nil
	}
	switch method {
	case "tools/call":
		p := req.(*mcp.CallToolRequest).Params
		if g.opts.ToolSearch && p.Name == searchToolName {
			// It finds only what the caller may call.
			return nil, rec, false, nil
		}
		// A name longer than any tool's names nothing, and the answer
		// and the audit line would copy it whole.
		if err := mcpclient.CheckToolNameLength("tool name", p.Name); err != nil {
			return nil, rec, false, err
		}
		name, err := g.resolveTool(caller, p.Name)
		if err != nil {
			return nil, access.Record{Tool: p.Name}, false, err
		}
		p.Name = name
		server, _, _ := SplitQualifiedName(p.Name)
		rec = access.Record{Server: server, Tool: p.Name}
		if g.opts.Audit.Arguments() && len(p.Arguments) > 0 {
			// Arguments that are not an object are the server's to refuse;
			// the line then has none.
			_ = json.Unmarshal(p.Arguments, &rec.Arguments)
		}
		return []access.Action{{Verb: access.CallTool, Server: server, Tool: p.Name}}, rec, true, nil
	case "resources/read":
		if err := mcpclient.CheckURILength("uri", req.(*mcp.ReadResourceRequest).Params.URI); err != nil {
			return nil, rec, false, err
		}
		act, err := readAction(req.(*mcp.ReadResourceRequest).Params.URI)
		return []access.Action{act}, access.Record{Server: act.Server, URI: act.URI}, true, err
	case "resources/subscribe":
		if err := mcpclient.CheckURILength("uri", req.(*mcp.SubscribeRequest).Params.URI); err != nil {
			return nil, rec, false, err
		}
		act, err := readAction(req.(*mcp.SubscribeRequest).Params.URI)
		return []access.Action{act}, access.Record{Server: act.Server, URI: act.URI}, false, err
	case "subscriptions/listen":
		if n := req.(*mcp.ServerRequest[*mcp.SubscriptionsListenParams]).Params.Notifications; n != nil {
			for _, uri := range n.ResourceSubscriptions {
				act, err := readAction(uri)
				if err != nil {
					return nil, access.Record{URI: uri}, false, err
				}
				acts = append(acts, act)
			}
		}
		return acts, rec, false, nil
	case "prompts/get":
		p := req.(*mcp.GetPromptRequest).Params
		if err := mcpclient.CheckPromptNameLength("name", p.Name); err != nil {
			return nil, rec, false, err
		}
		server, prompt, err := g.resolvePrompt(caller, p.Name)
		if err != nil {
			return nil, access.Record{Prompt: p.Name}, false, err
		}
		p.Name = QualifiedName(server, prompt)
		rec = access.Record{Server: server, Prompt: prompt}
		if g.opts.Audit.Arguments() && p.Arguments != nil {
			rec.Arguments = make(map[string]any, len(p.Arguments))
			for k, v := range p.Arguments {
				rec.Arguments[k] = v
			}
		}
		return []access.Action{{Verb: access.GetPrompt, Server: server, Prompt: prompt}}, rec, true, nil
	case "completion/complete":
		p := req.(*mcp.CompleteRequest).Params
		if p == nil || p.Ref == nil {
			return nil, rec, false, nil
		}
		if err := errors.Join(mcpclient.CheckPromptNameLength("ref.name", p.Ref.Name), mcpclient.CheckURILength("ref.uri", p.Ref.URI)); err != nil {
			return nil, rec, false, err
		}
		switch p.Ref.Type {
		case "ref/prompt":
			server, prompt, err := g.resolvePrompt(caller, p.Ref.Name)
			if err != nil {
				return nil, access.Record{Prompt: p.Ref.Name}, false, err
			}
			p.Ref.Name = QualifiedName(server, prompt)
			return []access.Action{{Verb: access.GetPrompt, Server: server, Prompt: prompt}}, rec, false, nil
		case "ref/resource":
			server, uri, err := g.resolveTemplate(caller, p.Ref.URI)
			if err != nil {
				return nil, access.Record{URI: p.Ref.URI}, false, err
			}
			p.Ref.URI = ResourceURI(server, uri)
			return []access.Action{{Verb: access.ReadResource, Server: server, URI: uri}}, rec, false, nil
		}
	}
	return nil, rec, false, nil
}

// filter keeps in a list result what the caller may use, as the gRPC
// edge's lists do.
func (g *Gateway) filter(c access.Caller, res mcp.Result) {
	switch r := res.(type) {
	case *mcp.ListToolsResult:
		r.Tools = slices.DeleteFunc(r.Tools, func(t *mcp.Tool) bool {
			if g.opts.ToolSearch && t.Name == searchToolName {
				return false
			}
			server, _, _ := SplitQualifiedName(t.Name)
			return !g.allowed(c, access.Action{Verb: access.CallTool, Server: server, Tool: t.Name})
		})
	case *mcp.ListPromptsResult:
		r.Prompts = slices.DeleteFunc(r.Prompts, func(p *mcp.Prompt) bool {
			server, name, _ := SplitQualifiedName(p.Name)
			return !g.allowed(c, access.Action{Verb: access.GetPrompt, Server: server, Prompt: name})
		})
	case *mcp.ListResourcesResult:
		r.Resources = slices.DeleteFunc(r.Resources, func(x *mcp.Resource) bool {
			server, uri, _ := SplitResourceURI(x.URI)
			return !g.allowed(c, access.Action{Verb: access.ReadResource, Server: server, URI: uri})
		})
	case *mcp.ListResourceTemplatesResult:
		r.ResourceTemplates = slices.DeleteFunc(r.ResourceTemplates, func(x *mcp.ResourceTemplate) bool {
			server, uri, _ := SplitResourceURI(x.URITemplate)
			return !g.allowed(c, access.Action{Verb: access.ReadResource, Server: server, URI: uri})
		})
	}
}

// screenUpdates is the sending middleware that sends a resource update
// to a host session only while the session's caller may read the
// resource its subscription stands for, by the permissions in force, as
// the gRPC edge filters each event of a Subscribe stream: a reload of the
// callers file that takes the permission away stops the updates at once,
// and one that gives it back resumes them. (The upstream subscription
// stays, as a Subscribe stream's does, until the host unsubscribes or its
// session ends.)
func (g *Gateway) screenUpdates(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/resources/updated" && !g.mayHear(req) {
			return nil, nil
		}
		return next(ctx, method, req)
	}
}

// mayHear reports whether the resource update req may go to its session.
// An update of a URI the session holds no subscription to goes nowhere.
func (g *Gateway) mayHear(req mcp.Request) bool {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	p, _ := req.GetParams().(*mcp.ResourceUpdatedNotificationParams)
	if ss == nil || p == nil {
		return false
	}
	g.mu.Lock()
	h, ok := g.subs[subscription{session: ss, uri: p.URI}]
	g.mu.Unlock()
	return ok && g.allowed(h.caller, access.Action{Verb: access.ReadResource, Server: h.server, URI: h.uri})
}

// approve asks, as the gRPC edge does, the agent registered for approval
// requests whether the tool call an "ask" rule holds may proceed. It
// returns nil when approved, the caller's cancellation, or a
// *access.RuleDeniedError saying why not.
func (g *Gateway) approve(ctx context.Context, caller access.Caller, need *access.ApprovalRequiredError, server string, req mcp.Request) error {
	var args map[string]any
	if call, ok := req.(*mcp.CallToolRequest); ok && len(call.Params.Arguments) > 0 {
		_ = json.Unmarshal(call.Params.Arguments, &args) // the handler refuses what does not decode
	}
	return need.Settle(g.mgr.AskApproval(ctx, server, &mcpclient.ApprovalRequest{
		Tool: need.Tool, Arguments: args, Rule: need.Rule, Caller: caller.Name,
	}))
}
