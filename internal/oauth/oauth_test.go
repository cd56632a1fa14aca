package oauth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpd-project/mcpd/internal/config"
)

// testAS is an authorization server and a protected resource at /mcp in
// one loopback server: just enough OAuth to drive the Manager.
type testAS struct {
	srv *httptest.Server

	mu         sync.Mutex
	challenges map[string]string // code -> PKCE challenge
	tokens     map[string][]string
	refresh    map[string]bool
	// refreshScopes are the scopes each refresh token renews.
	refreshScopes map[string][]string
	expiresIn     int
	issInRedir    string // "" means the right issuer
	needScope     string // a scope /mcp demands beyond a valid token
	refuse        bool   // /mcp refuses needScope even when granted
	tokenCalls    atomic.Int32
	grantTypes    []string
	lastAuthReq   url.Values
	// refreshedBy is the client each refresh came from (its client_id, or
	// its Basic user).
	refreshedBy []string
	// movedTo, when set, is the authorization server the resource's
	// metadata names instead of this one.
	movedTo string
	// noResourceMetadata answers 404 for the resource's metadata, as a
	// cache or a server that has none does.
	noResourceMetadata bool
	// onRegister, when set, runs as each registration is answered.
	onRegister func()
	// registrations counts dynamic client registrations: the first
	// client is dyn-client, the next dyn-client-2, and so on.
	registrations int
	// issuedTo is the client each refresh token was issued to; a refresh
	// by another client is refused, as authorization servers do.
	issuedTo map[string]string
	// unknownClient is a client the server no longer knows (it deleted
	// the registration): its token requests are refused invalid_client.
	unknownClient string
	// secretExpiresIn, when set, gives each registration a secret that
	// expires that long after it is made.
	secretExpiresIn time.Duration
	// refreshDelay holds back the answer to every refresh.
	refreshDelay atomic.Int64 // time.Duration
	// reuseRevokes makes a refresh token spent a second time revoke every
	// token, as OAuth 2.1 has servers that rotate refresh tokens do.
	reuseRevokes bool
	spent        map[string]bool
}

