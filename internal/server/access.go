package server

import (
	"context"
	"errors"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// This file is the gRPC edge's one door to internal/access: authenticate
// turns a request's metadata and TLS peer into a caller, guard checks
// every request's actions (one table, actionsOf) and writes the audit
// trail, and hub.allowed filters lists and events with the same check.

// authenticate is the auth interceptor's function: the bearer token and
// the verified client certificate become the caller in ctx.
func authenticate(authz *access.Authorizer, audit *access.Auditor) auth.AuthFunc {
	return func(ctx context.Context) (context.Context, error) {
		caller, err := authz.Authenticate(credentialsOf(ctx))
		if err != nil {
			method, _ := grpc.Method(ctx)
			audit.Log(access.Record{Method: path.Base(method), Code: codes.Unauthenticated.String()})
			return nil, toStatus(err)
		}
		if caller.Name != access.AnonymousCallerName {
			logging.AddFields(ctx, logging.Fields{"caller", caller.Name})
		}
		// The server requests of the caller's calls go to its own agents
		// first.
		return mcpclient.OnBehalfOf(access.NewContext(ctx, caller), caller.Name), nil
	}
}

// credentialsOf is what a request presents: its bearer token and its
// verified client certificate.
func credentialsOf(ctx context.Context) access.Credentials {
	var creds access.Credentials
	if tok, err := auth.AuthFromMD(ctx, "bearer"); err == nil {
		creds.Token = tok
	}
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.VerifiedChains[0]) > 0 {
			creds.Certificate = ti.State.VerifiedChains[0][0]
		}
	}
	return creds
}

// guard authorizes every MCPHub request and audits the ones that act.
type guard struct {
	authz *access.Authorizer
	audit *access.Auditor
	// qualify resolves a bare tool name (Manager.QualifyToolName).
	qualify func(name string, listed func(server, qualified string) bool) (string, error)
	// approve asks an agent about a tool call an "ask" rule holds; nil
	// denies such calls.
	approve approver
	// poll looks up a poll (Manager.Poll), whose permission StopPoll
	// needs.
	poll func(id string) (mcpclient.PollStatus, error)
}

// qualifyTool rewrites the bare tool name of a CallTool or CallToolStream
// request to its qualified name, among the tools the caller's ListTools
// shows (it may call them, no deny rule hides them), so that the
// permission check, the audit line and the handler all see the one name
// the call goes to, and no answer names a tool hidden from the caller.
func (g *guard) qualifyTool(caller access.Caller, msg any) error {
	var name *string
	switch m := msg.(type) {
	case *mcpdv1.CallToolRequest:
		name = &m.Name
	case *mcpdv1.CallToolStreamRequest:
		name = &m.Name
	default:
		return nil
	}
	if _, _, ok := mcpclient.SplitQualifiedToolName(*name); ok || *name == "" || g.qualify == nil {
		return nil
	}
	listed := func(server, qualified string) bool {
		return g.authz.Allowed(caller, access.Action{Verb: access.CallTool, Server: server, Tool: qualified})
	}
	qualified, err := g.qualify(*name, listed)
	if err != nil {
		return err
	}
	*name = qualified
	return nil
}

// approver asks for the approval a tool call needs and returns nil when it
// is given, else why not.
type approver func(ctx context.Context, need *access.ApprovalRequiredError, server string, req mcpclient.ApprovalRequest) error

// request is what guard knows of one request.
type request struct {
	actions []access.Action
	// own are actions on what the caller already runs (the poll a
	// StopPoll ends): its permissions must allow them, no tool rule
	// holds them up.
	own []access.Action
	// ownUnseen answers a caller whose permissions do not allow own: what
	// it may not see does not exist for it (the refusal would name it).
	ownUnseen error
	audited   bool // the request acts on something: it gets an audit line
	record    access.Record
	// arguments are a tool call's arguments, for an approval request.
	arguments func() map[string]any
	// pollInterval is a StartPoll's of a tool: its approval covers every
	// call of the poll.
	pollInterval time.Duration
	// approved: an agent approved the request's tool call (an ask rule).
	approved bool
}

type approvedKey struct{}

// approvedFromContext says whether the guard had the request of ctx
// approved by an agent (see request.approved).
func approvedFromContext(ctx context.Context) bool {
	approved, _ := ctx.Value(approvedKey{}).(bool)
	return approved
}

