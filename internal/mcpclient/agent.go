package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
)

// Agent-defined tools. An agent serves tools of its own over one stream
// (ServeTools at the gRPC edge), as a server of kind config.TransportAgent.
// Such a server is an upstream like any other: its session is an MCP
// client session with an in-process MCP server whose tool handlers forward
// each call to the agent's stream and wait for its answer. Listing,
// filters, progress, cancellation, status, events and permissions
// therefore take the same paths as for every other server.

// noteWaitingForAgent is the last_error of an agent server that no agent
// serves yet, in StateConnecting.
const noteWaitingForAgent = "waiting for an agent to serve its tools (ServeTools)"

// noteAgentStreamEnded is the last_error of an agent server whose stream
// ended, in StateStopped.
const noteAgentStreamEnded = "the agent's ServeTools stream ended"

// agentOutbound bounds the calls and cancellations waiting for the edge to
// send them on the agent's stream; a handler blocks (within its call's
// deadline) when it is full.
const agentOutbound = 64

// AgentDeclaration is what an agent declares when it serves tools.
type AgentDeclaration struct {
	// Server names the server.
	Server string
	// Tools are the tools, by their own names.
	Tools []*mcp.Tool
	// Instructions and ServerInfo are shown in the server's status.
	Instructions string
	ServerInfo   *mcp.Implementation
}

// AgentCall is one call for the agent to run. Exactly one of Call and
// Cancel is meaningful: a message is a call or the cancellation of one.
type AgentCall struct {
	// ID identifies the call among this link's calls.
	ID string
	// Cancel, when set, says the caller gave up on call ID; Reason says
	// why.
	Cancel bool
	Reason string
	// Tool, Arguments and Meta are the call's, Tool by its own name.
	Tool      string
	Arguments map[string]any
	Meta      map[string]any
	// Deadline is when the caller stops waiting, zero if never.
	Deadline time.Time
}

// AgentReply answers one call: a result, or a protocol error.
type AgentReply struct {
	Result *mcp.CallToolResult
	Error  *jsonrpc.Error
}

// AgentLink is one agent's stream as the Manager sees it. The edge sends
// what Outbound yields, passes replies to Answer and progress to Progress,
// and calls Close when the stream ends. Its methods are safe for
// concurrent use; Close may be called more than once.
type AgentLink struct {
	decl AgentDeclaration
	out  chan AgentCall

	done    chan struct{}
	endOnce sync.Once
	endErr  error // set before done closes

	mu      sync.Mutex
	nextID  uint64
	pending map[string]*agentPending
}

type agentPending struct {
	reply    chan AgentReply // capacity 1
	progress func(p *mcp.ProgressNotificationParams)
}

func newAgentLink(decl AgentDeclaration) *AgentLink {
	return &AgentLink{
		decl:    decl,
		out:     make(chan AgentCall, agentOutbound),
		done:    make(chan struct{}),
		pending: make(map[string]*agentPending),
	}
}

// Outbound yields the calls and cancellations to send to the agent.
func (l *AgentLink) Outbound() <-chan AgentCall { return l.out }

// Done is closed when the link ends: the edge closed it, or mcpd ended it
// (see Err).
func (l *AgentLink) Done() <-chan struct{} { return l.done }

// Err says why mcpd ended the link (the server was replaced or removed);
// nil while it lives or when the edge closed it.
func (l *AgentLink) Err() error {
	select {
	case <-l.done:
		return l.endErr
	default:
		return nil
	}
}

// Close ends the link from the agent's side: its server turns STOPPED and
// its calls in flight fail with ErrUnavailable.
func (l *AgentLink) Close() { l.end(nil) }

func (l *AgentLink) end(err error) {
	l.endOnce.Do(func() {
		l.endErr = err
		close(l.done)
	})
}

func (l *AgentLink) ended() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Answer delivers the agent's reply to call id. A reply to a call that is
// over (answered, cancelled, or unknown) is ErrNotFound.
func (l *AgentLink) Answer(id string, r AgentReply) error {
	l.mu.Lock()
	p := l.pending[id]
	delete(l.pending, id)
	l.mu.Unlock()
	if p == nil {
		return errorf(ErrNotFound, "no call %q is waiting for an answer", id)
	}
	p.reply <- r
	return nil
}