func newTestAS(t *testing.T) *testAS {
	as := &testAS{challenges: map[string]string{}, tokens: map[string][]string{}, refresh: map[string]bool{}, refreshScopes: map[string][]string{}, issuedTo: map[string]string{}, spent: map[string]bool{}, expiresIn: 3600}
	mux := http.NewServeMux()
	as.srv = httptest.NewServer(mux)
	t.Cleanup(as.srv.Close)
	base := func() string { return as.srv.URL }
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		as.mu.Lock()
		issuer, none := as.movedTo, as.noResourceMetadata
		as.mu.Unlock()
		if none {
			http.NotFound(w, r)
			return
		}
		if issuer == "" {
			issuer = base()
		}
		writeJSON(w, map[string]any{"resource": base() + "/mcp", "authorization_servers": []string{issuer}, "scopes_supported": []string{"read"}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{
			"issuer": base(), "authorization_endpoint": base() + "/authorize", "token_endpoint": base() + "/token",
			"registration_endpoint": base() + "/register", "response_types_supported": []string{"code"},
			"code_challenge_methods_supported": []string{"S256"}, "authorization_response_iss_parameter_supported": true,
			"token_endpoint_auth_methods_supported": []string{"none", "client_secret_basic"},
		})
	})
	mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		if as.onRegister != nil {
			as.onRegister()
		}
		as.mu.Lock()
		as.registrations++
		id := "dyn-client"
		if as.registrations > 1 {
			id = fmt.Sprintf("dyn-client-%d", as.registrations)
		}
		reg := map[string]any{"client_id": id, "token_endpoint_auth_method": "none"}
		if as.secretExpiresIn != 0 {
			reg["client_secret"] = "secret-of-" + id
			reg["client_secret_expires_at"] = time.Now().Add(as.secretExpiresIn).Unix()
			reg["token_endpoint_auth_method"] = "client_secret_basic"
		}
		as.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		writeJSON(w, reg)
	})
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		as.mu.Lock()
		as.lastAuthReq = q
		code := fmt.Sprintf("code-%d", len(as.challenges))
		as.challenges[code] = q.Get("code_challenge") + " " + q.Get("scope")
		iss := as.issInRedir
		as.mu.Unlock()
		if iss == "" {
			iss = base()
		}
		u, _ := url.Parse(q.Get("redirect_uri"))
		v := url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {iss}}
		u.RawQuery = v.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		as.tokenCalls.Add(1)
		_ = r.ParseForm()
		if r.PostForm.Get("grant_type") == "refresh_token" {
			time.Sleep(time.Duration(as.refreshDelay.Load()))
		}
		as.mu.Lock()
		defer as.mu.Unlock()
		gt := r.PostForm.Get("grant_type")
		as.grantTypes = append(as.grantTypes, gt)
		by := r.PostForm.Get("client_id")
		if id, _, ok := r.BasicAuth(); ok {
			by = id
		}
		var scopes []string
		switch gt {
		case "authorization_code":
			if by != "" && by == as.unknownClient {
				w.WriteHeader(http.StatusUnauthorized)
				writeJSON(w, map[string]any{"error": "invalid_client"})
				return
			}
			ch, ok := as.challenges[r.PostForm.Get("code")]
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			pkce, scope, _ := strings.Cut(ch, " ")
			if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != pkce || r.PostForm.Get("resource") != base()+"/mcp" {
				w.WriteHeader(http.StatusBadRequest)
				writeJSON(w, map[string]any{"error": "invalid_grant"})
				return
			}
			delete(as.challenges, r.PostForm.Get("code"))
			scopes = strings.Fields(scope)
		case "refresh_token":
			as.refreshedBy = append(as.refreshedBy, by)
			if by != "" && by == as.unknownClient {
				w.WriteHeader(http.StatusUnauthorized)
				writeJSON(w, map[string]any{"error": "invalid_client"})
				return
			}
			if rt := r.PostForm.Get("refresh_token"); as.reuseRevokes && as.spent[rt] {
				clear(as.tokens)
				clear(as.refresh)
			}
			if rt := r.PostForm.Get("refresh_token"); !as.refresh[rt] || as.issuedTo[rt] != by {
				w.WriteHeader(http.StatusBadRequest)
				writeJSON(w, map[string]any{"error": "invalid_grant"})
				return
			}
			delete(as.refresh, r.PostForm.Get("refresh_token"))
			as.spent[r.PostForm.Get("refresh_token")] = true
			scopes = as.refreshScopes[r.PostForm.Get("refresh_token")]
		case "client_credentials":
			if id, secret, ok := r.BasicAuth(); !ok || id != "svc" || secret != "s3cret" {
				w.WriteHeader(http.StatusUnauthorized)
				writeJSON(w, map[string]any{"error": "invalid_client"})
				return
			}
			scopes = []string{"read"}
		}
		n := len(as.tokens)
		access, refresh := fmt.Sprintf("at-%d", n), fmt.Sprintf("rt-%d", n)
		as.tokens[access] = scopes
		as.refresh[refresh] = true
		as.issuedTo[refresh] = by
		as.refreshScopes[refresh] = scopes
		writeJSON(w, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": as.expiresIn, "refresh_token": refresh, "scope": strings.Join(scopes, " ")})
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		as.mu.Lock()
		scopes, ok := as.tokens[tok]
		need, refuse := as.needScope, as.refuse
		as.mu.Unlock()
		rm := `resource_metadata="` + base() + `/.well-known/oauth-protected-resource/mcp"`
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer `+rm)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if need != "" && (refuse || !strings.Contains(" "+strings.Join(scopes, " ")+" ", " "+need+" ")) {
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="`+need+`", `+rm)
			w.WriteHeader(http.StatusForbidden)
			return
		}
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(body)
	})
	return as
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// client sends requests to the test resource through m.
func client(m *Manager, as *testAS, cfg *config.OAuth) *http.Client {
	return &http.Client{Transport: m.Transport("srv", as.srv.URL+"/mcp", cfg, http.DefaultTransport, nil)}
}

func post(t *testing.T, c *http.Client, as *testAS) (*http.Response, error) {
	t.Helper()
	resp, err := c.Post(as.srv.URL+"/mcp", "application/json", strings.NewReader(`{"ping":1}`))
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && string(body) != `{"ping":1}` {
			t.Errorf("resource got body %q, want the request's own (sent again intact)", body)
		}
	}
	return resp, err
}

// authorize has c's server authorized through m: its first request asks
// for consent, which the person gives.
func authorize(t *testing.T, m *Manager, c *http.Client, as *testAS) {
	t.Helper()
	_, _ = post(t, c, as)
	if err := m.Complete(context.Background(), "srv", consent(t, m)); err != nil {
		t.Fatal(err)
	}
}

