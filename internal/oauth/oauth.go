// Package oauth makes mcpd an OAuth 2.1 client of its HTTP and SSE
// upstreams, as the MCP authorization specification describes: Protected
// Resource Metadata (RFC 9728) and authorization server metadata (RFC 8414,
// OpenID discovery) discovery, client registration (pre-registered, Client
// ID Metadata Document, Dynamic Client Registration), the authorization
// code grant with PKCE and resource indicators, step-up authorization, and
// refresh; and, for daemons with nobody at a browser, the client
// credentials, JWT bearer and token exchange grants and DPoP-bound tokens.
//
// A Manager keeps one authorization per server. Its Transport wraps a
// server's HTTP transport: every request carries the server's token, a 401
// or a 403 insufficient_scope answer is authorized and the request sent
// again. Where a person's consent is needed, the Manager starts a pending
// authorization (see Pending) and the request fails at once with
// ErrAuthorizationRequired: nothing waits for a person inside a request.
// The consent ends when the browser's redirect reaches the Manager's
// redirect handler, or when Complete is given the URL the browser ended on.
// A server's metadata, registration and token requests go through the
// Manager's HTTP client, or through the Transports its Transport call
// names (those of a server with TLS settings of its own).
//
// Tokens and client registrations persist in a state directory, one file
// per server, mode 0600 in a 0700 directory, written atomically. They are
// never logged, and errors never quote them.
package oauth

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/config"
)

// Errors of the package; the gRPC edge maps them through mcpclient.
var (
	// ErrAuthorizationRequired means a server needs a person's consent
	// before it can be used: see Manager.Pending.
	ErrAuthorizationRequired = errors.New("authorization required")
	// ErrNoPendingAuthorization means Complete was called for a server
	// that waits for no consent.
	ErrNoPendingAuthorization = errors.New("no pending authorization")
	// ErrInvalidRedirect means a redirect URL that does not complete the
	// pending authorization: malformed, or with the wrong state.
	ErrInvalidRedirect = errors.New("invalid redirect")
	// ErrAuthorizationFailed means the authorization server refused: an
	// error in the redirect, a failed token request, a mismatched issuer,
	// or a scope it keeps refusing.
	ErrAuthorizationFailed = errors.New("authorization failed")
	// ErrUnreachable means an authorization server could not be reached
	// (a network failure, not an answer); trying again may succeed. A
	// pending authorization stays pending.
	ErrUnreachable = errors.New("authorization server unreachable")
	// ErrStore means the state directory could not be written.
	ErrStore = errors.New("oauth state store")
)

// Defaults of Options.
const (
	defaultFlowTTL = 10 * time.Minute
	// defaultStoredPoll: a person who consented through another mcpd
	// sharing the state directory waits at most this long for this one.
	defaultStoredPoll = 2 * time.Second
	// maxStepUps bounds the re-authorizations after 403 insufficient_scope
	// that did not lead to a successful request, so that a server that
	// never accepts any scope does not ask a person forever.
	maxStepUps = 2
	// refreshMargin renews a token this long before it expires, so that a
	// request does not carry a token that expires on the way.
	refreshMargin = 30 * time.Second
	// requestTimeout bounds one metadata, registration or token request.
	requestTimeout = 30 * time.Second
	// stateLockWait bounds how long a save waits for another mcpd's
	// hold of the state directory's lock before it saves without the
	// lock. A renewal holds it through its discovery (a few metadata
	// requests) and its token request, each at most requestTimeout.
	stateLockWait = 4 * requestTimeout
)