// Progress passes the agent's progress on call id to its caller. Progress
// of a call that is over is ErrNotFound.
func (l *AgentLink) Progress(id string, p *mcp.ProgressNotificationParams) error {
	l.mu.Lock()
	pc := l.pending[id]
	l.mu.Unlock()
	if pc == nil {
		return errorf(ErrNotFound, "no call %q is running", id)
	}
	pc.progress(p)
	return nil
}

// agentDeadlineKey carries a call's deadline from callTool to the
// in-process server's handler; the handler removes it from _meta. The
// deadline does not survive the in-process session's context otherwise.
const agentDeadlineKey = "mcpd.internal/deadline"

// handler returns the in-process server's handler of one tool: it forwards
// the call on the link and waits for the answer, the caller's cancellation,
// or the end of the link or of the run (runCtx) that serves it.
func (l *AgentLink) handler(runCtx context.Context, tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		call := AgentCall{Tool: tool}
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &call.Arguments); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "arguments must be an object"}
			}
		}
		if len(req.Params.Meta) > 0 {
			call.Meta = make(map[string]any, len(req.Params.Meta))
			for k, v := range req.Params.Meta {
				switch k {
				case agentDeadlineKey:
					if s, ok := v.(string); ok {
						call.Deadline, _ = time.Parse(time.RFC3339Nano, s)
					}
				case "progressToken":
					// mcpd's own token, for its routing; the agent reports
					// progress by call id.
				default:
					call.Meta[k] = v
				}
			}
		}
		token := req.Params.GetProgressToken()
		p := &agentPending{
			reply: make(chan AgentReply, 1),
			progress: func(pp *mcp.ProgressNotificationParams) {
				if token == nil {
					return
				}
				out := *pp
				out.ProgressToken = token
				// Best effort: progress must not hold up the agent's
				// stream, and a closed session has no caller left.
				_ = req.Session.NotifyProgress(context.WithoutCancel(ctx), &out)
			},
		}
		l.mu.Lock()
		l.nextID++
		call.ID = strconv.FormatUint(l.nextID, 10)
		l.pending[call.ID] = p
		l.mu.Unlock()
		forget := func() {
			l.mu.Lock()
			delete(l.pending, call.ID)
			l.mu.Unlock()
		}

		select {
		case l.out <- call:
		case <-ctx.Done():
			forget()
			return nil, ctx.Err()
		case <-l.done:
			forget()
			return nil, abandoned(ctx)
		case <-runCtx.Done():
			forget()
			return nil, abandoned(ctx)
		}
		select {
		case r := <-p.reply:
			if r.Error != nil {
				return nil, r.Error
			}
			if r.Result == nil {
				return &mcp.CallToolResult{}, nil
			}
			return r.Result, nil
		case <-ctx.Done():
			forget()
			l.cancel(call.ID, cancelReason(runCtx, call.Deadline))
			return nil, ctx.Err()
		case <-l.done:
			forget()
			return nil, abandoned(ctx)
		case <-runCtx.Done():
			// A restart or stop: the agent must not go on running a call
			// that nobody waits for (or that a retry sends again).
			forget()
			l.cancel(call.ID, reasonRunEnded)
			return nil, abandoned(ctx)
		}
	}
}

// Why mcpd tells the agent to stop a call it sent.
const (
	reasonCallerCancelled = "the caller cancelled the call"
	reasonDeadlinePassed  = "the call's deadline passed"
	reasonRunEnded        = "the server stopped or restarted"
)

// cancelReason says why a call's handler context ended. That context comes
// from the in-process session, which ends it with context.Canceled in
// every case: when the run ended (the caller's call is bound to it), and
// when the caller's deadline passed.
func cancelReason(runCtx context.Context, deadline time.Time) string {
	switch {
	case runCtx.Err() != nil:
		return reasonRunEnded
	case !deadline.IsZero() && !time.Now().Before(deadline):
		return reasonDeadlinePassed
	default:
		return reasonCallerCancelled
	}
}

