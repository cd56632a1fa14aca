package oauth

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/mcpd-project/mcpd/internal/config"
)

// serverAuth is the authorization of one server.
type serverAuth struct {
	m    *Manager
	name string

	// authSem (capacity 1) serialises authorize, so that concurrent 401
	// answers lead to one discovery and one flow; a request waits for it
	// only as long as its context allows.
	authSem chan struct{}

	// saveMu serialises writes of the record, each of the record as it is
	// then, so that the file ends as the record does.
	saveMu sync.Mutex

	mu sync.Mutex
	// gen counts ForgetAuthorization calls: a token or registration
	// obtained by a request that began before one is not kept.
	gen      uint64
	loaded   bool
	resource string
	cfg      *config.OAuth // nil: defaults
	rec      *record
	dpop     *dpopKey
	pending  *flow
	lastErr  string
	// http sends the server's metadata, registration and token requests.
	http *httpClients
	// refused is why the last authorization attempt failed, until a token
	// is obtained (see Manager.Blocked).
	refused string
	// stepUps counts re-authorizations for scopes already granted: a
	// server that keeps refusing them is not asked about forever.
	// stepUpKey names the request whose refusal started the episode (see
	// requestKey); the episode ends when that request succeeds. Other
	// requests succeeding say nothing: a server may let initialize through
	// and still refuse a tool.
	stepUps   int
	stepUpKey string

	// onDisk is the access token of the record as this Manager last read
	// it from, or wrote it to, the state directory: a record there with
	// another token was written since by another mcpd sharing the
	// directory (see adoptStored).
	onDisk string

	// released says the server was removed (Manager.Release) and not
	// connected since; guarded by m.mu, not mu.
	released bool
}

// holdsAnything reports whether sa has something a later connect of the
// server reuses: a token, a client registration, a DPoP key, or a
// consent still pending.
func (sa *serverAuth) holdsAnything() bool {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	return sa.pending != nil || (sa.rec != nil && (sa.rec.Token != nil || sa.rec.Client != nil || sa.rec.DPoPKey != ""))
}

// configure takes the server's current settings, loading the stored
// record on first use. A record for another URL, or obtained under other
// settings (grant, client, scopes, DPoP), is not reused. requests (nil:
// the Manager's client) carry the OAuth requests made from now on, those
// of a flow started before too: a consent completed after a reconnect
// exchanges its code with what the new session uses.
func (sa *serverAuth) configure(resource string, cfg *config.OAuth, requests *Transports) {
	settings := settingsOf(cfg)
	var stale *flow
	defer func() {
		if stale != nil {
			stale.finish() // its consent was for the old URL or settings
		}
	}()
	sa.mu.Lock()
	defer sa.mu.Unlock()
	if !sa.loaded {
		sa.loaded = true
		rec, err := sa.m.store.load(sa.name)
		if err != nil {
			sa.m.log.Warn().Str("server", sa.name).Err(err).Msg("oauth state unreadable; starting afresh")
		}
		sa.rec = rec
		sa.onDisk = accessTokenOf(rec)
	}
	if sa.rec == nil || sa.rec.Resource != resource || sa.rec.Settings != settings {
		// Like a Forget: a token or registration a request for the old
		// URL or settings is still obtaining must not land in this record.
		sa.gen++
		stale, sa.pending = sa.pending, nil
		sa.rec = &record{Resource: resource, Settings: settings}
		sa.dpop = nil
		sa.stepUps = 0
		sa.refused = ""
	}
	sa.resource = resource
	sa.cfg = cfg.Clone()
	sa.http = newHTTPClients(sa.m.opts.HTTPClient, resource, requests)
	if sa.wantsDPoP() && sa.dpop == nil && sa.rec.DPoPKey != "" {
		if k, err := parseDPoPKey(sa.rec.DPoPKey); err == nil {
			sa.dpop = k
		}
	}
}

