package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/mcpd-project/mcpd/internal/localfile"
)

// Scope says where the configuration of a server came from. Scopes are
// read in the order of their values, and a later scope's entry for a name
// replaces an earlier one's as a whole.
type Scope int

// The scopes, in the order mcpd reads them.
const (
	ScopeUnspecified Scope = iota
	// ScopeDefault is the built-in default, used only when no file of any
	// other scope exists and no --config is given.
	ScopeDefault
	// ScopeManaged is the operator's file at a system path.
	ScopeManaged
	// ScopeUser is the user's files in the home directory.
	ScopeUser
	// ScopeProject is the project's shared .mcp.json.
	ScopeProject
	// ScopeLocal is the personal overrides beside the project's file.
	ScopeLocal
	// ScopeFlag is a --config flag: a file or inline JSON.
	ScopeFlag
	// ScopeAPI is a server added with ConnectServer (and kept in the state
	// file, if there is one).
	ScopeAPI
)

// String returns the scope's name as docs and logs use it.
func (s Scope) String() string {
	switch s {
	case ScopeDefault:
		return "default"
	case ScopeManaged:
		return "managed"
	case ScopeUser:
		return "user"
	case ScopeProject:
		return "project"
	case ScopeLocal:
		return "local"
	case ScopeFlag:
		return "flag"
	case ScopeAPI:
		return "api"
	}
	return "unspecified"
}

// Source says where one server's configuration came from: its scope and
// the file (or "--config #N" for inline JSON); Name is empty for a server
// added through the API that no file keeps.
type Source struct {
	Scope Scope
	Name  string
	// DisabledBy, if not empty, names the setting of Claude Code, and its
	// file, that switched the server off for this project (see
	// [ClaudeRole]): the entry is Disabled for that reason alone. A label
	// like Name: a reload that only changes it restarts nothing.
	DisabledBy string
}

// ClaudeRole says what Claude Code makes of a layer's file, so that the
// servers its user turned down or switched off there stay off under mcpd.
type ClaudeRole int

// The roles of a layer for Claude Code.
const (
	// ClaudeNone is a file Claude Code does not read (mcpd's own).
	ClaudeNone ClaudeRole = iota
	// ClaudeServers is a file whose servers Claude Code runs too
	// (~/.claude.json: its user servers, and a project's local ones):
	// disabledMcpServers applies to them.
	ClaudeServers
	// ClaudeMcpjson is the project's .mcp.json: disabledMcpServers and
	// disabledMcpjsonServers apply to its servers.
	ClaudeMcpjson
	// ClaudeChoices is a file of Claude Code's settings, read only for
	// its lists of servers turned down: "disabledMcpjsonServers" at its
	// top level, or, with Projects, "disabledMcpjsonServers" and
	// "disabledMcpServers" of the project's object in ~/.claude.json. It
	// holds no servers, and is not in [Merged.Read]. A settings file's
	// allowedMcpServers and deniedMcpServers go into [Merged.Policy].
	ClaudeChoices
	// ClaudeManagedSettings is a file of Claude Code's managed settings
	// (managed-settings.json, or one of managed-settings.d): read only
	// for its MCP server policy, as Claude Code reads managed settings
	// (see [ClaudePolicy]). It holds no servers.
	ClaudeManagedSettings
	// ClaudeExclusive is Claude Code's managed-mcp.json: its servers are
	// the managed scope's, and when the file exists, it takes exclusive
	// control ([ClaudePolicy.Exclusive]).
	ClaudeExclusive
)

