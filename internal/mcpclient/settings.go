package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
)

// unsubscribeTimeout bounds the best-effort upstream unsubscribe when the
// last interest in a resource goes away: the caller (a closing event
// stream) must not hang on a slow server.
const unsubscribeTimeout = 5 * time.Second

// logLevels are MCP's levels, lowest first.
var logLevels = []mcp.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// settings is what agents set up per server name. It outlives sessions and
// upstreams: a restarted or replaced server gets it replayed. A server
// disconnected for good takes its own with it (forgetServer).
type settings struct {
	mu           sync.Mutex
	calls        map[string]*callLock            // server -> lock held across its subscribe and unsubscribe calls
	subs         map[string]map[string]*interest // server -> uri -> the upstream subscription's holders
	levels       map[string]mcp.LoggingLevel
	roots        map[string][]*mcp.Root // per-server roots, overriding defaultRoots
	defaultRoots []*mcp.Root

	// settling notes when an unsubscribe went out to a 2026-07-28
	// session, for the next subscribe of the URI to wait listenSettle.
	settling map[string]map[string]time.Time // server -> uri -> when

	closed   bool           // the Manager closed: no more delayed unsubscribes
	delayed  sync.WaitGroup // delayed unsubscribes pending or running, and subscribes a caller left (track)
	releases int            // delayed unsubscribes ever scheduled, for their gen
}

// interest is an upstream resource subscription: the streams holding it
// and, once none does, the delayed unsubscribe that ends it.
type interest struct {
	holders int
	release *time.Timer // pending while holders is 0, else nil
	gen     int         // which release is pending: a stale one finds another
	// since is the event bus's last sequence when mcpd began to hold the
	// subscription: updates published after it are on the bus.
	since uint64
	// failed says why the server's current session has no subscription
	// of it: subscribing again on a new session failed (the server
	// refused it). Its holders get no updates; the server's status notes
	// it, and the next holder tries again. "" when subscribed.
	failed string
}

func newSettings() *settings {
	return &settings{
		calls:    make(map[string]*callLock),
		subs:     make(map[string]map[string]*interest),
		settling: make(map[string]map[string]time.Time),
		levels:   make(map[string]mcp.LoggingLevel),
		roots:    make(map[string][]*mcp.Root),
	}
}

// resources are the URIs subscribed upstream on a server: held, or let go
// of less than the unsubscribe delay ago.
func (s *settings) resources(server string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	uris := make([]string, 0, len(s.subs[server]))
	for uri := range s.subs[server] {
		uris = append(uris, uri)
	}
	slices.Sort(uris)
	return uris
}

// lockSubscribing takes the lock that orders a server's upstream subscribe
// and unsubscribe calls: they reach the server in the order interests come
// and go, each once. Servers do not wait on each other's. It returns ctx's
// error if ctx ends before the lock is free. A lock exists while someone
// holds or waits for it, so that server names used once (servers
// connected and disconnected under names of their own) leave none behind.
func (s *settings) lockSubscribing(ctx context.Context, server string) (unlock func(), err error) {
	s.mu.Lock()
	lock := s.calls[server]
	if lock == nil {
		lock = &callLock{ch: make(chan struct{}, 1)}
		s.calls[server] = lock
	}
	lock.users++
	s.mu.Unlock()
	select {
	case lock.ch <- struct{}{}:
	case <-ctx.Done():
		s.leave(server, lock)
		return nil, ctx.Err()
	}
	return sync.OnceFunc(func() {
		<-lock.ch
		s.leave(server, lock)
	}), nil
}

// leave counts one user of a server's lock less, and drops the lock with
// its last user.
func (s *settings) leave(server string, lock *callLock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lock.users--
	if lock.users == 0 && s.calls[server] == lock {
		delete(s.calls, server)
	}
}

// callLock is a mutex whose wait a caller can give up, and the count of
// those who hold it or wait for it (guarded by settings.mu).
type callLock struct {
	ch    chan struct{}
	users int
}

// forgetServer drops what was set up for a server that is gone for good
// (disconnected, removed from the config): its log level, its roots and
// the notes of its unsubscribes (a server connected again under the name
// has sessions of its own, with no listen of the old one to unwind).
// Resource subscriptions stay while streams hold them, and go with the
// last holder.
func (s *settings) forgetServer(server string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.levels, server)
	delete(s.roots, server)
	delete(s.settling, server)
}

func (s *settings) logLevel(server string) mcp.LoggingLevel {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.levels[server]
}

