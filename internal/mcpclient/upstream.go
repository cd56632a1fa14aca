// Package mcpclient owns mcpd's upstream side: one supervised MCP client
// session per configured server. It starts the server (through
// internal/transport), probes its protocol era, keeps its tool list current,
// calls its tools, and reports its state. Tools an agent serves itself
// (ServeTools) are one more kind of server here, reached through an
// in-process session (see agent.go). The gRPC edge (internal/server) uses
// it through Manager and maps its errors to status codes.
package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/oauth"
	"github.com/mcpd-project/mcpd/internal/telemetry"
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
	// StateAuthorizationRequired means a remote server waits for a
	// person's consent (see internal/oauth).
	StateAuthorizationRequired
	// StateDisabled means the server is kept, with its configuration, but
	// not run until it is enabled again.
	StateDisabled
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
	case StateAuthorizationRequired:
		return "authorization_required"
	case StateDisabled:
		return "disabled"
	}
	return "unknown"
}

// Status is a snapshot of one server.
type Status struct {
	// Config is the server's configuration; Config.Source says where the
	// configuration came from.
	Config config.Server
	// Transport is how the server is reached: Config.Kind, or for
	// TransportAuto the detected kind once a session came up.
	Transport       config.TransportKind
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
	// AuthorizationURL and AuthorizationExpires describe the consent the
	// server waits for, in StateAuthorizationRequired.
	AuthorizationURL     string
	AuthorizationExpires time.Time
	// Notes say where mcpd treats the server otherwise than its
	// declarations say.
	Notes []string
}

// upstream supervises the session with one server. Each start launches a
// run goroutine that owns one session and its child process; stop cancels
// the run and waits for it. A restart is a stop and a start of the same
// upstream, so the SDK client (and the roots it holds) carries over.
type upstream struct {
	cfg    config.Server
	opts   *Options
	wants  interests // what agents set up, replayed on every new session
	log    zerolog.Logger
	client *mcp.Client
	tracer *tracer // nil unless the server is traced
	// stopping is the context of the child process's stops: once it ends
	// (Manager.Hurry), a stop kills the process group at once.
	stopping context.Context
	// stderrLog bounds the stderr lines of the server's processes that
	// reach the log, one start after another; skippedLog, with the same
	// rate and burst, the warnings of their stdout lines that are no
	// JSON-RPC.
	stderrLog  *rate.Limiter
	skippedLog *rate.Limiter

	calls    *inflight
	requests runningRequests         // what the server is running, for keepAlive
	refresh  chan struct{}           // a tools/list_changed arrived (capacity 1)
	lost     chan *mcp.ClientSession // a request found this session gone (capacity 1)
	// authWake is signalled when the server's authorization changed
	// (capacity 1).
	authWake chan struct{}

	// rootsMu guards rootURIs, the roots last given to client (the SDK
	// offers no getter).
	rootsMu  sync.Mutex
	rootURIs []string

	// lifeMu serialises start, stop and restart.
	lifeMu sync.Mutex

	mu           sync.Mutex
	source       config.Source // cfg.Source, or what Relabel set since
	warnings     []string      // cfg.Warnings, or what Relabel set since
	run          *run          // the current run; nil before the first start
	state        State
	changed      chan struct{} // closed and replaced on every state change
	lastErr      string
	publishedErr string // the error of the last server_state event
	// unannounced: state was set without an event (see queue); the next
	// change is published even if it sets the same state.
	unannounced bool
	// retired: the server was replaced or removed; see retire.
	retired      bool
	stateChanged time.Time
	restarts     uint32
	session      *mcp.ClientSession
	// scope ends the requests of one session when it ends (bindRun).
	scope *sessionScope
	// sendsTracked: session's transport marks each request's
	// transport.SendRecord, so a request it never sent is known.
	sendsTracked bool
	proc         *transport.Process
	// cutSession cuts off the HTTP requests of session, a remote one, and
	// stops watching for the hurry to do so (see dialRemote); nil for
	// other sessions.
	cutSession func()
	lastProc   *transport.Process // kept for the stderr tail after an exit
	init       *mcp.InitializeResult
	detected   config.TransportKind // for TransportAuto: what worked last
	// legacyEra: the server answered only initialize the last time it was
	// probed, over the transport kinds set here; reconnects skip the
	// server/discover probe, as the design asks (cache the era per server).
	legacyEra map[config.TransportKind]bool
	tools     map[string]*mcp.Tool // by the server's own name, after filters
	// toolsUndeclared: the tools came from a server that did not declare
	// the tools capability (see refreshTools).
	toolsUndeclared bool
	// toolNotes say which tools of the last listing were skipped, and why
	// (see refreshTools).
	toolNotes []string
	// priorTools are the tools of the server this one replaced (a reload,
	// ConnectServer with replace), until this one first lists its own:
	// what a stream of tool list changes knew before.
	priorTools map[string]*mcp.Tool
	// toolsUnannounced says a new session's listing differs from the
	// last one; goReady publishes it as a tool list change.
	toolsUnannounced bool
	// agent is the link of the agent serving an agent server's tools
	// (config.TransportAgent), nil until one does; see agent.go.
	agent     *AgentLink
	sinks     map[string]*callSink // streamed calls in flight, by progress token
	liveConn  *routedConn          // the session's connection, if routed: it feeds sinks itself
	nextToken uint64
}

// run is one supervised attempt: connect, serve until stopped or the
// session ends.
type run struct {
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{} // closed when the run goroutine returns
	settled chan struct{} // closed when the connection attempt succeeded or failed
	// ended says how the run was stopped, for the requests it cuts off
	// ("stopped", "restarted", "disabled"); set under u.mu before cancel.
	ended string
}

// interests is what the Manager keeps per server name for agents, so that
// a new session (after a restart or a replacement) sets it up again.
type interests interface {
	// resources lists the URIs of the server agents subscribed to.
	resources(server string) []string
	// unsubscribed notes that an unsubscribe of uri went out to a
	// 2026-07-28 session.
	unsubscribed(server, uri string)
	// logLevel is the level set with SetLogLevel, or "".
	logLevel(server string) mcp.LoggingLevel
	// lockSubscribing takes the lock held across every upstream subscribe
	// and unsubscribe call of a server that follows a change of interest
	// (see goReady).
	lockSubscribing(ctx context.Context, server string) (unlock func(), err error)
	// rootsFor is the roots set with SetRoots for the server.
	rootsFor(server string) []*mcp.Root
	// subscribed records whether a new session subscribed uri: err is
	// why not, nil when it did.
	subscribed(server, uri string, err error)
	// subscriptionNotes are status notes on the resources held whose
	// subscription the current session does not have.
	subscriptionNotes(server string) []string
}

func newUpstream(cfg config.Server, opts *Options, stopping context.Context, wants interests, roots []*mcp.Root) *upstream {
	u := &upstream{
		cfg:      cfg,
		opts:     opts,
		stopping: stopping,
		wants:    wants,
		log:      opts.Logger.With().Str("server", cfg.Name).Logger(),
		calls:    newInflight(opts.MaxInFlight, opts.QueueTimeout),
		refresh:  make(chan struct{}, 1),
		lost:     make(chan *mcp.ClientSession, 1),
		authWake: make(chan struct{}, 1),
		changed:  make(chan struct{}),
		sinks:    make(map[string]*callSink),
		source:   cfg.Source,
		warnings: cfg.Warnings,
	}
	stderrRate := rate.Limit(opts.StderrLogRate)
	if stderrRate < 0 {
		stderrRate = rate.Inf
	}
	u.stderrLog = rate.NewLimiter(stderrRate, opts.StderrLogBurst)
	u.skippedLog = rate.NewLimiter(stderrRate, opts.StderrLogBurst)
	if opts.Trace != nil && opts.Trace(cfg.Name) {
		u.cfg.Trace = true
	}
	if u.cfg.Trace {
		u.tracer = newTracer(u.cfg, u.log)
	}
	u.client = mcp.NewClient(opts.ClientInfo, u.clientOptions())
	u.client.AddReceivingMiddleware(u.rootsMiddleware)
	u.client.AddSendingMiddleware(u.requests.middleware)
	// Innermost: the span and duration of a request cover all its rounds.
	u.client.AddSendingMiddleware(u.inputMiddleware)
	up := telemetry.Upstream{Server: cfg.Name, Transport: u.transportName}
	u.client.AddSendingMiddleware(opts.Telemetry.SendingMiddleware(up))
	// Outermost: the lookup that drops a read's result is sent nowhere.
	u.client.AddSendingMiddleware(uncachedReads)
	u.setRoots(roots)
	return u
}