// settingsOf describes the settings tokens are obtained under, without
// secrets.
func settingsOf(c *config.OAuth) string {
	if c == nil {
		return ""
	}
	s := strings.Join([]string{c.EffectiveGrant(), c.ClientID, c.ClientMetadataURL, strings.Join(c.Scopes, " "), c.AuthMethod}, "|")
	if c.DPoP {
		s += "|dpop"
	}
	if c.IdP != nil {
		s += "|" + c.IdP.Issuer + "|" + c.IdP.TokenEndpoint + "|" + c.IdP.ClientID
	}
	return s
}

// httpClients returns the clients of the server's OAuth requests.
func (sa *serverAuth) httpClients() *httpClients {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	return sa.http
}

func (sa *serverAuth) wantsDPoP() bool { return sa.cfg != nil && sa.cfg.DPoP }

// dpopKeyLocked returns the server's DPoP key, made and saved on first use.
func (sa *serverAuth) dpopKeyLocked() (*dpopKey, error) {
	if !sa.wantsDPoP() {
		return nil, nil
	}
	if sa.dpop == nil {
		k, err := newDPoPKey()
		if err != nil {
			return nil, err
		}
		sa.dpop = k
		sa.rec.DPoPKey = k.marshal()
	}
	return sa.dpop, nil
}

// token returns the current token, or nil.
func (sa *serverAuth) token() *tokenRecord {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	if sa.rec == nil || sa.rec.Token == nil {
		return nil
	}
	t := *sa.rec.Token
	return &t
}

func (sa *serverAuth) pendingFlow() *flow {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	if f := sa.pending; f != nil && time.Now().Before(f.expires) {
		return f
	}
	return nil
}

// setToken keeps a new token, obtained by a request that began in gen,
// and saves the record; after a ForgetAuthorization since, it drops it.
// A token that renews replaces (non-nil) is dropped too when the record
// holds another token by now: a consent completed meanwhile (a step-up's,
// with more scopes) is newer than a refresh of the token before it. It
// reports whether it kept it.
func (sa *serverAuth) setToken(t *tokenRecord, issuer string, gen uint64, replaces *tokenRecord) bool {
	sa.mu.Lock()
	if sa.gen != gen {
		sa.mu.Unlock()
		sa.m.log.Info().Str("server", sa.name).Msg("oauth token obtained after its authorization was forgotten; dropped")
		return false
	}
	if replaces != nil && !sa.holdsLocked(replaces) {
		sa.mu.Unlock()
		sa.m.log.Info().Str("server", sa.name).Msg("oauth token refreshed after a newer one was obtained; the newer one is kept")
		return false
	}
	sa.rec.Token = t
	if issuer != "" {
		sa.rec.Issuer = issuer
	}
	sa.lastErr = ""
	sa.refused = ""
	sa.mu.Unlock()
	sa.persist()
	return true
}

// generation is the current gen, for a request about to begin.
func (sa *serverAuth) generation() uint64 {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	return sa.gen
}

// persist writes the record as it is now: a new token, which replaces
// whatever another mcpd sharing the state directory saved (both are
// current; the other instance takes this one at its next renewal).
// Callers hold the server's lock of the directory (lockState), so that
// the write does not land inside another instance's saveChange.
func (sa *serverAuth) persist() {
	sa.saveMu.Lock()
	defer sa.saveMu.Unlock()
	sa.mu.Lock()
	rec := *sa.rec
	sa.mu.Unlock()
	sa.writeLocked(&rec)
}