// describe is the one table from a request message to its actions and
// audit record. A message this table does not know (a new RPC) needs the
// manage permission and is audited.
func describe(method string, msg any, withArgs bool) request {
	view := func(server string) []access.Action {
		if server == "" {
			return nil // a list over every server: filtered by the handler
		}
		return []access.Action{{Verb: access.ViewServer, Server: server}}
	}
	manage := func(server string) request {
		return request{
			actions: []access.Action{{Verb: access.ManageServers, Server: server}},
			audited: true,
			record:  access.Record{Method: method, Server: server},
		}
	}
	switch m := msg.(type) {
	case *mcpdv1.ListServersRequest:
		return request{}
	case *mcpdv1.GetServerRequest:
		return request{actions: view(m.GetName())}
	case *mcpdv1.ListToolsRequest:
		return request{actions: view(m.GetServer())}
	case *mcpdv1.ListResourcesRequest:
		return request{actions: view(m.GetServer())}
	case *mcpdv1.ListResourceTemplatesRequest:
		return request{actions: view(m.GetServer())}
	case *mcpdv1.ListPromptsRequest:
		return request{actions: view(m.GetServer())}
	case *mcpdv1.CallToolRequest:
		return callTool(method, m.GetName(), m.GetArguments().AsMap, withArgs)
	case *mcpdv1.CallToolStreamRequest:
		return callTool(method, m.GetName(), m.GetArguments().AsMap, withArgs)
	case *mcpdv1.ReadResourceRequest:
		return request{
			actions: []access.Action{{Verb: access.ReadResource, Server: m.GetServer(), URI: m.GetUri()}},
			audited: true,
			record:  access.Record{Method: method, Server: m.GetServer(), URI: m.GetUri()},
		}
	case *mcpdv1.GetPromptRequest:
		r := request{
			actions: []access.Action{{Verb: access.GetPrompt, Server: m.GetServer(), Prompt: m.GetName()}},
			audited: true,
			record:  access.Record{Method: method, Server: m.GetServer(), Prompt: m.GetName()},
		}
		if withArgs {
			r.record.Arguments = make(map[string]any, len(m.GetArguments()))
			for k, v := range m.GetArguments() {
				r.record.Arguments[k] = v
			}
		}
		return r
	case *mcpdv1.CompleteRequest:
		switch ref := m.GetRef().(type) {
		case *mcpdv1.CompleteRequest_Prompt:
			return request{actions: []access.Action{{Verb: access.GetPrompt, Server: m.GetServer(), Prompt: ref.Prompt}}}
		case *mcpdv1.CompleteRequest_ResourceTemplate:
			return request{actions: []access.Action{{Verb: access.ReadResource, Server: m.GetServer(), URI: ref.ResourceTemplate}}}
		}
		return request{actions: view(m.GetServer())}
	case *mcpdv1.SubscribeRequest:
		var acts []access.Action
		for _, s := range m.GetServers() {
			acts = append(acts, view(s)...)
		}
		for _, r := range m.GetResources() {
			acts = append(acts, access.Action{Verb: access.ReadResource, Server: r.GetServer(), URI: r.GetUri()})
		}
		return request{actions: acts}
	case *mcpdv1.CompleteAuthorizationRequest:
		return manage(m.GetServer())
	case *mcpdv1.ForgetAuthorizationRequest:
		return manage(m.GetServer())
	case *mcpdv1.HandleServerRequestsRequest:
		reg := m.GetRegister()
		if reg == nil {
			return request{} // a reply: the handler refuses it if misplaced
		}
		servers := reg.GetServers()
		if len(servers) == 0 {
			servers = []string{access.AllServers}
		}
		kinds := reg.GetKinds()
		if len(kinds) == 0 { // every kind
			kinds = []mcpdv1.ServerRequestKind{
				mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING,
				mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_ELICITATION,
				mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_ROOTS,
			}
		}
		var acts []access.Action
		for _, k := range kinds {
			kind, ok := requestKindFromProto[k]
			if !ok {
				continue // INVALID_ARGUMENT from the handler
			}
			for _, s := range servers {
				acts = append(acts, access.Action{Verb: access.AnswerRequests, Server: s, RequestKind: kind.String()})
			}
		}
		return request{actions: acts}
	case *mcpdv1.StartPollRequest:
		act := startPollAction(m)
		r := request{
			actions: []access.Action{act},
			audited: true,
			record:  access.Record{Method: method, Server: act.Server, URI: act.URI, Tool: act.Tool},
		}
		if tool := m.GetTool(); tool != nil {
			// An approval of the poll shows what each call will send, and
			// how often.
			r.arguments = tool.GetArguments().AsMap
			r.pollInterval = mcpclient.DefaultPollInterval
			if iv := m.GetInterval(); iv != nil {
				r.pollInterval = iv.AsDuration()
			}
			if withArgs {
				r.record.Arguments = r.arguments()
			}
		}
		return r
	case *mcpdv1.StopPollRequest:
		// The poll's own permission is added by guard.describePoll, which
		// can look the poll up.
		return request{audited: true, record: access.Record{Method: method}}
	case *mcpdv1.ListPollsRequest:
		return request{} // filtered by the handler
	case *mcpdv1.SearchToolsRequest:
		var acts []access.Action
		for _, s := range m.GetServers() {
			acts = append(acts, view(s)...)
		}
		return request{actions: acts} // matches filtered by the handler
	case *mcpdv1.ConnectServerRequest:
		return manage(m.GetServer().GetName())
	case *mcpdv1.ServeToolsRequest:
		// Serving tools adds (or takes over) a server, like ConnectServer.
		decl := m.GetDeclare()
		if decl == nil {
			return request{} // a result or progress: the handler refuses it if misplaced
		}
		return manage(decl.GetServer())
	case *mcpdv1.DisconnectServerRequest:
		return manage(m.GetName())
	case *mcpdv1.RestartServerRequest:
		return manage(m.GetName())
	case *mcpdv1.SetServerEnabledRequest:
		return manage(m.GetName())
	case *mcpdv1.SetLogLevelRequest:
		return manage(m.GetServer())
	case *mcpdv1.SetRootsRequest:
		server := m.GetServer()
		if server == "" {
			server = access.AllServers
		}
		return manage(server)
	}
	return manage("")
}