// start launches a run.
func (u *upstream) start() {
	u.lifeMu.Lock()
	defer u.lifeMu.Unlock()
	u.startLocked()
}

func (u *upstream) startLocked() {
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{ctx: ctx, cancel: cancel, done: make(chan struct{}), settled: make(chan struct{})}
	u.mu.Lock()
	u.run = r
	u.mu.Unlock()
	u.setState(StateConnecting, "")
	go u.serve(r)
}

// stop ends the session, stops the process and waits for the run to end.
// It is idempotent.
func (u *upstream) stop() {
	u.lifeMu.Lock()
	defer u.lifeMu.Unlock()
	if link := u.agentLink(); link != nil {
		link.end(errorf(ErrAborted, "server %q was removed or replaced", u.cfg.Name))
	}
	u.stopLocked("stopped")
	u.setState(StateStopped, "")
}

// stopLocked ends the current run, if any, and waits for it; ended says
// how, in the words of the error of a request it cuts off ("server %q was
// <ended>").
func (u *upstream) stopLocked(ended string) {
	u.mu.Lock()
	r := u.run
	if r != nil {
		r.ended = ended
	}
	u.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// setEnabled stops the server into StateDisabled, or starts a disabled
// one; see Manager.SetEnabled.
func (u *upstream) setEnabled(enabled bool) {
	u.lifeMu.Lock()
	defer u.lifeMu.Unlock()
	u.mu.Lock()
	state := u.state
	u.mu.Unlock()
	switch {
	case !enabled && state != StateDisabled:
		u.stopLocked("disabled")
		u.setState(StateDisabled, "")
	case enabled && state == StateDisabled:
		if err := u.cfg.Validate(); err != nil {
			u.setState(StateFailed, "") // lastErr still says why
			return
		}
		u.startLocked()
	}
}

// restart stops the current run and starts a new one. The server is
// CONNECTING from the start, so calls that arrive meanwhile wait for the
// new session; calls in flight end (see bindRun), and callTool decides
// which of them go to the new session.
func (u *upstream) restart() {
	u.lifeMu.Lock()
	defer u.lifeMu.Unlock()
	u.setState(StateConnecting, "")
	u.stopLocked("restarted")
	u.mu.Lock()
	u.restarts++
	u.mu.Unlock()
	u.startLocked()
}

// waitSettled waits until the current run's connection attempt succeeded
// or failed, or ctx ends.
func (u *upstream) waitSettled(ctx context.Context) error {
	u.mu.Lock()
	r := u.run
	u.mu.Unlock()
	if r == nil {
		return nil
	}
	select {
	case <-r.settled:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (u *upstream) serve(r *run) {
	defer close(r.done)
	settle := sync.OnceFunc(func() { close(r.settled) })
	defer settle()
	if u.cfg.Kind == config.TransportAgent {
		u.serveAgent(r, settle)
		return
	}
	var (
		backoff  = newBackoff(u.opts.RestartBackoff, u.opts.RestartBackoffMax)
		failures []time.Time // session ends and failed reconnects, for crash-loop detection
		wasReady bool        // a session came up in this run
	)
	for {
		if p, ok := u.pendingAuthorization(); ok {
			if !u.awaitAuthorization(r, p, settle) {
				return
			}
			continue
		}
		cs, err := u.connect(r.ctx)
		if r.ctx.Err() != nil {
			if cs != nil {
				u.closeSession(cs, nil)
				u.stopProcess()
			}
			return
		}
		if err == nil && u.isOwnEndpoint(cs) {
			// Not tried again: it would be itself again.
			u.closeSession(cs, nil)
			u.stopProcess()
			u.log.Warn().Msg(ownEndpointReason)
			u.setState(StateFailed, ownEndpointReason)
			return
		}
		var (
			level mcp.LoggingLevel
			uris  []string
		)
		if err == nil {
			level, uris = u.setUp(r.ctx, cs)
			if r.ctx.Err() != nil { // stopped while setting up: never ready
				u.closeSession(cs, nil)
				u.stopProcess()
				return
			}
			// A session whose set-up ran into the server's authorization
			// (a consent to give, a scope it keeps refusing) is not ready.
			if authErr := u.authBlocked(); authErr != nil {
				u.closeSession(cs, nil)
				u.stopProcess()
				cs, err = nil, authErr
			}
		}
		if err == nil {
			// Nor is one whose connection ended while it was set up (a
			// tools/list answer over the size limit, a server that exits
			// when asked for its tools): it never served, and on a first
			// start that is a startup problem like a failed handshake.
			if connErr := u.connEnded(cs); connErr != nil {
				u.closeSession(cs, nil)
				exited := u.stopProcess()
				why := connErr.Error()
				switch {
				case errors.Is(connErr, transport.ErrStdoutClosed):
					why = stdoutClosedReason
				case errors.Is(connErr, io.EOF) && u.cfg.Kind == config.TransportStdio:
					why = exited // the process ended it: say how
				}
				cs, err = nil, fmt.Errorf("session ended while mcpd set it up: %s", why)
			}
		}
		connectFailed := err != nil // no session came up, so none ended
		if err == nil {
			u.goReady(r.ctx, cs, level, uris, settle)
			wasReady = true
			started := time.Now()
			reason, stopped := u.hold(r, cs)
			if stopped {
				return
			}
			if time.Since(started) > u.opts.CrashLoopWindow {
				backoff.reset() // it ran long enough to start afresh
			}
			err = errors.New(reason)
			u.log.Warn().Str("reason", reason).Msg("server session ended")
		} else {
			u.log.Warn().Str("error", u.cfg.Redact(err.Error())).Msg("server failed to connect")
		}
		if _, ok := u.pendingAuthorization(); ok {
			continue // held in StateAuthorizationRequired at the top
		}

		// A server that never came up in this run has a configuration or
		// startup problem: report it at once. Remote servers are tried
		// again in the background, for they may just not be up yet.
		if !wasReady && u.cfg.Kind == config.TransportStdio {
			u.setState(StateFailed, err.Error())
			return
		}
		now := time.Now()
		failures = append(slices.DeleteFunc(failures, func(t time.Time) bool {
			return now.Sub(t) > u.opts.CrashLoopWindow
		}), now)
		// A crash loop is a process that keeps dying: retrying it only
		// burns CPU. A remote server that is away (a redeploy, a network
		// cut) is retried at the backoff's pace until it is back.
		if wasReady && u.cfg.Kind == config.TransportStdio && len(failures) >= u.opts.CrashLoopRestarts {
			u.setState(StateFailed, fmt.Sprintf("crash loop: %d failures within %v; last: %v", len(failures), u.opts.CrashLoopWindow, err))
			return
		}
		switch {
		case wasReady && !connectFailed:
			u.setState(StateReconnecting, err.Error())
		case wasReady:
			u.retryFailed(StateReconnecting, err.Error())
		default: // a remote server that was never ready, retried
			u.retryFailed(StateFailed, err.Error())
			settle()
		}
		if !backoff.wait(r.ctx) {
			return
		}
		u.mu.Lock()
		u.restarts++
		u.mu.Unlock()
	}
}

// ownEndpointReason is the last error of a server that is mcpd's own MCP
// endpoint.
const ownEndpointReason = "the server is this mcpd's own MCP endpoint (its capabilities name this mcpd's instance): " +
	"each session would list mcpd's tools again, under ever longer names; it is not tried again"

// isOwnEndpoint says whether the server of session cs names this mcpd's
// instance in its capabilities: it is mcpd's own MCP endpoint, reached
// over HTTP or through mcp-stdio.
func (u *upstream) isOwnEndpoint(cs *mcp.ClientSession) bool {
	caps := cs.InitializeResult().Capabilities
	if caps == nil {
		return false
	}
	instance, _ := caps.Experimental[InstanceCapability].(map[string]any)
	id, _ := instance["id"].(string)
	return id != "" && id == u.opts.InstanceID
}

// hold serves a ready session until it ends or the run is stopped. It
// returns why the session ended, or stopped when the run was.
func (u *upstream) hold(r *run, cs *mcp.ClientSession) (reason string, stopped bool) {
	sessionEnded := make(chan struct{})
	var endErr error // set before sessionEnded closes
	go func() {
		endErr = cs.Wait()
		close(sessionEnded)
	}()
	// workCtx bounds what this loop starts for the session: the pings and
	// a listing of the tools. refreshed is closed when the listing that
	// runs ends; nil while none runs. The loop waits for it, so that no
	// late listing overwrites the tools of the next session.
	workCtx, stopWork := context.WithCancel(r.ctx)
	var refreshed chan struct{}
	defer func() {
		stopWork()
		if refreshed != nil {
			<-refreshed
		}
	}()
	var (
		pingsFailed <-chan error
		probeName   string
	)
	if u.opts.KeepAlive > 0 {
		var probe func(context.Context) error
		if probe, probeName = u.keepAliveProbe(cs); probe != nil {
			pingsFailed = u.keepAlive(workCtx, probe, probeName)
		}
	}
	// end closes a session whose connection is still open: its requests,
	// a ping or a listing in flight among them, end first, for Close would
	// wait for them.
	end := func(why string) {
		stopWork()
		u.endSession(cs, why)
		u.closeSession(cs, sessionEnded)
	}
	for {
		// One listing at a time: a change announced while one runs stays
		// queued in u.refresh for the next.
		refresh := u.refresh
		if refreshed != nil {
			refresh = nil
		}
		select {
		case <-r.ctx.Done():
			u.closeSession(cs, sessionEnded)
			u.stopProcess()
			return "", true
		case <-sessionEnded:
			stopWork()
			// The connection is gone: the calls in flight fail with their
			// own errors (a message over the limit, the closed connection),
			// which say more than ending them here would.
			//
			// Close releases what the SDK holds for the session (such as
			// its subscriptions/listen goroutine) even though the peer is
			// already gone.
			u.closeConn(cs)
			readErr := u.connEnded(cs) // before stopProcess forgets cs
			reason := u.stopProcess()
			switch {
			case errors.Is(readErr, transport.ErrStdoutClosed):
				reason = stdoutClosedReason
			case errors.Is(endErr, transport.ErrWriteFailed), errors.Is(endErr, transport.ErrMessageTooLarge):
				// The process was stopped because the pipe broke, or
				// because it sent a line over the limit; that says more
				// than the exit status of the stop.
				reason = endErr.Error()
			case u.cfg.Kind != config.TransportStdio && endErr != nil && !errors.Is(endErr, io.EOF):
				// A remote session: the SDK's reason (a stream that failed
				// or was cut at the size limit) is all there is to say.
				reason = "session ended: " + endErr.Error()
			}
			return reason, false
		case <-u.authWake:
			if _, ok := u.pendingAuthorization(); !ok {
				continue
			}
			end("the server needs authorization")
			return "server needs authorization", false
		case gone := <-u.lost:
			if gone != cs {
				continue // an older session's, reported late
			}
			// A request saw the session gone (HTTP 404 or 400 for an
			// unknown session) while its connection stays open.
			end("the server lost the session")
			u.stopProcess()
			return "server lost the session", false
		case err := <-pingsFailed:
			reason := fmt.Sprintf("%d keepalive %ss in a row failed; last: %v", max(u.opts.KeepAliveFailures, 1), probeName, err)
			end(reason)
			u.stopProcess()
			return reason, false
		case <-refreshed:
			refreshed = nil
		case <-refresh:
			// Listed off this loop: a server that hangs in the listing
			// still has its failed pings (or a lost session) acted on at
			// once, not after the listing's own timeout.
			done := make(chan struct{})
			refreshed = done
			go func() {
				defer close(done)
				ctx, cancel := context.WithTimeout(workCtx, u.callTimeout(0))
				defer cancel()
				if err := u.refreshTools(ctx, cs); err != nil {
					if workCtx.Err() == nil {
						u.log.Warn().Str("error", u.cfg.Redact(err.Error())).Msg("refreshing tools")
					}
					return
				}
				u.publish(events.Event{Kind: events.KindToolsChanged})
			}()
		}
	}
}

// keepAliveProbe returns how keepAlive checks that cs's server is alive,
// and the probe's name for logs: a ping on a legacy session; on a
// 2026-07-28 stdio session, which has no ping, a server/discover that the
// routed connection sends itself (see routedConn.discover). A 2026-07-28
// session over Streamable HTTP gets none (nil): it has no connection mcpd
// could rebuild, and each of its requests is an HTTP request of its own.
func (u *upstream) keepAliveProbe(cs *mcp.ClientSession) (probe func(context.Context) error, name string) {
	if !isStateless(cs) {
		return func(ctx context.Context) error { return cs.Ping(ctx, nil) }, "ping"
	}
	if u.cfg.Kind != config.TransportStdio {
		return nil, ""
	}
	u.mu.Lock()
	c := u.liveConn
	current := u.session == cs
	u.mu.Unlock()
	if c == nil || !current || !c.canDiscover() {
		return nil, ""
	}
	return c.discover, "server/discover probe"
}

// keepAlive runs probe (a ping, or a server/discover; see keepAliveProbe)
// every KeepAlive, each bounded by half of that, and reports on the
// returned channel once KeepAliveFailures probes in a row have failed. It
// ends with ctx; a server that does not know ping is not pinged again. A
// server/discover answered with a JSON-RPC error does not fail: the
// server read and answered, which is all a probe asks; restarting it
// would bring back a server that answers the same. (The SDK's own
// keepalive closes the session itself, and its Close waits for every call
// in flight, up to their deadlines, while the server still looks ready.)
//
// Probes cannot tell a hung server from one too busy to answer: a server
// that runs its tools on the thread that reads its input (a Python
// FastMCP 1.x tool that is a plain def) answers nothing until the tool
// returns. So while a request sent before the failing probes began is
// still running, the failures do not end the session: that request's own
// deadline bounds the wait, and ending the session would throw away the
// work it asked for (and an idempotent call would be sent again, to be
// cut off again). Requests sent later do not hold the session: a hung
// server is restarted once the requests it was given before it stopped
// answering have ended.
func (u *upstream) keepAlive(ctx context.Context, probe func(context.Context) error, name string) <-chan error {
	failed := make(chan error, 1)
	threshold := max(u.opts.KeepAliveFailures, 1)
	go func() {
		tick := time.NewTicker(u.opts.KeepAlive)
		defer tick.Stop()
		misses := 0
		var failingSince time.Time // when the first failed probe of the streak was sent
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			sent := time.Now()
			probeCtx, cancel := context.WithTimeout(ctx, u.opts.KeepAlive/2)
			err := probe(probeCtx)
			cancel()
			var wireErr *jsonrpc.Error
			switch {
			case err == nil:
				misses = 0
				continue
			case ctx.Err() != nil:
				return
			case errors.As(err, &wireErr) && wireErr.Code == jsonrpc.CodeMethodNotFound:
				return
			}
			if misses == 0 {
				failingSince = sent
			}
			if misses++; misses < threshold {
				u.log.Warn().Int("failures", misses).Str("error", u.cfg.Redact(err.Error())).Msg("keepalive " + name + " failed")
				continue
			}
			if u.requests.sentBefore(failingSince) {
				if misses == threshold {
					u.log.Warn().Int("failures", misses).Str("error", u.cfg.Redact(err.Error())).
						Msg("keepalive " + name + "s unanswered while the server runs a request sent before them; the session is kept until that request ends")
				}
				continue
			}
			failed <- err
			return
		}
	}()
	return failed
}

// runningRequests notes when each request that runs a server's own code
// (a tool call, a prompt, a resource read) was sent, until it ends, for
// keepAlive.
type runningRequests struct {
	mu    sync.Mutex
	next  uint64
	since map[uint64]time.Time
	// drained is closed when the last request ends; nil until idle asks.
	drained chan struct{}
}

// middleware is a sending middleware that notes the requests.
func (r *runningRequests) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" && method != "prompts/get" && method != "resources/read" {
			return next(ctx, method, req)
		}
		defer r.begin()()
		return next(ctx, method, req)
	}
}

