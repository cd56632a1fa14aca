package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// demoEntry is a config entry that runs the demo server; mark ends up in
// the server's args, so that a test sees which scope's entry won.
func demoEntry(t *testing.T, mark string) map[string]any {
	return map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server", mark}}
}

// scopeFile writes a config file with the given servers, each running
// the demo server marked with mark, plus extra top-level keys.
func scopeFile(t *testing.T, path, mark string, names []string, extra map[string]any) {
	t.Helper()
	servers := map[string]any{}
	for _, n := range names {
		servers[n] = demoEntry(t, mark)
	}
	doc := map[string]any{"mcpServers": servers}
	for k, v := range extra {
		doc[k] = v
	}
	replaceFile(t, path, mustJSON(t, doc))
}

// TestConfigScopes reads every scope, each overriding the ones before it
// per server, then reloads after changes across scopes.
func TestConfigScopes(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	home, project, etc := shortTempDir(t), shortTempDir(t), shortTempDir(t)
	managed := filepath.Join(etc, "managed-mcp.json")
	claude := filepath.Join(home, ".claude.json")
	user := filepath.Join(home, ".mcp.json")
	shared := filepath.Join(project, ".mcp.json")
	local := filepath.Join(project, ".mcp.local.json")
	flagFile := filepath.Join(etc, "flag.json")

	scopeFile(t, managed, "managed", []string{"m", "cu", "u", "p", "l", "f", "i"}, nil)
	// Claude Code's user file holds more than servers.
	scopeFile(t, claude, "claude", []string{"cu", "u", "p", "l", "f", "i"}, map[string]any{"numStartups": 7, "projects": map[string]any{}})
	scopeFile(t, user, "user", []string{"u", "p", "l", "f", "i"}, nil)
	scopeFile(t, shared, "project", []string{"p", "l", "f", "i", "off"}, nil)
	replaceFile(t, local, mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"l": demoEntry(t, "local"), "f": demoEntry(t, "local"), "i": demoEntry(t, "local"),
		"off": map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server", "local"}, "disabled": true},
	}}))
	scopeFile(t, flagFile, "flag", []string{"f", "i"}, nil)
	inline := mustJSON(t, map[string]any{"mcpServers": map[string]any{"i": demoEntry(t, "inline")}})

	d := startDaemon(ctx, t, daemonOptions{
		config: flagFile,
		args:   []string{"--config", inline, "--project", project, "--managed-config", managed},
		env:    []string{"HOME=" + home},
	})
	type want struct {
		mark   string
		scope  mcpdv1.ConfigScope
		source string
	}
	check := func(t *testing.T, wants map[string]want) map[string]*mcpdv1.Server {
		t.Helper()
		got := map[string]*mcpdv1.Server{}
		for name, w := range wants {
			s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
			if !slices.Contains(s.GetArgs(), w.mark) || s.GetScope() != w.scope || s.GetSource() != w.source {
				t.Errorf("server %s: got args %q scope %v source %q; want mark %q scope %v source %q",
					name, s.GetArgs(), s.GetScope(), s.GetSource(), w.mark, w.scope, w.source)
			}
			got[name] = s
		}
		return got
	}
	before := check(t, map[string]want{
		"m":  {"managed", mcpdv1.ConfigScope_CONFIG_SCOPE_MANAGED, managed},
		"cu": {"claude", mcpdv1.ConfigScope_CONFIG_SCOPE_USER, claude},
		"u":  {"user", mcpdv1.ConfigScope_CONFIG_SCOPE_USER, user},
		"p":  {"project", mcpdv1.ConfigScope_CONFIG_SCOPE_PROJECT, shared},
		"l":  {"local", mcpdv1.ConfigScope_CONFIG_SCOPE_LOCAL, local},
		"f":  {"flag", mcpdv1.ConfigScope_CONFIG_SCOPE_FLAG, flagFile},
		"i":  {"inline", mcpdv1.ConfigScope_CONFIG_SCOPE_FLAG, "--config #2"},
	})
	off := d.waitServer(ctx, t, "off", mcpdv1.ServerState_SERVER_STATE_DISABLED)
	if off.GetScope() != mcpdv1.ConfigScope_CONFIG_SCOPE_LOCAL || !slices.Contains(off.GetArgs(), "local") || off.GetPid() != 0 {
		t.Errorf("disabled entry: got scope %v args %q pid %d; want the local entry, not running", off.GetScope(), off.GetArgs(), off.GetPid())
	}
	list, err := d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.GetServers()); n != 8 {
		t.Errorf("ListServers: got %d servers, want 8 (no demo server once a config file exists)", n)
	}

	// Across scopes: the managed file goes away, the local file stops
	// overriding l and takes p over unchanged, and "off" is enabled there.
	if err := os.Remove(managed); err != nil {
		t.Fatal(err)
	}
	pEntry := demoEntry(t, "project")
	replaceFile(t, local, mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"p": pEntry, "f": demoEntry(t, "local"), "i": demoEntry(t, "local"), "off": demoEntry(t, "local"),
	}}))
	d.send(t, syscall.SIGHUP)
	poll(ctx, t, "the managed-only server is gone", func() (bool, error) {
		_, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "m"})
		return status.Code(err) == codes.NotFound, err
	})
	// The reload applies servers in name order; p comes late.
	poll(ctx, t, "p is relabelled", func() (bool, error) {
		resp, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "p"})
		return resp.GetServer().GetScope() == mcpdv1.ConfigScope_CONFIG_SCOPE_LOCAL, err
	})
	after := check(t, map[string]want{
		"u":   {"user", mcpdv1.ConfigScope_CONFIG_SCOPE_USER, user},
		"p":   {"project", mcpdv1.ConfigScope_CONFIG_SCOPE_LOCAL, local},
		"l":   {"project", mcpdv1.ConfigScope_CONFIG_SCOPE_PROJECT, shared},
		"i":   {"inline", mcpdv1.ConfigScope_CONFIG_SCOPE_FLAG, "--config #2"},
		"off": {"local", mcpdv1.ConfigScope_CONFIG_SCOPE_LOCAL, local},
	})
	for _, name := range []string{"u", "p", "i"} {
		if after[name].GetPid() != before[name].GetPid() {
			t.Errorf("server %s: got pid %d, want %d: its entry did not change, so it must not restart", name, after[name].GetPid(), before[name].GetPid())
		}
	}
	if after["l"].GetPid() == before["l"].GetPid() {
		t.Errorf("server l: got the same pid %d, want a new process for the changed entry", after["l"].GetPid())
	}
}