// describePoll adds to a StopPoll request the permission of the poll it
// stops: that of reading its resource or calling its tool, without the
// tool rules (stopping a poll needs no approval, and a tool denied since
// the poll started may still be stopped). An unknown poll needs none: the
// handler answers NOT_FOUND, and so does the guard to a caller that may
// not see the poll (ListPolls hides it).
func (g *guard) describePoll(msg any, r *request) {
	m, ok := msg.(*mcpdv1.StopPollRequest)
	if !ok || g.poll == nil {
		return
	}
	st, err := g.poll(m.GetId())
	if err != nil {
		return
	}
	act := pollAction(st.Spec)
	r.own = append(r.own, act)
	r.ownUnseen = mcpclient.PollNotFound(m.GetId())
	r.record.Server, r.record.URI, r.record.Tool = act.Server, act.URI, act.Tool
}

func callTool(method, name string, args func() map[string]any, withArgs bool) request {
	act := access.Action{Verb: access.CallTool, Tool: name}
	if server, _, ok := mcpclient.SplitQualifiedToolName(name); ok {
		act.Server = server
	}
	r := request{
		actions:   []access.Action{act},
		audited:   true,
		record:    access.Record{Method: method, Server: act.Server, Tool: name},
		arguments: args,
	}
	if withArgs {
		r.record.Arguments = args()
	}
	return r
}

// check authorizes every action of r, asking for approval where a tool
// rule says "ask"; a refusal is audited.
func (g *guard) check(ctx context.Context, caller access.Caller, r *request, start time.Time) error {
	for _, act := range r.own {
		if err := g.authz.Permits(caller, act); err != nil {
			rec := r.record
			rec.Server, rec.Tool, rec.URI = act.Server, act.Tool, act.URI
			g.refused(caller, rec, err, start)
			if r.ownUnseen != nil {
				return toStatus(r.ownUnseen)
			}
			return toStatus(err)
		}
	}
	for _, act := range r.actions {
		err := g.authz.Authorize(caller, act)
		var need *access.ApprovalRequiredError
		if errors.As(err, &need) {
			err = need.Denied("no agent can approve it")
			if g.approve != nil {
				req := mcpclient.ApprovalRequest{Caller: caller.Name, PollInterval: r.pollInterval}
				if r.arguments != nil {
					req.Arguments = r.arguments()
				}
				err = g.approve(ctx, need, act.Server, req)
				if err == nil {
					// A reload during the wait may deny the call now.
					err = g.authz.Approved(caller, act)
				}
				r.approved = err == nil
			}
		}
		if gone := callerGone(ctx); err != nil && gone != nil {
			err = gone // the wait for approval ended by a reload
		}
		if err != nil {
			rec := r.record
			rec.Server, rec.Tool, rec.URI, rec.Prompt = act.Server, act.Tool, act.URI, act.Prompt
			g.refused(caller, rec, err, start)
			return toStatus(err)
		}
	}
	return nil
}

