package oauth

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpd-project/mcpd/internal/config"
)

// flow is one authorization code grant waiting for a person's consent.
type flow struct {
	sa       *serverAuth
	state    string
	verifier string
	authURL  string
	redirect string
	client   *clientRecord
	meta     *metadata
	expires  time.Time
	done     chan struct{}
	timer    *time.Timer
	// watch looks in the state directory for another mcpd's token (see
	// checkStored); nil without a state directory.
	watch *time.Timer

	once       sync.Once
	completing sync.Mutex // one completion at a time; the first wins
	completed  bool
	gen        uint64 // the serverAuth's gen when the flow began
}

// errForgotten ends an authorization that ForgetAuthorization overtook.
var errForgotten = errorf(ErrAuthorizationFailed, "authorization was forgotten")

func (f *flow) finish() {
	f.once.Do(func() {
		f.timer.Stop()
		if f.watch != nil {
			f.watch.Stop()
		}
		f.sa.m.removeFlow(f)
		close(f.done)
	})
}

// startFlow registers the client if needed, builds the authorization URL
// and makes the flow pending. It returns the ErrAuthorizationRequired the
// refused request fails with.
func (sa *serverAuth) startFlow(ctx context.Context, meta *metadata, scopes []string, gen uint64) error {
	redirect := sa.m.redirect()
	if redirect == "" {
		return errorf(ErrAuthorizationFailed, "server %q needs a person's consent, but mcpd has no redirect listener (see --oauth-redirect-addr)", sa.name)
	}
	client, tookIn, err := sa.ensureClient(ctx, meta, redirect, gen)
	if err != nil {
		return err
	}
	if tookIn && sa.holdsScopes(scopes) {
		// Its save took in a token another mcpd obtained meanwhile (a
		// person consented there): nobody needs asking again.
		return nil
	}
	verifier, challenge := pkce()
	state := newState()
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {client.ID},
		"redirect_uri":          {redirect},
		"state":                 {state},
		"code_challenge":        {challenge},
		"code_challenge_method": {"S256"},
		"resource":              {meta.resource},
	}
	if len(scopes) > 0 {
		q.Set("scope", strings.Join(scopes, " "))
	}
	authURL := meta.asm.AuthorizationEndpoint
	if strings.Contains(authURL, "?") {
		authURL += "&" + q.Encode()
	} else {
		authURL += "?" + q.Encode()
	}
	f := &flow{
		sa:       sa,
		state:    state,
		verifier: verifier,
		authURL:  authURL,
		redirect: redirect,
		client:   client,
		meta:     meta,
		expires:  time.Now().Add(sa.m.opts.FlowTTL),
		done:     make(chan struct{}),
		gen:      gen,
	}
	f.timer = time.AfterFunc(sa.m.opts.FlowTTL, func() {
		if sa.endFlowIf(f, errorf(ErrAuthorizationFailed, "the authorization was not completed within %v", sa.m.opts.FlowTTL)) {
			sa.m.changed(sa.name)
		}
	})
	if sa.m.store.dir != "" {
		// Set before the flow is seen (finish stops it), armed after.
		f.watch = time.AfterFunc(time.Hour, f.checkStored)
		f.watch.Reset(sa.m.opts.StoredPoll)
	}
	sa.mu.Lock()
	if sa.gen != gen {
		sa.mu.Unlock()
		f.finish() // never seen: its timers stop, and a late look ends at done
		return errForgotten
	}
	sa.pending = f
	sa.mu.Unlock()
	sa.m.addFlow(f)
	sa.m.log.Info().Str("server", sa.name).Str("issuer", meta.asm.Issuer).Time("expires", f.expires).Msg("server needs authorization")
	sa.m.changed(sa.name)
	return sa.consentError()
}