// TestConfigScopeErrors: a scope file that does not parse stops the start
// with a message naming the file and the line; so does broken inline JSON.
// Missing optional files are fine.
func TestConfigScopeErrors(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	project := shortTempDir(t)
	local := filepath.Join(project, ".mcp.local.json")
	replaceFile(t, local, "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": {\"command\": \"y\"}\n  }\n}\n")
	sock := filepath.Join(shortTempDir(t), "mcpd.sock")
	code, out := runMcpd(ctx, t, "--listen", "unix://"+sock, "--project", project)
	if code != 1 || !strings.Contains(out, local) || !strings.Contains(out, "line 4") {
		t.Errorf("broken local file: exit %d, output %q; want exit 1 naming %s and line 4", code, out, local)
	}

	// --scopes leaves the local file out: the start succeeds.
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--project", project, "--scopes", "managed,user,project"}})
	if list, err := d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{}); err != nil || len(list.GetServers()) != 0 {
		t.Errorf("--scopes without local: got %v %v, want no servers", list.GetServers(), err)
	}

	missing := filepath.Join(project, "no-such-dir")
	code, out = runMcpd(ctx, t, "--listen", "unix://"+sock, "--project", missing)
	if code != 1 || !strings.Contains(out, missing) {
		t.Errorf("missing --project directory: exit %d, output %q; want exit 1 naming it", code, out)
	}

	code, out = runMcpd(ctx, t, "--listen", "unix://"+sock, "--config", `{"mcpServers": {"a": {"command": "x"},}}`, "--config", "{\"mcpServers\":\n {\"a\" {}}}")
	if code != 1 || !strings.Contains(out, "--config #2") || !strings.Contains(out, "line 2") {
		t.Errorf("broken inline JSON: exit %d, output %q; want exit 1 naming --config #2 and line 2", code, out)
	}
}

// TestEditorFileWithoutServersKeepsDefault: Claude Code's ~/.claude.json
// exists for every user of it, mostly without servers; such a file does
// not count as a configuration, so mcpd still runs the demo server.
func TestEditorFileWithoutServersKeepsDefault(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	home, project := shortTempDir(t), shortTempDir(t)
	replaceFile(t, filepath.Join(home, ".claude.json"), `{"numStartups": 3, "projects": {}}`)
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--project", project}, env: []string{"HOME=" + home}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
}

// TestClaudeCodeLocalScope reads the servers `claude mcp add` keeps for
// one project (its default, local scope) in ~/.claude.json, under
// projects[<project dir>]: they override the project's .mcp.json, as in
// Claude Code, and mcpd's own .mcp.local.json overrides them. Other
// projects' servers are not read, and a project entry without servers
// (Claude Code writes one for every directory it opens) keeps the demo
// server. A reload picks up what Claude Code changed.
func TestClaudeCodeLocalScope(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	home, project, other := shortTempDir(t), shortTempDir(t), shortTempDir(t)
	// mcpd is pointed at the project through a symlink; Claude Code keys
	// the project by its real path.
	realProject, err := filepath.EvalSymlinks(project)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(shortTempDir(t), "app")
	if err := os.Symlink(project, link); err != nil {
		t.Fatal(err)
	}
	claude := filepath.Join(home, ".claude.json")
	claudeFile := func(local map[string]any) string {
		return mustJSON(t, map[string]any{
			"numStartups": 12,
			"mcpServers":  map[string]any{"u": demoEntry(t, "user")},
			"projects": map[string]any{
				realProject: map[string]any{"allowedTools": []string{}, "mcpServers": local, "disabledMcpjsonServers": []string{}},
				other:       map[string]any{"mcpServers": map[string]any{"elsewhere": demoEntry(t, "other")}},
			},
		})
	}
	replaceFile(t, claude, claudeFile(map[string]any{
		"l": demoEntry(t, "claude-local"), "p": demoEntry(t, "claude-local"), "x": demoEntry(t, "claude-local"),
	}))
	scopeFile(t, filepath.Join(project, ".mcp.json"), "project", []string{"p"}, nil)
	scopeFile(t, filepath.Join(project, ".mcp.local.json"), "mcp-local", []string{"x"}, nil)
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--project", link}, env: []string{"HOME=" + home}})

	localSource := claude + " projects[" + strconv.Quote(realProject) + "]"
	wants := map[string]struct {
		mark   string
		scope  mcpdv1.ConfigScope
		source string
	}{
		"u": {"user", mcpdv1.ConfigScope_CONFIG_SCOPE_USER, claude},
		"l": {"claude-local", mcpdv1.ConfigScope_CONFIG_SCOPE_LOCAL, localSource},
		"p": {"claude-local", mcpdv1.ConfigScope_CONFIG_SCOPE_LOCAL, localSource},
		"x": {"mcp-local", mcpdv1.ConfigScope_CONFIG_SCOPE_LOCAL, filepath.Join(link, ".mcp.local.json")},
	}
	for name, w := range wants {
		s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
		if !slices.Contains(s.GetArgs(), w.mark) || s.GetScope() != w.scope || s.GetSource() != w.source {
			t.Errorf("server %s: got args %q scope %v source %q; want mark %q scope %v source %q",
				name, s.GetArgs(), s.GetScope(), s.GetSource(), w.mark, w.scope, w.source)
		}
	}
	list, err := d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.GetServers()); n != len(wants) {
		t.Errorf("ListServers: got %d servers, want %d (none of another project's)", n, len(wants))
	}

	// `claude mcp remove l` and `p`: l goes, and p falls back to the
	// project's .mcp.json.
	replaceFile(t, claude, claudeFile(map[string]any{"x": demoEntry(t, "claude-local")}))
	d.send(t, syscall.SIGHUP)
	poll(ctx, t, "the removed local server is gone", func() (bool, error) {
		_, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "l"})
		return status.Code(err) == codes.NotFound, nil
	})
	poll(ctx, t, "p comes from the project's .mcp.json again", func() (bool, error) {
		resp, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "p"})
		s := resp.GetServer()
		return s.GetState() == mcpdv1.ServerState_SERVER_STATE_READY && s.GetScope() == mcpdv1.ConfigScope_CONFIG_SCOPE_PROJECT && slices.Contains(s.GetArgs(), "project"), err
	})

	// A project Claude Code opened but gave no servers is no config.
	empty := shortTempDir(t)
	replaceFile(t, claude, mustJSON(t, map[string]any{"projects": map[string]any{empty: map[string]any{"mcpServers": map[string]any{}}}}))
	d2 := startDaemon(ctx, t, daemonOptions{args: []string{"--project", empty}, env: []string{"HOME=" + home}})
	d2.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
}

