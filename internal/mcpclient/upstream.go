// Package mcpclient owns mcpd's upstream side: one supervised MCP client
// session per configured server. It starts the server (through
// internal/transport), probes its protocol era, keeps its tool list current,
// calls its tools, and reports its state. The gRPC edge (internal/server)
// uses it through Manager and maps its errors to status codes.
package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/transport"
)

// Protocol revisions mcpd asks for. The probe asks for the stateless
// revision; a server that does not answer it is reached with the newest
// initialize-based one.
const (
	statelessProtocolVersion = "2026-07-28"
	legacyProtocolVersion    = "2025-11-25"
)

// State is where a server is in its lifecycle.
type State int

// The states of a server.
const (
	StateConnecting State = iota + 1
	StateReady
	StateReconnecting
	StateFailed
	StateStopped
)

func (s State) String() string {
	switch s {
	case StateConnecting:
		return "connecting"
	case StateReady:
		return "ready"
	case StateReconnecting:
		return "reconnecting"
	case StateFailed:
		return "failed"
	case StateStopped:
		return "stopped"
	}
	return "unknown"
}

// Tool is one tool of one server, as mcpd exposes it.
type Tool struct {
	// Name is the qualified name, mcp__<server>__<tool>.
	Name string
	// Server names the server that owns the tool.
	Server string
	// Tool is the server's definition; Tool.Name is the server's own name.
	Tool *mcp.Tool
}

// Status is a snapshot of one server.
type Status struct {
	Config          config.Server
	State           State
	ProtocolVersion string
	ServerInfo      *mcp.Implementation
	Instructions    string
	Capabilities    *mcp.ServerCapabilities
	ToolCount       int
	LastError       string
	Restarts        uint32
	StderrTail      []string
	StateChanged    time.Time
	Pid             int
}

// upstream supervises the session with one server. Its run goroutine owns
// the session and the child process; stop cancels it and waits.
type upstream struct {
	cfg    config.Server
	opts   *Options
	log    zerolog.Logger
	client *mcp.Client

	ctx     context.Context // lifecycle: cancelled by stop
	cancel  context.CancelFunc
	done    chan struct{} // closed when run returns
	settled chan struct{} // closed when the first connection attempt settles
	refresh chan struct{} // a tools/list_changed arrived (capacity 1)

	mu           sync.Mutex
	state        State
	lastErr      string
	stateChanged time.Time
	restarts     uint32
	session      *mcp.ClientSession
	proc         *transport.Process
	lastProc     *transport.Process // kept for the stderr tail after an exit
	init         *mcp.InitializeResult
	tools        map[string]*mcp.Tool // by the server's own name, after filters
}

func newUpstream(cfg config.Server, restarts uint32, opts *Options) *upstream {
	ctx, cancel := context.WithCancel(context.Background())
	u := &upstream{
		cfg:      cfg,
		opts:     opts,
		log:      opts.Logger.With().Str("server", cfg.Name).Logger(),
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
		settled:  make(chan struct{}),
		refresh:  make(chan struct{}, 1),
		restarts: restarts,
	}
	u.client = mcp.NewClient(opts.ClientInfo, &mcp.ClientOptions{
		// No roots, sampling or elicitation: mcpd advertises only what it
		// can honour, and this client answers none of those requests.
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: u.onToolListChanged,
	})
	return u
}

// start launches the supervising goroutine. It is called once.
func (u *upstream) start() {
	u.setState(StateConnecting, "")
	go u.run()
}