// Layer is one configuration source to read.
type Layer struct {
	Scope Scope
	// Path is the file to read, or, with Inline, how messages name the
	// inline JSON.
	Path string
	// Inline, if not nil, is the JSON text itself.
	Inline []byte
	// Optional layers whose file does not exist are skipped; a file that
	// exists but cannot be read or parsed is an error all the same.
	Optional bool
	// Shared marks a file another program owns (an editor's settings): a
	// file without a "mcpServers" or "servers" key is skipped as if it
	// did not exist, instead of being an error.
	Shared bool
	// Projects, for a Shared file, reads what Claude Code keeps for one
	// project in ~/.claude.json instead of the top level: the object
	// projects[key] for the first of these keys the file has (the
	// project's path as given, then with its symlinks resolved). One
	// without servers is skipped, as Claude Code writes such an object
	// for every directory it is started in.
	Projects []string
	// State marks mcpd's own state file (see [MarshalEntry]): its values
	// are read back as they were written, and only the references written
	// for secrets expand.
	State bool
	// Reserved, for a State layer, names the variables no reference may
	// read: what MarshalEntry was given.
	Reserved func(name string) bool
	// Claude says what Claude Code makes of the file.
	Claude ClaudeRole
	// Dir, if not empty, is the directory the file's stdio servers start
	// in: the project's, for the project's files, as Claude Code started
	// there runs them. An entry's relative cwd is taken from it; one
	// without cwd gets Dir. Without Dir they start in mcpd's working
	// directory, as a relative cwd is taken from it.
	Dir string
}

// Entry is one server of a merged configuration.
type Entry struct {
	// Name is the entry's key.
	Name string
	// Server is the usable server when Err is nil; otherwise it holds
	// only Name and Source. Server.Source is set.
	Server Server
	// Disabled reports "disabled": true in the entry.
	Disabled bool
	// Err says why the entry cannot be used, nil if it can.
	Err error
}

// Merged is the configuration of every layer together.
type Merged struct {
	// Entries holds one entry per name, the one of the last layer that
	// names it, sorted by name.
	Entries []Entry
	// Read lists the layers that were read (a skipped optional file is
	// not), in order.
	Read []Source
	// Permissions gathers the top-level "permissions" blocks of every
	// layer: their rules together (the most specific rule wins wherever
	// it was written), and the default of the last layer that sets one.
	Permissions ToolRules
	// Policy is Claude Code's MCP server policy of the files read, nil if
	// they set none: the caller checks every server against it, whatever
	// its source.
	Policy *ClaudePolicy
	// Warnings say what the layers held outside their server entries that
	// mcpd does not understand, each prefixed with its file.
	Warnings []string
}

