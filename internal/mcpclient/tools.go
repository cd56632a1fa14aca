package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/transport"
)

// Tool is one tool of one server, as mcpd exposes it.
type Tool struct {
	// Name is the qualified name, mcp__<server>__<tool>.
	Name string
	// Server names the server that owns the tool.
	Server string
	// Tool is the server's definition; Tool.Name is the server's own name.
	Tool *mcp.Tool
}

// CallOptions tune one tool call.
type CallOptions struct {
	// Timeout bounds the call; zero means the server's default.
	Timeout time.Duration
	// Meta is sent as the request's _meta.
	Meta map[string]any
	// OnProgress, if set, receives the call's progress notifications; mcpd
	// sets a progress token for the call. It runs on the session's
	// notification goroutine and must not block.
	OnProgress func(*mcp.ProgressNotificationParams)
	// OnLog, if set, receives the log messages the server sends while the
	// call runs. It must not block.
	OnLog func(*mcp.LoggingMessageParams)
}

// refreshTools lists every page of the server's tools and keeps the ones
// the filters allow under a name a request can use (usableToolName), the
// first of a name listed twice. The status notes say which were skipped,
// and which names break MCP's rule (checkToolName) but are kept: tools
// under such names work through mcpd, and the clients map them to names
// model APIs take, so leaving them out would only lose them.
//
// A server that does not declare the tools capability is asked all the
// same, unless its config says StrictCapabilities: quick servers written
// by hand, or to older drafts, often leave it out and list tools anyway.
// Their answer is used, with a note in the server's status; an error is
// taken to mean the server has no tools.
func (u *upstream) refreshTools(ctx context.Context, cs *mcp.ClientSession) error {
	caps := cs.InitializeResult().Capabilities
	declared := caps != nil && caps.Tools != nil
	if !declared && u.cfg.StrictCapabilities {
		return nil
	}
	tools := make(map[string]*mcp.Tool)
	// Why tools were left out, and which kept names break MCP's rule: one
	// line each.
	var skipped, offRule []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			if !declared {
				u.log.Debug().Str("error", u.cfg.Redact(err.Error())).Msg("tools/list of a server that declared no tools capability: no tools")
				tools, skipped, offRule = map[string]*mcp.Tool{}, nil, nil
				break
			}
			return fmt.Errorf("tools/list: %w", err)
		}
		if !u.cfg.AllowsTool(tool.Name) {
			continue
		}
		// A name listed again would replace the first tool unseen.
		if err := usableToolName(tool.Name); err != nil {
			skipped = append(skipped, err.Error())
			continue
		}
		if _, dup := tools[tool.Name]; dup {
			skipped = append(skipped, fmt.Sprintf("tool name %s is listed twice; the first tool is used", quoteStart(tool.Name)))
			continue
		}
		if err := checkToolName(tool.Name); err != nil {
			offRule = append(offRule, err.Error())
		}
		tools[tool.Name] = tool
	}
	undeclared := !declared && len(tools) > 0
	if undeclared {
		u.log.Info().Int("tools", len(tools)).Msg(noteToolsUndeclared)
	}
	notes := append(toolNameNotes("tool skipped: ", "more tools skipped", skipped),
		toolNameNotes("tool name kept, but model APIs may refuse it: ", "more tool names off MCP's rule", offRule)...)
	u.mu.Lock()
	if len(notes) > 0 && !slices.Equal(notes, u.toolNotes) {
		u.log.Warn().Int("skipped", len(skipped)).Int("off_rule", len(offRule)).Strs("why", notes).Msg("tool names")
	}
	u.tools = tools
	u.toolsUndeclared = undeclared
	u.toolNotes = notes
	// Under u.mu, so that two listings cannot reach the metrics in the
	// other order: the series of tools no longer listed go.
	u.opts.Telemetry.ToolsListed(u.cfg.Name, maps.Keys(tools))
	u.mu.Unlock()
	return nil
}

// noteToolsUndeclared is the status note of a server whose tools came
// although it declared no tools capability.
const noteToolsUndeclared = "the server declared no tools capability but lists tools: they are used (strictCapabilities turns this off)"

// maxToolNameNotes bounds the notes of each kind on tool names in a
// server's status: a server may list thousands of tools.
const maxToolNameNotes = 5

// toolNameNotes are status notes on tool names: prefix and one line of
// why per tool up to maxToolNameNotes, then a count of the rest.
func toolNameNotes(prefix, more string, why []string) []string {
	var notes []string
	for i, w := range why {
		if i == maxToolNameNotes {
			notes = append(notes, fmt.Sprintf("%d %s", len(why)-i, more))
			break
		}
		notes = append(notes, prefix+w)
	}
	return notes
}