// waitSettled waits until the first connection attempt succeeded or failed,
// or ctx ends.
func (u *upstream) waitSettled(ctx context.Context) error {
	select {
	case <-u.settled:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop ends the session, stops the process and waits for run to return. It
// is idempotent.
func (u *upstream) stop() {
	u.cancel()
	<-u.done
	u.setState(StateStopped, "")
}

func (u *upstream) run() {
	defer close(u.done)
	cs, err := u.connect(u.ctx)
	if err != nil {
		if u.ctx.Err() == nil {
			u.setState(StateFailed, err.Error())
			u.log.Warn().Err(err).Msg("server failed to connect")
		}
		close(u.settled)
		return
	}
	if err := u.refreshTools(u.ctx, cs); err != nil {
		u.log.Warn().Err(err).Msg("listing tools")
	}
	u.setState(StateReady, "")
	u.log.Info().Str("protocol_version", cs.InitializeResult().ProtocolVersion).Msg("server ready")
	close(u.settled)

	sessionEnded := make(chan struct{})
	go func() {
		_ = cs.Wait()
		close(sessionEnded)
	}()
	for {
		select {
		case <-u.ctx.Done():
			_ = cs.Close()
			<-sessionEnded
			u.stopProcess()
			return
		case <-sessionEnded:
			// Close releases what the SDK holds for the session (such as
			// its subscriptions/listen goroutine) even though the peer is
			// already gone.
			_ = cs.Close()
			reason := u.stopProcess()
			u.setState(StateFailed, reason)
			u.log.Warn().Str("reason", reason).Msg("server session ended")
			return
		case <-u.refresh:
			if err := u.refreshTools(u.ctx, cs); err != nil {
				u.log.Warn().Err(err).Msg("refreshing tools")
			}
		}
	}
}

// stopProcess stops the child process, if any, and describes how it ended.
func (u *upstream) stopProcess() string {
	u.mu.Lock()
	proc := u.proc
	u.proc, u.session = nil, nil
	u.mu.Unlock()
	if proc == nil {
		return "session closed"
	}
	_ = proc.Stop(context.Background())
	return exitReason(proc)
}

// exitReason describes how a child process ended.
func exitReason(proc *transport.Process) string {
	if err := proc.ExitError(); err != nil {
		return "server process exited: " + err.Error()
	}
	return "server process exited"
}

// connect starts the server and opens a session. Without a forced protocol
// version it probes for the stateless era first, bounded by ProbeTimeout: a
// server that ignores server/discover or dies on it is started again and
// reached with initialize.
func (u *upstream) connect(ctx context.Context) (*mcp.ClientSession, error) {
	timeout := u.cfg.ConnectTimeout
	if timeout <= 0 {
		timeout = u.opts.ConnectTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	if v := u.cfg.ProtocolVersion; v != "" {
		return u.dial(ctx, v)
	}
	probeCtx, cancelProbe := context.WithTimeout(ctx, u.opts.ProbeTimeout)
	cs, err := u.dial(probeCtx, statelessProtocolVersion)
	cancelProbe()
	if err == nil || ctx.Err() != nil || errors.Is(err, errStart) {
		return cs, err
	}
	u.log.Info().Err(err).Msg("server/discover probe unanswered; connecting with initialize")
	return u.dial(ctx, legacyProtocolVersion)
}

// errStart marks a server that could not be started at all; probing again
// would not help.
var errStart = errors.New("start")

// dial starts the server and opens a session asking for version.
func (u *upstream) dial(ctx context.Context, version string) (*mcp.ClientSession, error) {
	if u.cfg.Kind != config.TransportStdio {
		return u.dialRemote(ctx, version)
	}
	proc, err := transport.StartProcess(transport.StdioSpec{
		Command: u.cfg.Command,
		Args:    u.cfg.Args,
		Env:     u.cfg.Env,
		Dir:     u.cfg.Cwd,
	}, &transport.ProcessOptions{
		Logger:          u.log,
		MaxLineBytes:    u.opts.MaxLineBytes,
		StderrTailLines: u.opts.StderrTailLines,
		StopGrace:       u.opts.StopGrace,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errStart, err)
	}
	u.mu.Lock()
	u.lastProc = proc
	u.mu.Unlock()

	cs, err := u.client.Connect(ctx, proc, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		exited := false
		select {
		case <-proc.Done():
			exited = true
		default:
		}
		_ = proc.Stop(context.Background())
		if exited && ctx.Err() == nil {
			return nil, fmt.Errorf("connect: %s", exitReason(proc))
		}
		return nil, fmt.Errorf("connect: %w", err)
	}
	u.mu.Lock()
	u.proc, u.session, u.init = proc, cs, cs.InitializeResult()
	u.mu.Unlock()
	return cs, nil
}

// dialRemote opens a session over a transport from Options.Dialer.
func (u *upstream) dialRemote(ctx context.Context, version string) (*mcp.ClientSession, error) {
	if u.opts.Dialer == nil {
		return nil, errorf(ErrUnimplemented, "%s transport is not supported yet: %w", u.cfg.Kind, errStart)
	}
	t, err := u.opts.Dialer(ctx, u.cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errStart, err)
	}
	cs, err := u.client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	u.mu.Lock()
	u.session, u.init = cs, cs.InitializeResult()
	u.mu.Unlock()
	return cs, nil
}

// onToolListChanged runs on the SDK's notification goroutine, which must
// never block: it only flags that the run loop should list tools again.
func (u *upstream) onToolListChanged(context.Context, *mcp.ToolListChangedRequest) {
	select {
	case u.refresh <- struct{}{}:
	default:
	}
}

// refreshTools lists every page of the server's tools and keeps the ones
// the filters allow.
func (u *upstream) refreshTools(ctx context.Context, cs *mcp.ClientSession) error {
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Tools == nil {
		return nil
	}
	tools := make(map[string]*mcp.Tool)
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		if u.cfg.AllowsTool(tool.Name) {
			tools[tool.Name] = tool
		}
	}
	u.mu.Lock()
	u.tools = tools
	u.mu.Unlock()
	return nil
}

func (u *upstream) setState(state State, lastErr string) {
	u.mu.Lock()
	changed := u.state != state
	u.state = state
	if lastErr != "" {
		u.lastErr = lastErr
	}
	if changed {
		u.stateChanged = time.Now()
	}
	u.mu.Unlock()
	if changed && u.opts.OnStateChange != nil {
		u.opts.OnStateChange(u.cfg.Name, state)
	}
}

func (u *upstream) status() Status {
	u.mu.Lock()
	defer u.mu.Unlock()
	st := Status{
		Config:       u.cfg,
		State:        u.state,
		ToolCount:    len(u.tools),
		LastError:    u.lastErr,
		Restarts:     u.restarts,
		StateChanged: u.stateChanged,
	}
	if u.init != nil {
		st.ProtocolVersion = u.init.ProtocolVersion
		st.ServerInfo = u.init.ServerInfo
		st.Instructions = u.init.Instructions
		st.Capabilities = u.init.Capabilities
	}
	if u.proc != nil {
		st.Pid = u.proc.Pid()
	}
	if u.lastProc != nil {
		st.StderrTail = u.lastProc.StderrTail()
	}
	return st
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

// ready returns the session if the server is ready for calls.
func (u *upstream) ready() (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.state != StateReady || u.session == nil {
		if u.lastErr != "" && u.state == StateFailed {
			return nil, errorf(ErrUnavailable, "server %q is %s: %s", u.cfg.Name, u.state, u.lastErr)
		}
		return nil, errorf(ErrUnavailable, "server %q is %s", u.cfg.Name, u.state)
	}
	return u.session, nil
}

// CallOptions tune one tool call.
type CallOptions struct {
	// Timeout bounds the call; zero means the server's default.
	Timeout time.Duration
	// Meta is sent as the request's _meta.
	Meta map[string]any
}

func (u *upstream) callTool(ctx context.Context, toolName string, args map[string]any, opts CallOptions) (*mcp.CallToolResult, error) {
	if !u.cfg.AllowsTool(toolName) {
		return nil, errorf(ErrPermissionDenied, "tool %q of server %q is denied by the server's tool filter", toolName, u.cfg.Name)
	}
	cs, err := u.ready()
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	_, known := u.tools[toolName]
	u.mu.Unlock()
	if !known {
		return nil, errorf(ErrNotFound, "server %q has no tool %q", u.cfg.Name, toolName)
	}
	ctx, cancel := context.WithTimeout(ctx, u.callTimeout(opts.Timeout))
	defer cancel()
	if args == nil {
		// MCP wants an object; a nil map would be omitted or sent as null.
		args = map[string]any{}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolName, Arguments: args, Meta: opts.Meta})
	if err != nil {
		return nil, u.classify(ctx, "tools/call "+toolName, err)
	}
	return res, nil
}

// callTimeout picks a request's deadline: the call's own, else the
// server's, else the daemon's.
func (u *upstream) callTimeout(own time.Duration) time.Duration {
	switch {
	case own > 0:
		return own
	case u.cfg.CallTimeout > 0:
		return u.cfg.CallTimeout
	}
	return u.opts.CallTimeout
}

// classify turns an SDK error into one of this package's kinds.
func (u *upstream) classify(ctx context.Context, op string, err error) error {
	var wireErr *jsonrpc.Error
	switch {
	case errors.Is(err, mcp.ErrConnectionClosed):
		return errorf(ErrUnavailable, "%s: server %q closed the connection", op, u.cfg.Name)
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", op, ctx.Err())
	case errors.As(err, &wireErr):
		return &RPCError{Server: u.cfg.Name, Code: wireErr.Code, Message: wireErr.Message}
	}
	return errorf(ErrUnavailable, "%s: server %q: %v", op, u.cfg.Name, err)
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