// TestClaudeCodeChoices keeps the servers a Claude Code user turned down
// for the project DISABLED, each with a note naming the setting:
// disabledMcpjsonServers (the project's .mcp.json servers declined, in
// ~/.claude.json or a settings file) and disabledMcpServers (switched off
// in /mcp, any of Claude Code's scopes, never mcpd's own files).
// SetServerEnabled still starts one, and a reload applies changed lists
// to the servers they name only.
func TestClaudeCodeChoices(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	home, project := shortTempDir(t), shortTempDir(t)
	realProject, err := filepath.EvalSymlinks(project)
	if err != nil {
		t.Fatal(err)
	}
	claude := filepath.Join(home, ".claude.json")
	claudeFile := func(choices map[string]any) string {
		return mustJSON(t, map[string]any{
			"mcpServers": map[string]any{"u": demoEntry(t, "user"), "u2": demoEntry(t, "user")},
			"projects":   map[string]any{realProject: choices},
		})
	}
	replaceFile(t, claude, claudeFile(map[string]any{
		"disabledMcpServers":     []string{"u", "own"},
		"disabledMcpjsonServers": []string{"p", "u2"},
		"enabledMcpjsonServers":  []string{"q"},
	}))
	scopeFile(t, filepath.Join(home, ".mcp.json"), "own", []string{"own"}, nil)
	scopeFile(t, filepath.Join(project, ".mcp.json"), "project", []string{"p", "q", "r"}, nil)
	if err := os.Mkdir(filepath.Join(project, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(project, ".claude", "settings.local.json")
	replaceFile(t, settings, mustJSON(t, map[string]any{"disabledMcpjsonServers": []string{"r"}}))
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--project", project}, env: []string{"HOME=" + home}})

	projectObject := claude + " projects[" + strconv.Quote(realProject) + "]"
	off := map[string]string{
		"u": "disabledMcpServers in " + projectObject,
		"p": "disabledMcpjsonServers in " + projectObject,
		"r": "disabledMcpjsonServers in " + settings,
	}
	for name, by := range off {
		s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_DISABLED)
		if s.GetCommand() != mcpdBinary(t) || !slices.ContainsFunc(s.GetNotes(), func(n string) bool { return strings.Contains(n, by) }) {
			t.Errorf("%s: got command %q notes %q; want its config kept and a note naming %q", name, s.GetCommand(), s.GetNotes(), by)
		}
	}
	pids := map[string]int32{}
	for _, name := range []string{"u2", "q", "own"} {
		s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
		if len(s.GetNotes()) != 0 {
			t.Errorf("%s: got notes %q, want none", name, s.GetNotes())
		}
		pids[name] = s.GetPid()
	}
	_, err = d.call(ctx, t, "mcp__p__echo", map[string]any{"message": "x"}, 0)
	wantDisabled(t, err)

	resp, err := d.hub.SetServerEnabled(ctx, &mcpdv1.SetServerEnabledRequest{Name: "p", Enabled: true})
	if err != nil || resp.GetServer().GetState() != mcpdv1.ServerState_SERVER_STATE_READY || len(resp.GetServer().GetNotes()) != 0 {
		t.Fatalf("enable p: got %v notes %q, %v; want READY without notes", resp.GetServer().GetState(), resp.GetServer().GetNotes(), err)
	}
	pids["p"] = resp.GetServer().GetPid()

	// u is switched on again in /mcp, and q declined after all: those two
	// change, the others keep their processes.
	replaceFile(t, claude, claudeFile(map[string]any{
		"disabledMcpServers":     []string{"own"},
		"disabledMcpjsonServers": []string{"p", "u2", "q"},
	}))
	d.send(t, syscall.SIGHUP)
	d.waitServer(ctx, t, "u", mcpdv1.ServerState_SERVER_STATE_READY)
	d.waitServer(ctx, t, "q", mcpdv1.ServerState_SERVER_STATE_DISABLED)
	d.waitServer(ctx, t, "r", mcpdv1.ServerState_SERVER_STATE_DISABLED)
	for _, name := range []string{"u2", "own", "p"} {
		s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
		if s.GetPid() != pids[name] {
			t.Errorf("%s: got pid %d after the reload, want %d: only the servers the lists changed for restart", name, s.GetPid(), pids[name])
		}
	}
	if !processGone(int(pids["q"])) {
		t.Errorf("q's process %d still runs after it was declined", pids["q"])
	}

	// A settings file that does not say what it turns down stops the
	// start, naming it, unless the project scope is left out.
	replaceFile(t, settings, `{"disabledMcpjsonServers": "r"}`)
	sock := filepath.Join(shortTempDir(t), "mcpd.sock")
	code, out := runMcpdWith(ctx, t, daemonEnv("HOME="+home), "--listen", "unix://"+sock, "--project", project)
	if code != 1 || !strings.Contains(out, settings) {
		t.Errorf("broken settings file: exit %d, output %q; want exit 1 naming %s", code, out, settings)
	}
	d2 := startDaemon(ctx, t, daemonOptions{args: []string{"--project", project, "--scopes", "managed,user"}, env: []string{"HOME=" + home}})
	d2.waitServer(ctx, t, "own", mcpdv1.ServerState_SERVER_STATE_READY)
}

// TestServerToggles disables and enables servers, lists "disabled": true
// entries as DISABLED, and keeps API changes in the state file across a
// restart of mcpd, without a secret in the file.
func TestServerToggles(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const secret = "toggle-secret-7c41e"
	dir := shortTempDir(t)
	stateFile := filepath.Join(dir, "state", "mcpd-state.json")
	cfg := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"on":     demoEntry(t, "on"),
		"parked": map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}, "disabled": true},
	}}))
	opts := daemonOptions{config: cfg, args: []string{"--state-file", stateFile}, env: []string{"E2E_TOGGLE_TOKEN=" + secret}}
	d := startDaemon(ctx, t, opts)

	parked := d.waitServer(ctx, t, "parked", mcpdv1.ServerState_SERVER_STATE_DISABLED)
	if parked.GetScope() != mcpdv1.ConfigScope_CONFIG_SCOPE_FLAG || parked.GetCommand() != mcpdBinary(t) {
		t.Errorf("parked: got scope %v command %q, want its config kept", parked.GetScope(), parked.GetCommand())
	}
	_, err := d.call(ctx, t, "mcp__parked__echo", map[string]any{"message": "x"}, 0)
	wantDisabled(t, err)

	on := d.waitServer(ctx, t, "on", mcpdv1.ServerState_SERVER_STATE_READY)
	resp, err := d.hub.SetServerEnabled(ctx, &mcpdv1.SetServerEnabledRequest{Name: "on", Enabled: false})
	if err != nil {
		t.Fatalf("disable: %v", err)
	}
	if s := resp.GetServer(); s.GetState() != mcpdv1.ServerState_SERVER_STATE_DISABLED || s.GetPid() != 0 || s.GetCommand() != mcpdBinary(t) {
		t.Errorf("disabled: got state %v pid %d command %q, want DISABLED, no process, config kept", s.GetState(), s.GetPid(), s.GetCommand())
	}
	if !processGone(int(on.GetPid())) {
		t.Errorf("disabled server's process %d still runs", on.GetPid())
	}
	_, err = d.call(ctx, t, "mcp__on__echo", map[string]any{"message": "x"}, 0)
	wantDisabled(t, err)
	_, err = d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "on"})
	wantDisabled(t, err)
	_, err = d.hub.SetServerEnabled(ctx, &mcpdv1.SetServerEnabledRequest{Name: "nope", Enabled: true})
	wantCode(t, err, codes.NotFound)

	resp, err = d.hub.SetServerEnabled(ctx, &mcpdv1.SetServerEnabledRequest{Name: "parked", Enabled: true})
	if err != nil || resp.GetServer().GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("enable parked: got %v %v, want READY", resp.GetServer().GetState(), err)
	}
	if got := text(d.mustCall(ctx, t, "mcp__parked__echo", map[string]any{"message": "back"})); !strings.Contains(got, "back") {
		t.Errorf("call to the enabled server: got %q, want the echo", got)
	}

	// A reload keeps both choices.
	d.send(t, syscall.SIGHUP)
	poll(ctx, t, "mcpd reloads", func() (bool, error) {
		return strings.Contains(d.log.String(), "reloading config"), nil
	})
	d.waitServer(ctx, t, "on", mcpdv1.ServerState_SERVER_STATE_DISABLED)
	d.waitServer(ctx, t, "parked", mcpdv1.ServerState_SERVER_STATE_READY)

	// Servers added through the API, with secrets.
	d.connect(ctx, t, "api", mcpdBinary(t), []string{"demo-server"}, map[string]string{"E2E_TOGGLE_TOKEN": secret})
	httpCfg := &mcpdv1.ServerConfig{Name: "remote", Transport: &mcpdv1.ServerConfig_Http{Http: &mcpdv1.HttpConfig{
		Url:     "http://127.0.0.1:1/mcp?key=" + secret,
		Headers: map[string]string{"Authorization": "Bearer " + secret},
	}}}
	if _, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: httpCfg}); err != nil {
		t.Fatalf("connect remote: %v", err)
	}
	if _, err := d.hub.SetServerEnabled(ctx, &mcpdv1.SetServerEnabledRequest{Name: "remote", Enabled: false}); err != nil {
		t.Fatalf("disable remote: %v", err)
	}

	fi, err := os.Stat(stateFile)
	if err != nil {
		t.Fatalf("state file: %v", err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("state file mode: got %v, want 0600", mode)
	}
	data, err := os.ReadFile(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) {
		t.Errorf("state file holds a secret:\n%s", data)
	}
	for _, ref := range []string{"${E2E_TOGGLE_TOKEN}", "${MCPD_REMOTE_AUTHORIZATION}", "${MCPD_REMOTE_URL}"} {
		if !strings.Contains(string(data), ref) {
			t.Errorf("state file: want the reference %s in:\n%s", ref, data)
		}
	}

	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("mcpd exit code %d, want 0", code)
	}
	d2 := startDaemon(ctx, t, opts)
	api := d2.waitServer(ctx, t, "api", mcpdv1.ServerState_SERVER_STATE_READY)
	if api.GetScope() != mcpdv1.ConfigScope_CONFIG_SCOPE_API || api.GetSource() != stateFile || !slices.Equal(api.GetEnvNames(), []string{"E2E_TOGGLE_TOKEN"}) {
		t.Errorf("restored api server: got scope %v source %q env %q; want API from %s with its env", api.GetScope(), api.GetSource(), api.GetEnvNames(), stateFile)
	}
	d2.waitServer(ctx, t, "on", mcpdv1.ServerState_SERVER_STATE_DISABLED)
	d2.waitServer(ctx, t, "parked", mcpdv1.ServerState_SERVER_STATE_READY)
	remote := d2.waitServer(ctx, t, "remote", mcpdv1.ServerState_SERVER_STATE_DISABLED)
	if remote.GetLastError() == "" || !strings.Contains(remote.GetLastError(), "MCPD_REMOTE_URL") {
		t.Errorf("restored remote server: got last error %q, want it to name the unset MCPD_REMOTE_URL", remote.GetLastError())
	}

	// Enabling "on" again is what the config says: the state file forgets it.
	if _, err := d2.hub.SetServerEnabled(ctx, &mcpdv1.SetServerEnabledRequest{Name: "on", Enabled: true}); err != nil {
		t.Fatalf("enable on: %v", err)
	}
	if _, err := d2.hub.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: "api"}); err != nil {
		t.Fatal(err)
	}
	data, err = os.ReadFile(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(data); strings.Contains(s, `"on"`) || strings.Contains(s, `"api"`) || !strings.Contains(s, `"parked"`) {
		t.Errorf("state file after enabling on and disconnecting api: want parked only among on, api, parked:\n%s", s)
	}

	// A server disabled through the API whose entry then leaves the files
	// is forgotten, as by DisconnectServer: its entry, added back, starts.
	if _, err := d2.hub.SetServerEnabled(ctx, &mcpdv1.SetServerEnabledRequest{Name: "on", Enabled: false}); err != nil {
		t.Fatalf("disable on: %v", err)
	}
	parkedEntry := map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}, "disabled": true}
	replaceFile(t, cfg, mustJSON(t, map[string]any{"mcpServers": map[string]any{"parked": parkedEntry}}))
	d2.send(t, syscall.SIGHUP)
	poll(ctx, t, "the removed entry's server goes", func() (bool, error) {
		_, err := d2.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "on"})
		return status.Code(err) == codes.NotFound, nil
	})
	// The state file is written once the server is gone.
	poll(ctx, t, "the state file forgets the removed entry's server", func() (bool, error) {
		data, err = os.ReadFile(stateFile)
		return err == nil && !strings.Contains(string(data), `"on"`), err
	})
	replaceFile(t, cfg, mustJSON(t, map[string]any{"mcpServers": map[string]any{"parked": parkedEntry, "on": demoEntry(t, "on")}}))
	d2.send(t, syscall.SIGHUP)
	var back *mcpdv1.Server
	poll(ctx, t, "the entry added back is connected", func() (bool, error) {
		resp, err := d2.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "on"})
		back = resp.GetServer()
		return err == nil, nil
	})
	if back.GetState() == mcpdv1.ServerState_SERVER_STATE_DISABLED {
		t.Fatal("the entry added back is DISABLED: the API's choice for the removed entry outlived it")
	}
	d2.waitServer(ctx, t, "on", mcpdv1.ServerState_SERVER_STATE_READY)
	d2.waitServer(ctx, t, "parked", mcpdv1.ServerState_SERVER_STATE_READY)
}