// usableToolName refuses a name a server lists that no request could
// name or that cannot be shown safely: empty, longer than MaxToolNameLen,
// not UTF-8, or holding a control character.
func usableToolName(name string) error {
	switch {
	case name == "":
		return errors.New("tool name is empty")
	case len(name) > MaxToolNameLen:
		return fmt.Errorf("tool name %s is longer than %d bytes", quoteStart(name), MaxToolNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("tool name %s is not UTF-8", quoteStart(name))
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("tool name %s holds a control character", quoteStart(name))
	}
	return nil
}

// checkToolName applies MCP's tool name rule (2025-11-25): 1 to 128 of
// A-Z, a-z, 0-9, '_', '-' and '.'. A tool an agent serves under a name it
// refuses is refused; one a server lists is kept, with a note
// (refreshTools).
func checkToolName(name string) error {
	if name == "" {
		return errors.New("tool name is empty (MCP allows 1 to 128 of A-Z, a-z, 0-9, _, - and .)")
	}
	if len(name) > 128 {
		return fmt.Errorf("tool name %.32q... is longer than 128 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("tool name %q: %q is not allowed (MCP allows A-Z, a-z, 0-9, _, - and .)", name, r)
		}
	}
	return nil
}

// listTools returns the server's tools with their qualified names.
func (u *upstream) listTools() []Tool {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]Tool, 0, len(u.tools))
	for name, t := range u.tools {
		out = append(out, Tool{Name: QualifiedToolName(u.cfg.Name, name), Server: u.cfg.Name, Tool: t})
	}
	return out
}

// callTool calls a tool, across the end of a session where that is safe: a
// call that never reached the ended session is sent on the next one, and a
// call that may have reached it is sent again, once, only if the server
// marks the tool read-only or idempotent. Either waits within the call's
// deadline, and a call its caller cancelled is never sent again. Any other
// call the session took with it fails with a *CallInterruptedError.
func (u *upstream) callTool(ctx context.Context, toolName string, args map[string]any, opts CallOptions) (*mcp.CallToolResult, error) {
	if !u.cfg.AllowsTool(toolName) {
		return nil, errorf(ErrPermissionDenied, "tool %q of server %q is denied by the server's tool filter", toolName, u.cfg.Name)
	}
	ctx = callBound(ctx)
	// The deadline covers waiting for a reconnecting server and for a slot.
	timeout := u.callTimeout(opts.Timeout)
	extendUpTo := time.Duration(0)
	if opts.Timeout <= 0 {
		extendUpTo = u.opts.CallTimeoutMax
	}
	ctx, cancel, extend := withCallDeadline(ctx, timeout, extendUpTo)
	defer cancel()
	if _, err := u.awaitReady(ctx); err != nil {
		return nil, err
	}
	repeatable, known := u.toolRepeatable(toolName)
	if !known {
		return nil, errorf(ErrNotFound, "server %q has no tool %q", u.cfg.Name, toolName)
	}
	// A queued call has not reached any session: a session that ends while
	// it waits for its slot is no concern of it.
	release, err := u.calls.acquire(ctx, u.cfg.Name)
	if err != nil {
		return nil, err
	}
	defer release()
	if args == nil {
		// MCP wants an object; a nil map would be omitted or sent as null.
		args = map[string]any{}
	}
	c := toolCall{name: toolName, args: args, opts: opts, extend: extend, progress: extendUpTo > timeout}
	var (
		ended *mcp.ClientSession // the session the last attempt died with
		sent  int                // attempts that may have reached a server
	)
	interrupted := func(err error) error {
		return &CallInterruptedError{Server: u.cfg.Name, Tool: toolName, Repeatable: repeatable, Retried: sent > 1, Err: err}
	}
	resend := "" // why the call goes again, counted once it does
	for {
		cs, err := u.awaitSession(ctx, ended)
		if err != nil {
			if sent > 0 {
				return nil, interrupted(err)
			}
			return nil, err
		}
		if resend != "" {
			u.opts.Telemetry.ToolCallResent(u.cfg.Name, toolName, resend)
			resend = ""
		}
		res, a := u.attempt(ctx, cs, c)
		if a.err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, a.err // the caller gave up
		}
		if !a.sessionEnded && a.sent && repeatable && sent == 0 && errors.Is(a.err, ErrUnavailable) && u.cfg.Kind != config.TransportAgent {
			// The call's connection may have failed just before the run
			// saw the session end (a server that went away, or came back
			// without the session): a call that would be sent again on a
			// new session must not fail for the order of the two.
			a.sessionEnded = u.sessionEnds(ctx, cs)
		}
		if !a.sessionEnded {
			// The session lives on, or its end was not seen yet (the call
			// failed with the connection before the run noticed). A call
			// that failed on the way after it may have reached the server
			// (its HTTP request cut off, or answered by a gateway's 504)
			// may have run all the same: it is not sent again, and says
			// so, lest the caller repeat it as if it had not. A tool safe
			// to call again fails plainly: the caller may repeat it.
			if a.sent && !repeatable && errors.Is(a.err, ErrUnavailable) && u.cfg.Kind != config.TransportAgent {
				sent++
				return nil, interrupted(a.err)
			}
			return nil, a.err
		}
		ended = cs
		if !a.sent {
			resend = "not_sent"
			continue
		}
		sent++
		if repeatable && sent == 1 && !a.tooLarge {
			resend = "idempotent"
			continue
		}
		return nil, interrupted(a.err)
	}
}

