package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
)

// Polls are mcpd's answer to servers that cannot notify: a poll reads a
// resource or calls a tool of one server on an interval and publishes a
// KindPollResult event when the result differs from the previous one (the
// first result is the baseline, published too). Polls belong to the
// Manager, not to any stream: they survive upstream restarts and Subscribe
// reconnects, skip their turn while their server is not ready, keep their
// last result across such pauses (so a restart alone publishes nothing),
// and end with StopPoll, with their server's removal, or with Close.

// Poll intervals.
const (
	// MinPollInterval is the shortest interval a poll may ask for.
	MinPollInterval = time.Second
	// DefaultPollInterval is a poll's interval when it asks for none.
	DefaultPollInterval = 5 * time.Second
	// DefaultMaxPolls caps the polls of a Manager when Options.MaxPolls
	// is not set.
	DefaultMaxPolls = 64
)

// PollSpec says what a poll reads, and how often.
type PollSpec struct {
	// Server names the server.
	Server string
	// URI is the resource to read; exactly one of URI and Tool is set.
	URI string
	// Tool is the server's own name of the tool to call, with Arguments.
	Tool      string
	Arguments map[string]any
	// Interval is the time between two polls; 0 means
	// DefaultPollInterval, and less than MinPollInterval is invalid.
	Interval time.Duration
	// Permit, if set, is asked before every request: the poll pauses,
	// with its error as the last error, while it refuses (the caller that
	// started the poll lost the permission, or a rule now denies it).
	Permit func() error
}

// QualifiedTool is the qualified name of the polled tool, "" for a
// resource poll.
func (s PollSpec) QualifiedTool() string {
	if s.Tool == "" {
		return ""
	}
	return QualifiedToolName(s.Server, s.Tool)
}

// PollStatus describes a poll.
type PollStatus struct {
	ID   string
	Spec PollSpec
	// Paused says the last turn found the server not ready.
	Paused bool
	// Polls counts the requests made; Changes the events published.
	Polls, Changes uint64
	// LastPoll is when the last request ended; zero before the first.
	LastPoll time.Time
	// LastError is why the last request failed, or was cut short by the
	// end of the server's session; "" when it succeeded.
	LastError string
}

// poller owns a Manager's polls.
type poller struct {
	m   *Manager
	max int

	mu     sync.Mutex
	polls  map[string]*poll
	nextID uint64
	closed bool
	// fallbacks are the polls that stand in for resource subscriptions
	// of servers that cannot notify, shared by every holder of one
	// resource.
	fallbacks map[events.Resource]*fallback
	wg        sync.WaitGroup
}

// fallback is one shared fallback poll and how many hold it.
type fallback struct {
	p     *poll
	refs  int
	since uint64 // the bus's last sequence when it began (interest.since)
}

func newPoller(m *Manager, limit int) *poller {
	if limit <= 0 {
		limit = DefaultMaxPolls
	}
	return &poller{m: m, max: limit, polls: make(map[string]*poll), fallbacks: make(map[events.Resource]*fallback)}
}

// poll is one running poll. Its goroutine owns last and baseline; mu
// guards what status reads.
type poll struct {
	id   string
	spec PollSpec
	stop context.CancelFunc
	done chan struct{}
	// publish turns a changed result into an event; key is the result's
	// JSON (or its error), baseline says it is the first.
	publish func(p *poll, raw json.RawMessage, err error, baseline bool)

	last    string // the key of the last result
	started bool   // a result was published: the next one is no baseline

	mu     sync.Mutex
	status PollStatus
}

// StartPoll starts a poll and returns its status. The server must exist
// (it need not be ready: the poll waits for it). Exceeding Options.MaxPolls
// is ErrResourceExhausted.
func (m *Manager) StartPoll(spec PollSpec) (PollStatus, error) {
	if err := CheckPollSpec(&spec); err != nil {
		return PollStatus{}, err
	}
	if _, err := m.lookup(spec.Server); err != nil {
		return PollStatus{}, err
	}
	p, err := m.polls.start(spec, publishPollResult(m.opts.Events), "")
	if err != nil {
		return PollStatus{}, err
	}
	return p.snapshot(), nil
}

// StopPoll stops a poll; an unknown id is ErrNotFound.
func (m *Manager) StopPoll(id string) error {
	pl := m.polls
	pl.mu.Lock()
	p := pl.polls[id]
	delete(pl.polls, id)
	pl.mu.Unlock()
	if p == nil {
		return PollNotFound(id)
	}
	p.halt()
	return nil
}

// PollNotFound is the ErrNotFound of poll id: the answer for a poll that
// does not exist, or that the asking caller may not see.
func PollNotFound(id string) error { return errorf(ErrNotFound, "poll %q not found", id) }

// Poll returns the status of one poll.
func (m *Manager) Poll(id string) (PollStatus, error) {
	m.polls.mu.Lock()
	p := m.polls.polls[id]
	m.polls.mu.Unlock()
	if p == nil {
		return PollStatus{}, PollNotFound(id)
	}
	return p.snapshot(), nil
}

