package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpd-project/mcpd/internal/config"
)

// TestRegistrationSecretNotEchoed: an authorization server whose
// registration answer mcpd cannot decode (here a fractional
// client_id_issued_at, as Python's time.time() gives) must not have the
// client secret it issued quoted in the error, last_error and the log.
func TestRegistrationSecretNotEchoed(t *testing.T) {
	const secret = "DCR-SECRET-do-not-echo"
	var srv *httptest.Server
	mux := http.NewServeMux()
	srv = httptest.NewServer(mux)
	defer srv.Close()
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"resource": srv.URL + "/mcp", "authorization_servers": []string{srv.URL}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{
			"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize", "token_endpoint": srv.URL + "/token",
			"registration_endpoint": srv.URL + "/register", "response_types_supported": []string{"code"},
			"code_challenge_methods_supported": []string{"S256"},
		})
	})
	mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"client_id":"c1","client_secret":"` + secret + `","client_id_issued_at":1718000000.25,"client_secret_expires_at":0}`))
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
		w.WriteHeader(http.StatusUnauthorized)
	})
	m := newManager(t, t.TempDir())
	c := &http.Client{Transport: m.Transport("srv", srv.URL+"/mcp", nil, http.DefaultTransport, nil)}
	_, err := c.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	if err == nil || !errors.Is(err, ErrAuthorizationFailed) {
		t.Fatalf("got %v, want ErrAuthorizationFailed", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("the request's error quotes the client secret: %v", err)
	}
	if le := m.LastError("srv"); strings.Contains(le, secret) {
		t.Errorf("LastError (Server.last_error) quotes the client secret: %q", le)
	}
}

// recordingRT records the hosts requested and forwards loopback ones.
type recordingRT struct {
	mu    chan struct{}
	hosts []string
}

func (r *recordingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu <- struct{}{}
	r.hosts = append(r.hosts, req.URL.Host)
	<-r.mu
	if strings.HasPrefix(req.URL.Host, "127.0.0.1") {
		return http.DefaultTransport.RoundTrip(req)
	}
	return &http.Response{StatusCode: http.StatusNotFound, Body: http.NoBody, Request: req, Header: http.Header{}}, nil
}

// TestResourceMetadataStaysPublic: the resource_metadata URL of a
// server's challenge, off the server's own origin, is not fetched when it
// names a non-public address (cloud metadata, RFC 1918): the server could
// otherwise make mcpd request them.
func TestResourceMetadataStaysPublic(t *testing.T) {
	for _, target := range []string{
		"https://169.254.169.254/latest/meta-data/iam/security-credentials/",
		"https://10.1.2.3/admin",
	} {
		t.Run(target, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+target+`"`)
				w.WriteHeader(http.StatusUnauthorized)
			}))
			defer srv.Close()
			rec := &recordingRT{mu: make(chan struct{}, 1)}
			m, err := New(&Options{HTTPClient: &http.Client{Transport: rec}})
			if err != nil {
				t.Fatal(err)
			}
			m.SetRedirectURL("http://127.0.0.1:1" + CallbackPath)
			c := &http.Client{Transport: m.Transport("srv", srv.URL+"/mcp", nil, http.DefaultTransport, nil)}
			_, _ = c.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{}`))
			for _, h := range rec.hosts {
				if !strings.HasPrefix(h, "127.0.0.1") {
					t.Errorf("mcpd sent a request to %s, named by the server's challenge; want non-public addresses refused", h)
				}
			}
		})
	}
}

// TestAuthorizeWaitEndsWithDeadline: a request that waits for another
// request's authorization (discovery and token requests of up to 30 s
// each) gives up at its own deadline.
func TestAuthorizeWaitEndsWithDeadline(t *testing.T) {
	as := newTestAS(t)
	m, net, cfg := heldTokenManager(t, "")
	c := client(m, as, cfg)
	first := make(chan struct{})
	go func() {
		defer close(first)
		_, _ = post(t, c, as) // its authorization waits at the token endpoint until the end
	}()
	<-net.held
	defer func() { close(net.release); <-first }()

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, as.srv.URL+"/mcp", strings.NewReader(`{"ping":2}`))
	done := make(chan error, 1)
	go func() {
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the waiting request: got %v, want its deadline exceeded", err)
		}
	case <-time.After(20 * time.Second): // a hang guard, not a measure
		t.Fatal("the waiting request outlived its deadline while the other authorization went on")
	}
}

// TestURLChangeDuringTokenRequest: a token that a request for a server's
// old URL obtains after the URL changed (a reload, ConnectServer with
// replace) is not kept for the new URL, whose origin it would go to.
func TestURLChangeDuringTokenRequest(t *testing.T) {
	as := newTestAS(t)
	m, net, cfg := heldTokenManager(t, "")
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = post(t, client(m, as, cfg), as)
	}()
	<-net.held
	// The server is replaced: same name, another host.
	var sawAuth string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAuth = r.Header.Get("Authorization")
	}))
	defer other.Close()
	c2 := &http.Client{Transport: m.Transport("srv", other.URL+"/mcp", cfg, http.DefaultTransport, nil)}
	close(net.release)
	<-done
	resp, err := c2.Post(other.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	if err == nil {
		resp.Body.Close()
	}
	if sawAuth != "" {
		t.Errorf("the new server %s got %q, a token obtained for %s/mcp", other.URL, sawAuth, as.srv.URL)
	}
}

// TestRateLimitedMetadataKeepsRefreshToken: a 429 on the resource's
// metadata while a token is refreshed keeps the refresh token, as the docs
// promise: the next refresh works, with no new consent (the issuer of a
// fallback to the server's origin once replaced the real one, and the
// token went).
func TestRateLimitedMetadataKeepsRefreshToken(t *testing.T) {
	var limited atomic.Bool
	var (
		mu     sync.Mutex
		access = map[string]bool{}
		rts    = map[string]bool{}
		n      int
	)
	issue := func(w http.ResponseWriter) {
		mu.Lock()
		n++
		at, rt := fmt.Sprintf("at-%d", n), fmt.Sprintf("rt-%d", n)
		access[at], rts[rt] = true, true
		mu.Unlock()
		writeJSON(w, map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": 1, "refresh_token": rt})
	}
	asMux := http.NewServeMux()
	as := httptest.NewServer(asMux)
	defer as.Close()
	asMux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": as.URL, "authorization_endpoint": as.URL + "/authorize", "token_endpoint": as.URL + "/token",
			"registration_endpoint": as.URL + "/register", "code_challenge_methods_supported": []string{"S256"}})
	})
	asMux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		writeJSON(w, map[string]any{"client_id": "dyn", "token_endpoint_auth_method": "none"})
	})
	asMux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		u, _ := url.Parse(r.URL.Query().Get("redirect_uri"))
		u.RawQuery = url.Values{"code": {"c"}, "state": {r.URL.Query().Get("state")}}.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	})
	asMux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.PostForm.Get("grant_type") == "refresh_token" {
			mu.Lock()
			ok := rts[r.PostForm.Get("refresh_token")]
			delete(rts, r.PostForm.Get("refresh_token"))
			mu.Unlock()
			if !ok {
				w.WriteHeader(http.StatusBadRequest)
				writeJSON(w, map[string]any{"error": "invalid_grant"})
				return
			}
		}
		issue(w)
	})
	rs := newLimitedResource(t, as.URL, &limited, func(w http.ResponseWriter, r *http.Request, challenge func()) {
		if r.URL.Path != "/mcp" {
			http.NotFound(w, r)
			return
		}
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		mu.Lock()
		ok := access[tok]
		mu.Unlock()
		if !ok {
			challenge()
		}
	})
	m := newManager(t, t.TempDir())
	postRS := rs.poster(m, nil)
	_ = postRS()
	if err := m.Complete(context.Background(), "srv", consent(t, m)); err != nil {
		t.Fatal(err)
	}
	if err := postRS(); err != nil { // refreshes (expires_in 1): fine
		t.Fatal(err)
	}
	limited.Store(true) // a rate limit on the metadata, for one refresh
	_ = postRS()
	limited.Store(false)
	if err := postRS(); errors.Is(err, ErrAuthorizationRequired) {
		t.Errorf("after one 429 on the resource metadata: got %v; want the refresh token kept and no new consent", err)
	}
}

// TestRateLimitedMetadataKeepsTheIssuer: a token refused while the
// resource's metadata answers 429 sends nothing to the server's origin as
// if it were the authorization server: no client secret of a
// client_credentials grant goes there, and the registration stays.
func TestRateLimitedMetadataKeepsTheIssuer(t *testing.T) {
	var limited, revoked atomic.Bool
	var originToken atomic.Int32 // requests to the resource server's own /token
	asMux := http.NewServeMux()
	as := httptest.NewServer(asMux)
	defer as.Close()
	asMux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": as.URL, "authorization_endpoint": as.URL + "/authorize", "token_endpoint": as.URL + "/token", "code_challenge_methods_supported": []string{"S256"}})
	})
	asMux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 3600})
	})
	rs := newLimitedResource(t, as.URL, &limited, func(w http.ResponseWriter, r *http.Request, challenge func()) {
		switch r.URL.Path {
		case "/token":
			originToken.Add(1)
			http.NotFound(w, r)
		case "/mcp":
			if r.Header.Get("Authorization") != "Bearer at" || revoked.Load() {
				challenge()
			}
		default:
			http.NotFound(w, r)
		}
	})
	m := newManager(t, t.TempDir())
	postRS := rs.poster(m, &config.OAuth{Grant: config.GrantClientCredentials, ClientID: "svc", ClientSecret: "s3cret"})
	if err := postRS(); err != nil {
		t.Fatal(err)
	}
	limited.Store(true)
	revoked.Store(true)
	if err := postRS(); !errors.Is(err, ErrUnreachable) {
		t.Errorf("a refused token while the metadata answers 429: got %v, want ErrUnreachable (try again)", err)
	}
	if n := originToken.Load(); n != 0 {
		t.Errorf("the resource server's origin got %d token requests (the client secret), want none", n)
	}
	limited.Store(false)
	revoked.Store(false)
	if err := postRS(); err != nil {
		t.Errorf("once the metadata answers again: %v", err)
	}
}

// redirectingRT answers every request for public.example with a redirect
// to a private address, sends loopback requests to the network, and
// records every host asked for.
type redirectingRT struct {
	mu    sync.Mutex
	hosts []string
}

func (r *redirectingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.hosts = append(r.hosts, req.URL.Host)
	r.mu.Unlock()
	switch {
	case strings.HasPrefix(req.URL.Host, "127.0.0.1"):
		return http.DefaultTransport.RoundTrip(req)
	case req.URL.Host == "public.example":
		h := http.Header{}
		h.Set("Location", "https://10.1.2.3/admin")
		return &http.Response{StatusCode: http.StatusFound, Body: http.NoBody, Request: req, Header: h}, nil
	}
	return &http.Response{StatusCode: http.StatusNotFound, Body: http.NoBody, Request: req, Header: http.Header{}}, nil
}

// TestResourceMetadataRedirectStaysPublic: a resource_metadata URL off the
// server's origin that redirects to a private address is not followed
// there.
func TestResourceMetadataRedirectStaysPublic(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="https://public.example/prm"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	rec := &redirectingRT{}
	m, err := New(&Options{HTTPClient: &http.Client{Transport: rec}})
	if err != nil {
		t.Fatal(err)
	}
	m.SetRedirectURL("http://127.0.0.1:1" + CallbackPath)
	c := &http.Client{Transport: m.Transport("srv", srv.URL+"/mcp", nil, http.DefaultTransport, nil)}
	if resp, err := c.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{}`)); err == nil {
		resp.Body.Close()
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Contains(rec.hosts, "public.example") {
		t.Fatalf("hosts asked: %v; want public.example among them (the test proves nothing otherwise)", rec.hosts)
	}
	if slices.Contains(rec.hosts, "10.1.2.3") {
		t.Errorf("mcpd followed the redirect to 10.1.2.3 (hosts asked: %v); want non-public addresses refused after a redirect too", rec.hosts)
	}
}

