package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// summary is an entry as "scope:command" (or "scope:disabled",
// "scope:invalid") for compact comparisons.
func summary(m *Merged) map[string]string {
	out := make(map[string]string)
	for _, e := range m.Entries {
		v := e.Server.Source.Scope.String() + ":"
		switch {
		case e.Disabled:
			v += "disabled"
		case e.Err != nil:
			v += "invalid"
		default:
			v += e.Server.Command
		}
		out[e.Name] = v
	}
	return out
}

func TestLoadLayersOverrideOrder(t *testing.T) {
	dir := t.TempDir()
	managed := writeFile(t, dir, "managed.json", `{"mcpServers": {"a": {"command": "managed"}, "b": {"command": "managed"}, "c": {"command": "managed"}, "d": {"command": "managed"}, "e": {"command": "managed"}, "f": {"command": "managed"}}}`)
	user := writeFile(t, dir, "user.json", `{"mcpServers": {"b": {"command": "user"}, "c": {"command": "user"}, "d": {"command": "user"}, "e": {"command": "user"}, "f": {"command": "user"}}}`)
	project := writeFile(t, dir, "project.json", `{"servers": {"c": {"command": "project"}, "d": {"command": "project"}, "e": {"command": "project"}, "f": {"command": "project"}}}`)
	local := writeFile(t, dir, "local.json", `{"mcpServers": {"d": {"command": "local"}, "e": {"command": "local"}, "f": {"command": "local"}}}`)
	flag := writeFile(t, dir, "flag.json", `{"mcpServers": {"e": {"command": "flag-file"}, "f": {"command": "flag-file"}}}`)
	layers := []Layer{
		{Scope: ScopeManaged, Path: managed, Optional: true},
		{Scope: ScopeUser, Path: user, Optional: true},
		{Scope: ScopeProject, Path: project, Optional: true},
		{Scope: ScopeLocal, Path: local, Optional: true},
		{Scope: ScopeFlag, Path: flag},
		{Scope: ScopeFlag, Path: "--config #2", Inline: []byte(`{"mcpServers": {"f": {"command": "inline"}}}`)},
	}
	m, err := LoadLayers(layers, nil)
	if err != nil {
		t.Fatalf("LoadLayers: got %v, want nil", err)
	}
	want := map[string]string{
		"a": "managed:managed", "b": "user:user", "c": "project:project",
		"d": "local:local", "e": "flag:flag-file", "f": "flag:inline",
	}
	if diff := cmp.Diff(want, summary(m)); diff != "" {
		t.Errorf("merged entries (-want +got):\n%s", diff)
	}
	for _, e := range m.Entries {
		if e.Name == "d" && e.Server.Source.Name != local {
			t.Errorf("source of d: got %q, want %q", e.Server.Source.Name, local)
		}
		if e.Name == "f" && e.Server.Source.Name != "--config #2" {
			t.Errorf("source of f: got %q, want --config #2", e.Server.Source.Name)
		}
	}
	if got := len(m.Read); got != len(layers) {
		t.Errorf("Read: got %d layers, want %d", got, len(layers))
	}
}

// TestLoadLayersWholeEntries: a later entry replaces the earlier one as a
// whole, including when it is disabled or invalid, and a disabled entry is
// parsed so that it can be enabled.
func TestLoadLayersWholeEntries(t *testing.T) {
	dir := t.TempDir()
	project := writeFile(t, dir, "project.json", `{"mcpServers": {
		"parked": {"command": "p", "env": {"K": "v"}},
		"broken-later": {"command": "p"},
		"fixed-later": {"args": ["no command"]}
	}}`)
	local := writeFile(t, dir, "local.json", `{"mcpServers": {
		"parked": {"command": "l", "disabled": true},
		"broken-later": {"type": "carrier-pigeon"},
		"fixed-later": {"command": "l"}
	}}`)
	m, err := LoadLayers([]Layer{
		{Scope: ScopeProject, Path: project},
		{Scope: ScopeLocal, Path: local},
	}, nil)
	if err != nil {
		t.Fatalf("LoadLayers: got %v, want nil", err)
	}
	want := map[string]string{"parked": "local:disabled", "broken-later": "local:invalid", "fixed-later": "local:l"}
	if diff := cmp.Diff(want, summary(m)); diff != "" {
		t.Errorf("merged entries (-want +got):\n%s", diff)
	}
	for _, e := range m.Entries {
		if e.Name == "parked" {
			if e.Err != nil || e.Server.Command != "l" || len(e.Server.Env) != 0 {
				t.Errorf("parked entry: got %+v (err %v), want the local entry only, usable", e.Server, e.Err)
			}
		}
	}
}