// checkStored ends f as completed when another mcpd sharing the state
// directory saved a token for the server meanwhile that has every scope f
// asks for (a person consented there), so that nobody is asked a second
// time; else it looks again after StoredPoll, until f ends. It skips a
// turn while a request of the server authorizes or refreshes (adoptStored
// takes authSem's turn) or the redirect of f is being completed.
func (f *flow) checkStored() {
	sa := f.sa
	select {
	case <-f.done:
		return
	default:
	}
	if f.completing.TryLock() {
		adopted := false
		if !f.completed {
			select {
			case sa.authSem <- struct{}{}:
				adopted = sa.adoptStored(f.satisfiedBy)
				sa.unlockAuth()
			default:
			}
		}
		if adopted {
			f.completed = true // a redirect coming later finds it done
			if sa.endFlowIf(f, nil) {
				sa.m.changed(sa.name)
			}
		}
		f.completing.Unlock()
		if adopted {
			return
		}
	}
	f.watch.Reset(sa.m.opts.StoredPoll)
}

// satisfiedBy reports whether a record another mcpd saved ends f: f is
// still the server's pending consent, begun since the last
// ForgetAuthorization, and the record's token has every scope f asks for
// (offline_access asks for a refresh token, not a scope of the token). A
// step-up's scopes include those of the token it adds to. sa.mu is held.
func (f *flow) satisfiedBy(disk *record) bool {
	sa := f.sa
	if sa.pending != f || sa.gen != f.gen {
		return false
	}
	return hasScopes(disk.Token, scopesOf(f.authURL))
}

// holdsScopes reports whether the record holds a token with every scope
// of scopes.
func (sa *serverAuth) holdsScopes(scopes []string) bool {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	return sa.rec.Token != nil && hasScopes(sa.rec.Token, scopes)
}

// hasScopes reports whether t has every scope of scopes; offline_access
// asks for a refresh token, not a scope of the token.
func hasScopes(t *tokenRecord, scopes []string) bool {
	for _, scope := range scopes {
		if scope != "offline_access" && !slices.Contains(t.Scopes, scope) {
			return false
		}
	}
	return true
}

// endFlowIf ends the pending flow if it is still f.
func (sa *serverAuth) endFlowIf(f *flow, err error) bool {
	sa.mu.Lock()
	if sa.pending != f {
		sa.mu.Unlock()
		return false
	}
	sa.mu.Unlock()
	return sa.endFlow(err)
}

// givenClient is the client the config names for asm: credentials from
// the config, else a Client ID Metadata Document the server takes; nil
// when mcpd registers one itself.
func givenClient(cfg *config.OAuth, asm *oauthex.AuthServerMeta) *clientRecord {
	if c := configuredClient(cfg, asm.TokenEndpointAuthMethodsSupported); c != nil {
		return c
	}
	if cfg != nil && cfg.ClientMetadataURL != "" && asm.ClientIDMetadataDocumentSupported {
		return &clientRecord{ID: cfg.ClientMetadataURL, AuthMethod: config.AuthMethodNone, How: "metadata-document"}
	}
	return nil
}