// cancel tells the agent that mcpd gave up on call id. Best effort, like
// MCP's notifications/cancelled: the caller has its answer already, and
// must not wait for room on the stream.
func (l *AgentLink) cancel(id, reason string) {
	select {
	case l.out <- AgentCall{ID: id, Cancel: true, Reason: reason}:
	case <-l.done:
	default:
	}
}

// abandoned is what a handler whose link or run ended returns: nothing
// until the session closes. An answer now would race with the run's end,
// which fails the call with ErrUnavailable (see bindRun); the run closes
// the session right after, which ends ctx.
func abandoned(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// ServeTools makes link's agent the one serving its declared server, and
// returns the link. A server of that name that waits for an agent (a
// config entry of kind agent, or an agent server whose stream ended) is
// taken over. One that an agent serves now, or that is not an agent
// server, is ErrAlreadyExists unless replace is set; then the old stream
// ends with ErrAborted, or the old server is replaced as Start replaces
// it (its requests in flight may finish first). ServeTools returns once
// the server is ready, with its status. A disabled agent server stays
// disabled: it keeps the link, serves it once someone enables it, and
// ServeTools returns at once with its DISABLED status.
func (m *Manager) ServeTools(ctx context.Context, decl AgentDeclaration, replace bool) (*AgentLink, Status, error) {
	cfg := config.Server{Name: decl.Server, Kind: config.TransportAgent}
	if err := cfg.Validate(); err != nil {
		return nil, Status{}, errorf(ErrInvalidArgument, "server: %w", err)
	}
	if err := checkAgentTools(decl.Tools); err != nil {
		return nil, Status{}, err
	}
	link := newAgentLink(decl)

	end, ok := m.begin(cfg.Name)
	if !ok {
		end()
		return nil, Status{}, errorf(ErrShuttingDown, "mcpd is shutting down")
	}
	m.mu.Lock()
	old := m.servers[cfg.Name]
	m.mu.Unlock()
	var u *upstream
	switch {
	case old != nil && old.cfg.Kind == config.TransportAgent:
		if live := old.agentLink(); live != nil && !live.ended() {
			if !replace {
				end()
				return nil, Status{}, errorf(ErrAlreadyExists, "server %q is served by another agent (set replace to take it over)", cfg.Name)
			}
			live.end(errorf(ErrAborted, "server %q is now served by another ServeTools stream", cfg.Name))
		}
		old.attach(link)
		u = old
	case old != nil && !replace:
		end()
		return nil, Status{}, errorf(ErrAlreadyExists, "server %q already exists (set replace to replace it)", cfg.Name)
	default:
		u = m.newUpstream(cfg)
		u.agent = link
		m.install(u, old, StateConnecting, "")
		u.start()
	}
	end()
	st, err := m.settle(ctx, u)
	if err != nil {
		link.Close()
		return nil, st, err
	}
	if st.State == StateDisabled {
		return link, st, nil
	}
	if st.State != StateReady {
		link.Close()
		return nil, st, errorf(ErrUnavailable, "server %q did not come up: %s", cfg.Name, st.LastError)
	}
	return link, st, nil
}

// checkAgentTools refuses declarations the in-process server could not
// serve: a tool without a name, two of one name, or an input schema that
// is not an object schema.
func checkAgentTools(tools []*mcp.Tool) error {
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		switch {
		case t == nil || t.Name == "":
			return errorf(ErrInvalidArgument, "tools[%d]: name is required", i)
		case seen[t.Name]:
			return errorf(ErrInvalidArgument, "tools[%d]: tool %q is declared twice", i, t.Name)
		}
		seen[t.Name] = true
		if err := checkToolName(t.Name); err != nil {
			return errorf(ErrInvalidArgument, "tools[%d]: %v", i, err)
		}
		if err := checkSchema(t.InputSchema); err != nil {
			return errorf(ErrInvalidArgument, "tools[%d] (%s): input_schema: %v", i, t.Name, err)
		}
		if err := checkSchema(t.OutputSchema); err != nil {
			return errorf(ErrInvalidArgument, "tools[%d] (%s): output_schema: %v", i, t.Name, err)
		}
		if err := tryAddTool(mcp.NewServer(&mcp.Implementation{Name: "check"}, nil), t, nil); err != nil {
			return errorf(ErrInvalidArgument, "tools[%d] (%s): %v", i, t.Name, err)
		}
	}
	return nil
}