func (s *settings) rootsFor(server string) []*mcp.Root {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.roots[server]; ok {
		return r
	}
	return s.defaultRoots
}

// addInterest counts one more holder of a resource's subscription and says
// whether it is the first, which subscribes upstream, or one of a
// subscription the server's session does not have (interest.failed),
// which tries again. A subscription let go of but not yet unsubscribed is
// taken over as it is.
func (s *settings) addInterest(server, uri string) (first, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs[server] == nil {
		s.subs[server] = make(map[string]*interest)
	}
	in := s.subs[server][uri]
	if in == nil {
		s.subs[server][uri] = &interest{holders: 1}
		return true, false
	}
	if in.release != nil {
		if in.release.Stop() {
			s.delayed.Done()
		} // else it is waiting for the lock, and will find a holder
		in.release = nil
	}
	in.holders++
	return false, in.failed != ""
}

// subscribed records whether the server's current session subscribed a
// held resource: err is why not, nil when it did.
func (s *settings) subscribed(server, uri string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.subs[server][uri]; in != nil {
		in.failed = ""
		if err != nil {
			in.failed = err.Error()
		}
	}
}

// subscriptionNotes are status notes on the resources held for a server
// whose current session has no subscription of them, as many as notes on
// tool names (maxToolNameNotes), then a count of the rest.
func (s *settings) subscriptionNotes(server string) []string {
	s.mu.Lock()
	var why []string
	for uri, in := range s.subs[server] {
		if in.failed != "" {
			why = append(why, config.RedactURI(uri)+" ("+in.failed+"): no updates of it arrive")
		}
	}
	s.mu.Unlock()
	slices.Sort(why)
	return toolNameNotes("resource subscription failed on the current session: ", "more resource subscriptions failed", why)
}

// held records since on a subscription that has just begun (see
// interest.since).
func (s *settings) held(server, uri string, since uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.subs[server][uri]; in != nil {
		in.since = since
	}
}

// forget drops a subscription whose upstream subscribe failed.
func (s *settings) forget(server, uri string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(server, uri)
}

func (s *settings) remove(server, uri string) {
	delete(s.subs[server], uri)
	if len(s.subs[server]) == 0 {
		delete(s.subs, server)
	}
}

// dropInterest counts one holder less and says whether it was the last.
func (s *settings) dropInterest(server, uri string) (last bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.subs[server][uri]
	if in == nil || in.holders == 0 {
		return false
	}
	in.holders--
	return in.holders == 0
}

// delayRelease arranges for unsubscribe(server, uri) to run after delay
// unless the subscription gets a holder again meanwhile. With no delay,
// or once the Manager closed, it forgets the subscription and returns
// false: the caller unsubscribes now.
func (s *settings) delayRelease(server, uri string, delay time.Duration, unsubscribe func(server, uri string, gen int)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.subs[server][uri]
	if in == nil || in.holders > 0 {
		return true // nothing to release
	}
	if delay < 0 || s.closed {
		s.remove(server, uri)
		return false
	}
	s.releases++
	in.gen = s.releases
	gen := in.gen
	s.delayed.Add(1)
	in.release = time.AfterFunc(delay, func() {
		defer s.delayed.Done()
		unsubscribe(server, uri, gen)
	})
	return true
}

// endRelease says whether the delayed unsubscribe gen is still due, and
// forgets the subscription if it is.
func (s *settings) endRelease(server, uri string, gen int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.subs[server][uri]
	if in == nil || in.holders > 0 || in.release == nil || in.gen != gen {
		return false
	}
	s.remove(server, uri)
	return true
}

// track counts work that ends a subscription in the background (with
// delayed.Done), unless the Manager is closing: then it reports false.
// Counted under mu, so that no count is added once close has begun and
// Close may be waiting.
func (s *settings) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.delayed.Add(1)
	return true
}

// close cancels the pending delayed unsubscribes (the servers are being
// stopped) and refuses new ones; wait for those running with delayed.
func (s *settings) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for server, byURI := range s.subs {
		for uri, in := range byURI {
			if in.release == nil {
				continue
			}
			if in.release.Stop() {
				s.delayed.Done()
			}
			s.remove(server, uri)
		}
	}
}

// listenSettle is how long a subscribe of a URI waits after an
// unsubscribe of it went out to a 2026-07-28 session (see
// SubscribeResource). The ended listen unwinds in a few goroutine
// hand-offs, well under a millisecond on an idle machine.
const listenSettle = 250 * time.Millisecond

