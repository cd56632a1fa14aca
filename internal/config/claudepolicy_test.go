package config

import (
	"slices"
	"strings"
	"testing"
)

// policyFrom loads the given settings files, managed ones first, and
// returns the policy and the warnings.
func policyFrom(t *testing.T, managed, user []string) (*ClaudePolicy, []string) {
	t.Helper()
	dir := t.TempDir()
	var layers []Layer
	for i, content := range managed {
		layers = append(layers, Layer{Path: writeFile(t, dir, "managed"+string(rune('a'+i))+".json", content), Claude: ClaudeManagedSettings})
	}
	for i, content := range user {
		layers = append(layers, Layer{Path: writeFile(t, dir, "user"+string(rune('a'+i))+".json", content), Claude: ClaudeChoices})
	}
	m, err := LoadLayers(layers, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m.Policy, m.Warnings
}

func stdio(name string, argv ...string) Server {
	return Server{Name: name, Kind: TransportStdio, Command: argv[0], Args: argv[1:], Source: Source{Scope: ScopeUser}}
}

func remote(name, url string) Server {
	return Server{Name: name, Kind: TransportHTTP, URL: url, Source: Source{Scope: ScopeProject}}
}

// TestClaudePolicyCheck follows the examples of Claude Code's managed MCP
// documentation: the denylist wins; an allowlist admits a stdio server by
// its command and a remote one by its URL, by name only where it has no
// entry of that kind.
func TestClaudePolicyCheck(t *testing.T) {
	type blocked struct {
		want string // in the error's text
		s    Server
	}
	agent := Server{Name: "tools", Kind: TransportAgent}
	for _, tc := range []struct {
		name          string
		managed, user []string
		allowed       []Server
		blocked       []blocked
	}{
		{
			name: "no policy", managed: []string{`{"other": 1}`},
			allowed: []Server{stdio("a", "x"), remote("b", "https://h/")},
		},
		{
			name:    "denylist by name, command and URL",
			managed: []string{`{"deniedMcpServers": [{"serverName": "bad"}, {"serverCommand": ["npx", "-y", "evil"]}, {"serverUrl": "https://*.evil.example/*"}]}`},
			allowed: []Server{stdio("good", "npx", "-y", "evil", "--flag"), stdio("good", "npx", "evil"), remote("good", "https://evil.example/x"), agent},
			blocked: []blocked{
				{"deniedMcpServers[0]", remote("bad", "https://ok.example/")},
				{"deniedMcpServers[1]", stdio("any", "npx", "-y", "evil")},
				{"deniedMcpServers[2]", remote("any", "https://mcp.evil.example/mcp")},
			},
		},
		{
			name:    "command-only allowlist",
			managed: []string{`{"allowedMcpServers": [{"serverCommand": ["npx", "-y", "@modelcontextprotocol/server-filesystem"]}]}`},
			allowed: []Server{stdio("fs", "npx", "-y", "@modelcontextprotocol/server-filesystem")},
			blocked: []blocked{
				{"matches none of its serverCommand entries", stdio("fs", "npx", "@modelcontextprotocol/server-filesystem")},
				{"has no serverUrl entry and no serverName entry names it", remote("my-api", "https://h/")},
			},
		},
		{
			name:    "URL-only allowlist",
			managed: []string{`{"allowedMcpServers": [{"serverUrl": "https://mcp.company.example/*"}, {"serverUrl": "http://localhost:*/*"}]}`},
			allowed: []Server{remote("a", "https://mcp.company.example/mcp"), remote("a", "https://MCP.Company.Example./x"), remote("b", "http://localhost:8080/mcp")},
			blocked: []blocked{
				{"has no serverCommand entry", stdio("a", "npx", "x")},
				{"matches none of its serverUrl entries", remote("c", "https://mcp.company.example.evil.test/mcp")},
				{"serverUrl entries", remote("d", "https://mcp.company.example:8443/mcp")},
				{"serverUrl entries", remote("e", "https://user@mcp.company.example/mcp")},
				{"serverUrl entries", remote("f", "http://mcp.company.example/mcp")},
			},
		},
		{
			name:    "mixed name and command allowlist",
			managed: []string{`{"allowedMcpServers": [{"serverName": "github"}, {"serverCommand": ["node", "approved.js"]}]}`},
			allowed: []Server{remote("github", "https://anything.example/"), stdio("other", "node", "approved.js")},
			blocked: []blocked{{"serverCommand", stdio("github", "node", "server.js")}},
		},
		{
			name:    "empty allowlist",
			managed: []string{`{"allowedMcpServers": []}`},
			allowed: []Server{agent},
			blocked: []blocked{{"is empty", stdio("a", "x")}},
		},
		{
			name:    "a soft allowlist the user widens",
			managed: []string{`{"allowedMcpServers": [{"serverName": "a"}]}`},
			user:    []string{`{"allowedMcpServers": [{"serverName": "b"}], "allowManagedMcpServersOnly": true}`},
			allowed: []Server{stdio("a", "x"), stdio("b", "x")},
			blocked: []blocked{{"no serverName entry names it", stdio("c", "x")}},
		},
		{
			name:    "only the managed allowlist",
			managed: []string{`{"allowedMcpServers": [{"serverName": "a"}], "allowManagedMcpServersOnly": true}`},
			user:    []string{`{"allowedMcpServers": [{"serverName": "b"}], "deniedMcpServers": [{"serverName": "a"}]}`},
			blocked: []blocked{{"no serverName entry", stdio("b", "x")}, {"deniedMcpServers[0] in", stdio("a", "x")}},
		},
		{
			name:    "drop-ins add to the lists",
			managed: []string{`{"allowedMcpServers": [{"serverName": "a"}]}`, `{"allowedMcpServers": [{"serverName": "b"}], "deniedMcpServers": [{"serverName": "a"}]}`},
			allowed: []Server{stdio("b", "x")},
			blocked: []blocked{{"blocked", stdio("a", "x")}, {"not allowed", stdio("c", "x")}},
		},
		{
			name:    "invalid managed values fail closed",
			managed: []string{`{"allowedMcpServers": {"serverName": "a"}, "deniedMcpServers": "everything"}`},
			blocked: []blocked{{"is empty", stdio("a", "x")}},
		},
		{
			name:    "invalid managed entries are left out",
			managed: []string{`{"allowedMcpServers": [{"serverName": "a b"}, {"serverName": "a", "serverCommand": ["x"]}, {"serverCommand": []}, {"serverUrl": "mcp.example.com"}, {"serverUrl": "https://u@h/"}, {"serverName": "ok"}]}`},
			allowed: []Server{stdio("ok", "x")},
			blocked: []blocked{{"no serverName entry", stdio("a", "x")}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := policyFrom(t, tc.managed, tc.user)
			for _, s := range tc.allowed {
				if err := p.Check(s); err != nil {
					t.Errorf("%s %q%s: got %v, want it allowed", s.Name, s.Command, s.URL, err)
				}
			}
			for _, b := range tc.blocked {
				err := p.Check(b.s)
				if err == nil || !strings.Contains(err.Error(), b.want) {
					t.Errorf("%s %q%s: got %v, want an error containing %q", b.s.Name, b.s.Command, b.s.URL, err, b.want)
				}
			}
		})
	}
}

// TestClaudePolicyWarnings says what a managed file held that is left out,
// naming the entry but never its value.
func TestClaudePolicyWarnings(t *testing.T) {
	_, warnings := policyFrom(t, []string{`{"allowedMcpServers": [{"serverUrl": "https://secret-key@h/"}, {"serverName": "ok"}], "deniedMcpServers": 7, "allowManagedMcpServersOnly": "yes"}`}, nil)
	want := []string{"allowedMcpServers[0] in ", "deniedMcpServers is not a list: left out", "allowManagedMcpServersOnly is not true or false: taken as true"}
	if len(warnings) != len(want) {
		t.Fatalf("got warnings %q, want %d", warnings, len(want))
	}
	for _, w := range want {
		if !slices.ContainsFunc(warnings, func(s string) bool { return strings.Contains(s, w) }) {
			t.Errorf("got warnings %q, want one containing %q", warnings, w)
		}
	}
	if slices.ContainsFunc(warnings, func(s string) bool { return strings.Contains(s, "secret-key") }) {
		t.Errorf("a warning quotes the entry's value: %q", warnings)
	}
}

// TestClaudePolicyUserFileStrict stops the load on a user's settings file
// whose list is not a list, as for its other lists.
func TestClaudePolicyUserFileStrict(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "settings.json", `{"deniedMcpServers": {"serverName": "a"}}`)
	_, err := LoadLayers([]Layer{{Path: path, Claude: ClaudeChoices}}, nil)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "deniedMcpServers") {
		t.Fatalf("got %v, want an error naming %s and the key", err, path)
	}
	managed := writeFile(t, dir, "managed-settings.json", `{"allowedMcpServers": [`)
	_, err = LoadLayers([]Layer{{Path: managed, Claude: ClaudeManagedSettings}}, nil)
	if err == nil || !strings.Contains(err.Error(), managed) {
		t.Fatalf("managed settings that are not JSON: got %v, want an error naming %s", err, managed)
	}
}