// consent follows the pending authorization URL like a browser that stops
// at mcpd's redirect, and returns where it was sent.
func consent(t *testing.T, m *Manager) string {
	t.Helper()
	p, ok := m.Pending("srv")
	if !ok {
		t.Fatal("Pending: got none, want a consent to give")
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header.Get("Location")
}

func newManager(t *testing.T, dir string) *Manager {
	t.Helper()
	return newManagerWith(t, &Options{StateDir: dir})
}

func newManagerWith(t *testing.T, opts *Options) *Manager {
	t.Helper()
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	m.SetRedirectURL("http://127.0.0.1:1" + CallbackPath)
	return m
}

// stepUpPending authorizes c's server, then has the resource demand the
// scope write: the next request starts a step-up consent and fails,
// waiting for it.
func stepUpPending(t *testing.T, m *Manager, c *http.Client, as *testAS) {
	t.Helper()
	authorize(t, m, c, as)
	as.mu.Lock()
	as.needScope = "write"
	as.mu.Unlock()
	if _, err := post(t, c, as); !errors.Is(err, ErrAuthorizationRequired) {
		t.Fatalf("request needing write: got %v, want ErrAuthorizationRequired", err)
	}
}

func TestAuthorizationCodeFlow(t *testing.T) {
	as := newTestAS(t)
	dir := filepath.Join(t.TempDir(), "oauth")
	m := newManager(t, dir)
	c := client(m, as, nil)
	ctx := context.Background()

	if _, err := post(t, c, as); !errors.Is(err, ErrAuthorizationRequired) {
		t.Fatalf("first request: got %v, want ErrAuthorizationRequired", err)
	}
	redirect := consent(t, m)
	if got := as.lastAuthReq; got.Get("code_challenge_method") != "S256" || got.Get("resource") != as.srv.URL+"/mcp" || got.Get("client_id") != "dyn-client" || got.Get("scope") != "read" {
		t.Errorf("authorization request: got %v, want S256 PKCE, the resource, the registered client and scope read", got)
	}

	wrong := strings.Replace(redirect, "state=", "state=x", 1)
	if err := m.Complete(ctx, "srv", wrong); !errors.Is(err, ErrInvalidRedirect) {
		t.Errorf("Complete with a wrong state: got %v, want ErrInvalidRedirect", err)
	}
	if err := m.Complete(ctx, "srv", "not a url%"); !errors.Is(err, ErrInvalidRedirect) {
		t.Errorf("Complete with a malformed URL: got %v, want ErrInvalidRedirect", err)
	}
	if err := m.Complete(ctx, "srv", redirect); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if _, ok := m.Pending("srv"); ok {
		t.Error("Pending after Complete: got one, want none")
	}
	resp, err := post(t, c, as)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request after consent: got %v %v, want 200", resp, err)
	}

	// The state persists, private, and a new Manager reuses the token.
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir: got %v %v, want mode 0700", fi.Mode(), err)
	}
	fi, err = os.Stat(filepath.Join(dir, "srv.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file: got %v %v, want mode 0600", fi.Mode(), err)
	}
	calls := as.tokenCalls.Load()
	m2 := newManager(t, dir)
	if resp, err := post(t, client(m2, as, nil), as); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request from a restarted manager: got %v %v, want 200 with the stored token", resp, err)
	}
	if as.tokenCalls.Load() != calls {
		t.Errorf("token requests: got %d more, want none (the stored token is reused)", as.tokenCalls.Load()-calls)
	}

	if err := m2.Forget("srv"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "srv.json")); !os.IsNotExist(err) {
		t.Errorf("state file after Forget: got %v, want it gone", err)
	}
}

func TestIssMismatchRefused(t *testing.T) {
	as := newTestAS(t)
	as.issInRedir = as.srv.URL + "/" // normalization must not make it match
	m := newManager(t, t.TempDir())
	if _, err := post(t, client(m, as, nil), as); !errors.Is(err, ErrAuthorizationRequired) {
		t.Fatalf("first request: got %v, want ErrAuthorizationRequired", err)
	}
	calls := as.tokenCalls.Load()
	if err := m.Complete(context.Background(), "srv", consent(t, m)); !errors.Is(err, ErrAuthorizationFailed) {
		t.Errorf("Complete with a wrong iss: got %v, want ErrAuthorizationFailed", err)
	}
	if as.tokenCalls.Load() != calls {
		t.Error("a code with a wrong iss was sent to the token endpoint")
	}
	if m.LastError("srv") == "" {
		t.Error("LastError: got empty, want why the authorization failed")
	}
}