// begin notes a request sent now; the returned func notes its end.
func (r *runningRequests) begin() (end func()) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.since == nil {
		r.since = make(map[uint64]time.Time)
	}
	id := r.next
	r.next++
	r.since[id] = now
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.since, id)
		if len(r.since) == 0 && r.drained != nil {
			close(r.drained)
			r.drained = nil
		}
	}
}

// idle returns how many requests run now, and a channel closed once none
// does (already closed if none does now).
func (r *runningRequests) idle() (drained <-chan struct{}, running int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.since) == 0 {
		done := make(chan struct{})
		close(done)
		return done, 0
	}
	if r.drained == nil {
		r.drained = make(chan struct{})
	}
	return r.drained, len(r.since)
}

// sentBefore reports whether a request sent before t is still running.
func (r *runningRequests) sentBefore(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sent := range r.since {
		if sent.Before(t) {
			return true
		}
	}
	return false
}

// setUp prepares a new session before it is declared ready: it lists the
// tools and replays what agents set up (log level, resource
// subscriptions), within the connect timeout. A failure here is logged,
// not fatal: the server still serves what it can. It returns what it
// replayed, for catchUp.
func (u *upstream) setUp(ctx context.Context, cs *mcp.ClientSession) (level mcp.LoggingLevel, uris []string) {
	ctx, cancel := context.WithTimeout(ctx, u.connectTimeout())
	defer cancel()
	u.mu.Lock()
	before := u.tools
	if before == nil {
		before = u.priorTools
	}
	u.priorTools = nil
	u.mu.Unlock()
	if err := u.refreshTools(ctx, cs); err != nil {
		u.log.Warn().Str("error", u.cfg.Redact(err.Error())).Msg("listing tools")
	} else if before != nil {
		// The new session lists other tools than the last one (a restart
		// or reload changed the server or its filters): as much a change
		// of the list as a tools/list_changed, which no server sends for
		// what changed while it was not connected.
		u.mu.Lock()
		u.toolsUnannounced = !reflect.DeepEqual(before, u.tools)
		u.mu.Unlock()
	}
	if u.wants == nil {
		return "", nil
	}
	level = u.wants.logLevel(u.cfg.Name)
	u.applyLogLevel(ctx, cs, level)
	uris = u.wants.resources(u.cfg.Name)
	u.subscribeAll(ctx, cs, uris)
	// What changed while no session followed these resources (a restart,
	// an outage) was never notified, and no server notifies it now: one
	// update each, once the new subscription is in place, tells their
	// followers to read them again, as a lapsed hold does.
	for _, uri := range uris {
		u.publish(events.Event{Kind: events.KindResourceUpdated, URI: uri})
	}
	return level, uris
}

