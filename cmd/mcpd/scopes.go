package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	mcpconfig "github.com/mcpd-project/mcpd/internal/config"
)

// The files of the user and project scopes.
const (
	// userClaudeFile is Claude Code's user settings: its top-level
	// "mcpServers" are the user's servers (read first, so that mcpd's own
	// user file wins), and projects[<dir>].mcpServers the servers of its
	// local scope for project dir (read before mcpd's local file).
	userClaudeFile = ".claude.json"
	// userFile is mcpd's own user file, in the home directory.
	userFile = ".mcp.json"
	// projectFile is the project's shared file.
	projectFile = ".mcp.json"
	// localFile holds personal overrides beside the project's file (keep
	// it out of version control).
	localFile = ".mcp.local.json"

	// Claude Code's settings files, read only for the servers its user
	// turned down (see mcpconfig.ClaudeChoices): the project's personal
	// and shared ones, and the user's in the home directory.
	claudeLocalSettings   = ".claude/settings.local.json"
	claudeProjectSettings = ".claude/settings.json"
	claudeUserSettings    = ".claude/settings.json"
)

// configLayers lists what mcpd reads, in order: the managed file, the
// user's files, the project's file, the local files (Claude Code's servers
// for the project, then mcpd's .mcp.local.json), the files where Claude
// Code keeps the servers its user turned down for the project, then every
// --config (a file, or inline JSON when it starts with '{'). Only --config
// files must exist.
func configLayers(c *config) ([]mcpconfig.Layer, error) {
	read, err := parseScopes(c.scopes)
	if err != nil {
		return nil, err
	}
	var layers []mcpconfig.Layer
	if read[mcpconfig.ScopeManaged] && c.managedConfig != "" {
		layers = append(layers, mcpconfig.Layer{Scope: mcpconfig.ScopeManaged, Path: c.managedConfig, Optional: true})
	}
	if read[mcpconfig.ScopeManaged] && c.claudeManaged != "" {
		managed, err := claudeManagedLayers(c.claudeManaged)
		if err != nil {
			return nil, err
		}
		layers = append(layers, managed...)
	}
	home, homeErr := os.UserHomeDir()
	if homeErr == nil && read[mcpconfig.ScopeUser] {
		layers = append(layers,
			mcpconfig.Layer{Scope: mcpconfig.ScopeUser, Path: filepath.Join(home, userClaudeFile), Optional: true, Shared: true, Claude: mcpconfig.ClaudeServers},
			mcpconfig.Layer{Scope: mcpconfig.ScopeUser, Path: filepath.Join(home, userFile), Optional: true},
		)
	}
	dir := c.project
	if dir != "" {
		// A mistyped --project would otherwise read nothing, silently.
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--project %s: not a directory", dir)
		}
	}
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("project directory: %w", err)
		}
		dir = wd
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("project directory: %w", err)
	}
	// The project's servers start in the project, as Claude Code started
	// there runs them. In mcpd's own working directory they do anyway,
	// and an entry that moves, unchanged, between the project's files and
	// the others runs on.
	start := dir
	if wd, err := os.Getwd(); err == nil && sameDir(wd, dir) {
		start = ""
	}
	if read[mcpconfig.ScopeProject] {
		layers = append(layers, mcpconfig.Layer{Scope: mcpconfig.ScopeProject, Path: filepath.Join(dir, projectFile), Optional: true, Claude: mcpconfig.ClaudeMcpjson, Dir: start})
	}
	// Claude Code keeps what it knows of this project in ~/.claude.json
	// under the project's path, as given or with its symlinks resolved.
	keys := []string{dir}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		keys = append(keys, real)
	}
	if read[mcpconfig.ScopeLocal] {
		if homeErr == nil {
			// Claude Code's local scope (what `claude mcp add` writes by
			// default): its servers for this project. mcpd's own local
			// file wins over them.
			layers = append(layers, mcpconfig.Layer{Scope: mcpconfig.ScopeLocal, Path: filepath.Join(home, userClaudeFile), Optional: true, Shared: true, Projects: keys, Claude: mcpconfig.ClaudeServers, Dir: start})
		}
		layers = append(layers, mcpconfig.Layer{Scope: mcpconfig.ScopeLocal, Path: filepath.Join(dir, localFile), Optional: true, Dir: start})
	}
	// The servers the user turned down in Claude Code for this project,
	// wherever Claude Code keeps that choice: its project object, with
	// any scope that holds Claude Code's servers, and its settings files,
	// whose lists turn down only the project's .mcp.json servers, with
	// the project scope (so that --scopes managed,user reads no file of
	// the project).
	if homeErr == nil && (read[mcpconfig.ScopeUser] || read[mcpconfig.ScopeProject] || read[mcpconfig.ScopeLocal]) {
		layers = append(layers, mcpconfig.Layer{Path: filepath.Join(home, userClaudeFile), Optional: true, Projects: keys, Claude: mcpconfig.ClaudeChoices})
	}
	if read[mcpconfig.ScopeProject] {
		settings := []string{filepath.Join(dir, claudeLocalSettings), filepath.Join(dir, claudeProjectSettings)}
		if homeErr == nil {
			settings = append(settings, filepath.Join(home, claudeUserSettings))
		}
		for _, path := range settings {
			layers = append(layers, mcpconfig.Layer{Path: path, Optional: true, Claude: mcpconfig.ClaudeChoices})
		}
	}
	for i, v := range c.configs {
		if strings.HasPrefix(strings.TrimSpace(v), "{") {
			layers = append(layers, mcpconfig.Layer{Scope: mcpconfig.ScopeFlag, Path: fmt.Sprintf("--config #%d", i+1), Inline: []byte(v)})
			continue
		}
		layers = append(layers, mcpconfig.Layer{Scope: mcpconfig.ScopeFlag, Path: v})
	}
	return layers, nil
}