func TestRefreshBeforeExpiry(t *testing.T) {
	as := newTestAS(t)
	as.expiresIn = 1 // within the refresh margin: renewed before every use
	m := newManager(t, t.TempDir())
	c := client(m, as, nil)
	authorize(t, m, c, as)
	if resp, err := post(t, c, as); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request: got %v %v, want 200", resp, err)
	}
	as.mu.Lock()
	grants := strings.Join(as.grantTypes, ",")
	as.mu.Unlock()
	if grants != "authorization_code,refresh_token" {
		t.Errorf("token requests: got %s, want the code exchange then a refresh", grants)
	}
	// A refused refresh (every token revoked) asks for consent.
	as.mu.Lock()
	clear(as.refresh)
	clear(as.tokens)
	as.mu.Unlock()
	if _, err := post(t, c, as); !errors.Is(err, ErrAuthorizationRequired) {
		t.Errorf("request after a revoked refresh token: got %v, want ErrAuthorizationRequired", err)
	}
}

func TestStepUpIsBounded(t *testing.T) {
	as := newTestAS(t)
	m := newManager(t, t.TempDir())
	c := client(m, as, nil)
	ctx := context.Background()
	// A new scope: consent again, asking for the union.
	stepUpPending(t, m, c, as)
	if err := m.Complete(ctx, "srv", consent(t, m)); err != nil {
		t.Fatal(err)
	}
	if got := as.lastAuthReq.Get("scope"); got != "read write" {
		t.Errorf("step-up scope: got %q, want %q (granted plus challenged)", got, "read write")
	}
	if resp, err := post(t, c, as); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request after the step-up: got %v %v, want 200", resp, err)
	}
	// Now the server refuses a scope it granted: mcpd asks once more, then
	// stops asking.
	as.mu.Lock()
	as.needScope = "admin"
	as.refuse = true
	as.mu.Unlock()
	consents := 0
	var err error
	for range 5 {
		if _, err = post(t, c, as); !errors.Is(err, ErrAuthorizationRequired) {
			break
		}
		consents++
		if cerr := m.Complete(ctx, "srv", consent(t, m)); cerr != nil {
			t.Fatal(cerr)
		}
	}
	if !errors.Is(err, ErrAuthorizationFailed) || consents > 2 {
		t.Errorf("a scope refused after it was granted: got %v after %d consents, want ErrAuthorizationFailed after at most 2", err, consents)
	}
	if m.Blocked("srv") == nil {
		t.Error("Blocked: got nil, want the refusal")
	}
}

func TestClientCredentials(t *testing.T) {
	as := newTestAS(t)
	m := newManager(t, t.TempDir())
	cfg := &config.OAuth{Grant: config.GrantClientCredentials, ClientID: "svc", ClientSecret: "s3cret"}
	resp, err := post(t, client(m, as, cfg), as)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request: got %v %v, want 200 with no person involved", resp, err)
	}
	if _, ok := m.Pending("srv"); ok {
		t.Error("Pending: got a consent, want none for client credentials")
	}
	wrong := &config.OAuth{Grant: config.GrantClientCredentials, ClientID: "svc", ClientSecret: "nope"}
	if _, err := post(t, client(newManager(t, t.TempDir()), as, wrong), as); !errors.Is(err, ErrAuthorizationFailed) {
		t.Errorf("wrong secret: got %v, want ErrAuthorizationFailed", err)
	} else if strings.Contains(err.Error(), "nope") {
		t.Errorf("error %q quotes the secret", err)
	}
}