// saveChange applies change to the record and saves it, for every save
// but a new token's. Another mcpd sharing the state directory may have
// saved a token since this one last read or wrote the file: that token is
// taken in first (adoptStored), so that the write keeps it rather than
// putting back an older one, whose refresh token may be spent (and whose
// reuse can revoke the grant). change runs with sa.mu held, on the record
// as it then is, and reports whether there is anything to save.
// saveChange reports whether it saved, and whether it took in a token.
// Callers hold the server's lock of the directory (lockState), so that no
// other instance writes between the read and the write.
func (sa *serverAuth) saveChange(change func() bool) (saved, tookIn bool) {
	sa.saveMu.Lock()
	defer sa.saveMu.Unlock()
	tookIn = sa.adoptStoredLocked(nil)
	sa.mu.Lock()
	if !change() {
		sa.mu.Unlock()
		return false, tookIn
	}
	rec := *sa.rec
	sa.mu.Unlock()
	sa.writeLocked(&rec)
	return true, tookIn
}

// writeLocked writes rec, the record as it is now; saveMu is held.
func (sa *serverAuth) writeLocked(rec *record) {
	if err := sa.m.store.save(sa.name, rec); err != nil {
		sa.m.log.Warn().Str("server", sa.name).Err(err).Msg("cannot save oauth state; tokens stay in memory")
		return
	}
	sa.mu.Lock()
	sa.onDisk = accessTokenOf(rec)
	sa.mu.Unlock()
}

// lockState takes server's lock of the state directory (store.lock),
// which every mcpd sharing the directory holds while it renews the
// server's token, saves its record or removes it. It waits as long as ctx
// allows and returns ctx's error if ctx ends first. Where the lock itself
// cannot be had (flock refused) the caller goes on without it, with a
// warning: the returned func lets go of the lock, if there is one.
func (m *Manager) lockState(ctx context.Context, server string) (func(), error) {
	unlock, err := m.store.lock(ctx, server)
	switch {
	case err == nil:
		if ctx.Err() != nil {
			unlock()
			return nil, ctx.Err()
		}
		return unlock, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	default:
		m.log.Warn().Str("server", server).Err(errWithoutPath(err)).Msg("cannot lock the oauth state; going on without the lock")
		return func() {}, nil
	}
}

// lockStateToSave is lockState for a save (or a removal) whose request
// may have ended: what it saves (a registration made, a token obtained)
// is kept all the same, and it waits for the lock at most stateLockWait,
// then goes on without it.
func (m *Manager) lockStateToSave(ctx context.Context, server string) func() {
	wait, cancel := context.WithTimeout(context.WithoutCancel(ctx), stateLockWait)
	defer cancel()
	unlock, err := m.lockState(wait, server)
	if err != nil {
		m.log.Warn().Str("server", server).Msg("the oauth state stayed locked by another mcpd; saving without the lock")
		return func() {}
	}
	return unlock
}

// accessTokenOf is r's access token, or "".
func accessTokenOf(r *record) string {
	if r == nil || r.Token == nil {
		return ""
	}
	return r.Token.AccessToken
}

// adoptStored takes the token another mcpd sharing the state directory
// saved since this one last read or wrote the record, for the same URL
// and settings, with the client, issuer and DPoP key it goes with. Its
// refresh token may have rotated the one this Manager holds away:
// spending that would be refused (and may revoke the grant). It reports
// whether it took one. Called with authSem held, before a refresh and
// after a refused one, and by a pending consent (flow.checkStored), whose
// accept, if set, is asked with sa.mu held whether to take the record.
func (sa *serverAuth) adoptStored(accept func(disk *record) bool) bool {
	sa.saveMu.Lock()
	defer sa.saveMu.Unlock()
	return sa.adoptStoredLocked(accept)
}

// adoptStoredLocked is adoptStored with saveMu held.
func (sa *serverAuth) adoptStoredLocked(accept func(disk *record) bool) bool {
	disk, err := sa.m.store.load(sa.name)
	if err != nil || disk == nil || disk.Token == nil {
		return false
	}
	sa.mu.Lock()
	defer sa.mu.Unlock()
	if disk.Resource != sa.rec.Resource || disk.Settings != sa.rec.Settings ||
		disk.Token.AccessToken == sa.onDisk || disk.Token.AccessToken == accessTokenOf(sa.rec) {
		return false
	}
	if accept != nil && !accept(disk) {
		return false
	}
	var key *dpopKey
	if sa.wantsDPoP() {
		if key, err = parseDPoPKey(disk.DPoPKey); err != nil {
			return false
		}
	}
	sa.rec = disk
	sa.onDisk = disk.Token.AccessToken
	if key != nil {
		sa.dpop = key
	}
	sa.lastErr, sa.refused = "", ""
	sa.m.log.Info().Str("server", sa.name).Msg("oauth token taken from the state directory, where another mcpd saved it")
	return true
}