// sameDir reports whether the directories a and b are one: the same path,
// or one reached through a symlink to the other.
func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// The files of Claude Code's managed settings, in --claude-managed-dir.
const (
	// claudeManagedServers, when it exists, holds the only servers
	// Claude Code runs.
	claudeManagedServers = "managed-mcp.json"
	// claudeManagedSettings holds the organisation's settings, among them
	// the MCP server policy; the drop-in directory's *.json files follow
	// it in the order of their names.
	claudeManagedSettings = "managed-settings.json"
	claudeManagedDropIns  = "managed-settings.d"
)

// claudeManagedLayers lists Claude Code's managed files in dir: its
// managed-mcp.json (servers of the managed scope), then its managed
// settings, read for their MCP server policy. A drop-in directory that
// cannot be listed stops the load: skipped, it would let run what its
// policy stops.
func claudeManagedLayers(dir string) ([]mcpconfig.Layer, error) {
	layers := []mcpconfig.Layer{
		{Scope: mcpconfig.ScopeManaged, Path: filepath.Join(dir, claudeManagedServers), Optional: true, Claude: mcpconfig.ClaudeExclusive},
		{Path: filepath.Join(dir, claudeManagedSettings), Optional: true, Claude: mcpconfig.ClaudeManagedSettings},
	}
	dropIns := filepath.Join(dir, claudeManagedDropIns)
	entries, err := os.ReadDir(dropIns)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return nil, fmt.Errorf("load config: %w", err)
	}
	for _, e := range entries { // sorted by name
		if name := e.Name(); !strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".json") {
			layers = append(layers, mcpconfig.Layer{Path: filepath.Join(dropIns, name), Optional: true, Claude: mcpconfig.ClaudeManagedSettings})
		}
	}
	return layers, nil
}

// parseScopes reads --scopes: names of the scopes before --config.
func parseScopes(list string) (map[mcpconfig.Scope]bool, error) {
	known := map[string]mcpconfig.Scope{
		"managed": mcpconfig.ScopeManaged, "user": mcpconfig.ScopeUser,
		"project": mcpconfig.ScopeProject, "local": mcpconfig.ScopeLocal,
	}
	out := make(map[mcpconfig.Scope]bool)
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		s, ok := known[name]
		if !ok {
			return nil, fmt.Errorf("--scopes: unknown scope %q (want managed, user, project or local)", name)
		}
		out[s] = true
	}
	return out, nil
}

// loadConfig reads every scope and merges them. When no file of any scope
// exists and no --config is given, the built-in default (the demo server)
// applies instead, under the policy the settings files set.
func loadConfig(c *config) (*mcpconfig.Merged, error) {
	layers, err := configLayers(c)
	if err != nil {
		return nil, err
	}
	merged, err := mcpconfig.LoadLayers(layers, os.LookupEnv)
	if err != nil || len(merged.Read) > 0 {
		return merged, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for the default config: %w", err)
	}
	lookup := func(name string) (string, bool) {
		if name == "MCPD_SELF" {
			return self, true
		}
		return os.LookupEnv(name)
	}
	def, err := mcpconfig.LoadLayers([]mcpconfig.Layer{{Scope: mcpconfig.ScopeDefault, Path: "built-in default", Inline: defaultConfig}}, lookup)
	if err != nil {
		return nil, err
	}
	// The settings files hold no servers, but their policy and warnings
	// hold for the default's.
	def.Policy, def.Warnings = merged.Policy, append(merged.Warnings, def.Warnings...)
	return def, nil
}