func TestFlowExpires(t *testing.T) {
	as := newTestAS(t)
	m, err := New(&Options{FlowTTL: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m.SetRedirectURL("http://127.0.0.1:1" + CallbackPath)
	_, _ = post(t, client(m, as, nil), as)
	p, ok := m.Pending("srv")
	if !ok {
		t.Fatal("Pending: got none")
	}
	select {
	case <-p.Done:
	case <-time.After(10 * time.Second):
		t.Fatal("the flow did not end at its expiry")
	}
	if m.LastError("srv") == "" {
		t.Error("LastError after expiry: got empty, want why")
	}
}

// failingTokenEndpoint fails requests to /token at the network level while
// down is set.
type failingTokenEndpoint struct {
	down atomic.Bool
}

func (f *failingTokenEndpoint) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.down.Load() && strings.HasSuffix(r.URL.Path, "/token") {
		return nil, errors.New("connection reset by peer")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// newFailingManager is a Manager whose token endpoint requests fail while
// the returned switch is down.
func newFailingManager(t *testing.T) (*failingTokenEndpoint, *Manager) {
	t.Helper()
	net := &failingTokenEndpoint{}
	m, err := New(&Options{HTTPClient: &http.Client{Transport: net}})
	if err != nil {
		t.Fatal(err)
	}
	m.SetRedirectURL("http://127.0.0.1:1" + CallbackPath)
	return net, m
}

func TestCompleteUnreachableStaysPending(t *testing.T) {
	as := newTestAS(t)
	net, m := newFailingManager(t)
	c := client(m, as, nil)
	_, _ = post(t, c, as)
	redirect := consent(t, m)
	net.down.Store(true)
	err := m.Complete(context.Background(), "srv", redirect)
	if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrAuthorizationFailed) {
		t.Fatalf("Complete with the token endpoint unreachable: got %v, want ErrUnreachable", err)
	}
	if _, ok := m.Pending("srv"); !ok {
		t.Fatal("Pending after a network failure: got none, want the consent still pending")
	}
	net.down.Store(false)
	if err := m.Complete(context.Background(), "srv", redirect); err != nil {
		t.Fatalf("Complete again once reachable: %v", err)
	}
	if resp, err := post(t, c, as); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request: got %v %v, want 200", resp, err)
	}
}

func TestForgetStoreFailure(t *testing.T) {
	as := newTestAS(t)
	dir := t.TempDir()
	m := newManager(t, dir)
	_, _ = post(t, client(m, as, nil), as)
	// A directory in the record's place cannot be removed, even by root.
	if err := os.Remove(filepath.Join(dir, "srv.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "srv.json", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	err := m.Forget("srv")
	if !errors.Is(err, ErrStore) {
		t.Fatalf("Forget with an unwritable store: got %v, want ErrStore", err)
	}
	if strings.Contains(err.Error(), dir) {
		t.Errorf("error %q names the state directory", err)
	}
	if _, ok := m.Pending("srv"); ok {
		t.Error("Pending after Forget: got a consent, want it ended")
	}
}

// TestStepUpResetsAfterSuccess: a request the server accepts ends an
// insufficient_scope episode, so the next one gets its own step-ups.
func TestStepUpResetsAfterSuccess(t *testing.T) {
	as := newTestAS(t)
	m := newManager(t, t.TempDir())
	c := client(m, as, nil)
	ctx := context.Background()
	_, _ = post(t, c, as)
	if err := m.Complete(ctx, "srv", consent(t, m)); err != nil {
		t.Fatal(err)
	}
	for episode := range 2 {
		// The server refuses the granted scope once (one step-up), then
		// accepts the token again.
		as.mu.Lock()
		as.needScope, as.refuse = "read", true
		as.mu.Unlock()
		if _, err := post(t, c, as); !errors.Is(err, ErrAuthorizationRequired) {
			t.Fatalf("episode %d: got %v, want a step-up consent", episode, err)
		}
		as.mu.Lock()
		as.refuse = false
		as.mu.Unlock()
		if err := m.Complete(ctx, "srv", consent(t, m)); err != nil {
			t.Fatal(err)
		}
		if resp, err := post(t, c, as); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("episode %d: request after the step-up: got %v %v, want 200", episode, resp, err)
		}
	}
}

// TestConfigureWhileAuthorizing reconfigures a server while its requests
// are authorized: run with -race.
func TestConfigureWhileAuthorizing(t *testing.T) {
	as := newTestAS(t)
	m := newManager(t, t.TempDir())
	cfg := &config.OAuth{Grant: config.GrantClientCredentials, ClientID: "svc", ClientSecret: "s3cret"}
	c := client(m, as, cfg)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				m.Transport("srv", as.srv.URL+"/mcp", cfg.Clone(), http.DefaultTransport, nil)
			}
		}
	})
	for range 20 {
		as.mu.Lock()
		clear(as.tokens) // every request is authorized anew
		as.mu.Unlock()
		_, _ = post(t, c, as)
	}
	close(stop)
	wg.Wait()
}