// goReady declares the session ready, then catches up with what agents set
// up meanwhile, both while holding the subscribing lock. An interest added
// before found the server not ready and is left to the catch-up; one added
// after finds it ready and subscribes upstream itself. Without the lock, an
// interest added between the two steps would be subscribed by both.
func (u *upstream) goReady(ctx context.Context, cs *mcp.ClientSession, level mcp.LoggingLevel, uris []string, settle func()) {
	if u.wants != nil {
		unlock, _ := u.wants.lockSubscribing(context.Background(), u.cfg.Name)
		defer unlock()
	}
	u.setState(StateReady, "")
	u.log.Info().Str("protocol_version", cs.InitializeResult().ProtocolVersion).Msg("server ready")
	// After READY, so that ListTools already returns the new list.
	u.mu.Lock()
	announce := u.toolsUnannounced
	u.toolsUnannounced = false
	u.mu.Unlock()
	if announce {
		u.publish(events.Event{Kind: events.KindToolsChanged})
	}
	settle()
	u.catchUp(ctx, cs, level, uris)
}

// catchUp applies what agents changed while the session was being set up:
// SubscribeResource, its release and SetLogLevel only act on a ready
// server, and the server was not ready yet. uris are the resources setUp
// subscribed.
func (u *upstream) catchUp(ctx context.Context, cs *mcp.ClientSession, level mcp.LoggingLevel, uris []string) {
	if u.wants == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, u.connectTimeout())
	defer cancel()
	if now := u.wants.logLevel(u.cfg.Name); now != level {
		u.applyLogLevel(ctx, cs, now)
	}
	wanted := u.wants.resources(u.cfg.Name)
	var missed []string
	for _, uri := range wanted {
		if !slices.Contains(uris, uri) {
			missed = append(missed, uri)
		}
	}
	u.subscribeAll(ctx, cs, missed)
	for _, uri := range uris {
		if !slices.Contains(wanted, uri) {
			u.unsubscribe(ctx, cs, uri)
		}
	}
}

// unsubscribe ends the subscription of uri on cs. On a 2026-07-28 session
// it notes when, so that the next subscribe of uri waits for the ended
// listen to unwind (see Manager.SubscribeResource).
func (u *upstream) unsubscribe(ctx context.Context, cs *mcp.ClientSession, uri string) {
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		u.log.Warn().Str("error", u.cfg.Redact(err.Error())).Str("uri", config.RedactURI(uri)).Msg("unsubscribing")
		return
	}
	if isStateless(cs) && u.wants != nil {
		u.wants.unsubscribed(u.cfg.Name, uri)
	}
}

func (u *upstream) applyLogLevel(ctx context.Context, cs *mcp.ClientSession, level mcp.LoggingLevel) {
	if level == "" || isStateless(cs) {
		return // a 2026-07-28 session gets it in every request's _meta
	}
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: level}); err != nil {
		u.log.Warn().Str("error", u.cfg.Redact(err.Error())).Msg("setting the log level again")
	}
}

// subscribeAll subscribes uris on a new session. A failure (the server
// refused) leaves the subscription held without updates: it is logged and
// noted in the server's status, and the next stream that asks for the
// resource tries again (see Manager.SubscribeResource).
func (u *upstream) subscribeAll(ctx context.Context, cs *mcp.ClientSession, uris []string) {
	for _, uri := range uris {
		err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
		if err != nil {
			u.log.Warn().Str("error", u.cfg.Redact(err.Error())).Str("uri", config.RedactURI(uri)).Msg("subscribing again")
			err = errors.New(u.cfg.Redact(err.Error()))
		}
		u.wants.subscribed(u.cfg.Name, uri, err)
	}
}

// connectTimeout is the server's connect timeout, else the daemon's.
func (u *upstream) connectTimeout() time.Duration {
	if u.cfg.ConnectTimeout > 0 {
		return u.cfg.ConnectTimeout
	}
	return u.opts.ConnectTimeout
}

// connEnded returns the error that ended the connection of session cs,
// nil while it is open or when its transport does not say (a Streamable
// HTTP session is not routed).
func (u *upstream) connEnded(cs *mcp.ClientSession) error {
	u.mu.Lock()
	c := u.liveConn
	current := u.session == cs
	u.mu.Unlock()
	if c == nil || !current {
		return nil
	}
	return c.ended()
}