// refused writes the audit line of a request refused before its handler
// ran.
func (g *guard) refused(caller access.Caller, rec access.Record, err error, start time.Time) {
	rec.Caller = caller.Name
	rec.Code = status.Code(toStatus(err)).String()
	rec.Denied = access.RefusedPermission(err)
	rec.Duration = time.Since(start)
	g.audit.Log(rec)
}

func (g *guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	caller, _ := access.FromContext(ctx)
	method := path.Base(info.FullMethod)
	if err := checkRequest(req); err != nil {
		g.refused(caller, access.Record{Method: method}, err, start)
		return nil, toStatus(err)
	}
	if err := g.qualifyTool(caller, req); err != nil {
		g.refused(caller, access.Record{Method: method, Tool: toolName(req)}, err, start)
		return nil, toStatus(err)
	}
	r := describe(method, req, g.audit.Arguments())
	r.record.Method = method
	g.describePoll(req, &r)
	ctx, unwatch := g.watchCaller(ctx, caller)
	defer unwatch()
	if err := g.check(ctx, caller, &r, start); err != nil {
		countRefusedCall(info.Server, req, err)
		return nil, err
	}
	if r.approved {
		ctx = context.WithValue(ctx, approvedKey{}, true)
	}
	resp, err := handler(ctx, req)
	if gone := callerGone(ctx); gone != nil && err != nil {
		// The call failed because the reload ended it. One that was done
		// by then keeps its answer: what it did stands.
		err = toStatus(gone)
	}
	if r.audited {
		rec := r.record
		rec.Caller = caller.Name
		rec.Code = status.Code(err).String()
		if res, ok := resp.(*mcpdv1.CallToolResponse); ok && err == nil {
			isErr := res.GetIsError()
			rec.IsError = &isErr
		}
		rec.Duration = time.Since(start)
		g.audit.Log(rec)
	}
	return resp, err
}

// watchCaller gives a unary call a context that ends when a reload of the
// callers file leaves the call's credentials naming no caller, or another,
// as a stream's does: a removed caller's long tool call, or its wait for
// an approval, does not run on. unwatch stops the watch. Without a callers
// file nothing is watched and the call pays nothing for it.
func (g *guard) watchCaller(ctx context.Context, caller access.Caller) (_ context.Context, unwatch func()) {
	if g.authz.Reloaded() == nil {
		return ctx, func() {}
	}
	ctx, end := context.WithCancelCause(ctx)
	go g.authz.Watch(ctx, caller, credentialsOf(ctx), func() { end(&callerGoneError{caller: caller.Name}) })
	return ctx, func() { end(nil) }
}

// callerGone returns the error that ended ctx if a reload removed its
// caller (see watchCaller), else nil.
func callerGone(ctx context.Context) *callerGoneError {
	var gone *callerGoneError
	if errors.As(context.Cause(ctx), &gone) {
		return gone
	}
	return nil
}

func (g *guard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	caller, _ := access.FromContext(ss.Context())
	ctx, end := context.WithCancelCause(ss.Context())
	defer end(nil)
	if g.authz.Reloaded() != nil {
		go g.authz.Watch(ctx, caller, credentialsOf(ctx), func() { end(&callerGoneError{caller: caller.Name}) })
	}
	w := &guardedStream{ServerStream: ss, ctx: ctx, g: g, srv: srv, caller: caller, method: path.Base(info.FullMethod), start: time.Now()}
	err := handler(srv, w)
	w.mu.Lock()
	req, denied := w.req, w.denied
	w.mu.Unlock()
	if gone := callerGone(ctx); gone != nil {
		err = toStatus(gone)
		if !req.audited {
			g.audit.Log(access.Record{Caller: caller.Name, Method: w.method, Code: codes.Unauthenticated.String(), Duration: time.Since(w.start)})
		}
	}
	if req.audited && !denied {
		rec := req.record
		rec.Caller = caller.Name
		rec.Code = status.Code(err).String()
		rec.IsError = w.isError
		rec.Duration = time.Since(w.start)
		g.audit.Log(rec)
	}
	return err
}

// callerGoneError ends a stream whose credentials no longer name its
// caller after the callers file was reloaded.
type callerGoneError struct{ caller string }