// TestStateFileRestoresAsGiven: a restarted mcpd restores what
// ConnectServer was given, not more: a "${VAR}" in a value stays text
// (it does not reach into mcpd's environment), and a command that
// --allow-command no longer allows comes back FAILED.
func TestStateFileRestoresAsGiven(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const secret = "daemon-secret-5be0"
	var mu sync.Mutex
	var paths []string
	recorder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		http.NotFound(w, r)
	}))
	defer recorder.Close()
	stateFile := filepath.Join(shortTempDir(t), "mcpd-state.json")
	opts := daemonOptions{args: []string{"--state-file", stateFile}, env: []string{"E2E_DAEMON_SECRET=" + secret}}
	d := startDaemon(ctx, t, opts)
	d.connect(ctx, t, "api", mcpdBinary(t), []string{"demo-server"}, nil)
	literal := recorder.URL + "/c/${E2E_DAEMON_SECRET}"
	lit := &mcpdv1.ServerConfig{Name: "lit", Transport: &mcpdv1.ServerConfig_Http{Http: &mcpdv1.HttpConfig{Url: literal}}}
	if _, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: lit}); err != nil {
		t.Fatalf("connect lit: %v", err)
	}
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("mcpd exit code %d, want 0", code)
	}

	opts.args = append(opts.args, "--allow-command", "/bin/true")
	d2 := startDaemon(ctx, t, opts)
	api := d2.waitServer(ctx, t, "api", mcpdv1.ServerState_SERVER_STATE_FAILED)
	if !strings.Contains(api.GetLastError(), "--allow-command") {
		t.Errorf("restored api server: got last error %q, want it refused by --allow-command", api.GetLastError())
	}
	// Nor does a restart or a disable and enable start it.
	if resp, err := d2.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "api"}); err == nil && resp.GetServer().GetState() == mcpdv1.ServerState_SERVER_STATE_READY {
		t.Errorf("RestartServer started the refused api server")
	}
	if _, err := d2.hub.SetServerEnabled(ctx, &mcpdv1.SetServerEnabledRequest{Name: "api", Enabled: false}); err != nil {
		t.Fatal(err)
	}
	if resp, err := d2.hub.SetServerEnabled(ctx, &mcpdv1.SetServerEnabledRequest{Name: "api", Enabled: true}); err == nil && resp.GetServer().GetState() == mcpdv1.ServerState_SERVER_STATE_READY {
		t.Errorf("SetServerEnabled started the refused api server")
	}
	if got := d2.waitServer(ctx, t, "lit", mcpdv1.ServerState_SERVER_STATE_FAILED).GetUrl(); got != literal {
		t.Errorf("restored lit server: got url %q, want %q as given", got, literal)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) < 2 {
		t.Fatalf("the recorder saw %q, want a request from each daemon", paths)
	}
	for _, p := range paths {
		if strings.Contains(p, secret) {
			t.Errorf("a restored server reached %q: the daemon's variable was filled in", p)
		}
	}
}