// Options configure a Manager. The zero value works: tokens in memory only,
// no redirect URL (so no authorization code grant) until SetRedirectURL.
type Options struct {
	// StateDir is where tokens and client registrations persist; empty
	// keeps them in memory.
	StateDir string
	// HTTPClient sends metadata, registration and token requests; default
	// a client with a 30s timeout. A server given Transports of its own
	// (Manager.Transport) has its requests sent through those instead,
	// by a copy of HTTPClient.
	HTTPClient *http.Client
	// FlowTTL bounds how long a pending authorization waits for consent;
	// default 10 minutes.
	FlowTTL time.Duration
	// StoredPoll is how often a pending authorization looks in StateDir
	// for a token another mcpd sharing it saved meanwhile (a person
	// consented there), which ends it; default 2s.
	StoredPoll time.Duration
	// ClientName names mcpd in dynamic client registration; default
	// "mcpd".
	ClientName string
	// Logger logs flows (never tokens or secrets); default none.
	Logger *zerolog.Logger
	// OnChange is called, with no lock held, when a server's pending
	// authorization starts or ends, or its tokens are forgotten.
	OnChange func(server string)
}

// Manager keeps the authorization of every server. Its methods are safe
// for concurrent use.
type Manager struct {
	opts  Options
	log   zerolog.Logger
	store *store

	mu          sync.Mutex
	redirectURL string
	servers     map[string]*serverAuth
	flows       map[string]*flow // pending flows by state
}

// New returns a Manager; it creates opts.StateDir (mode 0700) if needed.
func New(opts *Options) (*Manager, error) {
	m := &Manager{servers: make(map[string]*serverAuth), flows: make(map[string]*flow), log: zerolog.Nop()}
	if opts != nil {
		m.opts = *opts
	}
	if m.opts.Logger != nil {
		m.log = *m.opts.Logger
	}
	if m.opts.HTTPClient == nil {
		m.opts.HTTPClient = &http.Client{Timeout: requestTimeout}
	}
	if m.opts.FlowTTL <= 0 {
		m.opts.FlowTTL = defaultFlowTTL
	}
	if m.opts.StoredPoll <= 0 {
		m.opts.StoredPoll = defaultStoredPoll
	}
	if m.opts.ClientName == "" {
		m.opts.ClientName = "mcpd"
	}
	st, err := openStore(m.opts.StateDir)
	if err != nil {
		return nil, err
	}
	m.store = st
	return m, nil
}

// SetRedirectURL sets the URL the authorization server redirects the
// browser to: the redirect listener's callback. It must be set before the
// authorization code grant can run.
func (m *Manager) SetRedirectURL(u string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.redirectURL = u
}

func (m *Manager) redirect() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.redirectURL
}

// server returns the authorization of a server, made on first use. cfg,
// resource and requests are the server's current settings: a changed
// resource (the URL) drops the stored tokens.
func (m *Manager) server(name, resource string, cfg *config.OAuth, requests *Transports) *serverAuth {
	m.mu.Lock()
	sa := m.servers[name]
	if sa == nil {
		sa = &serverAuth{m: m, name: name, authSem: make(chan struct{}, 1)}
		m.servers[name] = sa
	}
	sa.released = false
	m.mu.Unlock()
	sa.configure(resource, cfg, requests)
	return sa
}

// Pending describes a consent a server waits for.
type Pending struct {
	// URL is the authorization URL to open in a browser.
	URL string
	// Expires is when mcpd stops waiting for the redirect.
	Expires time.Time
	// Done is closed when the authorization completes, fails or expires.
	Done <-chan struct{}
}

// Pending returns the consent server waits for, if any.
func (m *Manager) Pending(server string) (Pending, bool) {
	m.mu.Lock()
	sa := m.servers[server]
	m.mu.Unlock()
	if sa == nil {
		return Pending{}, false
	}
	f := sa.pendingFlow()
	if f == nil {
		return Pending{}, false
	}
	return Pending{URL: f.authURL, Expires: f.expires, Done: f.done}, true
}