func (e *callerGoneError) Error() string {
	return "caller " + strconv.Quote(e.caller) + " is no longer in the callers file with these credentials"
}

func (e *callerGoneError) Unwrap() error { return access.ErrUnauthenticated }

// guardedStream checks a stream's first message, which carries the
// request (the registration, for HandleServerRequests), before the handler
// sees it, and notes a tool result's is_error on its way out. The first
// RecvMsg happens before the handler reads any other message, on the
// handler's goroutine or on firstMessage's.
type guardedStream struct {
	grpc.ServerStream
	ctx    context.Context // the stream's, ended early if its caller goes
	g      *guard
	srv    any // the service the stream is for
	caller access.Caller
	method string
	start  time.Time
	// mu guards checked, denied and req: a handler that stops waiting for
	// the first message (firstMessage) returns while its read may still
	// complete.
	mu      sync.Mutex
	checked bool
	denied  bool
	req     request
	isError *bool
}

func (w *guardedStream) Context() context.Context { return w.ctx }

func (w *guardedStream) RecvMsg(m any) error {
	if err := w.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.checked {
		return nil
	}
	w.checked = true
	if err := checkRequest(m); err != nil {
		w.denied = true
		w.g.refused(w.caller, access.Record{Method: w.method}, err, w.start)
		return toStatus(err)
	}
	if err := w.g.qualifyTool(w.caller, m); err != nil {
		w.denied = true
		w.g.refused(w.caller, access.Record{Method: w.method, Tool: toolName(m)}, err, w.start)
		return toStatus(err)
	}
	w.req = describe(w.method, m, w.g.audit.Arguments())
	w.req.record.Method = w.method
	if err := w.g.check(w.ctx, w.caller, &w.req, w.start); err != nil {
		w.denied = true
		countRefusedCall(w.srv, m, err)
		return err
	}
	return nil
}

func (w *guardedStream) SendMsg(m any) error {
	if r, ok := m.(*mcpdv1.CallToolStreamResponse); ok && r.GetResult() != nil {
		isErr := r.GetResult().GetIsError()
		w.isError = &isErr
	}
	return w.ServerStream.SendMsg(m)
}

// allowed is the list and event filter: whether the request's caller may
// perform act.
func (h *hub) allowed(ctx context.Context, act access.Action) bool {
	caller, _ := access.FromContext(ctx)
	return h.access.Allowed(caller, act)
}

// visible is the filter of the servers the request's caller may see: a
// list over every server asks only those upstream.
func (h *hub) visible(ctx context.Context) func(server string) bool {
	return func(server string) bool {
		return h.allowed(ctx, access.Action{Verb: access.ViewServer, Server: server})
	}
}

// eventAllowed reports whether the caller may see ev: a resource update
// needs the resource, a poll's result what the poll reads (the resource,
// or calling the tool), every other event of a server the server.
func (h *hub) eventAllowed(ctx context.Context, ev events.Event) bool {
	switch {
	case ev.Server == "":
		return true // a gap marker
	case ev.Kind == events.KindResourceUpdated:
		return h.allowed(ctx, access.Action{Verb: access.ReadResource, Server: ev.Server, URI: ev.URI})
	case ev.Kind == events.KindPollResult && ev.URI != "":
		return h.allowed(ctx, access.Action{Verb: access.ReadResource, Server: ev.Server, URI: ev.URI})
	case ev.Kind == events.KindPollResult:
		return h.allowed(ctx, access.Action{Verb: access.CallTool, Server: ev.Server, Tool: ev.Tool})
	}
	return h.allowed(ctx, access.Action{Verb: access.ViewServer, Server: ev.Server})
}

// countRefusedCall counts a tool call that check refused for want of a
// permission in mcpd_tool_calls_total, as permission_denied: the refusal
// comes before the handler, which counts the calls it makes. srv is the
// service the interceptor serves, the hub for MCPHub's.
func countRefusedCall(srv, msg any, err error) {
	h, ok := srv.(*hub)
	if !ok || status.Code(err) != codes.PermissionDenied {
		return
	}
	if name := toolName(msg); name != "" {
		h.mgr.ToolCallRefused(name)
	}
}

// toolName is the tool name of a tool-call request, "" for any other.
func toolName(msg any) string {
	switch m := msg.(type) {
	case *mcpdv1.CallToolRequest:
		return m.GetName()
	case *mcpdv1.CallToolStreamRequest:
		return m.GetName()
	}
	return ""
}