// wantDisabled checks that err is FAILED_PRECONDITION with reason
// SERVER_DISABLED.
func wantDisabled(t *testing.T, err error) {
	t.Helper()
	st := wantCode(t, err, codes.FailedPrecondition)
	reason := ""
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			reason = info.GetReason()
		}
	}
	if !strings.Contains(st.Message(), "disabled") || reason != "SERVER_DISABLED" {
		t.Errorf("got %q (reason %q), want a message saying the server is disabled, reason SERVER_DISABLED", st.Message(), reason)
	}
}

// TestStateFileAnyoneMayWrite: mcpd refuses to start from a state file
// that anyone may write, since whoever writes it chooses the commands
// mcpd starts.
func TestStateFileAnyoneMayWrite(t *testing.T) {
	t.Parallel()
	stateFile := filepath.Join(shortTempDir(t), "mcpd-state.json")
	if err := os.WriteFile(stateFile, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(stateFile, 0o666); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(shortTempDir(t), "mcpd.sock")
	code, _, stderr := runMCPD(t, nil, "--listen", "unix://"+sock, "--config", emptyConfig(t), "--state-file", stateFile)
	if code != 1 || !strings.Contains(stderr, "anyone may write it") {
		t.Errorf("mcpd with a state file of mode 0666: exit %d, stderr %q; want exit 1 saying anyone may write it", code, stderr)
	}
}

// TestStateFileSharedReference: the state file names the variables of a
// server's secrets after the server and the field, so two servers (or two
// fields) can come to the same name: header X-Api-Key of gh and header
// Api-Key of gh-x are both ${MCPD_GH_X_API_KEY}. ConnectServer refuses the
// second, which a restarted mcpd would hand the first one's secret; a
// state file that holds such a pair restores neither.
func TestStateFileSharedReference(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	stateFile := filepath.Join(shortTempDir(t), "mcpd-state.json")
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--state-file", stateFile}})
	remote := func(name string, headers map[string]string) *mcpdv1.ServerConfig {
		return &mcpdv1.ServerConfig{Name: name, Transport: &mcpdv1.ServerConfig_Http{Http: &mcpdv1.HttpConfig{Url: "http://127.0.0.1:1/mcp", Headers: headers}}}
	}
	if _, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: remote("gh", map[string]string{"X-Api-Key": "gh-secret"})}); err != nil {
		t.Fatalf("connect gh: %v", err)
	}
	_, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: remote("gh-x", map[string]string{"Api-Key": "other"})})
	if st := wantCode(t, err, codes.InvalidArgument); !strings.Contains(st.Message(), "MCPD_GH_X_API_KEY") {
		t.Errorf("connect gh-x: got %q, want it to name the shared variable", st.Message())
	}
	_, err = d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: remote("docs", map[string]string{"Url": "a", "URL": "b"})})
	wantCode(t, err, codes.InvalidArgument)
	// Replacing gh with the same references is no conflict with itself.
	if _, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: remote("gh", map[string]string{"X-Api-Key": "new"}), Replace: true}); err != nil {
		t.Errorf("replace gh: %v", err)
	}
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("mcpd exit code %d, want 0", code)
	}

	// A file that holds such a pair anyway (written by hand, or before
	// ConnectServer checked) restores neither server.
	shared := filepath.Join(shortTempDir(t), "mcpd-state.json")
	pair := `{"mcpServers": {
	  "gh": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X-Api-Key": "${MCPD_GH_X_API_KEY}"}},
	  "gh-x": {"type": "http", "url": "http://127.0.0.1:2/mcp", "headers": {"Api-Key": "${MCPD_GH_X_API_KEY}"}}
	}}`
	if err := os.WriteFile(shared, []byte(pair), 0o600); err != nil {
		t.Fatal(err)
	}
	d2 := startDaemon(ctx, t, daemonOptions{args: []string{"--state-file", shared}, env: []string{"MCPD_GH_X_API_KEY=gh-secret"}})
	for _, name := range []string{"gh", "gh-x"} {
		s := d2.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_FAILED)
		if !strings.Contains(s.GetLastError(), "MCPD_GH_X_API_KEY") {
			t.Errorf("restored %s: got last error %q, want it refused for the shared variable", name, s.GetLastError())
		}
	}
	if code := d2.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("mcpd exit code %d, want 0", code)
	}

	// A server that could not be restored (one of its variables unset)
	// still holds its references: the next restart may expand them.
	failing := filepath.Join(shortTempDir(t), "mcpd-state.json")
	gh := `{"mcpServers": {"gh": {"type": "http", "url": "http://127.0.0.1:1/mcp",
	  "headers": {"X-Api-Key": "${MCPD_GH_X_API_KEY}", "Authorization": "${MCPD_GH_AUTHORIZATION}"}}}}`
	if err := os.WriteFile(failing, []byte(gh), 0o600); err != nil {
		t.Fatal(err)
	}
	d3 := startDaemon(ctx, t, daemonOptions{args: []string{"--state-file", failing}, env: []string{"MCPD_GH_X_API_KEY=gh-secret"}})
	d3.waitServer(ctx, t, "gh", mcpdv1.ServerState_SERVER_STATE_FAILED)
	_, err = d3.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: remote("gh-x", map[string]string{"Api-Key": "other"})})
	wantCode(t, err, codes.InvalidArgument)
}

