package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/rs/zerolog"

	mcpconfig "github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/localfile"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
	"github.com/mcpd-project/mcpd/internal/namelock"
	"github.com/mcpd-project/mcpd/internal/server"
)

// registry decides which servers run. It applies the merged config files
// at start-up and on every SIGHUP, touching only what changed, and carries
// out ConnectServer, DisconnectServer and SetServerEnabled, which it
// remembers: servers added through the API override the files' entries of
// the same name, and an enable or disable overrides the entry's
// "disabled". With a state file, it keeps both across restarts.
type registry struct {
	mgr   *mcpclient.Manager
	log   zerolog.Logger
	state string // the state file; "" keeps nothing on disk
	// reserved names the variables no reference in the state file may
	// read (see mcpconfig.MarshalEntry).
	reserved func(string) bool

	// applying serialises reloads. names serialises the work on one
	// server name (a reload's, ConnectServer's, DisconnectServer's,
	// SetServerEnabled's): each decides from the maps and acts on the
	// Manager under its name's lock. mu guards the maps and is never held
	// while a server stops or starts, so that a server slow to stop holds
	// up the work on no other.
	applying sync.Mutex
	names    namelock.Set
	mu       sync.Mutex
	files    []mcpconfig.Entry          // the merged files, as last applied
	api      map[string]mcpconfig.Entry // servers added through the API
	apiJSON  map[string]json.RawMessage // each api server as the state file holds it
	toggles  map[string]bool            // enabled or disabled through the API, where that differs from the config
	adding   map[string]mcpconfig.Entry // servers ConnectServer is starting, not yet in api
	applied  map[string]want            // what each server was last set up as
	// policy is Claude Code's MCP server policy of the files as last
	// applied: it holds for every server, the API's too.
	policy *mcpconfig.ClaudePolicy
}

var _ server.Registry = (*registry)(nil)

// want is how one server should be set up.
type want struct {
	cfg      mcpconfig.Server
	err      error // the entry is unusable
	disabled bool
}

// same reports whether w sets a server up as o does, and shows it as o
// does: an argument or URL newly written as a ${VAR} template (a secret
// moved out of the file) restarts the server, whose status, log lines and
// errors would otherwise show the value for as long as it runs.
func (w want) same(o want) bool {
	return w.cfg.Equal(&o.cfg) && w.disabled == o.disabled && errText(w.err) == errText(o.err) &&
		slices.Equal(w.cfg.DisplayArgs(), o.cfg.DisplayArgs()) && w.cfg.DisplayURL() == o.cfg.DisplayURL()
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// newRegistry returns a registry that keeps its state in stateFile (none
// if empty), after reading what the file holds. A state file that exists
// and cannot be read is an error. policy checks the servers the file
// restores as ConnectServer checked them: one it now refuses comes back
// FAILED, saying why. claude is Claude Code's policy of the files as read
// at start-up: it holds for ConnectServer from the first call, before
// the files' servers are applied. reserved names the variables of mcpd's
// own that the file's references may not read.
func newRegistry(mgr *mcpclient.Manager, log zerolog.Logger, stateFile string, policy *server.CommandPolicy, claude *mcpconfig.ClaudePolicy, reserved func(string) bool) (*registry, error) {
	r := &registry{
		mgr: mgr, log: log, state: stateFile, reserved: reserved, policy: claude,
		api: make(map[string]mcpconfig.Entry), apiJSON: make(map[string]json.RawMessage),
		toggles: make(map[string]bool), applied: make(map[string]want), adding: make(map[string]mcpconfig.Entry),
	}
	if stateFile == "" {
		return r, nil
	}
	if err := r.readState(policy); err != nil {
		return nil, err
	}
	return r, nil
}

// readStateFile reads the state file, refusing one that another user owns
// (root aside) or that anyone may write: whoever can write it chooses the
// commands mcpd starts. mcpd writes it 0600; a group's write bit is let
// pass, since Kubernetes adds it to the files of a volume with fsGroup.
func readStateFile(path string) ([]byte, error) {
	data, err := localfile.ReadChecked(path, localfile.ConfigLimit, func(fi fs.FileInfo) error {
		if fi.Mode().Perm()&0o002 != 0 {
			return fmt.Errorf("state file %s: anyone may write it (mode %04o), and whoever writes it chooses the commands mcpd starts; chmod o-w it", path, fi.Mode().Perm())
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Getuid() {
			return fmt.Errorf("state file %s: owned by uid %d, not by mcpd's user (uid %d) or root", path, st.Uid, os.Getuid())
		}
		return nil
	})
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("read state file: %w", err)
		}
		return nil, err
	}
	return data, nil
}