// unsubscribed notes that an unsubscribe of uri went out to a 2026-07-28
// session now, and forgets the notes that no longer hold anything back.
func (s *settings) unsubscribed(server, uri string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for u, at := range s.settling[server] {
		if now.Sub(at) >= listenSettle {
			delete(s.settling[server], u)
		}
	}
	if s.settling[server] == nil {
		s.settling[server] = make(map[string]time.Time)
	}
	s.settling[server][uri] = now
}

// settleLeft says how long a subscribe of uri has still to wait.
func (s *settings) settleLeft(server, uri string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.settling[server][uri]
	if !ok {
		return 0
	}
	left := listenSettle - time.Since(at)
	if left <= 0 {
		delete(s.settling[server], uri)
		if len(s.settling[server]) == 0 {
			delete(s.settling, server)
		}
	}
	return left
}

// SubscribeResource adds one interest in updates of a resource. The first
// interest subscribes upstream (at once if the server is ready, else when
// its session comes up, and again after every restart); release drops the
// interest, and Options.UnsubscribeDelay after the last release mcpd
// unsubscribes, unless an interest came back meanwhile. Updates arrive as
// KindResourceUpdated events on the bus.
//
// The delay spares the server a subscribe right after an unsubscribe when
// a stream reconnects, and that pair is what loses subscriptions on a
// 2026-07-28 session: go-sdk servers (v1.8.0) keep one subscription per
// session and URI, and the ending subscriptions/listen, whose cancellation
// the SDK's client sends in the background, removes it when it unwinds,
// which may be after the new listen made it. After an unsubscribe that
// does go out, a subscribe of the same URI waits listenSettle for that
// unwinding.
func (m *Manager) SubscribeResource(ctx context.Context, server, uri string) (release func(), err error) {
	if uri == "" {
		return nil, errorf(ErrInvalidArgument, "resource uri is required")
	}
	// Unknown names get no lock: they come from requests, not servers.
	if _, err := m.lookup(server); err != nil {
		return nil, err
	}
	// A new session catching up holds the lock for up to its connect
	// timeout; the caller's deadline bounds the wait.
	var unlock func()
	for {
		if unlock, err = m.settings.lockSubscribing(ctx, server); err != nil {
			return nil, err
		}
		left := m.settings.settleLeft(server, uri)
		if left <= 0 {
			break
		}
		unlock()
		t := time.NewTimer(left)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	handedOff := false
	defer func() {
		if !handedOff {
			unlock()
		}
	}()
	// Looked up under the lock: a server replaced meanwhile has caught up
	// by now, and this is the one to subscribe on.
	u, err := m.lookup(server)
	if err != nil {
		return nil, err
	}
	first, failed := m.settings.addInterest(server, uri)
	if first || failed {
		// A subscription the server's session does not have (it refused
		// it when mcpd subscribed again on a new session) is asked for
		// again: the stream gets the server's answer, as the first one
		// did, rather than a subscription that sends nothing.
		if cs, err := u.ready(); err == nil {
			sub := m.startSubscribe(ctx, u, cs, server, uri, first)
			select {
			case err := <-sub.done:
				if err := sub.finish(err); err != nil {
					return nil, err
				}
			case <-ctx.Done():
				// The caller went away; the server may subscribe all the
				// same, and an unsubscribe sent now could overtake the
				// subscribe. It ends in the background, holding the lock,
				// and its interest is let go then, as any is.
				finish := func() {
					if sub.finish(<-sub.done) != nil {
						return
					}
					if first {
						// A stream that resumes meanwhile takes this
						// interest over: it began now.
						m.settings.held(server, uri, m.lastSequence())
					}
					m.releaseLocked(server, uri)
				}
				if !m.settings.track() {
					finish() // the Manager is closing: its servers stop, which ends the request
					return nil, fmt.Errorf("resources/subscribe: %w", context.Cause(ctx))
				}
				handedOff = true
				go func() {
					defer m.settings.delayed.Done()
					defer unlock()
					finish()
				}()
				return nil, fmt.Errorf("resources/subscribe: %w", context.Cause(ctx))
			}
		}
	}
	if first {
		m.settings.held(server, uri, m.lastSequence())
	}
	return sync.OnceFunc(func() { m.releaseResource(server, uri) }), nil
}

// subscribing is a resources/subscribe under way.
type subscribing struct {
	done   <-chan error
	finish func(error) error // records the answer; nil: subscribed
}

// startSubscribe sends resources/subscribe for an interest addInterest
// counted, under the server's subscribing lock. The request is not
// cancelled with ctx: a server may subscribe although its client gave
// up, so the answer is waited for, within the server's call timeout.
func (m *Manager) startSubscribe(ctx context.Context, u *upstream, cs *mcp.ClientSession, server, uri string, first bool) subscribing {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), u.callTimeout(0))
	sctx, unbind := u.bindRun(sctx)
	done := make(chan error, 1)
	go func() { done <- cs.Subscribe(sctx, &mcp.SubscribeParams{URI: uri}) }()
	return subscribing{done: done, finish: func(err error) error {
		defer cancel()
		defer unbind()
		if err != nil {
			if first {
				m.settings.forget(server, uri)
			} else {
				m.releaseLocked(server, uri)
			}
			return u.classify(sctx, cs, "resources/subscribe", err)
		}
		m.settings.subscribed(server, uri, nil)
		return nil
	}}
}