// Entries returns every entry of the file (usable, unusable and disabled)
// labelled with src, sorted by name.
func (f *File) Entries(src Source) []Entry {
	out := make([]Entry, 0, len(f.Servers)+len(f.Invalid)+len(f.Disabled))
	for _, s := range f.Servers {
		s.Source = src
		out = append(out, Entry{Name: s.Name, Server: s})
	}
	for _, bad := range f.Invalid {
		out = append(out, Entry{Name: bad.Name, Server: Server{Name: bad.Name, Source: src}, Err: bad.Err})
	}
	for _, name := range f.Disabled {
		e, ok := f.parked[name]
		if !ok {
			e = Entry{Name: name, Server: Server{Name: name}, Disabled: true}
		}
		e.Server.Source = src
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// errNoServersKey is Parse's error for a JSON object without servers.
var errNoServersKey = errors.New(`no "mcpServers" or "servers" object`)

// LoadLayers reads every layer in order and merges them entry by entry:
// a later layer's entry for a name replaces the earlier one, whether it is
// usable, unusable or disabled. An error names the file (and, for invalid
// JSON, the line and column); it is returned for the first layer that
// cannot be read or parsed, and nothing is merged then.
func LoadLayers(layers []Layer, lookup func(string) (string, bool)) (*Merged, error) {
	byName := make(map[string]Entry)
	// role is what Claude Code makes of the file each entry came from.
	role := make(map[string]ClaudeRole)
	var off claudeOff
	var policy policyBuilder
	// managed names the servers of the managed scope: while Claude Code's
	// managed-mcp.json has exclusive control, no later file replaces one.
	managed := make(map[string]bool)
	m := &Merged{}
	// Each file is read once, however many layers read it (~/.claude.json
	// is three): all of them see one version of a file that Claude Code
	// rewrites at any time, and a large one is read once.
	files := make(map[string]fileRead)
	for _, l := range layers {
		data := l.Inline
		if data == nil {
			r, ok := files[l.Path]
			if !ok {
				r.data, r.err = localfile.Read(l.Path, localfile.ConfigLimit)
				files[l.Path] = r
			}
			data = r.data
			err := r.err
			// A path through a file (HOME pointing at one) is as
			// missing as a path that does not exist.
			if l.Optional && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("load config: %w", err)
			}
		}
		if l.Claude == ClaudeChoices || l.Claude == ClaudeManagedSettings {
			if err := readSettings(data, l, &off, &policy, &m.Warnings); err != nil {
				return nil, fmt.Errorf("load config %s: %w", l.Path, err)
			}
			continue
		}
		name := l.Path
		if len(l.Projects) > 0 {
			project, key, err := claudeProject(data, l.Projects)
			if err != nil {
				return nil, fmt.Errorf("load config %s: %w", l.Path, err)
			}
			if project == nil {
				continue
			}
			data, name = project, l.Path+" projects["+strconv.Quote(key)+"]"
		}
		opts := parseOptions{expand: expandWith(lookup), shared: l.Shared}
		if l.State {
			opts.expand = stateExpander(lookup, l.Reserved)
		}
		f, err := parse(data, opts)
		if l.Shared && errors.Is(err, errNoServersKey) {
			// Claude Code keeps ~/.claude.json whether or not it has
			// servers: one without them is as missing as no file, so
			// that it does not stand for a configuration (and keep the
			// built-in default from applying).
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("load config %s: %w", name, err)
		}
		if len(l.Projects) > 0 && len(f.Servers)+len(f.Invalid)+len(f.Disabled) == 0 {
			continue
		}
		src := Source{Scope: l.Scope, Name: name}
		m.Read = append(m.Read, src)
		m.Permissions.Allow = append(m.Permissions.Allow, f.Permissions.Allow...)
		m.Permissions.Ask = append(m.Permissions.Ask, f.Permissions.Ask...)
		m.Permissions.Deny = append(m.Permissions.Deny, f.Permissions.Deny...)
		if f.Permissions.Default != "" {
			m.Permissions.Default = f.Permissions.Default
		}
		for _, w := range f.Warnings {
			m.Warnings = append(m.Warnings, name+": "+w)
		}
		if l.Claude == ClaudeExclusive {
			policy.exclusive = l.Path
		}
		for _, e := range f.Entries(src) {
			if l.Dir != "" && e.Server.Kind == TransportStdio {
				e.Server.Cwd = inDir(l.Dir, e.Server.Cwd)
			}
			if policy.exclusive != "" && l.Scope != ScopeManaged && managed[e.Name] {
				m.Warnings = append(m.Warnings, fmt.Sprintf("%s: server %q left out: Claude Code's %s has exclusive control, and its entry of that name stands", name, e.Name, policy.exclusive))
				continue
			}
			if l.Scope == ScopeManaged {
				managed[e.Name] = true
			}
			byName[e.Name] = e
			role[e.Name] = l.Claude
		}
	}
	m.Policy = policy.policy()
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		e := byName[name]
		if by := off.disabledBy(name, role[name]); by != "" && !e.Disabled {
			// Kept whole, so that SetServerEnabled can still start it.
			e.Disabled = true
			e.Server.Source.DisabledBy = by
		}
		m.Entries = append(m.Entries, e)
	}
	return m, nil
}

// inDir is cwd, an entry's working directory, taken from dir: dir when
// cwd is empty, dir joined with cwd when it is relative.
func inDir(dir, cwd string) string {
	if filepath.IsAbs(cwd) {
		return cwd
	}
	return filepath.Join(dir, cwd)
}

// fileRead is what reading one layer's file gave.
type fileRead struct {
	data []byte
	err  error
}

// The keys under which Claude Code keeps the servers its user turned down
// for a project.
const (
	// keyDisabledMcpjson lists the project's .mcp.json servers the user
	// declined when Claude Code asked whether to use them. Any settings
	// file may hold it, and the project's object in ~/.claude.json.
	keyDisabledMcpjson = "disabledMcpjsonServers"
	// keyDisabledMCP lists the servers, of any of Claude Code's scopes,
	// switched off in its /mcp screen: only the project's object in
	// ~/.claude.json holds it.
	keyDisabledMCP = "disabledMcpServers"
)