// toolCall is what callTool sends on each attempt.
type toolCall struct {
	name     string
	args     map[string]any
	opts     CallOptions
	extend   func() // restarts the call's deadline (progress)
	progress bool   // ask for progress even without OnProgress, to extend
}

// attemptResult says how one attempt of a call failed.
type attemptResult struct {
	err error
	// sent: the request may have reached the server.
	sent bool
	// sessionEnded: the session the attempt used is over (its connection
	// closed or was lost, or the server was stopped or restarted).
	sessionEnded bool
	// tooLarge: a line over the size limit ended the session. It may have
	// been this call's answer, and would end the next session too: a call
	// that may have reached the server is not sent again (one that did not
	// cannot be the line's, and is).
	tooLarge bool
}

// attempt sends a call on cs once.
func (u *upstream) attempt(ctx context.Context, cs *mcp.ClientSession, c toolCall) (*mcp.CallToolResult, attemptResult) {
	tracked := u.tracksSends(cs)
	// Bound to the run whose session it uses: a restart or stop ends it at
	// once rather than after the SDK's Close waited for it.
	callCtx, unbind := u.bindRun(ctx)
	defer unbind()
	callCtx, sent := transport.WithSendRecord(callCtx)
	meta := u.requestMeta(cs, c.opts.Meta)
	if d, ok := callCtx.Deadline(); ok && u.cfg.Kind == config.TransportAgent {
		meta[agentDeadlineKey] = d.UTC().Format(time.RFC3339Nano)
	}
	if c.opts.OnProgress != nil || c.opts.OnLog != nil || c.progress {
		token, done := u.addSink(&callSink{
			onProgress: func(p *mcp.ProgressNotificationParams) {
				c.extend()
				if c.opts.OnProgress != nil {
					c.opts.OnProgress(p)
				}
			},
			onLog: c.opts.OnLog,
		})
		defer done()
		meta["progressToken"] = token
	}
	res, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: c.name, Arguments: c.args, Meta: meta})
	if err == nil {
		return res, attemptResult{}
	}
	out := attemptResult{
		err: u.classify(callCtx, cs, "tools/call "+c.name, err),
		// Over a transport that does not say, any request may have been
		// sent.
		sent: sent.Sent() || !tracked,
	}
	if sent.Refused() {
		// The server answered this very request that it does not know the
		// session, or its gateway turned it away (429, 503): it did not
		// run the call. (Every other call in flight on a lost session
		// fails the same way, ran or not.)
		out.sent = false
	}
	// A line over the size limit on a stream ends the session (classify
	// made it ErrUnavailable then); the call ends with it, as with any
	// other end: the server ran the call whose answer it was, and any call
	// that reached it may be that one.
	out.tooLarge = errors.Is(err, transport.ErrMessageTooLarge)
	out.sessionEnded = ctx.Err() == nil && errors.Is(out.err, ErrUnavailable) &&
		(out.tooLarge || errors.Is(err, mcp.ErrSessionMissing) || errors.Is(context.Cause(callCtx), errRunStopped) ||
			errors.Is(context.Cause(callCtx), errSessionEnded) || !u.isCurrent(cs))
	return nil, out
}

// toolRepeatable says whether the server lists the tool, and whether it
// marks it read-only or idempotent: safe to call again.
func (u *upstream) toolRepeatable(name string) (repeatable, known bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	t, known := u.tools[name]
	if !known {
		return false, false
	}
	a := t.Annotations
	return a != nil && (a.ReadOnlyHint || a.IdempotentHint), true
}

// requestMeta copies a request's _meta and, on a 2026-07-28 session where a
// log level was set, adds it: that era carries the level in every request.
func (u *upstream) requestMeta(cs *mcp.ClientSession, meta map[string]any) mcp.Meta {
	out := make(mcp.Meta, len(meta)+2)
	maps.Copy(out, meta)
	if u.wants != nil && isStateless(cs) {
		if level := u.wants.logLevel(u.cfg.Name); level != "" {
			out[mcp.MetaKeyLogLevel] = level
		}
	}
	return out
}

// QualifiedToolName is the name an agent sees for a server's tool.
func QualifiedToolName(server, tool string) string {
	return "mcp__" + server + "__" + tool
}

// SplitQualifiedToolName splits mcp__<server>__<tool>. Server names never
// contain "__", so the first "__" after the prefix ends the server name.
func SplitQualifiedToolName(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, "mcp__")
	if !found {
		return "", "", false
	}
	server, tool, found = strings.Cut(rest, "__")
	if !found || server == "" || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// sortTools orders tools by qualified name.
func sortTools(tools []Tool) {
	slices.SortFunc(tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
}

// hasTool reports whether the server lists a tool of that name (its own
// name) that its tool filter exposes.
func (u *upstream) hasTool(name string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.tools[name]
	return ok
}