// connOf returns the routed connection a transport made, if it is routed.
func connOf(t mcp.Transport) *routedConn {
	if rt, ok := t.(*routedTransport); ok {
		return rt.conn
	}
	return nil
}

// isStateless says whether a session speaks the 2026-07-28 era.
func isStateless(cs *mcp.ClientSession) bool {
	return cs.InitializeResult().ProtocolVersion >= statelessProtocolVersion
}

// closeSession closes cs, whose connection may still be open, and waits
// for sessionEnded (if not nil). A stdio session's process is stopped alongside Close,
// not after it: the SDK's Close waits for the requests in flight, and a
// write to a server that stopped reading ends only at its deadline (an
// answer to the server's own request has none; the transport bounds it to
// a minute). The stop begins by closing stdin, which fails that write at
// once, then goes on in order (stop grace, SIGTERM to the group, stop
// grace, SIGKILL), as Close would have begun it once the session was idle.
func (u *upstream) closeSession(cs *mcp.ClientSession, sessionEnded <-chan struct{}) {
	u.mu.Lock()
	proc := u.proc
	u.mu.Unlock()
	if proc != nil {
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			_ = proc.Stop(u.stopping)
		}()
		defer func() { <-stopped }()
	}
	u.closeConn(cs)
	if sessionEnded != nil {
		<-sessionEnded
	}
}

// closeConn closes cs with the SDK's Close; a remote session's close is
// bounded (see closeRemote).
func (u *upstream) closeConn(cs *mcp.ClientSession) {
	u.mu.Lock()
	cut := u.cutSession
	if u.session != cs {
		cut = nil
	}
	u.mu.Unlock()
	if cut == nil {
		_ = cs.Close()
		return
	}
	u.closeRemote(cs.Close, cut)
}

// closeRemote closes a remote session (closeFn is its Close, or its
// connection's) as a stdio server is stopped: in order, then at once. The
// SDK's Close waits for what the session still sends (mcpd's answers to
// the server's requests, cancellations), then sends a DELETE, each on a
// context nobody can end, bounded only by the SDK's or the transport's
// timeouts (up to RemoteOptions.PostTimeout) against a server that takes
// a request and never answers it. It gets the stop grace; then cut ends
// its requests. The daemon's hurry (Manager.Hurry) ends them at once (see
// dialRemote).
func (u *upstream) closeRemote(closeFn func() error, cut func()) {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = closeFn()
	}()
	grace := u.opts.StopGrace
	if grace <= 0 {
		grace = transport.DefaultStopGrace
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-closed:
		return
	case <-t.C:
	}
	u.log.Warn().Dur("stop_grace", grace).Msg("the server did not let its session close within the stop grace: its requests are cut off")
	cut()
	<-closed
}

// stopProcess stops the child process, if any, and describes how it ended.
func (u *upstream) stopProcess() string {
	u.mu.Lock()
	proc, cut := u.proc, u.cutSession
	u.proc, u.session, u.cutSession = nil, nil, nil
	u.mu.Unlock()
	if cut != nil {
		cut()
	}
	if proc == nil {
		return "session closed"
	}
	_ = proc.Stop(u.stopping)
	return exitReason(proc)
}

// stdoutClosedReason is why a session ended whose server closed its
// stdout but ran on: mcpd stopped the process then, so how it exited (by
// mcpd's own SIGTERM) says nothing about what went wrong.
const stdoutClosedReason = "server closed stdout (the process ran on until mcpd stopped it)"

// exitReason describes how a child process ended.
func exitReason(proc *transport.Process) string {
	if err := proc.ExitError(); err != nil {
		return "server process exited: " + err.Error()
	}
	return "server process exited"
}

// connect starts the server and opens a session, bounded by the connect
// timeout. A URL of unknown transport is tried as Streamable HTTP, then as
// legacy SSE; what works is kept for the next connect.
func (u *upstream) connect(parent context.Context) (*mcp.ClientSession, error) {
	timeout := u.connectTimeout()
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()

	kinds := []config.TransportKind{u.cfg.Kind}
	if u.cfg.Kind == config.TransportAuto {
		u.mu.Lock()
		detected := u.detected
		u.mu.Unlock()
		kinds = []config.TransportKind{config.TransportHTTP, config.TransportSSE}
		if detected != 0 {
			kinds = []config.TransportKind{detected}
		}
	}
	var errs []error
	for _, kind := range kinds {
		cs, err := u.connectAs(ctx, kind)
		if err == nil {
			u.mu.Lock()
			u.detected = kind
			u.mu.Unlock()
			return cs, nil
		}
		if parent.Err() != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect: no answer within %v (the connect timeout)%s", timeout, u.stdoutNoise())
		}
		errs = append(errs, fmt.Errorf("as %s: %w", kind, err))
	}
	if len(errs) == 1 {
		return nil, errors.Unwrap(errs[0])
	}
	return nil, errors.Join(errs...)
}

// stdoutNoise says, for a stdio server that did not answer in time, what
// it wrote to stdout instead that was no JSON-RPC message (its logging on
// the wrong stream, a line printed into a message): "" if nothing.
func (u *upstream) stdoutNoise() string {
	u.mu.Lock()
	proc := u.lastProc
	u.mu.Unlock()
	if proc == nil {
		return ""
	}
	n, last := proc.SkippedOutput()
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; of what it wrote to stdout, %d line(s) were no JSON-RPC message, the last: %q", n, last)
}

// connectAs opens a session over one transport kind. Without a forced
// protocol version it probes for the stateless era first, bounded by
// ProbeTimeout: a server that ignores server/discover or dies on it is
// started (or dialled) again and reached with initialize.
//
// Once a probe went unanswered, the era is kept: a restart or reconnect
// connects with initialize at once (each probe of a server that ignores it
// costs the probe timeout, and of a stdio server a process start). Should
// that fail, the server may have changed: it is probed again. A remote
// server that cannot be reached at all tells nothing of its era: the
// attempt ends with the connection's error, and the era is kept.
func (u *upstream) connectAs(ctx context.Context, kind config.TransportKind) (*mcp.ClientSession, error) {
	if v := u.cfg.ProtocolVersion; v != "" {
		return u.dial(ctx, kind, v)
	}
	if u.knownLegacy(kind) {
		cs, err := u.dial(ctx, kind, legacyProtocolVersion)
		if err == nil || ctx.Err() != nil || isStartError(err) || unreachable(err) {
			return cs, err
		}
		u.log.Info().Str("error", u.cfg.Redact(err.Error())).Msg("initialize failed; probing the server's era again")
		u.setLegacy(kind, false)
	}
	probeCtx, cancelProbe := context.WithTimeout(ctx, u.opts.ProbeTimeout)
	cs, err := u.dial(probeCtx, kind, statelessProtocolVersion)
	cancelProbe()
	if err == nil || ctx.Err() != nil || isStartError(err) || unreachable(err) {
		return cs, err
	}
	if authErr := u.authBlocked(); authErr != nil {
		// The server answered, with a demand for authorization: the era
		// is unknown until it is given, and initialize would only hide
		// why.
		return nil, authErr
	}
	u.log.Info().Str("error", u.cfg.Redact(err.Error())).Msg("server/discover probe unanswered; connecting with initialize")
	cs, err = u.dial(ctx, kind, legacyProtocolVersion)
	if err == nil {
		u.setLegacy(kind, true)
	}
	return cs, err
}

// knownLegacy says whether the last probe over kind found an
// initialize-era server.
func (u *upstream) knownLegacy(kind config.TransportKind) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.legacyEra[kind]
}

func (u *upstream) setLegacy(kind config.TransportKind, legacy bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.legacyEra == nil {
		u.legacyEra = make(map[config.TransportKind]bool)
	}
	u.legacyEra[kind] = legacy
}

// startError marks a server that could not be started at all (no such
// command, a bad URL): probing again would not help.
type startError struct{ error }