// stateDoc is the state file: servers added through the API in the
// .mcp.json format (so that the file is also a valid --config), and the
// names enabled or disabled through the API. mcpd writes its servers
// under "mcpServers"; a file edited by hand may hold them under "servers"
// (VS Code's key), which mcpd reads as the config files do.
type stateDoc struct {
	MCPServers map[string]json.RawMessage `json:"mcpServers"`
	Servers    map[string]json.RawMessage `json:"servers,omitempty"`
	Disabled   []string                   `json:"disabled,omitempty"`
	Enabled    []string                   `json:"enabled,omitempty"`
}

func (r *registry) readState(policy *server.CommandPolicy) error {
	data, err := readStateFile(r.state)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	merged, err := mcpconfig.LoadLayers([]mcpconfig.Layer{{Scope: mcpconfig.ScopeAPI, Path: r.state, Inline: data, State: true, Reserved: r.reserved}}, os.LookupEnv)
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	var doc stateDoc
	// Read as LoadLayers read it: a file edited by hand may hold comments.
	if err := mcpconfig.UnmarshalJSONC(data, &doc); err != nil {
		return fmt.Errorf("state file %s: %w", r.state, err)
	}
	// Each entry's text, wherever it was: the next write keeps it under
	// "mcpServers".
	raw := maps.Clone(doc.MCPServers)
	if raw == nil {
		raw = make(map[string]json.RawMessage)
	}
	for name, entry := range doc.Servers {
		if _, both := raw[name]; !both {
			raw[name] = entry
		}
	}
	readers := r.referenceReaders(merged.Entries, raw)
	for _, e := range merged.Entries {
		if e.Err == nil {
			err := policy.Check(e.Server)
			if err == nil {
				err = sharedReference(e.Name, readers)
			}
			if err != nil {
				// Kept without its command, as an entry that does not
				// parse is: RestartServer or an enable cannot start it.
				e.Err = fmt.Errorf("restored from the state file: %w", err)
				e.Server = mcpconfig.Server{Name: e.Name, Source: e.Server.Source}
			}
		}
		r.api[e.Name] = e
		r.apiJSON[e.Name] = raw[e.Name]
	}
	for _, name := range doc.Disabled {
		r.toggles[name] = false
	}
	for _, name := range doc.Enabled {
		r.toggles[name] = true
	}
	return nil
}

// stateRefs are the MCPD_ variables the state file reads server cfg's
// secrets from (an env NAME read as ${NAME} is the environment's to share,
// as in any .mcp.json, and is left out).
func (r *registry) stateRefs(cfg *mcpconfig.Server) []string {
	_, refs, err := mcpconfig.MarshalEntry(cfg, r.reserved)
	if err != nil {
		return nil
	}
	return slices.DeleteFunc(refs, func(ref string) bool { return !strings.HasPrefix(ref, "MCPD_") })
}

// referenceReaders maps each MCPD_ variable the entries read to the
// servers that read it, once per field. An entry that could not be used
// (a variable unset, a command no longer allowed) still holds its
// references, which a later restart may expand: they are read from its
// text in raw, the state file's entries by name.
func (r *registry) referenceReaders(entries []mcpconfig.Entry, raw map[string]json.RawMessage) map[string][]string {
	readers := map[string][]string{}
	for _, e := range entries {
		refs := referencesIn(raw[e.Name])
		if e.Err == nil {
			refs = r.stateRefs(&e.Server)
		}
		for _, ref := range refs {
			readers[ref] = append(readers[ref], e.Name)
		}
	}
	return readers
}

// stateReference is a state file value that is nothing but a reference to
// one of the MCPD_ variables MarshalEntry names.
var stateReference = regexp.MustCompile(`^\$\{(MCPD_[A-Z0-9_]+)\}$`)

// referencesIn lists the MCPD_ references among the string values of an
// entry's JSON text.
func referencesIn(raw json.RawMessage) []string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	var refs []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if m := stateReference.FindStringSubmatch(v); m != nil {
				refs = append(refs, m[1])
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return refs
}