// WatchResource is SubscribeResource for a caller that accepts polling:
// when fallback is positive and the server, ready now, cannot notify (it
// declares no resources.subscribe capability), mcpd reads the resource
// every fallback instead and publishes a KindResourceUpdated event when
// its contents change. A server that is not ready yet is subscribed to as
// by SubscribeResource.
func (m *Manager) WatchResource(ctx context.Context, server, uri string, fallback time.Duration) (release func(), err error) {
	if fallback > 0 && uri != "" {
		u, err := m.lookup(server)
		if err != nil {
			return nil, err
		}
		if cs, err := u.ready(); err == nil && !canNotify(cs) {
			return m.fallbackPoll(server, uri, fallback)
		}
	}
	return m.SubscribeResource(ctx, server, uri)
}

// canNotify reports whether a session's server declares resource
// subscriptions.
func canNotify(cs *mcp.ClientSession) bool {
	init := cs.InitializeResult()
	return init != nil && init.Capabilities != nil && init.Capabilities.Resources != nil && init.Capabilities.Resources.Subscribe
}

// ResourceHeldSince returns the event bus's last sequence when mcpd began
// to follow a resource it follows now (a subscription upstream, or a
// fallback poll): its updates after that sequence are on the bus, those
// before it may not be. ok is false when mcpd does not follow it.
func (m *Manager) ResourceHeldSince(server, uri string) (since uint64, ok bool) {
	m.settings.mu.Lock()
	in := m.settings.subs[server][uri]
	if in != nil {
		since, ok = in.since, true
	}
	m.settings.mu.Unlock()
	if ok {
		return since, true
	}
	m.polls.mu.Lock()
	defer m.polls.mu.Unlock()
	if f := m.polls.fallbacks[events.Resource{Server: server, URI: uri}]; f != nil {
		return f.since, true
	}
	return 0, false
}

// lastSequence is the event bus's last sequence, 0 without a bus.
func (m *Manager) lastSequence() uint64 {
	if m.opts.Events == nil {
		return 0
	}
	return m.opts.Events.LastSequence()
}

// ResourceInterest says how many holders of SubscribeResource want updates
// of a resource.
func (m *Manager) ResourceInterest(server, uri string) int {
	m.settings.mu.Lock()
	defer m.settings.mu.Unlock()
	if in := m.settings.subs[server][uri]; in != nil {
		return in.holders
	}
	return 0
}

func (m *Manager) releaseResource(server, uri string) {
	unlock, _ := m.settings.lockSubscribing(context.Background(), server)
	defer unlock()
	m.releaseLocked(server, uri)
}

// releaseLocked drops one holder of a resource's subscription; the caller
// holds the server's subscribing lock.
func (m *Manager) releaseLocked(server, uri string) {
	if !m.settings.dropInterest(server, uri) {
		return
	}
	if !m.settings.delayRelease(server, uri, m.opts.UnsubscribeDelay, m.unsubscribeUnheld) {
		m.unsubscribe(server, uri)
	}
}

// unsubscribeUnheld is the delayed unsubscribe gen, if still due.
func (m *Manager) unsubscribeUnheld(server, uri string, gen int) {
	unlock, _ := m.settings.lockSubscribing(context.Background(), server)
	defer unlock()
	if m.settings.endRelease(server, uri, gen) {
		m.unsubscribe(server, uri)
	}
}