// Polls returns the status of every poll, sorted by id (numerically).
func (m *Manager) Polls() []PollStatus {
	m.polls.mu.Lock()
	ps := make([]*poll, 0, len(m.polls.polls))
	for _, p := range m.polls.polls {
		ps = append(ps, p)
	}
	m.polls.mu.Unlock()
	out := make([]PollStatus, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.snapshot())
	}
	slices.SortFunc(out, func(a, b PollStatus) int { return comparePollIDs(a.ID, b.ID) })
	return out
}

func comparePollIDs(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b) // poll-9 before poll-10
	}
	return strings.Compare(a, b)
}

// CheckPollSpec refuses a spec StartPoll would refuse, as
// ErrInvalidArgument, and otherwise normalizes it: a qualified tool name
// becomes the server's own, a zero interval DefaultPollInterval.
func CheckPollSpec(spec *PollSpec) error {
	if spec.Server == "" {
		return errorf(ErrInvalidArgument, "server is required")
	}
	if (spec.URI == "") == (spec.Tool == "") {
		return errorf(ErrInvalidArgument, "a poll needs either a resource uri or a tool")
	}
	if server, tool, ok := SplitQualifiedToolName(spec.Tool); ok {
		if server != spec.Server {
			return errorf(ErrInvalidArgument, "tool %q is not a tool of server %q", spec.Tool, spec.Server)
		}
		spec.Tool = tool
	}
	switch {
	case spec.Interval == 0:
		spec.Interval = DefaultPollInterval
	case spec.Interval < MinPollInterval:
		return errorf(ErrInvalidArgument, "interval %v is below the minimum of %v", spec.Interval, MinPollInterval)
	}
	return nil
}

// start registers and starts a poll, listed among the polls.
func (pl *poller) start(spec PollSpec, publish func(*poll, json.RawMessage, error, bool), prefix string) (*poll, error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.startLocked(spec, publish, prefix)
}

// startLocked starts a poll; pl.mu is held. A fallback poll (prefix
// "fallback-") is not listed among the polls (its caller registers it
// under the same hold of pl.mu) but counts against the limit. The server
// must still be there: checked under pl.mu, a Disconnect that removed it
// has stopped its polls already or will find this one.
func (pl *poller) startLocked(spec PollSpec, publish func(*poll, json.RawMessage, error, bool), prefix string) (*poll, error) {
	if pl.closed {
		return nil, errorf(ErrShuttingDown, "mcpd is shutting down")
	}
	if len(pl.polls)+len(pl.fallbacks) >= pl.max {
		return nil, errorf(ErrResourceExhausted, "mcpd already runs %d polls, its limit (--max-polls)", pl.max)
	}
	if !pl.m.has(spec.Server) {
		return nil, errorf(ErrNotFound, "server %q not found", spec.Server)
	}
	pl.nextID++
	if prefix == "" {
		prefix = "poll-"
	}
	id := prefix + strconv.FormatUint(pl.nextID, 10)
	ctx, cancel := context.WithCancel(context.Background())
	p := &poll{id: id, spec: spec, stop: cancel, done: make(chan struct{}), publish: publish}
	p.status = PollStatus{ID: id, Spec: spec}
	if prefix == "poll-" {
		pl.polls[id] = p
	}
	pl.wg.Add(1)
	go func() {
		defer pl.wg.Done()
		defer close(p.done)
		p.run(ctx, pl.m)
	}()
	return p, nil
}

// stopServer stops the polls of a removed server. Its fallback polls stay
// with the streams that hold them: paused while no server has the name,
// they read again once one has.
func (pl *poller) stopServer(server string) {
	pl.mu.Lock()
	var stopped []*poll
	for id, p := range pl.polls {
		if p.spec.Server == server {
			stopped = append(stopped, p)
			delete(pl.polls, id)
		}
	}
	pl.mu.Unlock()
	for _, p := range stopped {
		p.halt()
	}
}

// close stops every poll, refuses new ones and waits for their
// goroutines.
func (pl *poller) close() {
	pl.mu.Lock()
	pl.closed = true
	var all []*poll
	for _, p := range pl.polls {
		all = append(all, p)
	}
	for _, f := range pl.fallbacks {
		all = append(all, f.p)
	}
	clear(pl.polls)
	clear(pl.fallbacks)
	pl.mu.Unlock()
	for _, p := range all {
		p.stop()
	}
	pl.wg.Wait()
}

// halt stops the poll and waits for its goroutine.
func (p *poll) halt() {
	p.stop()
	<-p.done
}

func (p *poll) snapshot() PollStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// run polls at once, then every interval, until ctx ends. The interval
// runs from the end of one request to the start of the next, so a slow
// server never gets overlapping polls.
func (p *poll) run(ctx context.Context, m *Manager) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		p.turn(ctx, m)
		timer.Reset(p.spec.Interval)
	}
}