func (e startError) Unwrap() error { return e.error }

func isStartError(err error) bool {
	var se startError
	return errors.As(err, &se)
}

// unreachable says whether err is a remote server's address refusing or
// not answering a connection: nobody there to speak either era, so
// falling back from the probe to initialize would only fail again.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// dial starts the server and opens a session asking for version.
func (u *upstream) dial(ctx context.Context, kind config.TransportKind, version string) (*mcp.ClientSession, error) {
	if kind != config.TransportStdio {
		return u.dialRemote(ctx, kind, version)
	}
	proc, err := transport.StartProcess(transport.StdioSpec{
		Command: u.cfg.Command,
		Args:    u.cfg.Args,
		Env:     u.cfg.Env,
		Dir:     u.cfg.Cwd,
	}, &transport.ProcessOptions{
		Logger:              u.log,
		MaxLineBytes:        u.opts.MaxLineBytes,
		StderrTailLines:     u.opts.StderrTailLines,
		StopGrace:           u.opts.StopGrace,
		OnStderrLine:        u.opts.Telemetry.StderrLines(u.cfg.Name),
		StderrLogLimit:      u.stderrLog,
		OnStderrLineDropped: u.opts.Telemetry.StderrLinesDropped(u.cfg.Name),
		SkippedLogLimit:     u.skippedLog,
		Withhold:            u.opts.WithholdEnv,
		Hurry:               u.stopping,
		Reaper:              u.opts.Reaper,
	})
	u.mu.Lock()
	u.lastProc = proc // nil after a failed start: the old tail is not its
	u.mu.Unlock()
	if err != nil {
		return nil, startError{err}
	}

	t := u.routed(proc)
	cs, err := u.client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		_ = proc.Stop(u.stopping)
		// A closed connection means the process went away: say how; so
		// does a write that found its stdin closed (a broken pipe), which
		// of the two comes first being a matter of timing. Any other error
		// (a JSON-RPC error answered to initialize, say) is the server's
		// own word and is kept.
		if ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, syscall.EPIPE)) {
			if c := connOf(t); c != nil && errors.Is(c.ended(), transport.ErrStdoutClosed) {
				return nil, fmt.Errorf("connect: %s", stdoutClosedReason)
			}
			return nil, fmt.Errorf("connect: %s", exitReason(proc))
		}
		return nil, fmt.Errorf("connect: %w", err)
	}
	u.mu.Lock()
	u.proc, u.session, u.init, u.liveConn = proc, cs, cs.InitializeResult(), connOf(t)
	u.sendsTracked = true // the stdio connection marks what it writes
	u.mu.Unlock()
	return cs, nil
}