// sharedReference refuses server name when a variable it reads its
// secrets from is read by another server, or by two of its own fields:
// the names are made from the server's name and the field's
// (MCPD_GH_X_API_KEY is header X-Api-Key of server gh, and header Api-Key
// of server gh-x), and one server must not be handed another's secret.
func sharedReference(name string, readers map[string][]string) error {
	for _, ref := range slices.Sorted(maps.Keys(readers)) {
		servers := readers[ref]
		if len(servers) > 1 && slices.Contains(servers, name) {
			return fmt.Errorf("%w: the state file would read ${%s} for more than one secret (servers %s); rename the server or the header",
				mcpclient.ErrInvalidArgument, ref, strings.Join(slices.Compact(slices.Sorted(slices.Values(servers))), ", "))
		}
	}
	return nil
}

// writeState replaces the state file atomically: a temporary file in the
// same directory, mode 0600, synced, then renamed over the old one.
func (r *registry) writeState() {
	if r.state == "" {
		return
	}
	doc := stateDoc{MCPServers: r.apiJSON}
	for _, name := range slices.Sorted(maps.Keys(r.toggles)) {
		if r.toggles[name] {
			doc.Enabled = append(doc.Enabled, name)
		} else {
			doc.Disabled = append(doc.Disabled, name)
		}
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err == nil {
		err = writeStateFile(r.state, append(data, '\n'))
	}
	if err != nil {
		r.log.Error().Err(err).Str("file", r.state).Msg("state file not written: the change holds until mcpd stops")
	}
}

// writeStateFile writes the state file atomically, making its directory
// (0700) first.
func writeStateFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	if err := mcpconfig.WriteFileAtomic(path, data); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	return nil
}

// apply sets the servers up as the merged files (and what the API
// changed) say: it starts new servers, restarts changed ones, disables or
// fails the ones that say so, and disconnects the ones nothing names any
// more. A server whose setup is unchanged is left alone, only its source
// label follows the file. It returns once every change is under way.
func (r *registry) apply(ctx context.Context, merged *mcpconfig.Merged) {
	r.applying.Lock()
	defer r.applying.Unlock()
	r.mu.Lock()
	r.files = merged.Entries
	r.policy = merged.Policy
	r.mu.Unlock()
	r.reconcile(ctx)
	r.mu.Lock()
	r.forgetToggles()
	r.mu.Unlock()
}

// forgetToggles drops the API's enable or disable of servers that are gone
// (no file or API entry names them any more), as DisconnectServer does:
// nothing could undo such a choice (the API finds no server of that name),
// and it would hold the name's next entry disabled. r.mu is held.
func (r *registry) forgetToggles() {
	named := make(map[string]bool, len(r.files)+len(r.api))
	for _, e := range r.files {
		named[e.Name] = true
	}
	forgot := false
	for name := range r.toggles {
		if _, err := r.mgr.Get(name); err != nil && !named[name] {
			delete(r.toggles, name)
			forgot = true
		}
	}
	if forgot {
		r.writeState()
	}
}

// desired is what every server should be, from the files, the API's
// servers and the toggles.
func (r *registry) desired() map[string]want {
	out := make(map[string]want, len(r.files)+len(r.api))
	for _, e := range append(slices.Clone(r.files), slices.Collect(maps.Values(r.api))...) {
		if e.Err == nil {
			if err := r.policy.Check(e.Server); err != nil {
				// Kept without its command, as an unusable entry is:
				// neither an enable nor RestartServer can start it.
				e.Err, e.Server = err, mcpconfig.Server{Name: e.Name, Source: e.Server.Source}
			}
		}
		out[e.Name] = want{cfg: e.Server, err: e.Err, disabled: e.Disabled}
	}
	for name, enabled := range r.toggles {
		if w, ok := out[name]; ok {
			w.disabled = !enabled
			out[name] = w
		}
	}
	return out
}