// TestRefreshAsTheConfiguredClient: a token issued to a pre-registered
// client is refreshed as that client (it went out with no client_id, which
// authorization servers refuse, and the person had to consent again).
func TestRefreshAsTheConfiguredClient(t *testing.T) {
	as := newTestAS(t)
	as.expiresIn = 1 // within the refresh margin: renewed before every use
	m := newManager(t, t.TempDir())
	c := client(m, as, &config.OAuth{ClientID: "pre", ClientSecret: "s3cret"})
	authorize(t, m, c, as)
	if resp, err := post(t, c, as); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request: got %v %v, want 200", resp, err)
	}
	as.mu.Lock()
	by := slices.Clone(as.refreshedBy)
	as.mu.Unlock()
	if len(by) == 0 || slices.ContainsFunc(by, func(id string) bool { return id != "pre" }) {
		t.Errorf("refreshes came from %q, want every one from the configured client pre", by)
	}
}

// TestRefreshUnreachableKeepsToken: a refresh that does not reach the
// authorization server fails the request but keeps the refresh token, so
// that no new consent is needed once it is back.
func TestRefreshUnreachableKeepsToken(t *testing.T) {
	as := newTestAS(t)
	net, m := newFailingManager(t)
	c := client(m, as, nil)
	authorize(t, m, c, as)
	as.mu.Lock()
	clear(as.tokens) // the access token is refused: a refresh is due
	as.mu.Unlock()
	net.down.Store(true)
	if _, err := post(t, c, as); err == nil || errors.Is(err, ErrAuthorizationRequired) {
		t.Fatalf("request while the token endpoint is down: got %v, want a failure that is not a consent", err)
	}
	net.down.Store(false)
	if resp, err := post(t, c, as); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request once it is back: got %v %v, want 200 after a refresh, without consent", resp, err)
	}
}

// TestRefreshStaysWithItsIssuer: when the resource names another
// authorization server, the refresh token is not sent there; a new
// consent is asked for instead.
func TestRefreshStaysWithItsIssuer(t *testing.T) {
	as, other := newTestAS(t), newTestAS(t)
	m := newManager(t, t.TempDir())
	c := client(m, as, nil)
	authorize(t, m, c, as)
	as.mu.Lock()
	clear(as.tokens)
	as.movedTo = other.srv.URL
	as.mu.Unlock()
	if _, err := post(t, c, as); !errors.Is(err, ErrAuthorizationRequired) {
		t.Errorf("request after the move: got %v, want ErrAuthorizationRequired", err)
	}
	if n := other.tokenCalls.Load(); n != 0 {
		t.Errorf("the other authorization server got %d token requests, want none (the refresh token is the first one's)", n)
	}
}

// TestMetadataRedirectsStaySafe: a metadata fetch follows no redirect to
// plain http off loopback.
func TestMetadataRedirectsStaySafe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// .invalid never resolves: nothing is reached even if followed.
		http.Redirect(w, r, "http://metadata.invalid/prm", http.StatusFound)
	}))
	defer srv.Close()
	_, err := fetchResourceMetadata(context.Background(), http.DefaultClient, srv.URL+"/.well-known/oauth-protected-resource")
	if err == nil || !strings.Contains(err.Error(), "redirected") {
		t.Errorf("a redirect to http off loopback: got %v, want it refused as such", err)
	}
}

// TestEndpointsInClearRefused: authorization server metadata that sends
// the person, the code or a registration over plain http off loopback is
// refused before anything goes there.
func TestEndpointsInClearRefused(t *testing.T) {
	for _, field := range []string{"authorization_endpoint", "token_endpoint", "registration_endpoint"} {
		t.Run(field, func(t *testing.T) {
			var srv *httptest.Server
			srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/.well-known/oauth-authorization-server" {
					http.NotFound(w, r)
					return
				}
				meta := map[string]any{
					"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize", "token_endpoint": srv.URL + "/token",
					"registration_endpoint": srv.URL + "/register", "response_types_supported": []string{"code"},
					"code_challenge_methods_supported": []string{"S256"},
				}
				// .invalid never resolves: nothing is reached even if used.
				meta[field] = "http://auth.invalid/x"
				writeJSON(w, meta)
			}))
			defer srv.Close()
			_, err := authServerMetadata(context.Background(), http.DefaultClient, srv.URL)
			if err == nil || !strings.Contains(err.Error(), field) {
				t.Errorf("metadata with %s over plain http off loopback: got %v, want it refused", field, err)
			}
		})
	}
}

