package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpd-project/mcpd/internal/config"
)

// TestSharedStateDirFollowsRotation: two mcpd instances share a state
// directory (the per-user default). One refreshes, and its authorization
// server rotates the refresh token: the other, holding the old one, must
// take the rotated token from the file rather than spend the old one (a
// refused refresh drops its token, asks a person again, and writes a
// record without a token over the other's).
func TestSharedStateDirFollowsRotation(t *testing.T) {
	as := newTestAS(t)
	as.expiresIn = 1 // within the refresh margin: renewed before every use
	dir := t.TempDir()
	m1 := newManager(t, dir)
	c1 := client(m1, as, nil)
	authorize(t, m1, c1, as)
	// The second instance starts now, and reads the token of the first.
	m2 := newManager(t, dir)
	c2 := client(m2, as, nil)

	// The first refreshes: rt-0 is spent, rt-1 is on disk.
	if resp, err := post(t, c1, as); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("first instance's request: got %v %v, want 200", resp, err)
	}
	// The access tokens the resource accepts are only the newest: as an
	// expired one would be.
	as.mu.Lock()
	for tok := range as.tokens {
		if tok != "at-1" {
			delete(as.tokens, tok)
		}
	}
	as.mu.Unlock()

	if resp, err := post(t, c2, as); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("second instance's request: got %v %v, want 200 with the rotated token from the state file", resp, err)
	}
	if _, ok := m2.Pending("srv"); ok {
		t.Error("second instance: a consent is pending, want none (the first instance's token is on disk)")
	}
	as.mu.Lock()
	refreshedBy := len(as.refreshedBy)
	as.mu.Unlock()
	data, err := os.ReadFile(filepath.Join(dir, "srv.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"refreshToken"`) {
		t.Errorf("state file after the second instance's request holds no token (%d refreshes sent), want the rotated one kept", refreshedBy)
	}
}

// TestSharedStateDirRefreshOnce: two instances sharing a state directory
// hold the same token, and both renew it at once. Only one spends the
// refresh token; the other waits for the state directory's lock and takes
// the renewed token. Spent twice, the authorization server would revoke
// the grant (reuse detection), and both would need a person again.
func TestSharedStateDirRefreshOnce(t *testing.T) {
	as := newTestAS(t)
	as.expiresIn = 1 // within the refresh margin: renewed before every use
	as.reuseRevokes = true
	dir := t.TempDir()
	m1 := newManager(t, dir)
	c1 := client(m1, as, nil)
	authorize(t, m1, c1, as)
	m2 := newManager(t, dir)
	c2 := client(m2, as, nil) // reads the first instance's token

	// The renewed token lasts; the delay is long enough that both
	// renewals overlap without the lock.
	as.mu.Lock()
	as.expiresIn = 3600
	as.mu.Unlock()
	as.refreshDelay.Store(int64(300 * time.Millisecond))
	codes := make(chan string, 2)
	for _, c := range []*http.Client{c1, c2} {
		go func() {
			resp, err := post(t, c, as)
			if err != nil {
				codes <- err.Error()
				return
			}
			codes <- resp.Status
		}()
	}
	for range 2 {
		if got := <-codes; got != "200 OK" {
			t.Errorf("request of an instance: got %s, want 200 OK", got)
		}
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	if len(as.refreshedBy) != 1 {
		t.Errorf("refreshes sent: got %d, want 1 (the other instance takes the renewed token)", len(as.refreshedBy))
	}
}

// TestRefreshLetsGoOfTheLock: a renewal whose context ends as it takes
// the state directory's lock lets go of it; held on, it would stop every
// other instance's renewals, and this one's next.
func TestRefreshLetsGoOfTheLock(t *testing.T) {
	as := newTestAS(t)
	dir := t.TempDir()
	m := newManager(t, dir)
	authorize(t, m, client(m, as, nil), as)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the lock is free: taken at the first try all the same
	if err := m.servers["srv"].refresh(ctx, nil); err == nil {
		t.Fatal("refresh with its context ended: got nil, want an error")
	}
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(context.Background(), 5*lockPoll)
	defer stop()
	unlock, err := s.lock(wait, "srv")
	if err != nil {
		t.Fatalf("the lock after a renewal that ended: %v, want it free", err)
	}
	unlock()
}

// TestSharedStateDirConsentOnce: an instance without a token takes the
// one another instance sharing the state directory obtained since it
// started, rather than asking a person a second time.
func TestSharedStateDirConsentOnce(t *testing.T) {
	as := newTestAS(t)
	dir := t.TempDir()
	m1 := newManager(t, dir)
	m2 := newManager(t, dir)
	c1, c2 := client(m1, as, nil), client(m2, as, nil) // both read the (empty) state
	authorize(t, m1, c1, as)
	if resp, err := post(t, c2, as); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("second instance's request: got %v %v, want 200 with the token the first saved", resp, err)
	}
	if _, ok := m2.Pending("srv"); ok {
		t.Error("second instance: a consent is pending, want none")
	}
}

