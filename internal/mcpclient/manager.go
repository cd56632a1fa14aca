package mcpclient

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/namelock"
	"github.com/mcpd-project/mcpd/internal/oauth"
	"github.com/mcpd-project/mcpd/internal/telemetry"
	"github.com/mcpd-project/mcpd/internal/transport"
)

// Options configure a Manager. The zero value of each field selects its
// default.
type Options struct {
	// Logger receives lifecycle logs and child stderr; default: none.
	Logger zerolog.Logger
	// ClientInfo identifies mcpd to servers; default name "mcpd".
	ClientInfo *mcp.Implementation
	// ProbeTimeout bounds the server/discover probe; default 5s.
	ProbeTimeout time.Duration
	// ConnectTimeout bounds starting a server and opening its session,
	// probe included; default 30s. A server's own setting wins.
	ConnectTimeout time.Duration
	// CallTimeout is the default deadline of a tool call; default 60s. A
	// server's and a call's own settings win.
	CallTimeout time.Duration
	// StopGrace is how long a child process gets after stdin closes, and
	// again after SIGTERM, before the next step, and how long a remote
	// session's close may take before its requests are cut off (see
	// closeRemote); default 2s.
	StopGrace time.Duration
	// DrainTimeout is how long a server replaced by Start, or removed by
	// DisconnectAll, may go on to finish the requests it runs before it
	// stops; 0 stops it at once.
	DrainTimeout time.Duration
	// MaxLineBytes bounds one message from a stdio server; default 16 MiB.
	MaxLineBytes int
	// RestartBackoff is the first wait before reconnecting a server whose
	// session ended; it doubles per failure up to RestartBackoffMax.
	// Defaults 250ms and 30s.
	RestartBackoff, RestartBackoffMax time.Duration
	// CrashLoopRestarts failures (session ends or failed reconnects)
	// within CrashLoopWindow end in StateFailed instead of another retry.
	// Defaults 5 and 1m.
	CrashLoopRestarts int
	CrashLoopWindow   time.Duration
	// KeepAlive, if positive, checks sessions at this interval: a ping on
	// legacy sessions, a server/discover on 2026-07-28 stdio sessions
	// (that era has no ping); KeepAliveFailures consecutive failed checks
	// end the session, which is then rebuilt. 2026-07-28 Streamable HTTP
	// sessions are not checked.
	KeepAlive         time.Duration
	KeepAliveFailures int
	// MaxInFlight caps the concurrent calls to one server (0: no cap); a
	// call waits up to QueueTimeout for a slot (0: 5s; negative: it is
	// refused at once).
	MaxInFlight  int
	QueueTimeout time.Duration
	// CallTimeoutMax, when longer than a call's default timeout, lets the
	// call's progress notifications restart that timeout, up to this much
	// in all. A call's explicit timeout is never extended.
	CallTimeoutMax time.Duration
	// StderrTailLines is how many stderr lines a status keeps; default 50.
	StderrTailLines int
	// StderrLogRate and StderrLogBurst bound the stderr lines of one
	// server that reach Logger, as a token bucket that its restarts
	// share: lines per second, default transport.DefaultStderrLogRate,
	// negative: no limit; and the burst, default
	// transport.DefaultStderrLogBurst. Lines over the limit still reach
	// the stderr tail; a warning counts them. The warnings of a server's
	// stdout lines that are no JSON-RPC have a bucket of their own, of the
	// same rate and burst.
	StderrLogRate  float64
	StderrLogBurst int
	// Dialer, if set, opens the transport of servers that are not stdio
	// child processes; without it such servers fail as unsupported.
	Dialer Dialer
	// Events, if set, receives the servers' notifications and state
	// changes.
	Events *events.Bus
	// Requests, if set, hands server requests (sampling, elicitation,
	// roots) to attached agents, and mcpd advertises sampling and
	// elicitation to servers. Without it mcpd advertises only roots.
	Requests *Broker
	// OAuth, if set, authorizes remote servers; the same Manager must be
	// in RemoteOptions.OAuth of the Dialer.
	OAuth *oauth.Manager
	// OnStateChange, if set, is called after every state change of a
	// server. It must not block or call back into the Manager.
	OnStateChange func(server string, state State)
	// OnRemoved, if set, is called once a server was stopped and removed
	// (Disconnect), after its last OnStateChange. Same rules.
	OnRemoved func(server string)
	// MaxPolls caps the polls running at once (StartPoll, and fallback
	// polls of resource subscriptions); default DefaultMaxPolls.
	MaxPolls int
	// Telemetry, if set, records the servers' requests, tool calls,
	// events and stderr lines, and traces requests.
	Telemetry *telemetry.Telemetry
	// Trace, if set, says which servers have their JSON-RPC messages
	// logged at debug level, beside those whose config says so.
	Trace func(server string) bool
	// UnsubscribeDelay is how long an upstream resource subscription is
	// kept after its last holder lets go; default 2s, negative: none.
	UnsubscribeDelay time.Duration
	// WithholdEnv, if set, names the variables of mcpd's environment
	// that stdio servers do not inherit (mcpd's own credentials); a
	// server's own env setting passes a variable anyway.
	WithholdEnv func(name string) bool
	// Reaper, if set, reaps the orphans of the servers' processes (mcpd
	// as PID 1), leaving each server's own process to its supervision.
	Reaper *transport.Reaper
	// InstanceID names this mcpd process: its MCP endpoint shows it in
	// its capabilities (InstanceCapability), and a server that shows it
	// is that endpoint reached again, which is refused. Default: a random
	// id, new for each Manager.
	InstanceID string
}