// TestStateFileEditedByHand: a state file is a .mcp.json, read as one:
// comments and a trailing comma, as a person editing it may leave, do not
// stop mcpd, and the server it holds comes back.
func TestStateFileEditedByHand(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	stateFile := filepath.Join(shortTempDir(t), "mcpd-state.json")
	content := `{
  // added by hand
  "mcpServers": {
    "demo": {"command": "` + mcpdBinary(t) + `", "args": ["demo-server"],},
  },
}`
	if err := os.WriteFile(stateFile, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--state-file", stateFile}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
}

// TestStateFileEditedByHandServers: a state file edited by hand may hold
// its servers under "servers", as VS Code's files do: mcpd restores them,
// and the next change it writes keeps them, so that they come back after
// another restart.
func TestStateFileEditedByHandServers(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	stateFile := filepath.Join(shortTempDir(t), "mcpd-state.json")
	content := `{"servers": {"demo": {"command": "` + mcpdBinary(t) + `", "args": ["demo-server"]}}}`
	if err := os.WriteFile(stateFile, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := daemonOptions{config: emptyConfig(t), args: []string{"--state-file", stateFile}}
	d := startDaemon(ctx, t, opts)
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	// A change: mcpd rewrites the state file.
	d.connect(ctx, t, "other", mcpdBinary(t), []string{"demo-server"}, nil)
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("mcpd exit code %d, want 0", code)
	}
	data, err := os.ReadFile(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	d2 := startDaemon(ctx, t, opts)
	for _, name := range []string{"demo", "other"} {
		if s := d2.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY, mcpdv1.ServerState_SERVER_STATE_FAILED); s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
			t.Errorf("server %s after a restart: got %v (last error %q), want READY; the state file mcpd wrote:\n%s", name, s.GetState(), s.GetLastError(), data)
		}
	}
}