// dialRemote opens a session over a transport from Options.Dialer.
func (u *upstream) dialRemote(ctx context.Context, kind config.TransportKind, version string) (*mcp.ClientSession, error) {
	if u.opts.Dialer == nil {
		return nil, startError{errorf(ErrUnimplemented, "%s transport is not supported yet", kind)}
	}
	cfg := u.cfg
	cfg.Kind = kind
	// A listen stream that ends on its own means this session no longer
	// gets notifications: rebuild it, if it is still the current one.
	var mine atomic.Pointer[mcp.ClientSession]
	dialCtx := withListenEnded(ctx, func() {
		u.mu.Lock()
		current := u.session != nil && u.session == mine.Load()
		u.mu.Unlock()
		if current {
			u.log.Warn().Msg("a subscriptions/listen stream ended; rebuilding the session")
			u.markLost(mine.Load())
		}
	})
	var tracked bool
	dialCtx = withSendsTracked(dialCtx, func() { tracked = true })
	// The session's requests end once the daemon is out of time
	// (Manager.Hurry), as a stdio server's stop then skips its graces, or
	// once closeRemote cuts them off.
	cutCtx, cutNow := context.WithCancel(context.Background())
	unwatch := context.AfterFunc(u.stopping, cutNow)
	cut := func() {
		unwatch()
		cutNow()
	}
	dialCtx = withCut(dialCtx, cutCtx)
	t, err := u.opts.Dialer(dialCtx, cfg)
	if err != nil {
		cut()
		return nil, startError{err}
	}
	t = u.routed(t)
	// The SDK's Connect does work bounded by no context of the caller's:
	// a legacy Streamable HTTP session opens its standalone GET inside
	// Connect, on the connection's own detached context. A server that
	// never answers that GET would hold Connect (and stop, which waits
	// for the run) for ever: when ctx ends first, close the connection.
	guard := &connectGuard{Transport: t, close: func(c mcp.Connection) { u.closeRemote(c.Close, cut) }}
	stop := context.AfterFunc(ctx, guard.abandon)
	cs, err := u.client.Connect(ctx, guard, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if !stop() {
		if err == nil {
			u.closeRemote(cs.Close, cut)
		}
		cut()
		return nil, fmt.Errorf("connect: %w", context.Cause(ctx))
	}
	if err != nil {
		cut()
		return nil, fmt.Errorf("connect: %w", err)
	}
	mine.Store(cs)
	u.mu.Lock()
	old := u.cutSession // of a session that ended without stopProcess
	u.session, u.init, u.liveConn, u.cutSession = cs, cs.InitializeResult(), connOf(t), cut
	u.sendsTracked = tracked
	u.mu.Unlock()
	if old != nil {
		old()
	}
	return cs, nil
}

func (u *upstream) setState(state State, lastErr string) {
	u.changeState(state, lastErr, false)
}

// queue sets the state of a server that waits for the one it replaces to
// stop, without an event: the old server's STOPPED comes first, then this
// state, published again by the next setState. A request that arrives
// meanwhile waits as for any connecting server.
func (u *upstream) queue(state State, lastErr string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.state, u.unannounced, u.stateChanged = state, true, time.Now()
	if lastErr != "" {
		u.lastErr = u.cfg.Redact(lastErr)
	}
}

// retryFailed sets the state after a failed attempt to connect that will
// be retried (StateReconnecting, or StateFailed for a remote server never
// ready). The state may stay, but an error unlike the one last published
// is news to an agent following events: it is published. The same error
// again is not (a server away for an hour must not flood the event buffer).
func (u *upstream) retryFailed(state State, lastErr string) {
	u.changeState(state, lastErr, true)
}

// changeState sets the state and, if not empty, the last error, and
// publishes the state when it changed, or when newErr and the error
// differs from the one last published.
func (u *upstream) changeState(state State, lastErr string, newErr bool) {
	u.mu.Lock()
	changed := u.state != state || u.unannounced
	u.state, u.unannounced = state, false
	if lastErr != "" {
		u.lastErr = u.cfg.Redact(lastErr)
	}
	if changed {
		u.stateChanged = time.Now()
		close(u.changed)
		u.changed = make(chan struct{})
	}
	ev := events.Event{Kind: events.KindServerState, State: state.String()}
	if state == StateFailed || state == StateReconnecting || state == StateAuthorizationRequired {
		ev.Error = u.lastErr
	}
	publish := changed || (newErr && failureKey(ev.Error) != failureKey(u.publishedErr))
	if publish {
		u.publishedErr = ev.Error
	}
	u.mu.Unlock()
	if changed && u.opts.OnStateChange != nil {
		u.opts.OnStateChange(u.cfg.Name, state)
	}
	if publish {
		u.publish(ev)
	}
}

// ipPort matches an IP address and port in an error: a connection's own
// ("read tcp 10.0.0.2:53422->10.0.0.9:443: ..."), whose port is new for
// every attempt, and the peer's, which changes from one attempt to the
// next behind round-robin DNS.
var ipPort = regexp.MustCompile(`(?:\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Za-z:.%]+\]):\d+`)

// failureKey is what two failures must share to be the same failure for
// retryFailed: their text but for the addresses and ports in it.
func failureKey(err string) string { return ipPort.ReplaceAllString(err, "*") }

// publish puts an event of this server on the bus, if there is one.
func (u *upstream) publish(e events.Event) {
	if u.opts.Events != nil {
		e.Server = u.cfg.Name
		u.opts.Events.Publish(e)
	}
}

func (u *upstream) status() Status {
	var subNotes []string
	if u.wants != nil {
		subNotes = u.wants.subscriptionNotes(u.cfg.Name)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	st := Status{
		Config:       u.cfg,
		Transport:    u.cfg.Kind,
		State:        u.state,
		ToolCount:    len(u.tools),
		LastError:    u.lastErr,
		Restarts:     u.restarts,
		StateChanged: u.stateChanged,
	}
	st.Config.Source, st.Config.Warnings = u.source, u.warnings
	if u.cfg.Kind == config.TransportAuto && u.detected != 0 {
		st.Transport = u.detected
	}
	if u.state == StateDisabled && u.source.DisabledBy != "" {
		// The entry itself asks to run; say which setting holds it back.
		st.Notes = append(st.Notes, "disabled by Claude Code's "+u.source.DisabledBy+"; SetServerEnabled starts it")
	}
	if u.toolsUndeclared {
		st.Notes = append(st.Notes, noteToolsUndeclared)
	}
	st.Notes = append(st.Notes, u.toolNotes...)
	st.Notes = append(st.Notes, subNotes...)
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
	if u.state == StateAuthorizationRequired {
		if p, ok := u.pendingAuthorization(); ok {
			st.AuthorizationURL, st.AuthorizationExpires = p.URL, p.Expires
		}
	}
	return st
}

// ready returns the session if the server is ready for calls.
func (u *upstream) ready() (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.readyLocked()
}

func (u *upstream) readyLocked() (*mcp.ClientSession, error) {
	if u.state == StateDisabled {
		return nil, errorf(ErrDisabled, "server %q is disabled: enable it with SetServerEnabled", u.cfg.Name)
	}
	if u.state == StateAuthorizationRequired {
		return nil, errorf(ErrAuthorizationRequired, "server %q needs authorization: open its authorization_url (GetServer) in a browser, or pass the URL the browser ends on to CompleteAuthorization", u.cfg.Name)
	}
	if u.state != StateReady || u.session == nil {
		if u.lastErr != "" && (u.state != StateConnecting || u.waitingForAgentLocked()) {
			return nil, errorf(ErrUnavailable, "server %q is %s: %s", u.cfg.Name, u.state, u.lastErr)
		}
		return nil, errorf(ErrUnavailable, "server %q is %s", u.cfg.Name, u.state)
	}
	return u.session, nil
}

// awaitReady returns the session once the server is ready. A server that
// is connecting or reconnecting is waited for until ctx ends; a failed or
// stopped one is unavailable at once.
func (u *upstream) awaitReady(ctx context.Context) (*mcp.ClientSession, error) {
	return u.awaitSession(ctx, nil)
}

// awaitSession is awaitReady for a session other than ended, one a call
// just saw end: while the server still shows it as ready, it waits for the
// server to notice.
func (u *upstream) awaitSession(ctx context.Context, ended *mcp.ClientSession) (*mcp.ClientSession, error) {
	for {
		u.mu.Lock()
		cs, err := u.readyLocked()
		state, changed, retired := u.state, u.changed, u.retired
		u.mu.Unlock()
		var grace *time.Timer
		switch {
		case retired:
			// Replaced or removed: its session only finishes what it runs.
			return nil, &kindError{kind: ErrUnavailable, msg: fmt.Sprintf("server %q was replaced or removed", u.cfg.Name), cause: errRetired}
		case err == nil && cs != ended:
			return cs, nil
		case err == nil:
			// The session ended, or is being closed, and the run has not
			// moved on yet. It will; but should it not within a grace
			// period, the session lives on after all, and the call goes
			// out on it again rather than waiting out its deadline.
			err = errorf(ErrUnavailable, "server %q lost its session", u.cfg.Name)
			grace = time.NewTimer(sessionEndGrace)
		case state == StateReady:
			// Ready without a session: being closed.
			err = errorf(ErrUnavailable, "server %q lost its session", u.cfg.Name)
		case state != StateConnecting && state != StateReconnecting:
			return nil, err
		case u.waitingForAgent():
			// No agent serves it: waiting would only use up the deadline.
			return nil, err
		}
		var graceOver <-chan time.Time
		if grace != nil {
			graceOver = grace.C
		}
		select {
		case <-changed:
		case <-graceOver:
			ended = nil
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (while waiting: %w)", err, context.Cause(ctx))
		}
		if grace != nil {
			grace.Stop()
		}
	}
}

// sessionEndGrace is how long a call waits for the run to notice the end
// of a session that the call saw end before it takes the session, still
// the server's and ready, for alive; and how long sessionEnds waits for
// the end of a session that its server did not answer for.
const sessionEndGrace = 2 * time.Second

// sessionEnds reports whether session cs is ending: a request on it just
// failed after it may have reached the server, and the session may have
// ended with it (its server went away, or came back without it) before
// the run saw the end. The session's own requests may not tell the run
// for seconds (a standalone stream is opened again after a second or
// more, a keepalive probe comes every KeepAlive), so the server is asked
// at once with the keepalive's probe: an answer means the session lives
// on, and a server that forgot the session has it ended (see classify).
// Without an answer, the run has sessionEndGrace to see the end.
func (u *upstream) sessionEnds(ctx context.Context, cs *mcp.ClientSession) bool {
	if isStateless(cs) && u.cfg.Kind != config.TransportStdio {
		return false // no session: each request is an HTTP request of its own
	}
	ctx, cancel := context.WithTimeout(ctx, sessionEndGrace)
	probe, _ := u.keepAliveProbe(cs)
	answered := make(chan bool, 1) // whether the server answered the probe
	probed := make(chan struct{})
	defer func() {
		cancel()
		<-probed
	}()
	go func() {
		defer close(probed)
		if probe == nil {
			return
		}
		err := probe(ctx)
		// A JSON-RPC error is an answer too.
		answered <- err == nil || !errors.Is(u.classify(ctx, cs, "probe", err), ErrUnavailable)
	}()
	for {
		u.mu.Lock()
		current, changed := u.session == cs && u.state == StateReady, u.changed
		u.mu.Unlock()
		if !current {
			return true
		}
		select {
		case <-changed:
		case alive := <-answered:
			if alive {
				return false
			}
		case <-ctx.Done():
			return false
		}
	}
}

// isCurrent says whether cs is the session of a ready server.
func (u *upstream) isCurrent(cs *mcp.ClientSession) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.session == cs && u.state == StateReady
}

// tracksSends says whether cs is the current session and its transport
// marks what it sends.
func (u *upstream) tracksSends(cs *mcp.ClientSession) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.session == cs && u.sendsTracked
}

// errRunStopped is the cause of a request that bindRun ended because the
// server was stopped or restarted.
var errRunStopped = errors.New("server stopped")

// errRetired is the cause of a request that found its server replaced or
// removed before it was sent: the Manager sends it to the replacement.
var errRetired = errors.New("server retired")

// errSessionEnded is the cause of a request that bindRun ended because its
// session ended (lost, failed pings, or closed by the server).
var errSessionEnded = errors.New("session ended")