// InstanceCapability is the key, in capabilities.experimental, of the
// object {"id": <instance id>} with which mcpd's MCP endpoint names the
// mcpd it belongs to (see Options.InstanceID).
const InstanceCapability = "mcpd/instance"

func (o *Options) withDefaults() *Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.ClientInfo == nil {
		out.ClientInfo = &mcp.Implementation{Name: "mcpd", Version: "dev"}
	}
	if out.ProbeTimeout <= 0 {
		out.ProbeTimeout = 5 * time.Second
	}
	if out.UnsubscribeDelay == 0 {
		out.UnsubscribeDelay = 2 * time.Second
	}
	if out.StderrLogRate == 0 {
		out.StderrLogRate = transport.DefaultStderrLogRate
	}
	if out.StderrLogBurst <= 0 {
		out.StderrLogBurst = transport.DefaultStderrLogBurst
	}
	if out.ConnectTimeout <= 0 {
		out.ConnectTimeout = 30 * time.Second
	}
	if out.CallTimeout <= 0 {
		out.CallTimeout = 60 * time.Second
	}
	if out.RestartBackoff <= 0 {
		out.RestartBackoff = 250 * time.Millisecond
	}
	if out.RestartBackoffMax < out.RestartBackoff {
		out.RestartBackoffMax = max(30*time.Second, out.RestartBackoff)
	}
	if out.CrashLoopRestarts <= 0 {
		out.CrashLoopRestarts = 5
	}
	if out.CrashLoopWindow <= 0 {
		out.CrashLoopWindow = time.Minute
	}
	if out.QueueTimeout == 0 {
		out.QueueTimeout = 5 * time.Second
	}
	if out.InstanceID == "" {
		out.InstanceID = rand.Text()
	}
	return &out
}

// Dialer opens a transport to a server reached over the network. cfg.Kind
// is TransportHTTP or TransportSSE (never TransportAuto: mcpd detects by
// trying both). Each call returns a fresh transport for one session.
type Dialer func(ctx context.Context, cfg config.Server) (mcp.Transport, error)