// holdsLocked reports whether the record's token is still t; sa.mu is
// held.
func (sa *serverAuth) holdsLocked(t *tokenRecord) bool {
	return sa.rec.Token != nil && sa.rec.Token.AccessToken == t.AccessToken
}

// dropToken forgets t, a token that no longer works (a refused refresh),
// unless the record holds another by now.
// The caller holds the server's lock of the state directory.
func (sa *serverAuth) dropToken(t *tokenRecord) {
	sa.saveChange(func() bool {
		if !sa.holdsLocked(t) {
			return false
		}
		sa.rec.Token = nil
		return true
	})
}

// dropClientIfUnknown forgets c, a registration mcpd made itself, when
// err is the token endpoint's invalid_client: the authorization server
// deleted it (or let it expire), and a consent for it would fail there
// every time. The next consent registers again. The caller holds the
// server's lock of the state directory.
func (sa *serverAuth) dropClientIfUnknown(c *clientRecord, err error) {
	te, ok := errors.AsType[*tokenError](err)
	if !ok || te.Code != "invalid_client" || c == nil || c.How != "dynamic" {
		return
	}
	dropped, _ := sa.saveChange(func() bool {
		if sa.rec.Client == nil || sa.rec.Client.ID != c.ID {
			return false
		}
		sa.rec.Client = nil
		return true
	})
	if dropped {
		sa.m.log.Info().Str("server", sa.name).Msg("the authorization server no longer knows mcpd's client; registering again")
	}
}

// forget clears the record and removes its file, under the state
// directory's lock, so that another mcpd's renewal under way does not
// write the file back after the removal, and under saveMu, so that no
// write of the old record of this one does.
func (sa *serverAuth) forget() error {
	sa.endFlow(errorf(ErrAuthorizationFailed, "authorization was forgotten"))
	unlock := sa.m.lockStateToSave(context.Background(), sa.name)
	defer unlock()
	sa.saveMu.Lock()
	defer sa.saveMu.Unlock()
	sa.mu.Lock()
	sa.gen++
	sa.rec = &record{Resource: sa.resource}
	sa.dpop = nil
	sa.stepUps = 0
	sa.stepUpKey = ""
	sa.lastErr = ""
	sa.refused = ""
	sa.mu.Unlock()
	return sa.m.store.remove(sa.name)
}

// endFlow ends the pending flow, if any, with err (nil: it succeeded). It
// reports whether there was one.
func (sa *serverAuth) endFlow(err error) bool {
	sa.mu.Lock()
	f := sa.pending
	sa.pending = nil
	if err != nil {
		sa.lastErr = err.Error()
	}
	sa.mu.Unlock()
	if f == nil {
		return false
	}
	f.finish()
	return true
}