// claudeOff gathers the servers a Claude Code user turned down for the
// project, each with the first setting that names it. Approvals
// (enabledMcpjsonServers, enableAllProjectMcpServers) are not read: a
// rejection in any file stands, as in Claude Code.
type claudeOff struct {
	mcpjson map[string]string // keyDisabledMcpjson
	servers map[string]string // keyDisabledMCP
}

// readSettings reads a ClaudeChoices or ClaudeManagedSettings layer's
// file, data: the servers its user turned down into off, its MCP server
// policy into policy. A managed settings file that is not a JSON object
// stops the load as any other settings file does: skipped, it would let
// run what the organisation's policy stops.
func readSettings(data []byte, l Layer, off *claudeOff, policy *policyBuilder, warnings *[]string) error {
	if len(l.Projects) > 0 {
		// The project's object in ~/.claude.json holds no policy.
		return off.read(data, l)
	}
	data = stripJSONC(data)
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		return fmt.Errorf("parse settings: %w", describeSyntaxError(data, err))
	}
	managed := l.Claude == ClaudeManagedSettings
	if !managed {
		if err := off.read(data, l); err != nil {
			return err
		}
	} else if k := jsonKind(data); k != "object" {
		return fmt.Errorf("parse settings: is a JSON %s, want an object", k)
	}
	return policy.readSettings(data, l.Path, managed, func(w string) { *warnings = append(*warnings, w) })
}

// read adds the lists of a ClaudeChoices layer's file, data: the whole of
// ~/.claude.json for a layer with Projects, else a settings file's JSON,
// comments stripped.
func (c *claudeOff) read(data []byte, l Layer) error {
	where, keys := l.Path, []string{keyDisabledMcpjson}
	if len(l.Projects) > 0 {
		project, key, err := claudeProject(data, l.Projects)
		if err != nil || project == nil {
			return err
		}
		data, where = project, l.Path+" projects["+strconv.Quote(key)+"]"
		keys = append(keys, keyDisabledMCP)
	}
	if k := jsonKind(data); k != "object" {
		return fmt.Errorf("parse settings: is a JSON %s, want an object", k)
	}
	for _, key := range keys {
		raw, ok := rawMember(data, key)
		if !ok {
			continue
		}
		var names []string
		if err := json.Unmarshal(raw, &names); err != nil {
			return fmt.Errorf("parse settings: %q: want a list of server names", key)
		}
		into := &c.mcpjson
		if key == keyDisabledMCP {
			into = &c.servers
		}
		if *into == nil {
			*into = make(map[string]string)
		}
		for _, name := range names {
			if _, seen := (*into)[name]; !seen {
				(*into)[name] = key + " in " + where
			}
		}
	}
	return nil
}

// disabledBy names the setting that turns down server name, whose entry
// came from a file of the given role; "" if none does.
func (c *claudeOff) disabledBy(name string, role ClaudeRole) string {
	if by, ok := c.mcpjson[name]; ok && role == ClaudeMcpjson {
		return by
	}
	if by, ok := c.servers[name]; ok && (role == ClaudeMcpjson || role == ClaudeServers) {
		return by
	}
	return ""
}

// claudeProject returns the object Claude Code keeps in its ~/.claude.json
// for the project under the first of keys that has one, and that key; nil
// when none has one.
func claudeProject(data []byte, keys []string) (json.RawMessage, string, error) {
	data = stripJSONC(data)
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		return nil, "", fmt.Errorf("parse config: %w", describeSyntaxError(data, err))
	}
	projects, ok := rawMember(data, "projects")
	if !ok {
		return nil, "", nil
	}
	for _, key := range keys {
		if p, ok := rawMember(projects, key); ok && jsonKind(p) == "object" {
			return p, key, nil
		}
	}
	return nil, "", nil
}