// ensureClient returns the client to authorize as, in the order the issue
// of registration takes: credentials from the config, then a Client ID
// Metadata Document, then a registration made before (for the same
// redirect URL), then Dynamic Client Registration.
func (sa *serverAuth) ensureClient(ctx context.Context, meta *metadata, redirect string, gen uint64) (c *clientRecord, tookIn bool, err error) {
	sa.mu.Lock()
	cfg := sa.cfg
	stored := sa.rec.Client
	sa.mu.Unlock()
	asm := meta.asm
	if given := givenClient(cfg, asm); given != nil {
		return given, false, nil
	}
	// A registration whose secret expires before a consent could end is
	// made again: the code exchange would be refused, the consent lost.
	if stored != nil && stored.How == "dynamic" && stored.RedirectURI == redirect && !stored.secretExpiresWithin(sa.m.opts.FlowTTL) {
		return stored, false, nil
	}
	if asm.RegistrationEndpoint == "" {
		return nil, false, errorf(ErrAuthorizationFailed, "the authorization server of %q offers no client registration; configure oauth.clientId", sa.name)
	}
	method := ""
	if cfg != nil {
		method = cfg.AuthMethod
	}
	if method == "" {
		method = chooseAuthMethod(asm.TokenEndpointAuthMethodsSupported, false)
	}
	req := &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{redirect},
		TokenEndpointAuthMethod: method,
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		ClientName:              sa.m.opts.ClientName,
		ApplicationType:         "native",
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := oauthex.RegisterClient(rctx, asm.RegistrationEndpoint, req, sa.httpClients().any)
	if err != nil {
		return nil, false, registrationError(err)
	}
	c = &clientRecord{ID: resp.ClientID, Secret: resp.ClientSecret, AuthMethod: resp.TokenEndpointAuthMethod, RedirectURI: redirect, How: "dynamic",
		SecretExpires: resp.ClientSecretExpiresAt}
	if c.AuthMethod == "" {
		c.AuthMethod = method
		if c.Secret != "" && method == config.AuthMethodNone {
			c.AuthMethod = config.AuthMethodClientSecretBasic // RFC 7591's default
		}
	}
	unlock := sa.m.lockStateToSave(ctx, sa.name)
	unreadable := false
	kept, tookIn := sa.saveChange(func() bool {
		if sa.gen != gen {
			return false
		}
		if sa.rec.Issuer != "" && sa.rec.Issuer != asm.Issuer {
			// Taken in from another mcpd, and of another authorization
			// server. Without the resource's metadata that says nothing
			// about a move (see authorizeLocked); with it, the resource
			// moved, and the refresh token goes to no other server.
			if meta.fallback {
				unreadable = true
				return false
			}
			sa.rec.Token = nil
		}
		sa.rec.Client = c
		sa.rec.Issuer = asm.Issuer
		return true
	})
	unlock()
	switch {
	case unreadable:
		return nil, false, errorf(ErrUnreachable, "server %q: its resource metadata could not be read; its registration and tokens are kept", sa.name)
	case !kept:
		return nil, false, errForgotten
	}
	sa.m.log.Info().Str("server", sa.name).Str("issuer", asm.Issuer).Msg("oauth client registered")
	return c, tookIn, nil
}

// chooseAuthMethod picks a token endpoint authentication method the
// server supports: a public client's none where it can, else the secret
// methods RFC 7591 names, basic first (its default).
func chooseAuthMethod(supported []string, haveSecret bool) string {
	order := []string{config.AuthMethodNone, config.AuthMethodClientSecretBasic, config.AuthMethodClientSecretPost}
	if haveSecret {
		order = []string{config.AuthMethodClientSecretBasic, config.AuthMethodClientSecretPost, config.AuthMethodNone}
	}
	for _, m := range order {
		for _, s := range supported {
			if s == m {
				return m
			}
		}
	}
	if haveSecret {
		return config.AuthMethodClientSecretBasic
	}
	return config.AuthMethodNone
}