// turn makes one request, when the server is ready, and publishes its
// result if it changed.
func (p *poll) turn(ctx context.Context, m *Manager) {
	if p.spec.Permit != nil {
		if err := p.spec.Permit(); err != nil {
			p.mu.Lock()
			p.status.Paused, p.status.LastError = true, "not permitted now: "+err.Error()
			p.mu.Unlock()
			return
		}
	}
	u, err := m.lookup(p.spec.Server)
	if err == nil {
		_, err = u.ready()
	}
	if err != nil {
		p.setPaused(true)
		return
	}
	raw, err := p.request(ctx, m, u)
	if ctx.Err() != nil {
		return // stopped mid-request
	}
	if errors.Is(err, ErrUnavailable) {
		// The session ended under the request (a restart, a lost
		// connection): a pause, not a result, even when a new session is
		// up by now, or a restart would publish an error and then the
		// old result again. The status says why.
		p.mu.Lock()
		p.status.Paused, p.status.LastError = true, err.Error()
		p.mu.Unlock()
		return
	}
	key := string(raw)
	if err != nil {
		key = "error: " + err.Error()
	}
	p.mu.Lock()
	p.status.Paused = false
	p.status.Polls++
	p.status.LastPoll = time.Now()
	p.status.LastError = ""
	if err != nil {
		p.status.LastError = err.Error()
	}
	changed := !p.started || key != p.last
	if changed {
		p.status.Changes++
	}
	p.mu.Unlock()
	if !changed {
		return
	}
	baseline := !p.started
	p.started, p.last = true, key
	p.publish(p, raw, err, baseline)
}

func (p *poll) setPaused(paused bool) {
	p.mu.Lock()
	p.status.Paused = paused
	p.mu.Unlock()
}

// request reads the resource or calls the tool and returns the result as
// MCP JSON.
func (p *poll) request(ctx context.Context, m *Manager, u *upstream) (json.RawMessage, error) {
	var res any
	var err error
	if p.spec.URI != "" {
		res, err = onSession(ctx, u, "resources/read", func(ctx context.Context, cs *mcp.ClientSession) (*mcp.ReadResourceResult, error) {
			return readResource(ctx, cs, p.spec.URI)
		})
	} else {
		// Through the Manager, so that the call counts in the metrics like
		// any other.
		res, err = m.CallTool(ctx, p.spec.QualifiedTool(), p.spec.Arguments, CallOptions{})
	}
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("poll %s: encode result: %w", p.id, err)
	}
	return raw, nil
}

// publishPollResult publishes a poll's changed result as a KindPollResult
// event.
func publishPollResult(bus *events.Bus) func(*poll, json.RawMessage, error, bool) {
	return func(p *poll, raw json.RawMessage, err error, baseline bool) {
		if bus == nil {
			return
		}
		ev := events.Event{
			Server:   p.spec.Server,
			Kind:     events.KindPollResult,
			PollID:   p.id,
			Baseline: baseline,
			URI:      p.spec.URI,
			Tool:     p.spec.QualifiedTool(),
		}
		if err != nil {
			ev.Error = err.Error()
		} else {
			ev.Data = raw
		}
		bus.Publish(ev)
	}
}

// publishResourceUpdated stands in for a server's resource update
// notifications: a change after the baseline is a KindResourceUpdated
// event. Failures are logged, not published: a subscriber of updates
// expects no other kind of event.
func publishResourceUpdated(m *Manager) func(*poll, json.RawMessage, error, bool) {
	return func(p *poll, _ json.RawMessage, err error, baseline bool) {
		if err != nil {
			m.opts.Logger.Warn().Str("server", p.spec.Server).Str("uri", config.RedactURI(p.spec.URI)).Str("error", err.Error()).Msg("fallback poll of a resource")
			return
		}
		if baseline || m.opts.Events == nil {
			return
		}
		m.opts.Events.Publish(events.Event{Server: p.spec.Server, Kind: events.KindResourceUpdated, URI: p.spec.URI})
	}
}

// fallbackPoll starts, or joins, the poll standing in for update
// notifications of a resource; release leaves it, and the last release
// stops it.
func (m *Manager) fallbackPoll(server, uri string, interval time.Duration) (release func(), err error) {
	spec := PollSpec{Server: server, URI: uri, Interval: interval}
	if err := CheckPollSpec(&spec); err != nil {
		return nil, err
	}
	pl := m.polls
	key := events.Resource{Server: server, URI: uri}
	// Joined or started under one hold of pl.mu: two holders cannot both
	// start one, nor pass the limit together.
	pl.mu.Lock()
	f := pl.fallbacks[key]
	if f != nil {
		f.refs++
	} else {
		p, err := pl.startLocked(spec, publishResourceUpdated(m), "fallback-")
		if err != nil {
			pl.mu.Unlock()
			return nil, err
		}
		f = &fallback{p: p, refs: 1, since: m.lastSequence()}
		pl.fallbacks[key] = f
	}
	pl.mu.Unlock()
	return sync.OnceFunc(func() {
		pl.mu.Lock()
		f.refs--
		last := f.refs == 0 && pl.fallbacks[key] == f
		if last {
			delete(pl.fallbacks, key)
		}
		pl.mu.Unlock()
		if last {
			f.p.halt()
		}
	}), nil
}