// refresh renews the token with its refresh token, at the authorization
// server that issued it only, as the client it was issued to. A refused
// refresh drops the token, so that the next 401 asks for consent again;
// one that did not reach the server keeps it. challenges are those of the
// answer that asked for a new token, if any (a server may name its
// metadata only there).
func (sa *serverAuth) refresh(ctx context.Context, challenges []oauthex.Challenge) error {
	// Another mcpd sharing the state directory may be renewing the same
	// token: it saves the new one before it lets go, and adoptStored then
	// takes it instead of spending the refresh token a second time.
	unlock, err := sa.m.lockState(ctx, sa.name)
	if err != nil {
		return err
	}
	defer unlock()
	if sa.adoptStored(nil) {
		if t := sa.token(); t != nil && !t.expiring(time.Now()) {
			return nil
		}
	}
	sa.mu.Lock()
	gen := sa.gen
	t := sa.rec.Token
	stored := sa.rec.Client
	cfg := sa.cfg
	issuer := sa.rec.Issuer
	resource := sa.resource
	sa.mu.Unlock()
	if t == nil || t.RefreshToken == "" {
		return errorf(ErrAuthorizationFailed, "no refresh token")
	}
	meta, err := discover(ctx, sa.httpClients(), resource, challenges)
	if err != nil {
		return err
	}
	if issuer != "" && meta.asm.Issuer != issuer && meta.fallback {
		// No metadata was found (a 429, a 404 from a cache...): that says
		// nothing about a move. Keep the token for the next try.
		return errorf(ErrUnreachable, "the resource's metadata could not be read; the token is kept")
	}
	if issuer != "" && meta.asm.Issuer != issuer {
		// The refresh token is the issuer's: it goes to no other server.
		sa.dropToken(t)
		return errorf(ErrAuthorizationFailed, "the authorization server is no longer the one that issued the token")
	}
	client := givenClient(cfg, meta.asm)
	if client == nil {
		client = t.IssuedTo
	}
	if client == nil {
		client = stored
	}
	ca := sa.clientAuth(client)
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {t.RefreshToken}, "resource": {meta.resource}}
	sa.mu.Lock()
	dk, err := sa.dpopKeyLocked()
	sa.mu.Unlock()
	if err != nil {
		return err
	}
	nt, err := tokenRequest(ctx, sa.httpClients().any, meta.asm.TokenEndpoint, form, ca, meta.asm.Issuer, dk)
	if err != nil {
		if refusedGrant(err) {
			if sa.adoptStored(nil) {
				return nil // another mcpd renewed it meanwhile
			}
			sa.dropToken(t)
			sa.dropClientIfUnknown(client, err)
		}
		return err
	}
	if nt.RefreshToken == "" {
		nt.RefreshToken = t.RefreshToken // the server keeps the old one valid
	}
	if nt.Scopes == nil {
		nt.Scopes = t.Scopes
	}
	nt.IssuedTo = t.IssuedTo
	if issuer == "" {
		issuer = meta.asm.Issuer
	}
	if sa.setToken(nt, issuer, gen, t) {
		sa.m.log.Info().Str("server", sa.name).Msg("oauth token refreshed")
	}
	return nil
}

// refusedGrant reports a token endpoint's refusal of a grant (400 or 401:
// invalid_grant, invalid_client ...), after which the token is no use;
// other failures (unreachable, 429, 5xx) say nothing about it.
func refusedGrant(err error) bool {
	te, ok := errors.AsType[*tokenError](err)
	return ok && (te.Status == http.StatusBadRequest || te.Status == http.StatusUnauthorized)
}

// clientAuth returns how to authenticate the client to the token endpoint.
func (sa *serverAuth) clientAuth(c *clientRecord) clientAuth {
	ca := clientAuth{method: config.AuthMethodNone}
	if c != nil {
		ca.id, ca.secret, ca.method = c.ID, c.Secret, c.AuthMethod
	}
	sa.mu.Lock()
	cfg := sa.cfg
	sa.mu.Unlock()
	if cfg != nil {
		ca.keyFile, ca.alg = cfg.PrivateKeyFile, cfg.SigningAlgorithm
	}
	if ca.method == "" {
		ca.method = config.AuthMethodNone
		if ca.secret != "" {
			ca.method = config.AuthMethodClientSecretBasic
		}
	}
	return ca
}