// Manager holds the upstream servers by name. Its methods are safe for
// concurrent use.
type Manager struct {
	opts *Options

	// names serialises the operations that replace or remove the server
	// of one name; reads only take mu. ops counts the operations under
	// way (see begin), for Close to wait for.
	names    namelock.Set
	ops      sync.WaitGroup
	mu       sync.Mutex
	servers  map[string]*upstream
	closed   bool
	settings *settings
	polls    *poller

	// stopping ends with Hurry: the stops of child processes under way
	// and to come skip their graces.
	stopping context.Context
	hurry    context.CancelFunc
	// closing ends when Close begins: drains under way end.
	closing    context.Context
	endClosing context.CancelFunc
}

// NewManager returns an empty Manager.
func NewManager(opts *Options) *Manager {
	m := &Manager{opts: opts.withDefaults(), servers: make(map[string]*upstream), settings: newSettings()}
	m.stopping, m.hurry = context.WithCancel(context.Background())
	m.closing, m.endClosing = context.WithCancel(context.Background())
	m.polls = newPoller(m, m.opts.MaxPolls)
	if bus, tel := m.opts.Events, m.opts.Telemetry; bus != nil && tel != nil {
		// Counted where every event passes, servers' and polls' alike.
		bus.OnPublish(func(k events.Kind) { tel.EventPublished(k.String()) })
	}
	return m
}

// InstanceID returns the id that names this mcpd process (see
// Options.InstanceID).
func (m *Manager) InstanceID() string { return m.opts.InstanceID }

// Events returns the bus the servers' events are published to, nil if
// none was given.
func (m *Manager) Events() *events.Bus { return m.opts.Events }

// Requests returns the broker that hands server requests to agents, nil if
// none was given.
func (m *Manager) Requests() *Broker { return m.opts.Requests }

// Telemetry returns what records the servers' metrics and traces, nil if
// none was given; the edges in front of the Manager record through it too.
func (m *Manager) Telemetry() *telemetry.Telemetry { return m.opts.Telemetry }

// Connect adds a server and waits, up to ctx, until it is ready or has
// failed. A server that fails stays registered in StateFailed so that its
// status explains why. With replace, a server of the same name is
// replaced (see Start); without, that is ErrAlreadyExists.
func (m *Manager) Connect(ctx context.Context, cfg config.Server, replace bool) (Status, error) {
	u, err := m.start(cfg, replace)
	if err != nil {
		return Status{}, err
	}
	return m.settle(ctx, u)
}

// Start adds a server like Connect but does not wait: the server connects
// in the background and its state tells how that goes.
//
// With replace, a server of the same name is replaced in order: it takes
// no new request, the requests it runs may finish (up to DrainTimeout),
// it stops, and only then does the new server start, so that a server
// that cannot run twice at once (one that holds a lock file) is never
// run twice. Requests that arrive meanwhile wait for the new server, as
// for any connecting one. Start returns once the new server is starting.
func (m *Manager) Start(cfg config.Server, replace bool) error {
	_, err := m.start(cfg, replace)
	return err
}

func (m *Manager) start(cfg config.Server, replace bool) (*upstream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, errorf(ErrInvalidArgument, "server config: %w", err)
	}
	end, ok := m.begin(cfg.Name)
	defer end()
	if !ok {
		return nil, errorf(ErrShuttingDown, "mcpd is shutting down")
	}
	m.mu.Lock()
	old := m.servers[cfg.Name]
	m.mu.Unlock()
	if old != nil && !replace {
		return nil, errorf(ErrAlreadyExists, "server %q already exists (set replace to replace it)", cfg.Name)
	}
	u := m.newUpstream(cfg)
	m.install(u, old, StateConnecting, "")
	u.start()
	return u, nil
}