// TestClaudeCodeManagedPolicy keeps Claude Code's managed MCP policy for
// every server mcpd runs: the lists of its managed settings (and their
// drop-ins) decide which servers of the files start and which
// ConnectServer may add, managed-mcp.json takes exclusive control, and a
// reload follows the files.
func TestClaudeCodeManagedPolicy(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := shortTempDir(t)
	claudeDir := filepath.Join(dir, "claude-code")
	if err := os.MkdirAll(filepath.Join(claudeDir, "managed-settings.d"), 0o700); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(claudeDir, "managed-settings.json")
	demo := func(mark string) []string { return []string{mcpdBinary(t), "demo-server", mark} }
	replaceFile(t, settings, mustJSON(t, map[string]any{
		"deniedMcpServers":  []any{map[string]any{"serverName": "denied"}},
		"allowedMcpServers": []any{map[string]any{"serverCommand": demo("ok")}, map[string]any{"serverName": "no-effect-on-stdio"}},
	}))
	replaceFile(t, filepath.Join(claudeDir, "managed-settings.d", "10-extra.json"), mustJSON(t, map[string]any{
		"allowedMcpServers": []any{map[string]any{"serverCommand": demo("extra")}},
	}))
	replaceFile(t, filepath.Join(claudeDir, "managed-settings.d", ".hidden.json"), `not JSON, and never read`)
	cfg := filepath.Join(dir, "servers.json")
	replaceFile(t, cfg, mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"ok": demoEntry(t, "ok"), "extra": demoEntry(t, "extra"), "denied": demoEntry(t, "ok"), "other": demoEntry(t, "other"),
	}}))
	d := startDaemon(ctx, t, daemonOptions{config: cfg, env: []string{"MCPD_CLAUDE_MANAGED_DIR=" + claudeDir}})

	d.waitServer(ctx, t, "ok", mcpdv1.ServerState_SERVER_STATE_READY)
	d.waitServer(ctx, t, "extra", mcpdv1.ServerState_SERVER_STATE_READY)
	blocked := func(name, why string) {
		t.Helper()
		s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_FAILED)
		if !strings.Contains(s.GetLastError(), why) || s.GetPid() != 0 {
			t.Errorf("%s: got last error %q, pid %d; want no process and an error containing %q", name, s.GetLastError(), s.GetPid(), why)
		}
		if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: name}); err == nil {
			t.Errorf("%s: RestartServer started a server the policy stops", name)
		}
	}
	blocked("denied", "deniedMcpServers[0] in "+settings)
	blocked("other", "not allowed by Claude Code's policy")

	_, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: stdioConfig("api", mcpdBinary(t), []string{"demo-server", "other"}, nil)})
	if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), "allowedMcpServers") {
		t.Errorf("ConnectServer of a command the policy does not allow: got %q, want the allowlist named", st.Message())
	}
	d.connect(ctx, t, "api", mcpdBinary(t), []string{"demo-server", "ok"}, nil)
	if _, err := d.call(ctx, t, "mcp__api__echo", map[string]any{"message": "x"}, 0); err != nil {
		t.Fatalf("call through an allowed server: %v", err)
	}

	// managed-mcp.json takes exclusive control: only its servers run, its
	// entry of a name stands over a later file's, ConnectServer adds none.
	replaceFile(t, filepath.Join(claudeDir, "managed-mcp.json"), mustJSON(t, map[string]any{"mcpServers": map[string]any{"ok": demoEntry(t, "ok")}}))
	d.send(t, syscall.SIGHUP)
	exclusive := filepath.Join(claudeDir, "managed-mcp.json") + " has exclusive control"
	blocked("extra", exclusive)
	blocked("api", exclusive)
	if s := d.waitServer(ctx, t, "ok", mcpdv1.ServerState_SERVER_STATE_READY); s.GetScope() != mcpdv1.ConfigScope_CONFIG_SCOPE_MANAGED {
		t.Errorf("ok: got scope %v, want the managed file's entry", s.GetScope())
	}
	_, err = d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: stdioConfig("api2", mcpdBinary(t), []string{"demo-server", "ok"}, nil)})
	if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), exclusive) {
		t.Errorf("ConnectServer under exclusive control: got %q", st.Message())
	}

	// Without Claude Code's managed files, every server runs again.
	for _, f := range []string{"managed-mcp.json", "managed-settings.json", "managed-settings.d"} {
		if err := os.RemoveAll(filepath.Join(claudeDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	d.send(t, syscall.SIGHUP)
	for _, name := range []string{"ok", "extra", "denied", "other", "api"} {
		d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
	}

	// The policy holds for the built-in default too, which applies when no
	// file names a server.
	denyDemo := filepath.Join(shortTempDir(t), "claude-code")
	if err := os.Mkdir(denyDemo, 0o700); err != nil {
		t.Fatal(err)
	}
	replaceFile(t, filepath.Join(denyDemo, "managed-settings.json"), `{"deniedMcpServers": [{"serverName": "demo"}]}`)
	d2 := startDaemon(ctx, t, daemonOptions{env: []string{"MCPD_CLAUDE_MANAGED_DIR=" + denyDemo}})
	if s := d2.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_FAILED); !strings.Contains(s.GetLastError(), "deniedMcpServers[0]") {
		t.Errorf("demo: got last error %q, want the denylist named", s.GetLastError())
	}

	// Managed settings that are not JSON stop the start, naming the file.
	replaceFile(t, settings, `{"deniedMcpServers": [`)
	sock := filepath.Join(shortTempDir(t), "mcpd.sock")
	code, out := runMcpdWith(ctx, t, daemonEnv("MCPD_CLAUDE_MANAGED_DIR="+claudeDir), "--listen", "unix://"+sock, "--config", cfg)
	if code != 1 || !strings.Contains(out, settings) {
		t.Errorf("broken managed settings: exit %d, output %q; want exit 1 naming %s", code, out, settings)
	}
}

// TestClaudeCodeExclusiveHoldsNamesFromAgents: under the exclusive control
// of Claude Code's managed-mcp.json, agents still serve tools of their own
// (Claude Code exempts its in-process servers), but no agent's ServeTools
// takes the name of a managed server, and a reload that brings such an
// entry takes its name back from the agent that served it, whether the
// entry is new or was there, from mcpd's own managed file, before the
// control began.
func TestClaudeCodeExclusiveHoldsNamesFromAgents(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := shortTempDir(t)
	claudeDir := filepath.Join(dir, "claude-code")
	if err := os.Mkdir(claudeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	ownManaged := filepath.Join(dir, "managed.json")
	replaceFile(t, ownManaged, mustJSON(t, map[string]any{"mcpServers": map[string]any{"own": demoEntry(t, "own")}}))
	d := startDaemon(ctx, t, daemonOptions{
		config: emptyConfig(t),
		args:   []string{"--managed-config", ownManaged},
		env:    []string{"MCPD_CLAUDE_MANAGED_DIR=" + claudeDir},
	})
	d.waitServer(ctx, t, "own", mcpdv1.ServerState_SERVER_STATE_READY)

	// Before the control: agents may serve any name, a managed one too.
	serve := func(name string, replace bool) (*toolAgent, error) {
		t.Helper()
		a, _, err := serveTools(ctx, t, d, &mcpdv1.ToolServerDeclaration{Server: name, Tools: agentTools(), Replace: replace})
		return a, err
	}
	tookOwn, err := serve("own", true)
	if err != nil {
		t.Fatalf("ServeTools replacing a managed server without exclusive control: %v", err)
	}
	tookLater, err := serve("later", false)
	if err != nil {
		t.Fatalf("ServeTools: %v", err)
	}

	replaceFile(t, filepath.Join(claudeDir, "managed-mcp.json"), mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"later": demoEntry(t, "later"), "ok": demoEntry(t, "ok"),
	}}))
	d.send(t, syscall.SIGHUP)
	for name, agent := range map[string]*toolAgent{"own": tookOwn, "later": tookLater} {
		if err := agent.ended(ctx, t); status.Code(err) != codes.Aborted {
			t.Errorf("%s: the agent's stream ended with %v, want ABORTED as the managed entry takes its name", name, err)
		}
		s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
		if s.GetTransport() != mcpdv1.Transport_TRANSPORT_STDIO || s.GetScope() != mcpdv1.ConfigScope_CONFIG_SCOPE_MANAGED {
			t.Errorf("%s after the reload: got %v from scope %v, want the managed entry's stdio server", name, s.GetTransport(), s.GetScope())
		}
	}

	exclusive := filepath.Join(claudeDir, "managed-mcp.json") + " has exclusive control"
	for _, name := range []string{"ok", "own", "later"} {
		_, err := serve(name, true)
		if st := wantCode(t, err, codes.PermissionDenied); !strings.Contains(st.Message(), exclusive) {
			t.Errorf("ServeTools replacing %s under exclusive control: got %q, want the control named", name, st.Message())
		}
		if s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY); s.GetTransport() != mcpdv1.Transport_TRANSPORT_STDIO {
			t.Errorf("%s after a refused ServeTools: got %v, want the managed stdio server", name, s.GetTransport())
		}
	}
	mine, err := serve("mine", false)
	if err != nil {
		t.Fatalf("ServeTools of an agent's own name under exclusive control: %v", err)
	}
	outcome := callAsync(ctx, d, &mcpdv1.CallToolRequest{Name: "mcp__mine__echo", Arguments: mustStruct(t, map[string]any{"text": "hi"})})
	mine.answer(t, mine.nextCall(ctx, t).GetId(), agentText("mine"))
	if o := waitOutcome(ctx, t, outcome); o.err != nil || text(o.resp) != "mine" {
		t.Errorf("call of the agent's own tool: got %v, %v; want its answer", o.resp, o.err)
	}
}

