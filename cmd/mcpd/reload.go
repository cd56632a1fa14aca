package main

import (
	"context"
	"errors"
	"sync"

	"github.com/rs/zerolog"

	mcpconfig "github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// fileServers applies the config file to the manager: at start-up, and
// again on every SIGHUP, when it touches only what changed. Servers added
// with ConnectServer live beside them and are left alone unless the file
// names them.
type fileServers struct {
	mgr *mcpclient.Manager
	log zerolog.Logger

	mu      sync.Mutex
	applied map[string]*mcpconfig.Server // what the file said last time; nil entry = invalid entry
}

func newFileServers(mgr *mcpclient.Manager, log zerolog.Logger) *fileServers {
	return &fileServers{mgr: mgr, log: log, applied: make(map[string]*mcpconfig.Server)}
}

// apply starts new servers, restarts changed ones, and disconnects the ones
// the file no longer lists; invalid entries are (re)registered as FAILED
// with their reason. It returns once every change is under way (replacing
// a server waits for the old one to stop); connections proceed in the
// background. Applying in order keeps quick successive reloads in order.
func (f *fileServers) apply(ctx context.Context, file *mcpconfig.File) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := make(map[string]*mcpconfig.Server, len(file.Servers)+len(file.Invalid))
	for i := range file.Servers {
		next[file.Servers[i].Name] = &file.Servers[i]
	}
	for _, bad := range file.Invalid {
		next[bad.Name] = nil
	}

	for name, old := range f.applied {
		cfg, still := next[name]
		if !still || (old != nil && cfg == nil) || (old == nil && still) {
			f.disconnect(ctx, name)
		}
	}
	for _, bad := range file.Invalid {
		f.log.Warn().Str("server", bad.Name).Err(bad.Err).Msg("config entry unusable")
		if err := f.mgr.AddFailed(bad.Name, bad.Err); err != nil {
			// The name is taken (by a server added with ConnectServer):
			// the entry is not the file's to track.
			f.log.Warn().Str("server", bad.Name).Err(err).Msg("config entry not registered")
			delete(next, bad.Name)
		}
	}
	for name, cfg := range next {
		if cfg == nil {
			continue
		}
		old, had := f.applied[name]
		if !had {
			if _, err := f.mgr.Get(name); err == nil {
				// A server added with ConnectServer holds the name: the
				// file's entry waits until that one is gone (next reload).
				f.log.Warn().Str("server", name).Msg("config entry ignored: a server of that name was added with ConnectServer")
				delete(next, name)
				continue
			}
		}
		if _, err := f.mgr.Get(name); err == nil && had && old != nil && old.Equal(cfg) {
			continue // unchanged and still there
		}
		for _, w := range cfg.Warnings {
			f.log.Warn().Str("server", name).Msg("config entry: " + w)
		}
		replace := had // the file owned this name (valid or not); replace its server
		if err := f.mgr.Start(*cfg, replace); err != nil {
			f.log.Warn().Str("server", name).Err(err).Msg("connect")
			delete(next, name)
		}
	}
	f.applied = next
}

func (f *fileServers) disconnect(ctx context.Context, name string) {
	if err := f.mgr.Disconnect(ctx, name); err != nil && !errors.Is(err, mcpclient.ErrNotFound) {
		f.log.Warn().Str("server", name).Err(err).Msg("disconnect")
	}
}
