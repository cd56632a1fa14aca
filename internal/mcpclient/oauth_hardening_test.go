package mcpclient

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/oauth"
)

// TestTransient401OfATokenlessServer: a remote server with no
// Authorization header (so mcpd wraps it in OAuth) that answers 401s that
// are no OAuth challenge (an API-key gateway's hiccup) is READY again once
// it accepts requests: the failed authorization that the 401s set off no
// longer blocks a server that lets mcpd in without a token.
func TestTransient401OfATokenlessServer(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	mcpH := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newRemoteMCPServer(legacyVersions) }, nil)
	ts := serveRemote(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "k" || down.Load() {
			http.Error(w, "bad api key", http.StatusUnauthorized)
			return
		}
		mcpH.ServeHTTP(w, r)
	}))
	om, err := oauth.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	om.SetRedirectURL("http://127.0.0.1:1" + oauth.CallbackPath)
	hc := testHTTPClient(t)
	m, _ := busManager(t, &Options{
		ProbeTimeout:      5 * time.Second,
		RestartBackoff:    50 * time.Millisecond,
		RestartBackoffMax: 100 * time.Millisecond,
		OAuth:             om,
		Dialer:            NewRemoteDialer(&RemoteOptions{HTTPClient: hc, OAuth: om}),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := config.Server{Name: "keyed", Kind: config.TransportHTTP, URL: ts.URL + "/mcp", Headers: map[string]string{"X-Api-Key": "k"}}
	st, _ := m.Connect(ctx, cfg, false)
	t.Logf("while the gateway refuses: state %v, last error %q", st.State, st.LastError)

	down.Store(false) // the key works again; the server never asks for OAuth
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		st, _ = m.Get("keyed")
		if st.State == StateReady {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	st, _ = m.Restart(ctx, "keyed")
	if st.State != StateReady {
		t.Fatalf("5s after the server accepts requests again, and after RestartServer: state %v, last error %q; want READY",
			st.State, st.LastError)
	}
}

// TestForgetAuthorizationOfADisconnectedServer: the OAuth state a
// disconnected server keeps on disk (for the next time it is connected)
// can be forgotten by name; a name with no state stays NOT_FOUND.
func TestForgetAuthorizationOfADisconnectedServer(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "gone.json")
	if err := os.WriteFile(record, []byte(`{"resource": "https://gone.example/mcp"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	om, err := oauth.New(&oauth.Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := busManager(t, &Options{OAuth: om})
	if err := m.ForgetAuthorization(testContext(t), "gone"); err != nil {
		t.Fatalf("forget the stored state of a disconnected server: %v", err)
	}
	if _, err := os.Stat(record); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("its record: %v, want it deleted", err)
	}
	if err := m.ForgetAuthorization(testContext(t), "never"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a name with no state: got %v, want ErrNotFound", err)
	}
}