// heldTokenManager is a Manager (state in dir, "" for none) whose
// requests to a token endpoint wait at the returned blockingTokenEndpoint,
// and the client_credentials settings the test AS takes.
func heldTokenManager(t *testing.T, dir string) (*Manager, *blockingTokenEndpoint, *config.OAuth) {
	t.Helper()
	net := &blockingTokenEndpoint{held: make(chan struct{}, 1), release: make(chan struct{})}
	m, err := New(&Options{StateDir: dir, HTTPClient: &http.Client{Transport: net}})
	if err != nil {
		t.Fatal(err)
	}
	return m, net, &config.OAuth{Grant: config.GrantClientCredentials, ClientID: "svc", ClientSecret: "s3cret"}
}

// blockingTokenEndpoint holds requests to /token until release is closed,
// and says when one is held.
type blockingTokenEndpoint struct {
	held    chan struct{}
	release chan struct{}
}

func (b *blockingTokenEndpoint) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/token") {
		b.held <- struct{}{}
		<-b.release
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestForgetOvertakesTokenRequest: a token that arrives after
// ForgetAuthorization is not kept, in memory or on disk.
func TestForgetOvertakesTokenRequest(t *testing.T) {
	as := newTestAS(t)
	dir := t.TempDir()
	m, net, cfg := heldTokenManager(t, dir)
	done := make(chan error, 1)
	go func() {
		_, err := post(t, client(m, as, cfg), as)
		done <- err
	}()
	<-net.held
	if err := m.Forget("srv"); err != nil {
		t.Fatal(err)
	}
	close(net.release)
	if err := <-done; err == nil {
		t.Error("the request whose authorization was forgotten: got no error")
	}
	m.mu.Lock()
	sa := m.servers["srv"]
	m.mu.Unlock()
	if tok := sa.token(); tok != nil {
		t.Errorf("token after Forget: got one, want none")
	}
	if files := dirFiles(t, dir); len(files) != 0 {
		t.Errorf("state after Forget: got %v, want nothing", files)
	}
}

// heldRefreshes holds requests to a token endpoint that refresh a token
// while hold is set, until release is closed, and says when one is held.
type heldRefreshes struct {
	hold    atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func (h *heldRefreshes) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.hold.Load() && strings.HasSuffix(r.URL.Path, "/token") && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if form, _ := url.ParseQuery(string(body)); form.Get("grant_type") == "refresh_token" {
			h.held <- struct{}{}
			<-h.release
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestRefreshDoesNotOvertakeStepUp: a refresh of the old token that ends
// after a step-up's consent completed neither replaces the new token (its
// scopes would be lost, and the next request would ask for consent
// again) nor, refused, drops it.
func TestRefreshDoesNotOvertakeStepUp(t *testing.T) {
	for _, refused := range []bool{false, true} {
		t.Run(fmt.Sprintf("refused=%v", refused), func(t *testing.T) {
			as := newTestAS(t)
			as.expiresIn = 1 // within the refresh margin: renewed before every use
			net := &heldRefreshes{held: make(chan struct{}, 1), release: make(chan struct{})}
			m := newManagerWith(t, &Options{HTTPClient: &http.Client{Transport: net}})
			c := client(m, as, nil)
			ctx := context.Background()
			stepUpPending(t, m, c, as)

			// Another request refreshes the old token; the consent
			// completes while that refresh is on its way.
			net.hold.Store(true)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = post(t, c, as)
			}()
			<-net.held
			if err := m.Complete(ctx, "srv", consent(t, m)); err != nil {
				t.Fatal(err)
			}
			m.mu.Lock()
			sa := m.servers["srv"]
			m.mu.Unlock()
			stepped := sa.token()
			if refused {
				as.mu.Lock()
				clear(as.refresh)
				as.mu.Unlock()
			}
			close(net.release)
			<-done
			if tok := sa.token(); tok == nil || tok.AccessToken != stepped.AccessToken || !slices.Contains(tok.Scopes, "write") {
				t.Errorf("token after the late refresh: got %+v, want the step-up's (%s, with write)", tok, stepped.AccessToken)
			}
			net.hold.Store(false)
			if resp, err := post(t, c, as); err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("request needing write after the step-up: got %v %v, want 200", resp, err)
			}
		})
	}
}