// TestURLChangeEndsPendingConsent: a consent pending for a server's old
// URL ends when the URL changes; the server at its new URL gets a consent
// of its own, which authorizes it there.
func TestURLChangeEndsPendingConsent(t *testing.T) {
	a, b := newTestAS(t), newTestAS(t)
	m := newManager(t, t.TempDir())
	if _, err := post(t, client(m, a, nil), a); !errors.Is(err, ErrAuthorizationRequired) {
		t.Fatalf("first request: got %v, want ErrAuthorizationRequired", err)
	}
	cb := client(m, b, nil) // the server "srv" now lives at b's URL
	if _, err := post(t, cb, b); !errors.Is(err, ErrAuthorizationRequired) {
		t.Fatalf("request to the new URL: got %v, want ErrAuthorizationRequired", err)
	}
	p, ok := m.Pending("srv")
	if !ok {
		t.Fatal("no consent pending for the new URL")
	}
	u, _ := url.Parse(p.URL)
	if res := u.Query().Get("resource"); res != b.srv.URL+"/mcp" {
		t.Fatalf("the pending consent is for resource %q, want %s/mcp", res, b.srv.URL)
	}
	if err := m.Complete(context.Background(), "srv", consent(t, m)); err != nil {
		t.Fatal(err)
	}
	if resp, err := post(t, cb, b); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("after the consent at the new URL: %v, %v; want 200", resp, err)
	}
}