// install publishes u, not started, under its name in place of old (nil
// for none), m.begin held on the name. While old is there, u shows state
// (and msg) and requests that arrive wait as for a connecting server; old
// takes no new request, finishes those it runs (see retire) and stops,
// and u takes over its counters and, for the tools_changed of its first
// listing, its tools. It returns with u alone under the name, for the
// caller to start it or set its state.
func (m *Manager) install(u, old *upstream, state State, msg string) {
	var takeRest func()
	if old != nil {
		u.queue(state, msg)
		takeRest = u.takeCounters(old)
		old.mu.Lock()
		u.priorTools = old.tools
		old.mu.Unlock()
	}
	m.mu.Lock()
	m.servers[u.cfg.Name] = u
	m.mu.Unlock()
	if old == nil {
		return
	}
	m.retire(old)
	takeRest()
	if m.opts.OAuth != nil {
		// Like Disconnect: a consent the old server waited for ends with
		// it; the new one asks afresh if it needs one.
		m.opts.OAuth.Release(u.cfg.Name)
	}
}

// takeCounters gives u, which replaces old under its name, the counts old
// has made (restarts, queue rejections): its Status and the metrics read
// them as counters of the server, which a replacement must not set back.
// Call it before u is published; the returned func adds what old counts
// while it drains, and is called once old has stopped.
func (u *upstream) takeCounters(old *upstream) (takeRest func()) {
	take := func(restarts uint32, rejected uint64) {
		u.mu.Lock()
		u.restarts += restarts
		u.mu.Unlock()
		u.calls.rejected.Add(rejected)
	}
	counts := func() (uint32, uint64) {
		old.mu.Lock()
		defer old.mu.Unlock()
		return old.restarts, old.calls.rejected.Load()
	}
	restarts, rejected := counts()
	take(restarts, rejected)
	return func() {
		nowRestarts, nowRejected := counts()
		take(nowRestarts-restarts, nowRejected-rejected)
	}
}

// begin takes the locks of names for an operation and counts it, so that
// Close waits for it; ok is false once the Manager is closed (the locks
// are held all the same: end releases them).
func (m *Manager) begin(names ...string) (end func(), ok bool) {
	unlock := m.names.Lock(names...)
	m.mu.Lock()
	ok = !m.closed
	if ok {
		m.ops.Add(1)
	}
	m.mu.Unlock()
	return func() {
		if ok {
			m.ops.Done()
		}
		unlock()
	}, ok
}

// retire stops old, which another server replaced or which was removed,
// once the requests it runs have ended (see drain).
func (m *Manager) retire(old *upstream) {
	old.retire()
	m.drain(old)
	old.stop()
}

// AddFailed registers a server whose configuration could not be used (a
// bad entry in the config file) in StateFailed, so that its status says
// why. An existing server of that name is left alone.
func (m *Manager) AddFailed(name string, reason error) error {
	return m.AddStopped(config.Server{Name: name}, StateFailed, reason, false)
}

// AddStopped registers a server that does not run: in StateFailed (its
// configuration could not be used; reason says why) or in StateDisabled
// (reason, if any, is why it could not run if enabled). cfg needs only a
// name. With replace, a server of that name is replaced as Start replaces
// it (its requests in flight may finish first); without, an existing one
// is left alone and the result is ErrAlreadyExists.
func (m *Manager) AddStopped(cfg config.Server, state State, reason error, replace bool) error {
	end, ok := m.begin(cfg.Name)
	defer end()
	if !ok {
		return errorf(ErrShuttingDown, "mcpd is shutting down")
	}
	m.mu.Lock()
	old := m.servers[cfg.Name]
	m.mu.Unlock()
	if old != nil && !replace {
		return errorf(ErrAlreadyExists, "server %q already exists", cfg.Name)
	}
	u := m.newUpstream(cfg)
	msg := ""
	if reason != nil {
		msg = reason.Error()
	}
	u.queue(state, msg)
	m.install(u, old, state, msg)
	u.setState(state, msg) // published after the old server's STOPPED
	return nil
}