// authorize acts on an answer that asks for authorization: status 401, or
// 403 with insufficient_scope (stepUp). sent is the token the refused
// request carried. It returns nil when the request may be sent again with
// a new token, and ErrAuthorizationRequired when a person must consent.
func (sa *serverAuth) authorize(ctx context.Context, challenges []oauthex.Challenge, sent *tokenRecord, stepUp bool) error {
	if err := sa.lockAuth(ctx); err != nil {
		return err
	}
	defer sa.unlockAuth()
	if cur := sa.token(); cur != nil && (sent == nil || cur.AccessToken != sent.AccessToken) {
		return nil // renewed by a concurrent request
	}
	if f := sa.pendingFlow(); f != nil {
		return sa.consentError()
	}
	if !stepUp && sa.adoptStored(nil) {
		return nil // another mcpd sharing the state directory has a token
	}
	if !stepUp && sent != nil && sent.RefreshToken != "" {
		err := sa.refresh(ctx, challenges)
		switch {
		case err == nil:
			return nil
		case sa.token() != nil:
			// The refresh did not reach a verdict (the authorization server
			// unreachable, a timeout, a 429): the token is kept for the
			// next try, and this request fails.
			return err
		}
		sa.m.log.Info().Str("server", sa.name).Msg("oauth refresh refused; authorizing again")
	}
	err := sa.authorizeLocked(ctx, challenges, sent, stepUp)
	if err != nil && !errors.Is(err, ErrAuthorizationRequired) && ctx.Err() == nil {
		sa.mu.Lock()
		sa.lastErr = err.Error()
		sa.refused = err.Error()
		sa.mu.Unlock()
	}
	return err
}

func (sa *serverAuth) authorizeLocked(ctx context.Context, challenges []oauthex.Challenge, sent *tokenRecord, stepUp bool) error {
	sa.mu.Lock()
	gen := sa.gen
	resource := sa.resource
	sa.mu.Unlock()
	meta, err := discover(ctx, sa.httpClients(), resource, challenges)
	if err != nil {
		return err
	}
	sa.mu.Lock()
	if sa.rec.Issuer != "" && sa.rec.Issuer != meta.asm.Issuer && meta.fallback {
		// No metadata could be read (a 429, a 404 from a cache): the
		// server's origin stands in for an authorization server, which
		// says nothing about a move. Nothing is dropped, and no person is
		// sent to the wrong server; the next request tries again.
		sa.mu.Unlock()
		return errorf(ErrUnreachable, "server %q: its resource metadata could not be read; its registration and tokens are kept", sa.name)
	}
	if sa.rec.Issuer != "" && sa.rec.Issuer != meta.asm.Issuer {
		// The resource moved to another authorization server (SEP-2352):
		// its client registration and tokens mean nothing there.
		sa.m.log.Info().Str("server", sa.name).Str("issuer", meta.asm.Issuer).Msg("authorization server changed; registering again")
		sa.rec.Client = nil
		sa.rec.Token = nil
		sa.rec.Issuer = ""
	}
	cfg := sa.cfg
	var granted []string
	if sent != nil {
		granted = sent.Scopes
	}
	sa.mu.Unlock()

	challenged := strings.Fields(challengeParam(challenges, "scope"))
	scopes := chooseScopes(cfg, meta, challenged)
	if stepUp {
		if len(challenged) > 0 && allIn(challenged, granted) {
			sa.mu.Lock()
			sa.stepUps++
			n := sa.stepUps
			sa.mu.Unlock()
			if n > maxStepUps-1 {
				return errorf(ErrAuthorizationFailed, "server %q refuses scope %q although it was granted; not asking again (ForgetAuthorization starts afresh)", sa.name, strings.Join(challenged, " "))
			}
		}
		// Keep what was granted before (SEP-2350).
		scopes = unionScopes(granted, scopes)
	}
	if grant := cfg.EffectiveGrant(); grant != config.GrantAuthorizationCode {
		t, err := sa.grantToken(ctx, grant, meta, scopes)
		if err != nil {
			return err
		}
		unlock := sa.m.lockStateToSave(ctx, sa.name)
		kept := sa.setToken(t, meta.asm.Issuer, gen, nil)
		unlock()
		if !kept {
			return errForgotten
		}
		sa.m.log.Info().Str("server", sa.name).Str("grant", grant).Msg("oauth token obtained")
		return nil
	}
	return sa.startFlow(ctx, meta, scopes, gen)
}