// Blocked returns why server cannot be used now, or nil: it waits for a
// consent (ErrAuthorizationRequired), or its last authorization failed and
// no token was obtained since (ErrAuthorizationFailed).
func (m *Manager) Blocked(server string) error {
	m.mu.Lock()
	sa := m.servers[server]
	m.mu.Unlock()
	if sa == nil {
		return nil
	}
	if sa.pendingFlow() != nil {
		return sa.consentError()
	}
	sa.mu.Lock()
	defer sa.mu.Unlock()
	if sa.refused != "" {
		return errorf(ErrAuthorizationFailed, "%s", sa.refused)
	}
	return nil
}

// LastError says why server's last authorization failed, or "".
func (m *Manager) LastError(server string) string {
	m.mu.Lock()
	sa := m.servers[server]
	m.mu.Unlock()
	if sa == nil {
		return ""
	}
	sa.mu.Lock()
	defer sa.mu.Unlock()
	return sa.lastErr
}

// Complete finishes server's pending authorization with the URL the
// browser was redirected to (its code, state and iss parameters).
func (m *Manager) Complete(ctx context.Context, server, redirectURL string) error {
	m.mu.Lock()
	sa := m.servers[server]
	m.mu.Unlock()
	var f *flow
	if sa != nil {
		f = sa.pendingFlow()
	}
	if f == nil {
		return errorf(ErrNoPendingAuthorization, "server %q waits for no authorization", server)
	}
	params, err := redirectParams(redirectURL)
	if err != nil {
		return err
	}
	return f.complete(ctx, params)
}

// Forget deletes server's tokens and client registration, on disk and in
// memory, and ends its pending authorization.
func (m *Manager) Forget(server string) error {
	m.mu.Lock()
	sa := m.servers[server]
	m.mu.Unlock()
	var err error
	if sa != nil {
		err = sa.forget()
		m.dropIfReleased(sa)
	} else {
		unlock := m.lockStateToSave(context.Background(), server)
		err = m.store.remove(server)
		unlock()
	}
	m.changed(server)
	return err
}

// Stored reports whether mcpd holds OAuth state for server (tokens or a
// client registration), in memory or in the state directory: that of a
// server since disconnected stays, for the next time it is connected.
func (m *Manager) Stored(server string) bool {
	m.mu.Lock()
	sa := m.servers[server]
	m.mu.Unlock()
	if sa != nil {
		return true
	}
	return m.store.exists(server)
}

// Release ends server's pending authorization (the server was removed or
// replaced); its tokens stay, on disk and in memory, for the next time it
// is connected. A server with nothing stored (no token, no client
// registration) leaves nothing behind, and one with something leaves
// nothing once Forget deletes it: server names are the callers' to
// choose, and every HTTP or SSE server has an authorization here.
func (m *Manager) Release(server string) {
	m.mu.Lock()
	sa := m.servers[server]
	if sa != nil {
		sa.released = true
	}
	m.mu.Unlock()
	if sa == nil {
		return
	}
	ended := sa.endFlow(nil)
	m.dropIfReleased(sa)
	if ended {
		m.changed(server)
	}
}

// dropIfReleased forgets sa, the authorization of a server no longer
// connected, when it holds nothing worth keeping. A server connected
// since (Transport) has it again and keeps it.
func (m *Manager) dropIfReleased(sa *serverAuth) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.servers[sa.name] == sa && sa.released && !sa.holdsAnything() {
		delete(m.servers, sa.name)
	}
}

func (m *Manager) changed(server string) {
	if m.opts.OnChange != nil {
		m.opts.OnChange(server)
	}
}

func (m *Manager) addFlow(f *flow) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flows[f.state] = f
}

func (m *Manager) removeFlow(f *flow) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.flows[f.state] == f {
		delete(m.flows, f.state)
	}
}

func (m *Manager) flowByState(state string) *flow {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.flows[state]
}

// kindError attaches a sentinel kind to a message; cause, if set, is
// what the message describes (errors.Is finds a context error in it).
type kindError struct {
	kind  error
	msg   string
	cause error
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }
func (e *kindError) Unwrap() error        { return e.cause }

func errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: sprintf(format, args...)}
}