// SetEnabled disables a server (stops it and keeps it, with its
// configuration, in StateDisabled) or enables a disabled one (starts it
// again, without waiting; see Await). Enabling a server that is not
// disabled, or disabling a disabled one, changes nothing. A server whose
// configuration is unusable goes back to StateFailed when enabled.
func (m *Manager) SetEnabled(name string, enabled bool) error {
	end, ok := m.begin(name)
	defer end()
	u, err := m.lookup(name)
	if err != nil {
		return err
	}
	if !ok {
		return errorf(ErrShuttingDown, "mcpd is shutting down")
	}
	u.setEnabled(enabled)
	return nil
}

// Await waits, up to ctx, until the server's current connection attempt
// has succeeded or failed, and returns its status.
func (m *Manager) Await(ctx context.Context, name string) (Status, error) {
	u, err := m.lookup(name)
	if err != nil {
		return Status{}, err
	}
	return m.settle(ctx, u)
}

// Relabel updates where a server's configuration came from, without
// touching the server.
func (m *Manager) Relabel(name string, src config.Source, warnings []string) {
	if u, err := m.lookup(name); err == nil {
		u.mu.Lock()
		u.source, u.warnings = src, slices.Clone(warnings)
		u.mu.Unlock()
	}
}

func (m *Manager) newUpstream(cfg config.Server) *upstream {
	return newUpstream(cfg, m.opts, m.stopping, m.settings, m.settings.rootsFor(cfg.Name))
}

// settle waits for u's first attempt and returns its status.
func (m *Manager) settle(ctx context.Context, u *upstream) (Status, error) {
	err := u.waitSettled(ctx)
	return u.status(), err
}

// Disconnect stops a server at once, cutting off the requests it runs,
// and forgets it.
func (m *Manager) Disconnect(ctx context.Context, name string) error {
	if m.remove([]string{name}, false) == 0 {
		return errorf(ErrNotFound, "server %q not found", name)
	}
	return nil
}

// DisconnectAll forgets the named servers and stops them, side by side
// rather than one after another (each stop may wait out its grace
// periods), each once the requests it runs have ended, up to
// DrainTimeout. It returns how many it found.
func (m *Manager) DisconnectAll(names []string) int {
	return m.remove(names, true)
}

// remove forgets the named servers and stops them, side by side; with
// drain, each once the requests it runs have ended (see Manager.drain).
func (m *Manager) remove(names []string, drain bool) int {
	end, _ := m.begin(names...) // closed or not: Close stops them too
	defer end()
	var gone []*upstream
	m.mu.Lock()
	for _, name := range names {
		if u := m.servers[name]; u != nil {
			gone = append(gone, u)
			delete(m.servers, name)
		}
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, u := range gone {
		m.polls.stopServer(u.cfg.Name)
		u.retire()
		wg.Go(func() {
			if drain {
				m.drain(u)
			}
			u.stop()
		})
	}
	wg.Wait()
	for _, u := range gone {
		if m.opts.OAuth != nil {
			m.opts.OAuth.Release(u.cfg.Name) // its tokens stay for the next connect
		}
		// Its series and settings go with it: server names are the
		// callers' to choose.
		m.opts.Telemetry.ForgetServer(u.cfg.Name)
		m.settings.forgetServer(u.cfg.Name)
		if m.opts.OnRemoved != nil {
			m.opts.OnRemoved(u.cfg.Name)
		}
	}
	return len(gone)
}

// Restart stops a server and connects it again with the same configuration,
// then waits like Connect.
//
// The requests the server runs are cut off at once, not drained: a
// restart is what an operator asks of a server that hangs. Tool calls
// that are safe to send again go to the new session (see callTool).
func (m *Manager) Restart(ctx context.Context, name string) (Status, error) {
	end, ok := m.begin(name)
	m.mu.Lock()
	old := m.servers[name]
	m.mu.Unlock()
	if old == nil {
		end()
		return Status{}, errorf(ErrNotFound, "server %q not found", name)
	}
	if old.status().State == StateDisabled {
		end()
		return Status{}, errorf(ErrDisabled, "server %q is disabled: enable it with SetServerEnabled", name)
	}
	if !ok {
		end()
		return Status{}, errorf(ErrShuttingDown, "mcpd is shutting down")
	}
	if err := old.cfg.Validate(); err != nil {
		end()
		return Status{}, errorf(ErrInvalidArgument, "server %q cannot restart: %w", name, err)
	}
	old.restart()
	end()
	return m.settle(ctx, old)
}

// Get returns the status of one server.
func (m *Manager) Get(name string) (Status, error) {
	u, err := m.lookup(name)
	if err != nil {
		return Status{}, err
	}
	return u.status(), nil
}

// List returns the status of every server, sorted by name.
func (m *Manager) List() []Status {
	out := make([]Status, 0)
	for _, u := range m.snapshot() {
		out = append(out, u.status())
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Config.Name, b.Config.Name) })
	return out
}