// chooseScopes picks the scopes to ask for: the configured ones (cfg may
// be nil), else the challenge's, else the resource's scopes_supported,
// else none; plus offline_access where the authorization server supports
// it (SEP-2207).
func chooseScopes(cfg *config.OAuth, meta *metadata, challenged []string) []string {
	var scopes []string
	switch {
	case cfg != nil && len(cfg.Scopes) > 0:
		scopes = slices.Clone(cfg.Scopes)
	case len(challenged) > 0:
		scopes = slices.Clone(challenged)
	default:
		scopes = slices.Clone(meta.scopesSupported)
	}
	offline := slices.Contains(meta.asm.ScopesSupported, "offline_access")
	if !offline {
		scopes = slices.DeleteFunc(scopes, func(s string) bool { return s == "offline_access" })
	} else if cfg.EffectiveGrant() == config.GrantAuthorizationCode && !slices.Contains(scopes, "offline_access") {
		scopes = append(scopes, "offline_access")
	}
	return scopes
}

func allIn(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

// consentError is the error of a request that waits for consent.
func (sa *serverAuth) consentError() error {
	return errorf(ErrAuthorizationRequired, "server %q needs authorization: open its authorization_url (GetServer) in a browser, or pass the URL the browser ends on to CompleteAuthorization", sa.name)
}

// dpopKey returns the server's DPoP key, or nil when it uses none.
func (sa *serverAuth) dpopKey() *dpopKey {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	if !sa.wantsDPoP() {
		return nil
	}
	return sa.dpop
}

// accepted notes a request the server accepted with a token: whatever
// refused authorization before no longer blocks the server, and when it
// is the request an insufficient_scope episode started with, the episode
// is over: the next one gets its own bounded step-ups. key is evaluated
// only during an episode.
func (sa *serverAuth) accepted(key func() string) {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	sa.refused = ""
	if sa.stepUpKey != "" && key() == sa.stepUpKey {
		sa.stepUps = 0
		sa.stepUpKey = ""
	}
}

// refusedScope notes the request a 403 insufficient_scope refused.
func (sa *serverAuth) refusedScope(key string) {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	sa.stepUpKey = key
}

// renewIfStale renews the token before it expires, unless a concurrent
// request did already: with its refresh token, else, for a grant that
// needs no person, by running the grant again (a workload token file is
// read anew then).
func (sa *serverAuth) renewIfStale(ctx context.Context, seen *tokenRecord) error {
	if err := sa.lockAuth(ctx); err != nil {
		return err
	}
	defer sa.unlockAuth()
	if cur := sa.token(); cur == nil || cur.AccessToken != seen.AccessToken {
		return nil
	}
	if seen.RefreshToken != "" {
		return sa.refresh(ctx, nil)
	}
	sa.mu.Lock()
	grant := sa.cfg.EffectiveGrant()
	sa.mu.Unlock()
	if grant == config.GrantAuthorizationCode {
		return errorf(ErrAuthorizationFailed, "no refresh token")
	}
	return sa.authorizeLocked(ctx, nil, seen, false)
}

// newState returns an unguessable state parameter.
func newState() string { return rand.Text() }

// pkce returns a verifier and its S256 challenge.
func pkce() (verifier, challenge string) {
	v := oauth2.GenerateVerifier()
	return v, oauth2.S256ChallengeFromVerifier(v)
}

// lockAuth takes authSem, or gives up when ctx ends.
func (sa *serverAuth) lockAuth(ctx context.Context) error {
	select {
	case sa.authSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (sa *serverAuth) unlockAuth() { <-sa.authSem }
