package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"
)

// TestRefreshAsTheClientTheTokenWasIssuedTo: mcpd restarted with another
// redirect URL (the default listener port is a free one) registers a new
// client for a step-up consent. The person declines it; the token of the
// first consent must still be refreshed as the client it was issued to,
// not the newer registration (which the authorization server refuses:
// the token is dropped and a person asked again).
func TestRefreshAsTheClientTheTokenWasIssuedTo(t *testing.T) {
	as := newTestAS(t)
	dir := t.TempDir()
	m := newManager(t, dir)
	c := client(m, as, nil)
	authorize(t, m, c, as)

	// A restart: the redirect listener has another port.
	m2 := newManager(t, dir)
	m2.SetRedirectURL("http://127.0.0.1:2" + CallbackPath)
	c2 := client(m2, as, nil)
	as.mu.Lock()
	as.needScope = "write"
	as.mu.Unlock()
	if _, err := post(t, c2, as); !errors.Is(err, ErrAuthorizationRequired) {
		t.Fatalf("request needing write: got %v, want ErrAuthorizationRequired", err)
	}
	p, ok := m2.Pending("srv")
	if !ok {
		t.Fatal("no step-up consent pending")
	}
	u, _ := url.Parse(p.URL)
	if got := u.Query().Get("client_id"); got == "dyn-client" {
		t.Fatalf("step-up consent as %q, want a new registration for the new redirect URL", got)
	}
	// The person declines.
	declined := "http://127.0.0.1:2" + CallbackPath + "?" + url.Values{"error": {"access_denied"}, "state": {u.Query().Get("state")}, "iss": {as.srv.URL}}.Encode()
	if err := m2.Complete(context.Background(), "srv", declined); !errors.Is(err, ErrAuthorizationFailed) {
		t.Fatalf("declined consent: got %v, want ErrAuthorizationFailed", err)
	}

	// The access token expires: the resource no longer takes it.
	as.mu.Lock()
	as.needScope = ""
	clear(as.tokens)
	as.mu.Unlock()
	if resp, err := post(t, c2, as); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("request after the token expired: got %v %v, want 200 with a refreshed token", resp, err)
	}
	as.mu.Lock()
	by := slices.Clone(as.refreshedBy)
	as.mu.Unlock()
	if !slices.Equal(by, []string{"dyn-client"}) {
		t.Errorf("refreshes came from %q, want one, from dyn-client, the client the token was issued to", by)
	}
}

// TestUnknownClientRegistersAgain: an authorization server that deleted
// mcpd's dynamic registration refuses its refresh with invalid_client.
// The consent that follows must be for a new registration: one for the
// deleted client fails at the authorization server, every time, until
// ForgetAuthorization.
func TestUnknownClientRegistersAgain(t *testing.T) {
	as := newTestAS(t)
	m := newManager(t, t.TempDir())
	c := client(m, as, nil)
	authorize(t, m, c, as)
	as.mu.Lock()
	as.unknownClient = "dyn-client"
	clear(as.tokens) // the access token expired
	as.mu.Unlock()
	if _, err := post(t, c, as); !errors.Is(err, ErrAuthorizationRequired) {
		t.Fatalf("request after the client was deleted: got %v, want ErrAuthorizationRequired", err)
	}
	p, ok := m.Pending("srv")
	if !ok {
		t.Fatal("no consent pending")
	}
	u, _ := url.Parse(p.URL)
	if got := u.Query().Get("client_id"); got == "dyn-client" {
		t.Errorf("consent asks for the deleted client %q, want a new registration", got)
	}
	if err := m.Complete(context.Background(), "srv", consent(t, m)); err != nil {
		t.Fatal(err)
	}
	if resp, err := post(t, c, as); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("request after the new consent: got %v %v, want 200", resp, err)
	}
}

// TestUnknownClientAtCodeExchange: a code exchange refused invalid_client
// (the registration deleted while the person consented) fails the
// consent, and the next one registers again.
func TestUnknownClientAtCodeExchange(t *testing.T) {
	as := newTestAS(t)
	m := newManager(t, t.TempDir())
	c := client(m, as, nil)
	_, _ = post(t, c, as)
	as.mu.Lock()
	as.unknownClient = "dyn-client"
	as.mu.Unlock()
	if err := m.Complete(context.Background(), "srv", consent(t, m)); !errors.Is(err, ErrAuthorizationFailed) {
		t.Fatalf("Complete for a deleted client: got %v, want ErrAuthorizationFailed", err)
	}
	if _, err := post(t, c, as); !errors.Is(err, ErrAuthorizationRequired) {
		t.Fatalf("next request: got %v, want ErrAuthorizationRequired", err)
	}
	p, _ := m.Pending("srv")
	u, _ := url.Parse(p.URL)
	if got := u.Query().Get("client_id"); got == "dyn-client" {
		t.Errorf("consent asks for the deleted client %q, want a new registration", got)
	}
}

// TestExpiringSecretRegistersAgain: a consent for a dynamic registration
// whose secret expires before the consent could end (client_secret_
// expires_at) is for a new registration; the code exchange with the
// expired secret would be refused, and the person's consent lost. A
// secret that lasts is kept.
func TestExpiringSecretRegistersAgain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		expiresIn time.Duration
		want      string
	}{
		{"expires within a consent's time", 5 * time.Minute, "dyn-client-2"},
		{"lasts", time.Hour, "dyn-client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := newTestAS(t)
			as.secretExpiresIn = tc.expiresIn
			m := newManager(t, t.TempDir()) // a consent has 10 minutes
			c := client(m, as, nil)
			authorize(t, m, c, as)
			as.mu.Lock()
			clear(as.tokens) // revoked: the next request needs a consent
			clear(as.refresh)
			as.mu.Unlock()
			if _, err := post(t, c, as); !errors.Is(err, ErrAuthorizationRequired) {
				t.Fatalf("request with revoked tokens: got %v, want ErrAuthorizationRequired", err)
			}
			p, ok := m.Pending("srv")
			if !ok {
				t.Fatal("no consent pending")
			}
			u, _ := url.Parse(p.URL)
			if got := u.Query().Get("client_id"); got != tc.want {
				t.Errorf("consent for client %q, want %q", got, tc.want)
			}
			if err := m.Complete(context.Background(), "srv", consent(t, m)); err != nil {
				t.Fatal(err)
			}
			if resp, err := post(t, c, as); err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("request after the consent: got %v %v, want 200", resp, err)
			}
		})
	}
}