// Tools returns the tools of one server, or of every ready server when
// server is empty, sorted by qualified name. Asking a server that is not
// ready is ErrUnavailable.
func (m *Manager) Tools(server string) ([]Tool, error) {
	var tools []Tool
	if server != "" {
		u, err := m.lookup(server)
		if err != nil {
			return nil, err
		}
		if _, err := u.ready(); err != nil {
			return nil, err
		}
		tools = u.listTools()
	} else {
		for _, u := range m.snapshot() {
			if _, err := u.ready(); err == nil {
				tools = append(tools, u.listTools()...)
			}
		}
	}
	sortTools(tools)
	return tools, nil
}

// CallTool calls a tool by its qualified name. A tool that reports failure
// is a result with IsError set, not an error.
func (m *Manager) CallTool(ctx context.Context, name string, args map[string]any, opts CallOptions) (*mcp.CallToolResult, error) {
	server, tool, ok := SplitQualifiedToolName(name)
	if !ok {
		return nil, errorf(ErrInvalidArgument, "tool name %q is not a qualified name mcp__<server>__<tool>", name)
	}
	u, err := m.lookup(server)
	if err != nil {
		return nil, err
	}
	res, err := u.callTool(ctx, tool, args, opts)
	if next := m.replacement(u, err); next != nil {
		// Never sent: the server that replaced u takes it.
		u = next
		res, err = u.callTool(ctx, tool, args, opts)
	}
	if m.opts.Telemetry != nil && m.has(server) {
		// A call that ended after its server was removed is not
		// counted: its series would outlive the server.
		m.opts.Telemetry.ToolCall(server, u.toolLabel(tool), callOutcome(res, err))
	}
	return res, err
}

// ToolCallRefused counts, in the tool calls metric, a call of the tool
// (by qualified name) that an edge refused for want of a permission: the
// caller's permissions, a deny rule, or an ask rule whose approval was
// not given. It counts as permission_denied, by the tool's name if the
// server lists it, as CallTool counts the calls it makes; a call of a
// server mcpd does not have counts nowhere, its name being the caller's.
func (m *Manager) ToolCallRefused(name string) {
	server, tool, ok := SplitQualifiedToolName(name)
	if m.opts.Telemetry == nil || !ok {
		return
	}
	if u, err := m.lookup(server); err == nil {
		m.opts.Telemetry.ToolCall(server, u.toolLabel(tool), callOutcome(nil, ErrPermissionDenied))
	}
}

// replacement returns the server that replaced u, when a request to u
// failed with err because u was replaced before the request was sent;
// nil otherwise.
func (m *Manager) replacement(u *upstream, err error) *upstream {
	if !errors.Is(err, errRetired) {
		return nil
	}
	next, lerr := m.lookup(u.cfg.Name)
	if lerr != nil || next == u {
		return nil
	}
	return next
}

// has reports whether a server of that name is registered.
func (m *Manager) has(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.servers[name] != nil
}