// reconcile brings the manager to desired(). Servers nothing names any
// more go first, side by side, so that a server renamed in its file is
// never run twice at once; the others follow, side by side too (a
// replaced server may first finish its calls in flight). Once ctx is done
// (mcpd stops), it leaves the rest as it is.
func (r *registry) reconcile(ctx context.Context) {
	r.mu.Lock()
	next := r.desired()
	var gone []string
	for name := range r.applied {
		if _, still := next[name]; !still {
			gone = append(gone, name)
		}
	}
	// A server ConnectServer is adding is looked at once it is in: a new
	// policy may stop it.
	names := slices.Collect(maps.Keys(next))
	for name := range r.adding {
		if _, ok := next[name]; !ok {
			names = append(names, name)
		}
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, name := range gone {
		wg.Go(func() { r.reconcileName(ctx, name) })
	}
	wg.Wait()
	for _, name := range names {
		wg.Go(func() { r.reconcileName(ctx, name) })
	}
	wg.Wait()
}

// reconcileName brings the server name to what desired() says now: an
// API call on the name may have come first, under the same lock.
func (r *registry) reconcileName(ctx context.Context, name string) {
	unlock := r.names.Lock(name)
	defer unlock()
	if ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	w, wanted := r.desired()[name]
	old, had := r.applied[name]
	r.mu.Unlock()
	if !wanted {
		if had && !r.agentServes(name, want{}) {
			r.mgr.DisconnectAll([]string{name})
		}
		r.mu.Lock()
		delete(r.applied, name)
		r.mu.Unlock()
		return
	}
	if r.agentServes(name, w) {
		return
	}
	// An agent's server that has the name is not the entry's server, even
	// where the entry is unchanged: a managed entry takes the name back.
	taken := w.cfg.Kind != mcpconfig.TransportAgent && r.agentHolds(name)
	if had && old.same(w) && !taken {
		// A server that gave up (it could not start, or crash-looped) is
		// started again below: the reload may follow the fix of what it
		// lacked. One whose entry is unusable would only fail again.
		if st, err := r.mgr.Get(name); err == nil && (st.State != mcpclient.StateFailed || w.err != nil || w.disabled) {
			r.mgr.Relabel(name, w.cfg.Source, w.cfg.Warnings)
			r.mu.Lock()
			r.applied[name] = w
			r.mu.Unlock()
			return // unchanged and still there
		}
	}
	var err error
	switch {
	case w.disabled:
		if by := w.cfg.Source.DisabledBy; by != "" {
			r.log.Info().Str("server", name).Str("disabled_by", by).Msg("config entry disabled by Claude Code's setting")
		}
		err = r.mgr.AddStopped(w.cfg, mcpclient.StateDisabled, w.err, true)
	case w.err != nil:
		r.log.Warn().Str("server", name).Err(w.err).Msg("config entry unusable")
		err = r.mgr.AddStopped(w.cfg, mcpclient.StateFailed, w.err, true)
	default:
		for _, warning := range w.cfg.Warnings {
			r.log.Warn().Str("server", name).Msg("config entry: " + warning)
		}
		err = r.mgr.Start(w.cfg, true)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.log.Warn().Str("server", name).Err(err).Msg("connect")
		delete(r.applied, name)
		return
	}
	r.applied[name] = w
}

// agentServes reports whether an agent's ServeTools stream has the name
// for a server that w, the files' wish, does not make (one it took over
// with replace, or a name no file had): like a server added through the
// API, it overrides the files, so a reload neither replaces, relabels nor
// removes it. It stays until DisconnectServer; the next reload then
// brings back the files' entry of that name. A managed entry under
// Claude Code's exclusive control takes the name back at once.
func (r *registry) agentServes(name string, w want) bool {
	if !r.agentHolds(name) || w.cfg.Kind == mcpconfig.TransportAgent {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.policy.Holds(w.cfg) == nil
}

// agentHolds reports whether an agent's server has the name now.
func (r *registry) agentHolds(name string) bool {
	st, err := r.mgr.Get(name)
	return err == nil && st.Config.Kind == mcpconfig.TransportAgent
}

// ServeTools lets an agent serve its tools under a name, unless Claude
// Code's policy holds that name for the organisation's server (see
// ClaudePolicy.Holds): the check and the take-over happen under the
// name's lock, so a reload cannot slip between them.
func (r *registry) ServeTools(ctx context.Context, decl mcpclient.AgentDeclaration, replace bool) (*mcpclient.AgentLink, mcpclient.Status, error) {
	defer r.names.Lock(decl.Server)()
	r.mu.Lock()
	held := r.policy.Holds(r.desired()[decl.Server].cfg)
	r.mu.Unlock()
	if held != nil {
		return nil, mcpclient.Status{}, mcpclient.Deny("server %q: %v", decl.Server, held)
	}
	return r.mgr.ServeTools(ctx, decl, replace)
}

// Connect adds a server through the API and remembers it (see registry).
func (r *registry) Connect(ctx context.Context, cfg mcpconfig.Server, replace bool) (mcpclient.Status, error) {
	cfg.Source = mcpconfig.Source{Scope: mcpconfig.ScopeAPI, Name: r.state}
	var raw json.RawMessage
	if r.state != "" {
		data, refs, err := mcpconfig.MarshalEntry(&cfg, r.reserved)
		if err != nil {
			return mcpclient.Status{}, fmt.Errorf("encode server for the state file: %w", err)
		}
		raw = data
		if len(refs) > 0 {
			r.log.Info().Str("server", cfg.Name).Strs("variables", refs).Msg("state file keeps the server's secrets as references: set these variables for a restarted mcpd")
		}
	}
	unlock := r.names.Lock(cfg.Name)
	r.mu.Lock()
	var err error
	if perr := r.policy.Check(cfg); perr != nil {
		err = mcpclient.Deny("server %q: %v", cfg.Name, perr)
	} else if r.state != "" {
		// Against the other servers the state file keeps, not the one
		// this replaces; and against those other calls are adding now.
		others := slices.DeleteFunc(slices.Collect(maps.Values(r.api)), func(e mcpconfig.Entry) bool { return e.Name == cfg.Name })
		for name, e := range r.adding {
			if name != cfg.Name {
				others = append(others, e)
			}
		}
		err = sharedReference(cfg.Name, r.referenceReaders(append(others, mcpconfig.Entry{Name: cfg.Name, Server: cfg}), r.apiJSON))
	}
	if err == nil {
		r.adding[cfg.Name] = mcpconfig.Entry{Name: cfg.Name, Server: cfg}
	}
	r.mu.Unlock()
	if err == nil {
		err = r.mgr.Start(cfg, replace) // may let the server it replaces finish its calls
	}
	r.mu.Lock()
	delete(r.adding, cfg.Name)
	if err == nil {
		r.api[cfg.Name] = mcpconfig.Entry{Name: cfg.Name, Server: cfg}
		r.apiJSON[cfg.Name] = raw
		delete(r.toggles, cfg.Name)
		r.applied[cfg.Name] = want{cfg: cfg}
		r.writeState()
	}
	r.mu.Unlock()
	unlock()
	if err != nil {
		return mcpclient.Status{}, err
	}
	return r.mgr.Await(ctx, cfg.Name)
}

// Disconnect stops and forgets a server. A server the files name comes
// back on the next reload.
func (r *registry) Disconnect(ctx context.Context, name string) error {
	defer r.names.Lock(name)()
	if err := r.mgr.Disconnect(ctx, name); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, wasAPI := r.api[name]
	_, wasToggled := r.toggles[name]
	delete(r.api, name)
	delete(r.apiJSON, name)
	delete(r.toggles, name)
	delete(r.applied, name)
	if wasAPI || wasToggled {
		r.writeState()
	}
	return nil
}

// SetEnabled disables or enables a server and remembers the choice where
// it differs from the server's config entry.
func (r *registry) SetEnabled(ctx context.Context, name string, enabled bool) (mcpclient.Status, error) {
	unlock := r.names.Lock(name)
	err := r.mgr.SetEnabled(name, enabled)
	r.mu.Lock()
	if err == nil {
		configDisabled := false
		for _, e := range r.files {
			if e.Name == name {
				configDisabled = e.Disabled
			}
		}
		if e, ok := r.api[name]; ok {
			configDisabled = e.Disabled
		}
		if enabled == !configDisabled {
			delete(r.toggles, name)
		} else {
			r.toggles[name] = enabled
		}
		if w, ok := r.applied[name]; ok {
			w.disabled = !enabled
			r.applied[name] = w
		}
		r.writeState()
	}
	r.mu.Unlock()
	unlock()
	if err != nil {
		return mcpclient.Status{}, err
	}
	if !enabled {
		return r.mgr.Get(name)
	}
	return r.mgr.Await(ctx, name)
}