// limitedResource is a protected resource at /mcp whose metadata names the
// authorization server issuer, and answers 429 while limited is set.
// serve answers every other path; challenge answers 401 with a challenge
// naming the metadata.
type limitedResource struct{ *httptest.Server }

func newLimitedResource(t *testing.T, issuer string, limited *atomic.Bool, serve func(w http.ResponseWriter, r *http.Request, challenge func())) *limitedResource {
	t.Helper()
	rs := &limitedResource{}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
			if limited.Load() {
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return
			}
			writeJSON(w, map[string]any{"resource": rs.URL + "/mcp", "authorization_servers": []string{issuer}})
			return
		}
		serve(w, r, func() {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+rs.URL+`/.well-known/oauth-protected-resource/mcp"`)
			w.WriteHeader(http.StatusUnauthorized)
		})
	}))
	t.Cleanup(rs.Close)
	return rs
}

// poster returns a function that POSTs to the resource through m (as
// server "srv", with cfg) and returns the request's error.
func (rs *limitedResource) poster(m *Manager, cfg *config.OAuth) func() error {
	c := &http.Client{Transport: m.Transport("srv", rs.URL+"/mcp", cfg, http.DefaultTransport, nil)}
	return func() error {
		resp, err := c.Post(rs.URL+"/mcp", "application/json", strings.NewReader(`{}`))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
}