// TestSharedStateDirPendingConsentTakesAnothersToken: two instances
// sharing a state directory both wait for a person's consent; the person
// consents through the first. The second's pending consent ends, with the
// first's token, without asking anyone again: with no token before, and
// with a token the server refused (expired, without a refresh token).
func TestSharedStateDirPendingConsentTakesAnothersToken(t *testing.T) {
	for _, held := range []bool{false, true} {
		t.Run(map[bool]string{false: "no token", true: "a refused token"}[held], func(t *testing.T) {
			as := newTestAS(t)
			dir := t.TempDir()
			if held {
				// A token the resource no longer takes, without a refresh
				// token: both instances read it, are refused, and ask.
				writeRecord(t, dir, as, "at-stale")
			}
			changes := make(chan struct{}, 16)
			m1 := newManagerWith(t, &Options{StateDir: dir, StoredPoll: 20 * time.Millisecond})
			m2 := newManagerWith(t, &Options{StateDir: dir, StoredPoll: 20 * time.Millisecond, OnChange: func(string) { changes <- struct{}{} }})
			t.Cleanup(func() { m1.Release("srv"); m2.Release("srv") })
			c1, c2 := client(m1, as, nil), client(m2, as, nil)
			_, _ = post(t, c1, as)
			_, _ = post(t, c2, as)
			p, ok := m2.Pending("srv")
			if !ok {
				t.Fatal("second instance: no consent pending")
			}
			<-changes // its start
			if err := m1.Complete(context.Background(), "srv", consent(t, m1)); err != nil {
				t.Fatal(err)
			}
			select {
			case <-changes: // its end
			case <-time.After(10 * time.Second):
				t.Fatal("the second instance's consent is still pending after the first's was completed")
			}
			<-p.Done
			if msg := m2.LastError("srv"); msg != "" {
				t.Errorf("second instance: last error %q, want none", msg)
			}
			if _, ok := m2.Pending("srv"); ok {
				t.Error("second instance: a consent is pending, want none")
			}
			if resp, err := post(t, c2, as); err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("second instance's request: got %v %v, want 200 with the first's token", resp, err)
			}
		})
	}
}