// TestClaudePolicyExclusive lets only the managed scope's servers run
// while Claude Code's managed-mcp.json exists; a later file's entry of a
// managed name does not replace it.
func TestClaudePolicyExclusive(t *testing.T) {
	dir := t.TempDir()
	exclusive := writeFile(t, dir, "managed-mcp.json", `{"mcpServers": {"github": {"command": "managed"}}}`)
	user := writeFile(t, dir, "user.json", `{"mcpServers": {"github": {"command": "user"}, "mine": {"command": "user"}}}`)
	m, err := LoadLayers([]Layer{
		{Scope: ScopeManaged, Path: exclusive, Optional: true, Claude: ClaudeExclusive},
		{Scope: ScopeUser, Path: user},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(m); got["github"] != "managed:managed" || got["mine"] != "user:user" {
		t.Fatalf("got %v, want github from the managed file, mine from the user's", got)
	}
	if !slices.ContainsFunc(m.Warnings, func(w string) bool { return strings.Contains(w, `server "github" left out`) }) {
		t.Errorf("got warnings %q, want one for the user's github", m.Warnings)
	}
	for _, e := range m.Entries {
		err := m.Policy.Check(e.Server)
		if (e.Name == "github") != (err == nil) || (err != nil && !strings.Contains(err.Error(), exclusive+" has exclusive control")) {
			t.Errorf("%s: got %v; want only the managed server allowed", e.Name, err)
		}
		// Only the managed server's name is held from agents.
		if held := m.Policy.Holds(e.Server); (e.Name == "github") != (held != nil) {
			t.Errorf("%s: Holds got %v; want only the managed server's name held", e.Name, held)
		}
	}
	if err := m.Policy.Holds(Server{Name: "github", Kind: TransportAgent, Source: Source{Scope: ScopeManaged}}); err != nil {
		t.Errorf("an agent's own server: Holds got %v, want nil", err)
	}

	// Without the file, nothing is exclusive.
	m, err = LoadLayers([]Layer{
		{Scope: ScopeManaged, Path: dir + "/none.json", Optional: true, Claude: ClaudeExclusive},
		{Scope: ScopeUser, Path: user},
	}, nil)
	if err != nil || m.Policy != nil || summary(m)["github"] != "user:user" {
		t.Fatalf("no managed-mcp.json: got %v, policy %v, %v; want the user's servers, no policy", summary(m), m.Policy, err)
	}
	if err := m.Policy.Holds(Server{Name: "github", Kind: TransportStdio, Source: Source{Scope: ScopeManaged}}); err != nil {
		t.Errorf("without exclusive control: Holds got %v, want nil", err)
	}
}

func TestWildcardMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"", "", true}, {"a", "a", true}, {"a", "b", false}, {"*", "", true}, {"*", "abc", true},
		{"a*", "abc", true}, {"*c", "abc", true}, {"a*c", "ac", true}, {"a*b*c", "axbyc", true},
		{"a*b*c", "axcyb", false}, {"*.example.com", "example.com", false}, {"ab*ba", "aba", false},
	} {
		if got := wildcardMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("wildcardMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// TestClaudePolicyAutoTransport holds a server reached by URL whose
// transport mcpd detects (a file's entry with a url and no type, "type":
// "auto", ConnectServer's remote) to the serverUrl entries as an HTTP
// one: a denylist entry stops it, and only an allowlist entry admits it.
func TestClaudePolicyAutoTransport(t *testing.T) {
	auto := func(name, url string) Server {
		return Server{Name: name, Kind: TransportAuto, URL: url, Source: Source{Scope: ScopeProject}}
	}
	denyOnly, _ := policyFrom(t, []string{`{"deniedMcpServers": [{"serverUrl": "https://evil.example/*"}]}`}, nil)
	if err := denyOnly.Check(auto("a", "https://evil.example/mcp")); err == nil || !strings.Contains(err.Error(), "deniedMcpServers[0]") {
		t.Errorf("denied URL: got %v, want the denylist named", err)
	}
	p, _ := policyFrom(t, []string{`{"allowedMcpServers": [{"serverUrl": "https://ok.example/*"}]}`}, nil)
	if err := p.Check(auto("b", "https://ok.example/mcp")); err != nil {
		t.Errorf("allowed URL: got %v, want it allowed", err)
	}
	if err := p.Check(auto("c", "https://other.example/mcp")); err == nil || !strings.Contains(err.Error(), "serverUrl entries") {
		t.Errorf("other URL: got %v, want it not allowed", err)
	}
}

// TestClaudePolicyURLAsDialed matches a server's URL as the HTTP client
// dials it and as a server reads its path: a port with leading zeros, a
// Unicode host (dialed in its ASCII form), another spelling of an IP
// address, an empty host (the local machine), a path with escaped
// letters or dot segments slip past no denylist entry, and an allowlist
// entry admits a path only when every reading of it matches.
func TestClaudePolicyURLAsDialed(t *testing.T) {
	deny, _ := policyFrom(t, []string{`{"deniedMcpServers": [{"serverUrl": "https://evil.example/*"}, {"serverUrl": "http://[::1]:*/*"}, {"serverUrl": "http://127.0.0.1:*/*"}, {"serverUrl": "https://h/admin/*"}, {"serverUrl": "http://localhost:*/*"}]}`}, nil)
	for _, u := range []string{
		"https://evil.example:0443/x",
		"https://ｅｖｉｌ.example/x",
		"https://%EF%BD%85vil.example/x",
		"http://[0:0::1]:8080/x",
		"http://[::ffff:127.0.0.1]:8080/x",
		"http://:8080/x",
		"https://h/%61dmin/x",
		"https://h/mcp/../admin/x",
		"https://h/mcp/%2e%2e/admin/x",
	} {
		if err := deny.Check(remote("s", u)); err == nil || !strings.Contains(err.Error(), "blocked by Claude Code's policy") {
			t.Errorf("%s: got %v, want it denied", u, err)
		}
	}
	if err := deny.Check(remote("s", "https://h/mcp")); err != nil {
		t.Errorf("https://h/mcp: got %v, want it allowed", err)
	}

	allow, _ := policyFrom(t, []string{`{"allowedMcpServers": [{"serverUrl": "https://h/mcp/*"}, {"serverUrl": "https://ok.example:08443/*"}, {"serverUrl": "http://[0::1]:*/*"}]}`}, nil)
	for _, u := range []string{"https://h/mcp/x", "https://h/mcp/a/./b", "https://ok.example:8443/x", "http://[::1]:9/"} {
		if err := allow.Check(remote("s", u)); err != nil {
			t.Errorf("%s: got %v, want it allowed", u, err)
		}
	}
	for _, u := range []string{"https://h/mcp/../admin", "https://h/mcp/%2e%2e/admin", "https://h/%6Dcp/x", "http://:8080/mcp/x"} {
		if err := allow.Check(remote("s", u)); err == nil {
			t.Errorf("%s: allowed, want it not allowed", u)
		}
	}
}