// complete exchanges the code in a redirect's parameters for a token.
func (f *flow) complete(ctx context.Context, params url.Values) error {
	sa := f.sa
	if params.Get("state") != f.state {
		return errorf(ErrInvalidRedirect, "the redirect's state does not match the pending authorization of %q", sa.name)
	}
	f.completing.Lock()
	defer f.completing.Unlock()
	if f.completed {
		return errorf(ErrNoPendingAuthorization, "the authorization of %q was already completed", sa.name)
	}
	select {
	case <-f.done:
		return errorf(ErrNoPendingAuthorization, "the authorization of %q ended", sa.name)
	default:
	}
	fail := func(err error) error {
		f.completed = true
		if sa.endFlowIf(f, err) {
			sa.m.log.Warn().Str("server", sa.name).Err(err).Msg("authorization failed")
			sa.m.changed(sa.name)
		}
		return err
	}
	if e := params.Get("error"); e != "" {
		msg := "the authorization server answered " + e
		if d := params.Get("error_description"); d != "" {
			msg += ": " + d
		}
		return fail(errorf(ErrAuthorizationFailed, "%s", msg))
	}
	// RFC 9207: where the server promises iss, it must come and match;
	// where it does not, an iss that comes must still match. Compared as
	// strings, without normalization.
	asm := f.meta.asm
	iss, hasIss := params["iss"]
	switch {
	case hasIss && (len(iss) != 1 || iss[0] != asm.Issuer):
		return fail(errorf(ErrAuthorizationFailed, "the redirect's iss does not match the authorization server %q", asm.Issuer))
	case !hasIss && asm.AuthorizationResponseIssParameterSupported:
		return fail(errorf(ErrAuthorizationFailed, "the authorization server %q promises an iss parameter, but the redirect has none", asm.Issuer))
	}
	code := params.Get("code")
	if code == "" {
		return errorf(ErrInvalidRedirect, "the redirect URL has no code")
	}
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {f.redirect},
		"code_verifier": {f.verifier},
		"resource":      {f.meta.resource},
	}
	sa.mu.Lock()
	dk, err := sa.dpopKeyLocked()
	sa.mu.Unlock()
	if err != nil {
		return fail(err)
	}
	t, err := tokenRequest(ctx, sa.httpClients().any, asm.TokenEndpoint, form, sa.clientAuth(f.client), asm.Issuer, dk)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnreachable) {
			// The flow stays pending: the caller went away, or the token
			// endpoint was not reached, and the code may still be good.
			return err
		}
		unlock := sa.m.lockStateToSave(ctx, sa.name)
		sa.dropClientIfUnknown(f.client, err)
		unlock()
		return fail(err)
	}
	if t.Scopes == nil {
		t.Scopes = scopesOf(f.authURL)
	}
	issuedTo := *f.client
	t.IssuedTo = &issuedTo
	f.completed = true
	unlock := sa.m.lockStateToSave(ctx, sa.name)
	kept := sa.setToken(t, asm.Issuer, f.gen, nil)
	unlock()
	if !kept {
		return fail(errForgotten)
	}
	sa.endFlowIf(f, nil)
	sa.m.log.Info().Str("server", sa.name).Msg("server authorized")
	sa.m.changed(sa.name)
	return nil
}

// scopesOf returns the scopes an authorization URL asked for: the granted
// ones when the token response does not say.
func scopesOf(authURL string) []string {
	u, err := url.Parse(authURL)
	if err != nil {
		return nil
	}
	return strings.Fields(u.Query().Get("scope"))
}

// redirectParams parses the URL a browser was redirected to.
func redirectParams(raw string) (url.Values, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.RawQuery == "" {
		return nil, errorf(ErrInvalidRedirect, "redirect_url must be the full URL the browser ended on, with its query (code and state)")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, errorf(ErrInvalidRedirect, "redirect_url has a malformed query")
	}
	if q.Get("state") == "" {
		return nil, errorf(ErrInvalidRedirect, "redirect_url has no state parameter")
	}
	return q, nil
}

// registrationError describes a failed registration without quoting the
// authorization server's answer: the SDK's errors carry the response body,
// which, for a 201 it could not decode, holds the issued client secret.
func registrationError(err error) error {
	if re, ok := errors.AsType[*oauthex.ClientRegistrationError](err); ok {
		return errorf(ErrAuthorizationFailed, "dynamic client registration refused: %s", re.Error())
	}
	if ctxErr := errors.Unwrap(err); ctxErr != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return &kindError{kind: ErrUnreachable, msg: "dynamic client registration: " + ctxErr.Error(), cause: err}
	}
	return errorf(ErrAuthorizationFailed, "dynamic client registration failed (the authorization server's answer is not quoted)")
}