// unsubscribe ends the upstream subscription of a ready server; the caller
// holds the server's subscribing lock.
func (m *Manager) unsubscribe(server, uri string) {
	u, err := m.lookup(server)
	if err != nil {
		return
	}
	cs, err := u.ready()
	if err != nil {
		return // the next session subscribes only to what is wanted then
	}
	ctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
	defer cancel()
	ctx, unbind := u.bindRun(ctx)
	defer unbind()
	u.unsubscribe(ctx, cs, uri)
}

// SetLogLevel sets the minimum level of log messages a server sends. A
// legacy server is told with logging/setLevel; a 2026-07-28 server gets the
// level in the _meta of every request. Either way mcpd sets it again on
// every new session.
func (m *Manager) SetLogLevel(ctx context.Context, server string, level mcp.LoggingLevel) error {
	if err := CheckLogLevel(level); err != nil {
		return err
	}
	u, err := m.lookup(server)
	if err != nil {
		return err
	}
	m.settings.mu.Lock()
	m.settings.levels[server] = level
	m.settings.mu.Unlock()
	cs, err := u.ready()
	if err != nil || isStateless(cs) {
		return nil // kept; applied when the session comes up
	}
	ctx, cancel := context.WithTimeout(ctx, u.callTimeout(0))
	defer cancel()
	ctx, unbind := u.bindRun(ctx)
	defer unbind()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: level}); err != nil {
		return u.classify(ctx, cs, "logging/setLevel", err)
	}
	return nil
}

// CheckLogLevel refuses, with ErrInvalidArgument, a level MCP does not
// define.
func CheckLogLevel(level mcp.LoggingLevel) error {
	if !slices.Contains(logLevels, level) {
		return errorf(ErrInvalidArgument, "log level %q is not one of %v", level, logLevels)
	}
	return nil
}

// SetRoots sets the roots offered to one server, or, with server empty, to
// every server without roots of its own, now and later. Servers that are
// connected are notified that the list changed.
func (m *Manager) SetRoots(server string, roots []*mcp.Root) error {
	for i, r := range roots {
		if err := CheckRootURI(r.URI); err != nil {
			return errorf(ErrInvalidArgument, "roots[%d]: %v", i, err)
		}
	}
	var targets []*upstream
	if server != "" {
		u, err := m.lookup(server)
		if err != nil {
			return err
		}
		targets = []*upstream{u}
	} else {
		targets = m.snapshot()
	}
	m.settings.mu.Lock()
	if server != "" {
		m.settings.roots[server] = roots
	} else {
		m.settings.defaultRoots = roots
	}
	m.settings.mu.Unlock()
	for _, u := range targets {
		u.setRoots(m.settings.rootsFor(u.cfg.Name))
	}
	return nil
}

// maxURIShown bounds how much of a refused root's uri an error shows.
const maxURIShown = 32

// CheckRootURI refuses a root uri that is no file:// URI: every MCP
// revision says a root's uri "must start with file://", and its schema
// gives it the format uri. A server would refuse the roots, or worse, read
// a path in what is none. The scheme is compared without regard to case,
// as URI schemes are. The error shows at most the uri's start.
func CheckRootURI(uri string) error {
	if uri == "" {
		return errors.New("uri is required")
	}
	if len(uri) < len("file://") || !strings.EqualFold(uri[:len("file://")], "file://") {
		return fmt.Errorf("uri %s is not a file:// URI (MCP's roots are)", shortQuote(uri, maxURIShown))
	}
	u, err := url.Parse(uri)
	if err != nil {
		// Its message would quote the whole uri.
		return fmt.Errorf("uri %s is not a valid URI (a control character, or a bad %%-escape)", shortQuote(uri, maxURIShown))
	}
	if u.Path == "" {
		return fmt.Errorf("uri %s names no path", shortQuote(uri, maxURIShown))
	}
	return nil
}

// setRoots replaces the roots of the upstream's client; the SDK notifies
// connected sessions.
func (u *upstream) setRoots(roots []*mcp.Root) {
	keep := make(map[string]bool, len(roots))
	for _, r := range roots {
		keep[r.URI] = true
	}
	u.rootsMu.Lock()
	defer u.rootsMu.Unlock()
	var stale []string
	for _, uri := range u.rootURIs {
		if !keep[uri] {
			stale = append(stale, uri)
		}
	}
	if len(stale) > 0 {
		u.client.RemoveRoots(stale...)
	}
	u.client.AddRoots(roots...)
	u.rootURIs = slices.Collect(maps.Keys(keep))
}