// TestProjectServersStartInProject starts the servers of the project's
// files (its .mcp.json, .mcp.local.json and Claude Code's local scope for
// it) in the project directory, as Claude Code, started there, does: a
// relative command or argument (`uv run server.py`, `./bin/server`) is
// the project's, whichever directory mcpd itself runs in. A relative cwd
// in those files is the project's too.
func TestProjectServersStartInProject(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	home, project := shortTempDir(t), shortTempDir(t)
	script := "#!/bin/sh\nexec " + strconv.Quote(mcpdBinary(t)) + " demo-server \"$@\"\n"
	for _, dir := range []string{project, filepath.Join(project, "sub")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "srv.sh"), []byte(script), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	realProject, err := filepath.EvalSymlinks(project)
	if err != nil {
		t.Fatal(err)
	}
	replaceFile(t, filepath.Join(home, ".claude.json"), mustJSON(t, map[string]any{
		"projects": map[string]any{realProject: map[string]any{"mcpServers": map[string]any{
			"claude-local": map[string]any{"command": "./srv.sh", "args": []string{"claude-local"}},
		}}},
	}))
	replaceFile(t, filepath.Join(project, ".mcp.json"), mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"shared": map[string]any{"command": "sh", "args": []string{"srv.sh", "shared"}},
	}}))
	replaceFile(t, filepath.Join(project, ".mcp.local.json"), mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"sub": map[string]any{"command": "sh", "args": []string{"srv.sh", "sub"}, "cwd": "sub"},
	}}))
	// mcpd runs in another directory (the test's), with no srv.sh.
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--project", project}, env: []string{"HOME=" + home}})
	for _, name := range []string{"claude-local", "shared", "sub"} {
		s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY, mcpdv1.ServerState_SERVER_STATE_FAILED)
		if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
			t.Errorf("server %s of the project: got %v (%s), want READY", name, s.GetState(), s.GetLastError())
		}
	}
}

// TestServerMovedIntoProjectKeepsRunning moves a server's entry, unchanged,
// from the user's ~/.mcp.json to the project's .mcp.json of the directory
// mcpd runs in (the default project): its process runs on, only its scope
// and source change, as the working directory it has is the project's
// either way.
func TestServerMovedIntoProjectKeepsRunning(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	home, project := shortTempDir(t), shortTempDir(t)
	user, shared := filepath.Join(home, ".mcp.json"), filepath.Join(project, ".mcp.json")
	scopeFile(t, user, "moved", []string{"m"}, nil)
	scopeFile(t, shared, "stays", []string{"p"}, nil)
	d := startDaemon(ctx, t, daemonOptions{dir: project, args: []string{"--project", "."}, env: []string{"HOME=" + home}})
	before := d.waitServer(ctx, t, "m", mcpdv1.ServerState_SERVER_STATE_READY)

	replaceFile(t, shared, mustJSON(t, map[string]any{"mcpServers": map[string]any{"m": demoEntry(t, "moved"), "p": demoEntry(t, "stays")}}))
	replaceFile(t, user, `{"mcpServers": {}}`)
	d.send(t, syscall.SIGHUP)
	var after *mcpdv1.Server
	poll(ctx, t, "m comes from the project's file", func() (bool, error) {
		resp, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "m"})
		after = resp.GetServer()
		return after.GetScope() == mcpdv1.ConfigScope_CONFIG_SCOPE_PROJECT || after.GetPid() != before.GetPid(), err
	})
	if after.GetPid() != before.GetPid() || after.GetRestarts() != before.GetRestarts() {
		t.Errorf("moved server: got pid %d restarts %d, want it untouched (pid %d restarts %d)", after.GetPid(), after.GetRestarts(), before.GetPid(), before.GetRestarts())
	}
}
