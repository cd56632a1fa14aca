package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/oauth"
	"github.com/mcpd-project/mcpd/internal/server"
)

// defaultOAuthStateDir is where tokens persist when --oauth-state-dir is
// not given: $XDG_STATE_HOME/mcpd/oauth, else ~/.local/state/mcpd/oauth.
func defaultOAuthStateDir(lookup func(string) (string, bool)) string {
	if d, ok := lookup("XDG_STATE_HOME"); ok && d != "" {
		return filepath.Join(d, "mcpd", "oauth")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "mcpd", "oauth")
	}
	return ""
}

// oauthRedirect is the loopback listener that receives the browser's
// redirect at the end of a consent.
type oauthRedirect struct {
	srv      *http.Server
	done     chan struct{}
	stopOnce sync.Once
}

// startOAuth makes the OAuth manager and, unless addr is "off", its
// redirect listener, which must be on a loopback address: the redirect
// carries an authorization code.
//
// A state directory the operator named must be usable, or mcpd does not
// start. The per-user default (defaultDir) is only a convenience: where it
// cannot be made (no writable home, a read-only root file system in a
// container), mcpd keeps tokens in memory and says so, rather than
// refusing to serve servers that may never need a token.
func startOAuth(stateDir string, defaultDir bool, addr string, log zerolog.Logger, onChange func(string)) (*oauth.Manager, *oauthRedirect, error) {
	opts := &oauth.Options{StateDir: stateDir, Logger: &log, OnChange: onChange}
	m, err := oauth.New(opts)
	switch {
	case err != nil && defaultDir:
		log.Warn().Err(err).Msg("the default oauth state directory cannot be used: OAuth tokens are kept in memory only, and lost at exit (--oauth-state-dir names another)")
		opts.StateDir = ""
		if m, err = oauth.New(opts); err != nil {
			return nil, nil, err
		}
	case err != nil:
		return nil, nil, err
	case stateDir == "":
		log.Info().Msg("no oauth state directory: OAuth tokens are kept in memory only")
	}
	if addr == "off" {
		return m, nil, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--oauth-redirect-addr %q: want host:port: %w", addr, err)
	}
	if !server.IsLoopbackHost(host) {
		return nil, nil, fmt.Errorf("--oauth-redirect-addr %q: the redirect listener must be on a loopback address", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("oauth redirect listener: %w", err)
	}
	hostForURL := host
	if hostForURL == "localhost" || hostForURL == "" {
		hostForURL = "127.0.0.1"
	}
	port := lis.Addr().(*net.TCPAddr).Port
	m.SetRedirectURL(fmt.Sprintf("http://%s%s", net.JoinHostPort(hostForURL, fmt.Sprint(port)), oauth.CallbackPath))
	r := &oauthRedirect{
		// Not behind server.LoopbackOnly, whose Origin check keeps web
		// pages from the API: the callback is a browser's navigation from
		// the authorization server's site.
		srv:  &http.Server{Handler: m, ReadHeaderTimeout: server.HTTPReadHeaderTimeout, IdleTimeout: server.HTTPIdleTimeout},
		done: make(chan struct{}),
	}
	go func() {
		defer close(r.done)
		if err := r.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("oauth redirect listener stopped")
		}
	}()
	log.Info().Str("addr", lis.Addr().String()).Msg("oauth redirect listener")
	return m, r, nil
}

// stop stops the listener: its requests (a consent being completed) may
// finish until ctx ends, then the rest are cut off. Only the first call
// does so. nil-safe.
func (r *oauthRedirect) stop(ctx context.Context) {
	if r == nil {
		return
	}
	r.stopOnce.Do(func() {
		if err := r.srv.Shutdown(ctx); err != nil {
			_ = r.srv.Close()
		}
		<-r.done
	})
}