func TestLoadLayersMissingAndBroken(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.json")

	m, err := LoadLayers([]Layer{{Scope: ScopeUser, Path: missing, Optional: true}}, nil)
	if err != nil || len(m.Entries) != 0 || len(m.Read) != 0 {
		t.Errorf("optional missing file: got %+v, %v; want nothing read and no error", m, err)
	}
	_, err = LoadLayers([]Layer{{Scope: ScopeFlag, Path: missing}}, nil)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("required missing file: got %v, want os.ErrNotExist naming %s", err, missing)
	}

	broken := writeFile(t, dir, "broken.json", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n    \"b\": {}\n  }\n}\n")
	_, err = LoadLayers([]Layer{
		{Scope: ScopeProject, Path: writeFile(t, dir, "good.json", `{"mcpServers": {}}`), Optional: true},
		{Scope: ScopeLocal, Path: broken, Optional: true},
	}, nil)
	if err == nil || !strings.Contains(err.Error(), broken) || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("broken optional file: got %v, want an error naming %s and line 4", err, broken)
	}

	_, err = LoadLayers([]Layer{{Scope: ScopeFlag, Path: "--config #1", Inline: []byte(`{"mcpServers": [}`)}}, nil)
	if err == nil || !strings.Contains(err.Error(), "--config #1") || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("broken inline JSON: got %v, want an error naming --config #1 and line 1", err)
	}

	if err := os.Chmod(broken, 0); err == nil && os.Geteuid() != 0 {
		_, err = LoadLayers([]Layer{{Scope: ScopeLocal, Path: broken, Optional: true}}, nil)
		if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), broken) {
			t.Errorf("unreadable optional file: got %v, want a permission error naming %s", err, broken)
		}
	}
}

// TestLoadLayersNotAFile: a scope's file that is a device (a cloned
// repository's .mcp.json linked to /dev/zero), a directory or larger than
// a config file can be is an error naming it, optional or not, and is
// never read; a FIFO nobody writes to reads as empty at once.
func TestLoadLayersNotAFile(t *testing.T) {
	dir := t.TempDir()
	device := filepath.Join(dir, ".mcp.json")
	if err := os.Symlink("/dev/zero", device); err != nil {
		t.Fatal(err)
	}
	large := writeFile(t, dir, "large.json", "")
	// Sparse: the size is all that is looked at.
	if err := os.Truncate(large, 256<<20+1); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{device, "load config: read " + device + ": is a character device, not a regular file"},
		{dir, "load config: read " + dir + ": is a directory, not a regular file"},
		{large, "load config: read " + large + ": too large: more than 256 MiB"},
		{fifo, "load config " + fifo + ": parse config: "},
	} {
		for _, optional := range []bool{true, false} {
			_, err := LoadLayers([]Layer{{Scope: ScopeProject, Path: tc.path, Optional: optional}}, nil)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("%s (optional %v): got %v, want %q", tc.path, optional, err, tc.want)
			}
		}
	}
}

// TestLoadLayersShared: an editor's own settings file may hold no servers
// at all, and then counts as not read (so that the built-in default still
// applies); mcpd's own files must have the key.
func TestLoadLayersShared(t *testing.T) {
	dir := t.TempDir()
	editor := writeFile(t, dir, "editor.json", `{"theme": "dark"}`)
	m, err := LoadLayers([]Layer{{Scope: ScopeUser, Path: editor, Optional: true, Shared: true}}, nil)
	if err != nil || len(m.Entries) != 0 || len(m.Read) != 0 {
		t.Errorf("shared file without servers: got %+v, %v; want no entries, no file read and no error", m, err)
	}
	if _, err := LoadLayers([]Layer{{Scope: ScopeUser, Path: editor, Optional: true}}, nil); err == nil {
		t.Errorf("own file without servers: got nil error, want one")
	}
	// Claude Code's ~/.claude.json: its own keys are no warnings there.
	claude := writeFile(t, dir, ".claude.json", `{"numStartups": 42, "projects": {}, "oauthAccount": {},
		"mcpServers": {"a": {"command": "echo"}}}`)
	m, err = LoadLayers([]Layer{{Scope: ScopeUser, Path: claude, Optional: true, Shared: true}}, nil)
	if err != nil || len(m.Entries) != 1 || len(m.Warnings) != 0 {
		t.Errorf("shared file with servers: got %d entries, warnings %q, %v; want 1 entry and no warnings", len(m.Entries), m.Warnings, err)
	}
}