// sessionScope is the life of one session: its requests end with it.
type sessionScope struct {
	cs     *mcp.ClientSession
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// scopeLocked is the current session's scope, made on first use; nil
// without a session. A scope of an earlier session is ended first.
func (u *upstream) scopeLocked() *sessionScope {
	if u.session == nil {
		return nil
	}
	if u.scope == nil || u.scope.cs != u.session {
		if u.scope != nil {
			u.scope.cancel(u.sessionEndedError("the session was replaced"))
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		u.scope = &sessionScope{cs: u.session, ctx: ctx, cancel: cancel}
	}
	return u.scope
}

// endSession ends the requests in flight on cs, if cs is the current
// session, before its Close (which would wait for them): a call that may
// have run is then resent or reported interrupted at once, as the
// session's end says, rather than at its deadline.
func (u *upstream) endSession(cs *mcp.ClientSession, why string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session == cs {
		if s := u.scopeLocked(); s != nil {
			s.cancel(u.sessionEndedError(why))
		}
	}
}

func (u *upstream) sessionEndedError(why string) error {
	return &kindError{kind: ErrUnavailable, msg: fmt.Sprintf("server %q: %s", u.cfg.Name, why), cause: errSessionEnded}
}

// bindRun ties a request to the current run and session: stopping or
// restarting the server, or the end of the session, ends the request at
// once with ErrUnavailable (its cause errRunStopped or errSessionEnded)
// instead of waiting for it (the SDK's Close would wait for requests in
// flight).
func (u *upstream) bindRun(ctx context.Context) (context.Context, func()) {
	u.mu.Lock()
	r := u.run
	scope := u.scopeLocked()
	u.mu.Unlock()
	if r == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(context.WithValue(ctx, boundRunKey{}, r))
	stop := context.AfterFunc(r.ctx, func() {
		ended := u.runEnded(r)
		if ended == "" {
			ended = "stopped" // with mcpd's own lifetime
		}
		cancel(&kindError{kind: ErrUnavailable, msg: fmt.Sprintf("server %q was %s", u.cfg.Name, ended), cause: errRunStopped})
	})
	stopScope := func() bool { return false }
	if scope != nil {
		stopScope = context.AfterFunc(scope.ctx, func() { cancel(context.Cause(scope.ctx)) })
	}
	return ctx, func() {
		stop()
		stopScope()
		cancel(context.Canceled)
	}
}

// boundRunKey is the context key of the run bindRun bound a request to.
type boundRunKey struct{}

// runEnded says how r was stopped ("restarted", ...), "" while it runs or
// when it ended by itself.
func (u *upstream) runEnded(r *run) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return r.ended
}

// stoppedRun says how the run ctx's request is bound to was stopped, ""
// if it was not (or the request is bound to none).
func (u *upstream) stoppedRun(ctx context.Context) string {
	if r, ok := ctx.Value(boundRunKey{}).(*run); ok {
		return u.runEnded(r)
	}
	return ""
}

// markLost tells the run loop that a request found session cs gone, if cs
// is still the current session (being set up, or ready): a request of an
// older session that fails late must not end the one that replaced it.
// A pending report is replaced, so the newest session's is never dropped.
func (u *upstream) markLost(cs *mcp.ClientSession) {
	u.mu.Lock()
	current := cs != nil && u.session == cs
	u.mu.Unlock()
	if !current {
		return
	}
	for {
		select {
		case u.lost <- cs:
			return
		default:
		}
		select {
		case <-u.lost:
		default:
		}
	}
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

// codeRejectedByTransport is the JSON-RPC code the SDK gives a request its
// HTTP transport could not deliver.
const codeRejectedByTransport = -32005

// classify turns an SDK error of a request on session cs into one of this
// package's kinds.
func (u *upstream) classify(ctx context.Context, cs *mcp.ClientSession, op string, err error) error {
	return u.redactError(u.classifyRaw(ctx, cs, op, err))
}

// redactError keeps the server's URL (it may hold a token) out of an
// error's message, in every form Redact knows (net/http prints it
// re-encoded, with the password as "***"). The kind stays reachable
// through the wrapped cause.
func (u *upstream) redactError(err error) error {
	if err == nil {
		return nil
	}
	msg := u.cfg.Redact(err.Error())
	if msg == err.Error() {
		return err
	}
	return &kindError{msg: msg, cause: err}
}

func (u *upstream) classifyRaw(ctx context.Context, cs *mcp.ClientSession, op string, err error) error {
	var wireErr *jsonrpc.Error
	problem, malformed := resultProblem(err)
	switch {
	case errors.Is(err, oauth.ErrAuthorizationRequired), errors.Is(err, oauth.ErrAuthorizationFailed):
		return errorf(ErrAuthorizationRequired, "%s: %v", op, err)
	case errors.Is(err, transport.ErrMessageTooLarge):
		// A too-large message on a stream ends the connection (the server
		// has left READY by now): retry once it is back. A too-large HTTP
		// body fails only this call; the session goes on.
		u.mu.Lock()
		ended := u.state != StateReady
		u.mu.Unlock()
		if ended {
			return errorf(ErrUnavailable, "%s: server %q: %v", op, u.cfg.Name, err)
		}
		return errorf(ErrResourceExhausted, "%s: server %q: %v", op, u.cfg.Name, err)
	case errors.As(err, &wireErr) && wireErr.Code == codeRejectedByTransport:
		// The SDK reports a failed HTTP exchange (refused connection, 5xx,
		// 429) with this code; it is not an answer from the server.
		return errorf(ErrUnavailable, "%s: server %q: %v", op, u.cfg.Name, err)
	case errors.As(err, &wireErr) && wireErr.Code == codeRefusedByHTTP:
		// Not the server's answer: mcpd's account of the HTTP refusal of
		// this one request (see refusedCall). The session goes on.
		kind := ErrUnavailable
		if string(wireErr.Data) == strconv.Itoa(http.StatusRequestEntityTooLarge) {
			kind = ErrResourceExhausted // the same request would be too large again
		}
		return errorf(kind, "%s: server %q refused the request: %s", op, u.cfg.Name, wireErr.Message)
	case errors.Is(err, mcp.ErrSessionMissing):
		u.markLost(cs)
		return errorf(ErrUnavailable, "%s: server %q lost the session; mcpd is reconnecting", op, u.cfg.Name)
	case errors.Is(err, mcp.ErrConnectionClosed) && u.stoppedRun(ctx) != "":
		// Stopping the run closed the connection, and the request saw that
		// before its context's end (bindRun's, which says the same).
		return errorf(ErrUnavailable, "%s: server %q was %s", op, u.cfg.Name, u.stoppedRun(ctx))
	case errors.Is(err, mcp.ErrConnectionClosed):
		u.mu.Lock()
		why := u.lastErr
		u.mu.Unlock()
		if why != "" {
			return errorf(ErrUnavailable, "%s: server %q closed the connection (%s)", op, u.cfg.Name, why)
		}
		return errorf(ErrUnavailable, "%s: server %q closed the connection", op, u.cfg.Name)
	case malformed:
		// The server answered, with a result the SDK could not decode:
		// the session is fine, and the request ran. Not ErrUnavailable,
		// which invites a retry that runs it again.
		return errorf(ErrMalformedResult, "%s: server %q answered a result mcpd cannot read: %s", op, u.cfg.Name, problem)
	case ctx.Err() != nil:
		// The cause tells a deadline (also a progress-extended one) from a
		// cancellation.
		return fmt.Errorf("%s: %w", op, context.Cause(ctx))
	case errors.As(err, &wireErr):
		// Redacted here: the edge formats an RPCError itself, past
		// redactError's wrapper.
		return &RPCError{Server: u.cfg.Name, Code: wireErr.Code, Message: u.cfg.Redact(wireErr.Message), Data: wireErr.Data}
	}
	return errorf(ErrUnavailable, "%s: server %q: %v", op, u.cfg.Name, err)
}

// connectGuard hands the SDK its transport's connection unchanged (the
// SDK updates a Streamable HTTP connection through an interface a wrapper
// could not forward) and can close it while Connect still runs.
type connectGuard struct {
	mcp.Transport
	close     func(mcp.Connection) // how to close the connection
	mu        sync.Mutex
	conn      mcp.Connection
	abandoned bool
}

func (g *connectGuard) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := g.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.conn = c
	abandoned := g.abandoned
	g.mu.Unlock()
	if abandoned {
		g.close(c)
	}
	return c, nil
}

// abandon closes the connection, made or yet to be made.
func (g *connectGuard) abandon() {
	g.mu.Lock()
	g.abandoned = true
	c := g.conn
	g.mu.Unlock()
	if c != nil {
		g.close(c)
	}
}
