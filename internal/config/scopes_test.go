package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// TestLoadLayersReadsAFileOnce: the layers that read one file (Claude
// Code's ~/.claude.json: its user servers, the project's servers and the
// project's choices) see one version of it. A FIFO gives its content to
// its content to one read only: a second read finds it empty.
func TestLoadLayersReadsAFileOnce(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, ".claude.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const project = "/home/me/app"
	content := `{"mcpServers": {"u": {"command": "echo"}},
		"projects": {"` + project + `": {"mcpServers": {"l": {"command": "echo"}}, "disabledMcpServers": ["u"]}}}`
	// The content waits in the pipe with no writer left: one read finds
	// it, and the end of the data after it.
	hold, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString(content); err != nil {
		t.Fatal(err)
	}
	w.Close()
	m, err := LoadLayers([]Layer{
		{Scope: ScopeUser, Path: fifo, Optional: true, Shared: true, Claude: ClaudeServers},
		{Scope: ScopeLocal, Path: fifo, Optional: true, Shared: true, Claude: ClaudeServers, Projects: []string{project}},
		{Scope: ScopeLocal, Path: fifo, Optional: true, Claude: ClaudeChoices, Projects: []string{project}},
	}, nil)
	if err != nil {
		t.Fatalf("LoadLayers: %v", err)
	}
	var got []string
	for _, e := range m.Entries {
		got = append(got, fmt.Sprintf("%s disabled=%v", e.Name, e.Disabled))
	}
	if want := []string{"l disabled=false", "u disabled=true"}; !slices.Equal(got, want) {
		t.Errorf("entries: got %q, want %q", got, want)
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

// TestLoadLayersClaudeChoices keeps off, as DISABLED entries, the servers
// a Claude Code user turned down for the project: disabledMcpjsonServers
// (in ~/.claude.json's project object or any settings file) applies to
// the project's .mcp.json only, disabledMcpServers (in the project object
// only) to the servers of every file Claude Code reads, never to mcpd's
// own files. An approval elsewhere does not undo a rejection.
func TestLoadLayersClaudeChoices(t *testing.T) {
	dir := t.TempDir()
	const project = "/home/me/app"
	claude := writeFile(t, dir, ".claude.json", `{
		"mcpServers": {"u": {"command": "user"}, "u2": {"command": "user"}},
		"projects": {
			"/home/me/app": {
				"mcpServers": {"l": {"command": "local"}},
				"disabledMcpServers": ["u", "l", "p2", "own", "flag", "parked"],
				"disabledMcpjsonServers": ["p", "u2", "bad"],
				"enabledMcpjsonServers": ["q"], "enableAllProjectMcpServers": true
			},
			"/elsewhere": {"disabledMcpServers": ["q", "r"], "disabledMcpjsonServers": ["q", "r"]}
		}}`)
	// disabledMcpServers is no key of Claude Code's settings files.
	settings := writeFile(t, dir, "settings.local.json", `{"disabledMcpjsonServers": ["q"], "disabledMcpServers": ["r"], "enabledMcpjsonServers": ["p"]}`)
	mcpjson := writeFile(t, dir, "project.json", `{"mcpServers": {
		"p": {"command": "project"}, "p2": {"command": "project"}, "q": {"command": "project"},
		"r": {"command": "project"}, "l": {"command": "project"}, "bad": {"command": 5},
		"parked": {"command": "project", "disabled": true}}}`)
	own := writeFile(t, dir, "own.json", `{"mcpServers": {"own": {"command": "own"}}}`)
	layers := []Layer{
		{Scope: ScopeUser, Path: claude, Optional: true, Shared: true, Claude: ClaudeServers},
		{Scope: ScopeUser, Path: own, Optional: true},
		{Scope: ScopeProject, Path: mcpjson, Optional: true, Claude: ClaudeMcpjson},
		{Scope: ScopeLocal, Path: claude, Optional: true, Shared: true, Projects: []string{project}, Claude: ClaudeServers},
		{Path: claude, Optional: true, Projects: []string{project}, Claude: ClaudeChoices},
		{Path: settings, Optional: true, Claude: ClaudeChoices},
		{Path: filepath.Join(dir, "missing.json"), Optional: true, Claude: ClaudeChoices},
		{Scope: ScopeFlag, Path: "--config #1", Inline: []byte(`{"mcpServers": {"flag": {"command": "flag"}}}`)},
	}
	m, err := LoadLayers(layers, nil)
	if err != nil {
		t.Fatalf("LoadLayers: got %v, want nil", err)
	}
	want := map[string]string{
		"u": "user:disabled", "u2": "user:user", "own": "user:own",
		"p": "project:disabled", "p2": "project:disabled", "q": "project:disabled", "r": "project:project",
		"bad": "project:disabled", "parked": "project:disabled",
		"l": "local:disabled", "flag": "flag:flag",
	}
	if diff := cmp.Diff(want, summary(m)); diff != "" {
		t.Errorf("merged entries (-want +got):\n%s", diff)
	}
	projectObject := claude + ` projects["/home/me/app"]`
	wantBy := map[string]string{
		"u": "disabledMcpServers in " + projectObject, "l": "disabledMcpServers in " + projectObject,
		"p2": "disabledMcpServers in " + projectObject, "p": "disabledMcpjsonServers in " + projectObject,
		"bad": "disabledMcpjsonServers in " + projectObject, "q": "disabledMcpjsonServers in " + settings,
	}
	for _, e := range m.Entries {
		if got := e.Server.Source.DisabledBy; got != wantBy[e.Name] {
			t.Errorf("%s: got DisabledBy %q, want %q", e.Name, got, wantBy[e.Name])
		}
		if e.Name == "p" && (e.Server.Command != "project" || e.Err != nil) {
			t.Errorf("p: got command %q, err %v; want its entry kept for an enable", e.Server.Command, e.Err)
		}
		if e.Name == "bad" && e.Err == nil {
			t.Errorf("bad: got no error, want its entry's error kept")
		}
	}
	if got := len(m.Read); got != 5 {
		t.Errorf("Read: got %d layers (%v), want 5: files of choices alone are no config", got, m.Read)
	}
}

// TestLoadLayersClaudeChoicesBroken refuses a settings file that does not
// say which servers it turns down: were it skipped, a server its user
// rejected would run.
func TestLoadLayersClaudeChoicesBroken(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"not JSON":     `{"disabledMcpjsonServers": [`,
		"not a list":   `{"disabledMcpjsonServers": "p"}`,
		"not a string": `{"disabledMcpjsonServers": ["p", 5]}`,
		"not object":   `["p"]`,
	} {
		path := writeFile(t, dir, strings.ReplaceAll(name, " ", "-")+".json", content)
		_, err := LoadLayers([]Layer{{Path: path, Optional: true, Claude: ClaudeChoices}}, nil)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: got %v, want an error naming %s", name, err, path)
		}
	}
	// Settings without the lists, and a ~/.claude.json without the project
	// or its lists, change nothing.
	for _, content := range []string{`{"permissions": {"allow": []}}`, `{"projects": {}}`, `{"projects": {"/p": {"allowedTools": []}}}`, `{}`} {
		path := writeFile(t, dir, "quiet.json", content)
		m, err := LoadLayers([]Layer{
			{Scope: ScopeFlag, Path: "--config #1", Inline: []byte(`{"mcpServers": {"p": {"command": "x"}}}`), Claude: ClaudeMcpjson},
			{Path: path, Optional: true, Claude: ClaudeChoices},
			{Path: path, Optional: true, Projects: []string{"/p"}, Claude: ClaudeChoices},
		}, nil)
		if err != nil {
			t.Errorf("%s: got %v, want nil", content, err)
			continue
		}
		if got := summary(m)["p"]; got != "flag:x" {
			t.Errorf("%s: got p %q, want flag:x (enabled)", content, got)
		}
	}
}

// TestLoadLayersDir starts a layer's stdio servers in its Dir: an entry
// without cwd gets Dir, a relative cwd is taken from it, an absolute one
// stays; a layer without Dir keeps its entries' cwd as written.
func TestLoadLayersDir(t *testing.T) {
	project := `{"mcpServers": {
		"none": {"command": "./srv"},
		"rel": {"command": "srv", "cwd": "sub/dir"},
		"abs": {"command": "srv", "cwd": "/opt/srv"},
		"parked": {"command": "srv", "disabled": true},
		"web": {"url": "https://example.com/mcp"}
	}}`
	m, err := LoadLayers([]Layer{
		{Scope: ScopeProject, Path: "project", Inline: []byte(project), Dir: "/home/me/app"},
		{Scope: ScopeFlag, Path: "flag", Inline: []byte(`{"mcpServers": {"flag": {"command": "srv", "cwd": "sub"}}}`)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range m.Entries {
		got[e.Name] = e.Server.Cwd
	}
	want := map[string]string{
		"none": "/home/me/app", "rel": "/home/me/app/sub/dir", "abs": "/opt/srv", "parked": "/home/me/app",
		"web": "", "flag": "sub",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cwd by server (-want +got):\n%s", diff)
	}
}