// writeRecord writes the state file of server srv of as, holding access
// token token without a refresh token, as another mcpd would have.
func writeRecord(t *testing.T, dir string, as *testAS, token string) {
	t.Helper()
	rec := record{Resource: as.srv.URL + "/mcp", Token: &tokenRecord{AccessToken: token, TokenType: "Bearer", Scopes: []string{"read"}}}
	data, err := json.Marshal(&rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "srv.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSharedStateDirStepUpNotEndedByAnothersToken: an instance waiting
// for a step-up (more scopes for the token it holds) keeps waiting when
// another instance saves a token (a renewal of its own), which need not
// have those scopes.
func TestSharedStateDirStepUpNotEndedByAnothersToken(t *testing.T) {
	as := newTestAS(t)
	dir := t.TempDir()
	m := newManagerWith(t, &Options{StateDir: dir, StoredPoll: 10 * time.Millisecond})
	t.Cleanup(func() { m.Release("srv") })
	c := client(m, as, nil)
	stepUpPending(t, m, c, as)
	p, ok := m.Pending("srv")
	if !ok {
		t.Fatal("no step-up pending")
	}
	// Another instance's renewal lands in the file.
	path := filepath.Join(dir, "srv.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	rec["token"].(map[string]any)["accessToken"] = "at-renewed-elsewhere"
	if data, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done:
		t.Fatal("the step-up ended when another instance saved a token")
	case <-time.After(200 * time.Millisecond): // twenty looks
	}
}

// TestSharedStateDirSaveKeepsAnothersRenewal: an instance that saves its
// record for another reason (here a client registration, for a step-up
// consent through its own redirect URL) after another instance renewed
// the token keeps the renewed token in the file. Saving its own, older
// token there would hand the other instance a spent refresh token at its
// next look at the file, and with reuse detection that revokes the grant.
func TestSharedStateDirSaveKeepsAnothersRenewal(t *testing.T) {
	as := newTestAS(t)
	dir := t.TempDir()
	m1 := newManager(t, dir)
	c1 := client(m1, as, nil)
	authorize(t, m1, c1, as)
	m2 := newManager(t, dir)
	m2.SetRedirectURL("http://127.0.0.1:2" + CallbackPath) // its own listener
	c2 := client(m2, as, nil)
	if resp, err := post(t, c2, as); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("second instance's request: got %v %v, want 200 with the first's token", resp, err)
	}

	// The first renews: at-0 and rt-0 are replaced by at-1 and rt-1.
	if err := m1.servers["srv"].refresh(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	// The second, still holding at-0, is asked for more scopes: its
	// step-up registers a client for its redirect URL and saves it.
	as.mu.Lock()
	as.needScope = "write"
	as.mu.Unlock()
	if _, err := post(t, c2, as); !errors.Is(err, ErrAuthorizationRequired) {
		t.Fatalf("second instance's request needing write: got %v, want ErrAuthorizationRequired", err)
	}

	data, err := os.ReadFile(filepath.Join(dir, "srv.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Token == nil || rec.Token.AccessToken != "at-1" || rec.Token.RefreshToken != "rt-1" {
		t.Errorf("state file's token after the second instance's save: got %+v, want the first's renewal (at-1, rt-1)", rec.Token)
	}
	if rec.Client == nil || rec.Client.RedirectURI != "http://127.0.0.1:2"+CallbackPath {
		t.Errorf("state file's client: got %+v, want the second instance's registration", rec.Client)
	}
	if tok := m2.servers["srv"].token(); tok == nil || tok.AccessToken != "at-1" {
		t.Errorf("second instance's token: got %+v, want the renewal it took in (at-1)", tok)
	}
}

// TestSharedStateDirSaveWaitsForTheLock: each kind of save (a client
// registration, a consent's token, a grant's token) waits while another
// instance holds the state directory's lock (a renewal). Saved at once,
// it could land between that instance's read of the file and its write.
func TestSharedStateDirSaveWaitsForTheLock(t *testing.T) {
	ccfg := &config.OAuth{Grant: config.GrantClientCredentials, ClientID: "svc", ClientSecret: "s3cret"}
	for _, tc := range []struct {
		name string
		// start readies m's server for the save, and returns the
		// request that saves; saved is what the file has after it.
		start func(t *testing.T, as *testAS, m *Manager) func() error
		saved string
	}{
		{"registration", func(t *testing.T, as *testAS, m *Manager) func() error {
			// A step-up through another redirect URL registers again.
			c := client(m, as, nil)
			authorize(t, m, c, as)
			m.SetRedirectURL("http://127.0.0.1:2" + CallbackPath)
			as.mu.Lock()
			as.needScope = "write"
			as.mu.Unlock()
			return func() error {
				if _, err := post(t, c, as); !errors.Is(err, ErrAuthorizationRequired) {
					return fmt.Errorf("request needing write: got %v, want ErrAuthorizationRequired", err)
				}
				return nil
			}
		}, `"redirectUri": "http://127.0.0.1:2` + CallbackPath + `"`},
		{"consent", func(t *testing.T, as *testAS, m *Manager) func() error {
			_, _ = post(t, client(m, as, nil), as)
			redirect := consent(t, m)
			return func() error { return m.Complete(context.Background(), "srv", redirect) }
		}, `"at-0"`},
		{"grant", func(t *testing.T, as *testAS, m *Manager) func() error {
			c := client(m, as, ccfg)
			return func() error {
				if resp, err := post(t, c, as); err != nil || resp.StatusCode != http.StatusOK {
					return fmt.Errorf("request: got %v %v, want 200", resp, err)
				}
				return nil
			}
		}, `"at-0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := newTestAS(t)
			dir := t.TempDir()
			m := newManager(t, dir)
			save := tc.start(t, as, m)
			s, err := openStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			unlock, err := s.lock(context.Background(), "srv") // another instance renews
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(unlock)
			done := make(chan error, 1)
			go func() { done <- save() }()
			path := filepath.Join(dir, "srv.json")
			for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if data, _ := os.ReadFile(path); strings.Contains(string(data), tc.saved) {
					t.Fatal("saved while another instance held the lock")
				}
			}
			unlock()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if data, _ := os.ReadFile(path); !strings.Contains(string(data), tc.saved) {
				t.Errorf("state file after the save:\n%s\nwant %s in it", data, tc.saved)
			}
		})
	}
}

// TestRegistrationTakesInAnothersConsent: while an instance registers a
// client to ask a person for consent, another instance sharing the state
// directory saves a token (a person consented there). The registration's
// save takes that token in; the instance uses it, and asks nobody.
func TestRegistrationTakesInAnothersConsent(t *testing.T) {
	as := newTestAS(t)
	dir := t.TempDir()
	as.onRegister = func() {
		as.mu.Lock()
		as.tokens["at-elsewhere"] = []string{"read"}
		as.mu.Unlock()
		writeRecord(t, dir, as, "at-elsewhere")
	}
	m := newManager(t, dir)
	if resp, err := post(t, client(m, as, nil), as); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("request: got %v %v, want 200 with the token the other instance saved", resp, err)
	}
	if _, ok := m.Pending("srv"); ok {
		t.Error("a consent is pending, want none")
	}
	if err := m.Blocked("srv"); err != nil {
		t.Errorf("Blocked: %v, want nil", err)
	}
}

// TestRegistrationKeepsAnothersTokenWithoutMetadata: the token a
// registration's save takes in names another issuer than the
// authorization server this instance found, but only because the
// resource's metadata could not be read (mcpd then tries the server's
// origin), which says nothing about a move. The token stays in the file.
func TestRegistrationKeepsAnothersTokenWithoutMetadata(t *testing.T) {
	as := newTestAS(t)
	as.noResourceMetadata = true
	dir := t.TempDir()
	as.onRegister = func() {
		rec := record{Resource: as.srv.URL + "/mcp", Issuer: "https://as.example", Token: &tokenRecord{AccessToken: "at-elsewhere", RefreshToken: "rt-elsewhere"}}
		data, err := json.Marshal(&rec)
		if err != nil {
			t.Error(err)
			return
		}
		if err := os.WriteFile(filepath.Join(dir, "srv.json"), data, 0o600); err != nil {
			t.Error(err)
		}
	}
	m := newManager(t, dir)
	if _, err := post(t, client(m, as, nil), as); !errors.Is(err, ErrUnreachable) {
		t.Errorf("request: got %v, want ErrUnreachable", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "srv.json")); !strings.Contains(string(data), `"rt-elsewhere"`) {
		t.Errorf("state file:\n%s\nwant the other instance's token kept", data)
	}
}