// checkSchema refuses a schema that is not a valid JSON Schema; nil is
// fine.
func checkSchema(schema any) error {
	if schema == nil {
		return nil
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	_, err = s.Resolve(nil)
	return err
}

// tryAddTool adds a tool to s, turning the SDK's panic on a bad
// declaration into an error.
func tryAddTool(s *mcp.Server, t *mcp.Tool, h mcp.ToolHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	s.AddTool(t, h)
	return nil
}

// agentLink returns the link that serves the server, nil if none did yet.
func (u *upstream) agentLink() *AgentLink {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.agent
}

// attach hands the server to a new link: the current run (if any) ends,
// and a new one serves the link. A disabled server starts no run: serving
// tools does not enable it (that takes SetEnabled, whose run then serves
// the link).
func (u *upstream) attach(link *AgentLink) {
	u.lifeMu.Lock()
	defer u.lifeMu.Unlock()
	u.stopLocked("handed to another agent stream")
	u.mu.Lock()
	u.agent = link
	disabled := u.state == StateDisabled
	u.mu.Unlock()
	if !disabled {
		u.startLocked()
	}
}

// waitingForAgent says whether calls should fail at once instead of
// waiting for a session: an agent server no live agent serves.
func (u *upstream) waitingForAgent() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.waitingForAgentLocked()
}

func (u *upstream) waitingForAgentLocked() bool {
	return u.cfg.Kind == config.TransportAgent && (u.agent == nil || u.agent.ended())
}

// serveAgent is serve for an agent server: one run serves one link, from
// the in-process session's start until the link or the run ends.
func (u *upstream) serveAgent(r *run, settle func()) {
	u.mu.Lock()
	link := u.agent
	u.mu.Unlock()
	if link == nil {
		u.setState(StateConnecting, noteWaitingForAgent)
		settle()
		<-r.ctx.Done()
		return
	}
	if link.ended() {
		u.setState(StateStopped, noteAgentStreamEnded)
		return
	}
	cs, ss, err := u.connectAgent(r.ctx, link)
	if err != nil {
		if r.ctx.Err() == nil {
			link.end(errorf(ErrUnavailable, "server %q: %v", u.cfg.Name, err))
			u.setState(StateFailed, err.Error())
		}
		return
	}
	level, uris := u.setUp(r.ctx, cs)
	if r.ctx.Err() == nil {
		u.goReady(r.ctx, cs, level, uris, settle)
	}
	select {
	case <-r.ctx.Done():
	case <-link.done:
		// Calls in flight end now, with ErrUnavailable (see bindRun).
		r.cancel()
		u.setState(StateStopped, noteAgentStreamEnded)
		u.log.Info().Msg("agent stopped serving")
	}
	u.mu.Lock()
	u.session, u.liveConn = nil, nil
	u.mu.Unlock()
	_ = cs.Close()
	_ = ss.Close()
}

// connectAgent opens the session with an in-process MCP server whose tools
// are the link's.
func (u *upstream) connectAgent(runCtx context.Context, link *AgentLink) (*mcp.ClientSession, *mcp.ServerSession, error) {
	ctx, cancel := context.WithTimeout(runCtx, u.connectTimeout())
	defer cancel()
	info := link.decl.ServerInfo
	if info == nil || info.Name == "" {
		info = &mcp.Implementation{Name: u.cfg.Name, Version: "agent"}
	}
	srv := mcp.NewServer(info, &mcp.ServerOptions{
		Instructions: link.decl.Instructions,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	for _, t := range link.decl.Tools {
		if err := tryAddTool(srv, t, link.handler(runCtx, t.Name)); err != nil {
			return nil, nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
	}
	serverSide, clientSide := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, serverSide, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	t := u.routed(clientSide)
	cs, err := u.client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: legacyProtocolVersion})
	if err != nil {
		_ = ss.Close()
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	u.mu.Lock()
	u.session, u.init, u.liveConn = cs, cs.InitializeResult(), connOf(t)
	u.sendsTracked = false
	u.mu.Unlock()
	return cs, ss, nil
}