// WaitStarted waits until every server registered now has had its first
// start: it is ready, or its first connection attempt failed. It returns
// early with ctx's error.
func (m *Manager) WaitStarted(ctx context.Context) error {
	for _, u := range m.snapshot() {
		if err := u.waitSettled(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Close stops every poll and server and refuses new ones. It waits for the
// servers' processes to exit; ctx bounds the wait: when it ends first, the
// processes still stopping are killed (see Hurry) and Close returns ctx's
// error.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.endClosing()
	m.polls.close()
	m.settings.close()
	// From ctx's end on, stops are hurried, those of an operation under
	// way (a reload's) too. Once that operation ends, every server it
	// started is in the snapshot below.
	defer context.AfterFunc(ctx, m.Hurry)()
	m.ops.Wait()
	var wg sync.WaitGroup
	for _, u := range m.snapshot() {
		wg.Go(u.stop)
	}
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		m.settings.delayed.Wait() // unsubscribes under way find their servers stopped
		close(stopped)
	}()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
	}
	// Out of time: kill what is left rather than leave it running after
	// mcpd (the AfterFunc above may not have run yet). After SIGKILL a
	// child is reaped at once, so this wait is short but for a process
	// stuck in the kernel; it is bounded all the same.
	m.Hurry()
	t := time.NewTimer(hurriedStopWait)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
	}
	return ctx.Err()
}

// hurriedStopWait bounds Close's wait for the stops it hurried.
const hurriedStopWait = 5 * time.Second

// Hurry makes the stops of the servers' child processes under way, and
// all later ones, skip their graces: the process group is killed at once
// (SIGKILL), as when a second signal asks mcpd to stop now. The requests
// of remote sessions end at once too, those their close waits for.
func (m *Manager) Hurry() { m.hurry() }

func (m *Manager) lookup(name string) (*upstream, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.servers[name]
	if u == nil {
		return nil, errorf(ErrNotFound, "server %q not found", name)
	}
	return u, nil
}

// ToolAsk returns the qualified pattern of the server's own ToolsAsk entry
// that matches the qualified tool name, or "" when there is none or no
// such server. It is the [access.ServerAsks] of the daemon.
func (m *Manager) ToolAsk(tool string) string {
	server, own, ok := SplitQualifiedToolName(tool)
	if !ok {
		return ""
	}
	u, err := m.lookup(server)
	if err != nil {
		return ""
	}
	if p := u.cfg.AsksTool(own); p != "" {
		return QualifiedToolName(server, p)
	}
	return ""
}

func (m *Manager) snapshot() []*upstream {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*upstream, 0, len(m.servers))
	for _, u := range m.servers {
		out = append(out, u)
	}
	return out
}

// QualifyToolName returns the qualified name of the tool an agent named. A
// qualified name (mcp__<server>__<tool>) is returned as it is. A bare name
// is a server's own tool name: it resolves when exactly one READY server
// lists a tool of that name that listed accepts. None is ErrNotFound;
// several are ErrInvalidArgument, naming the qualified candidates. listed
// (nil: every tool) keeps a caller's view of the tools, so that the answer
// names no tool the caller's tool list leaves out.
func (m *Manager) QualifyToolName(name string, listed func(server, qualified string) bool) (string, error) {
	if _, _, ok := SplitQualifiedToolName(name); ok {
		return name, nil
	}
	var candidates []string
	for _, u := range m.snapshot() {
		if _, err := u.ready(); err != nil || !u.hasTool(name) {
			continue
		}
		qualified := QualifiedToolName(u.cfg.Name, name)
		if listed == nil || listed(u.cfg.Name, qualified) {
			candidates = append(candidates, qualified)
		}
	}
	slices.Sort(candidates)
	switch len(candidates) {
	case 0:
		return "", errorf(ErrNotFound, "no ready server has a tool named %q (a qualified name is mcp__<server>__<tool>)", name)
	case 1:
		return candidates[0], nil
	}
	return "", errorf(ErrInvalidArgument, "tool name %q is ambiguous: use one of %s", name, strings.Join(candidates, ", "))
}
