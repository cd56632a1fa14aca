package mcpclient

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/oauth"
)

// A remote server that needs a person's consent is held in
// StateAuthorizationRequired until the consent ends (internal/oauth owns
// the flow): its session is closed, calls fail at once, agents registered
// for KindAuthorization are asked, and a consent that succeeds starts a
// new session with the new token.

// pendingAuthorization returns the consent the server waits for, if any.
func (u *upstream) pendingAuthorization() (oauth.Pending, bool) {
	if u.opts.OAuth == nil || u.cfg.Kind == config.TransportStdio {
		return oauth.Pending{}, false
	}
	return u.opts.OAuth.Pending(u.cfg.Name)
}

// authBlocked returns why the server's authorization keeps it from being
// used, or nil (see oauth.Manager.Blocked).
func (u *upstream) authBlocked() error {
	if u.opts.OAuth == nil || u.cfg.Kind == config.TransportStdio {
		return nil
	}
	if err := u.opts.OAuth.Blocked(u.cfg.Name); err != nil {
		return errorf(ErrAuthorizationRequired, "%v", err)
	}
	return nil
}

// awaitAuthorization holds the server in StateAuthorizationRequired until
// the pending consent ends or the run stops. It reports whether the run
// goes on connecting: the consent succeeded, or was replaced by another.
// A consent that failed or expired leaves the server FAILED.
func (u *upstream) awaitAuthorization(r *run, p oauth.Pending, settle func()) bool {
	u.setState(StateAuthorizationRequired, "server needs authorization: open its authorization_url, or complete it with CompleteAuthorization")
	settle()
	ctx, cancel := context.WithCancel(r.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { u.askAgent(ctx, p) })
	defer func() {
		cancel()
		wg.Wait()
	}()
	select {
	case <-p.Done:
	case <-r.ctx.Done():
		return false
	}
	if _, again := u.pendingAuthorization(); again {
		return true
	}
	if msg := u.opts.OAuth.LastError(u.cfg.Name); msg != "" {
		u.setState(StateFailed, "authorization: "+msg)
		return false
	}
	u.setState(StateConnecting, "")
	return true
}

// askAgent hands the consent to the newest agent registered for
// KindAuthorization. An agent that answers with the URL the browser ended
// on completes the consent; one that answers empty has shown the URL to
// a person, and the redirect will come to mcpd's redirect listener.
func (u *upstream) askAgent(ctx context.Context, p oauth.Pending) {
	if u.opts.Requests == nil {
		return
	}
	ctx, cancel := context.WithDeadline(ctx, p.Expires)
	defer cancel()
	reply, err := u.opts.Requests.ask(ctx, &ServerRequest{
		Server:        u.cfg.Name,
		Kind:          KindAuthorization,
		Authorization: &AuthorizationRequest{URL: p.URL, Expires: p.Expires},
	})
	if err != nil || reply.Authorization == nil || reply.Authorization.RedirectURL == "" {
		return
	}
	if err := u.opts.OAuth.Complete(ctx, u.cfg.Name, reply.Authorization.RedirectURL); err != nil {
		u.log.Warn().Err(err).Msg("the agent's redirect URL did not complete the authorization")
	}
}

// authorizationChanged wakes the run of a server whose consent started,
// so that it leaves READY.
func (u *upstream) authorizationChanged() {
	select {
	case u.authWake <- struct{}{}:
	default:
	}
}

// AuthorizationRequest is a consent a server needs, handed to an agent.
type AuthorizationRequest struct {
	// URL is the authorization URL to open in a browser.
	URL string
	// Expires is when mcpd stops waiting for the consent.
	Expires time.Time
}

// AuthorizationReply is an agent's answer to an AuthorizationRequest.
type AuthorizationReply struct {
	// RedirectURL, if set, is the URL the browser ended on; empty means
	// the redirect reaches mcpd's own listener.
	RedirectURL string
}

// AuthorizationChanged tells the Manager that server's authorization
// changed (internal/oauth calls it when a consent starts or ends).
func (m *Manager) AuthorizationChanged(server string) {
	if u, err := m.lookup(server); err == nil {
		u.authorizationChanged()
	}
}

// CompleteAuthorization finishes the pending consent of server with the
// URL the browser was redirected to.
func (m *Manager) CompleteAuthorization(ctx context.Context, server, redirectURL string) (Status, error) {
	u, err := m.lookup(server)
	if err != nil {
		return Status{}, err
	}
	if m.opts.OAuth == nil {
		return Status{}, errorf(ErrAuthorizationRequired, "server %q waits for no authorization", server)
	}
	if err := m.opts.OAuth.Complete(ctx, server, redirectURL); err != nil {
		return Status{}, oauthError(err)
	}
	return u.status(), nil
}

// ForgetAuthorization deletes server's tokens and client registration;
// its next request that the server refuses asks for consent again.
func (m *Manager) ForgetAuthorization(ctx context.Context, server string) error {
	if _, err := m.lookup(server); err != nil {
		// A server since disconnected keeps its tokens for the next time
		// it is connected: they can be forgotten all the same.
		if m.opts.OAuth == nil || !m.opts.OAuth.Stored(server) {
			return err
		}
	}
	if m.opts.OAuth == nil {
		return nil
	}
	return oauthError(m.opts.OAuth.Forget(server))
}

// oauthError gives an error of internal/oauth this package's kind.
func oauthError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, oauth.ErrInvalidRedirect):
		return errorf(ErrInvalidArgument, "%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, oauth.ErrUnreachable):
		return errorf(ErrUnavailable, "%v (the authorization is still pending: try again)", err)
	case errors.Is(err, oauth.ErrStore):
		return errorf(ErrFailedPrecondition, "%v", err)
	case errors.Is(err, oauth.ErrAuthorizationRequired),
		errors.Is(err, oauth.ErrNoPendingAuthorization),
		errors.Is(err, oauth.ErrAuthorizationFailed):
		return errorf(ErrAuthorizationRequired, "%v", err)
	}
	return err
}
