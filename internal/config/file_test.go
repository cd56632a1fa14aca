package config

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const testSecret = "s3cr3t-token"

var testEnv = map[string]string{
	"GITHUB_TOKEN": testSecret,
	"HOME":         "/home/me",
	"API_KEY":      testSecret,
	"EMPTY":        "",
}

// entryErrors maps names to error texts, for compact comparisons.
func entryErrors(f *File) map[string]string {
	m := make(map[string]string)
	for _, e := range f.Invalid {
		m[e.Name] = e.Error()
	}
	return m
}

func names(ss []Server) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func TestParseClaudeDesktop(t *testing.T) {
	data := `{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}
    },
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/Desktop", "${DOWNLOADS:-/tmp}"],
      "alwaysAllow": ["read_file"],
      "autoApprove": []
    }
  },
  "globalShortcut": "Ctrl+Space"
}`
	f, err := Parse([]byte(data), mapLookup(testEnv))
	if err != nil {
		t.Fatalf("Parse: got %v, want nil", err)
	}
	want := &File{Servers: []Server{
		{Name: "filesystem", Kind: TransportStdio, Command: "npx",
			Args:        []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/me/Desktop", "/tmp"},
			AlwaysAllow: []string{"read_file"}},
		{Name: "github", Kind: TransportStdio, Command: "npx",
			Args: []string{"-y", "@modelcontextprotocol/server-github"},
			Env:  map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": testSecret}},
	}, Warnings: []string{`top-level key "globalShortcut" is not understood by mcpd; ignored`}}
	if diff := cmp.Diff(want, f, cmpopts.IgnoreUnexported(Server{}, File{})); diff != "" {
		t.Errorf("Parse mismatch (-want +got):\n%s", diff)
	}
}

func TestParseVSCode(t *testing.T) {
	// VS Code's mcp.json: "servers", explicit types, "inputs", comments and
	// trailing commas.
	data := `{
  // Inputs are prompted for by VS Code; mcpd cannot.
  "inputs": [
    {"type": "promptString", "id": "api-key", "description": "API key", "password": true},
  ],
  "servers": {
    /* a local server */
    "memory": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-memory",], // trailing comma
      "envFile": "${workspaceFolder}/.env",
    },
    "remote": {
      "type": "http",
      "url": "https://api.example.com/mcp",
      "headers": {"Authorization": "Bearer ${API_KEY}", "X-Note": "a // not a comment, /* nor this */"},
    },
    "prompted": {
      "type": "http",
      "url": "https://api.example.com/mcp",
      "headers": {"Authorization": "Bearer ${input:api-key}"},
    },
    "events": {"type": "sse", "url": "http://localhost:3001/sse"},
  },
}`
	f, err := Parse([]byte(data), mapLookup(testEnv))
	if err != nil {
		t.Fatalf("Parse: got %v, want nil", err)
	}
	want := []Server{
		{Name: "events", Kind: TransportSSE, URL: "http://localhost:3001/sse"},
		{Name: "memory", Kind: TransportStdio, Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"},
			Warnings: []string{`field "envFile" is not understood by mcpd; ignored`}},
		{Name: "remote", Kind: TransportHTTP, URL: "https://api.example.com/mcp",
			Headers: map[string]string{"Authorization": "Bearer " + testSecret, "X-Note": "a // not a comment, /* nor this */"}},
	}
	if diff := cmp.Diff(want, f.Servers, cmpopts.IgnoreUnexported(Server{}, File{})); diff != "" {
		t.Errorf("Servers mismatch (-want +got):\n%s", diff)
	}
	if want := []string{`top-level key "inputs" is not understood by mcpd; ignored`}; !slices.Equal(f.Warnings, want) {
		t.Errorf("Warnings: got %q, want %q", f.Warnings, want)
	}
	errs := entryErrors(f)
	if len(errs) != 1 || !strings.Contains(errs["prompted"], "headers.Authorization: ${input:api-key} is a VS Code input") {
		t.Errorf("Invalid: got %q, want one error for prompted about ${input:...}", errs)
	}
}

func TestParseEntries(t *testing.T) {
	tests := []struct {
		name  string
		entry string
		want  *Server // nil: want an entry error
		err   string  // substring of the entry error
	}{
		{name: "stdio without type", entry: `{"command": "cat"}`,
			want: &Server{Kind: TransportStdio, Command: "cat"}},
		{name: "stdio with type", entry: `{"type": "stdio", "command": "cat", "cwd": "${HOME}/work", "env": {"A": "${EMPTY:-d}"}}`,
			want: &Server{Kind: TransportStdio, Command: "cat", Cwd: "/home/me/work", Env: map[string]string{"A": "d"}}},
		{name: "url without type is auto", entry: `{"url": "https://h/mcp"}`,
			want: &Server{Kind: TransportAuto, URL: "https://h/mcp"}},
		{name: "type auto", entry: `{"type": "auto", "url": "https://h/mcp"}`,
			want: &Server{Kind: TransportAuto, URL: "https://h/mcp"}},
		{name: "streamable-http alias", entry: `{"type": "streamable-http", "url": "https://h/mcp"}`,
			want: &Server{Kind: TransportHTTP, URL: "https://h/mcp"}},
		{name: "sse", entry: `{"type": "sse", "url": "http://127.0.0.1:9/sse", "headers": {"X-Key": "${API_KEY}"}}`,
			want: &Server{Kind: TransportSSE, URL: "http://127.0.0.1:9/sse", Headers: map[string]string{"X-Key": testSecret}}},
		{name: "windsurf serverUrl", entry: `{"serverUrl": "https://h/mcp"}`,
			want: &Server{Kind: TransportAuto, URL: "https://h/mcp"}},
		{name: "url expanded", entry: `{"url": "https://${HOST:-h.example}:${PORT:-443}/mcp"}`,
			want: &Server{Kind: TransportAuto, URL: "https://h.example:443/mcp"}},
		{name: "options", entry: `{"command": "cat", "timeout": 30, "connectTimeout": 1.5, "protocolVersion": "2025-03-26",
			"toolsAllow": ["get_*", "list"], "toolsDeny": ["get_secret"], "toolsAsk": ["write_*"]}`,
			want: &Server{Kind: TransportStdio, Command: "cat", CallTimeout: 30 * time.Second, ConnectTimeout: 1500 * time.Millisecond,
				ProtocolVersion: "2025-03-26", ToolsAllow: []string{"get_*", "list"}, ToolsDeny: []string{"get_secret"}, ToolsAsk: []string{"write_*"}}},
		{name: "strict capabilities", entry: `{"command": "cat", "strictCapabilities": true}`,
			want: &Server{Kind: TransportStdio, Command: "cat", StrictCapabilities: true}},
		{name: "zero timeout is default", entry: `{"command": "cat", "timeout": 0}`,
			want: &Server{Kind: TransportStdio, Command: "cat"}},
		{name: "disabled false", entry: `{"command": "cat", "disabled": false}`,
			want: &Server{Kind: TransportStdio, Command: "cat"}},

		{name: "unset variable", entry: `{"command": "srv", "env": {"TOKEN": "${NOT_SET}"}}`, err: "env.TOKEN: variable NOT_SET is not set"},
		{name: "unset variable in args", entry: `{"command": "srv", "args": ["--x", "${NOT_SET}"]}`, err: "args[1]: variable NOT_SET is not set"},
		{name: "two unset variables", entry: `{"command": "${NO_CMD}", "url": "", "cwd": "${NO_DIR}"}`,
			err: "command: variable NO_CMD is not set (use ${NO_CMD:-default} for a default); cwd: variable NO_DIR is not set"},
		{name: "unset variable in url", entry: `{"url": "https://${NO_HOST}/mcp"}`, err: "url: variable NO_HOST is not set"},
		{name: "unset variable in header", entry: `{"url": "https://h/", "headers": {"Authorization": "Bearer ${NO_KEY}"}}`,
			err: "headers.Authorization: variable NO_KEY is not set"},
		{name: "unterminated", entry: `{"command": "srv", "args": ["${GITHUB_TOKEN"]}`, err: `args[0]: unterminated "${"`},
		{name: "missing command", entry: `{"args": ["x"]}`, err: "needs a command (stdio) or a url"},
		{name: "empty command", entry: `{"type": "stdio", "command": ""}`, err: "stdio server needs a command"},
		{name: "stdio with url", entry: `{"type": "stdio", "command": "x", "url": "https://h/"}`, err: "stdio server takes no url"},
		{name: "http with command", entry: `{"type": "http", "command": "x", "url": "https://h/"}`, err: "http server takes no command"},
		{name: "command and url without type", entry: `{"command": "x", "url": "https://h/"}`, err: "both command and url"},
		{name: "sdk", entry: `{"type": "sdk", "name": "s"}`, want: &Server{Kind: TransportAgent}},
		{name: "sdk with a command", entry: `{"type": "sdk", "command": "x"}`, err: "sdk server takes no command"},
		{name: "unknown type", entry: `{"type": "ws", "url": "wss://h/"}`, err: `unknown type "ws"`},
		{name: "relative url", entry: `{"type": "sse", "url": "localhost:8080/sse"}`, err: `url scheme is "localhost"`},
		{name: "bad protocol version", entry: `{"command": "x", "protocolVersion": "latest"}`, err: `protocol version "latest"`},
		{name: "negative timeout", entry: `{"command": "x", "timeout": -1}`, err: "timeout is negative"},
		{name: "huge timeout", entry: `{"command": "x", "connectTimeout": 1e300}`, err: "connectTimeout is more than"},
		{name: "string timeout", entry: `{"command": "x", "timeout": "30s"}`, err: "field timeout is a JSON string, want a number"},
		{name: "args is a string", entry: `{"command": "x", "args": "-y pkg"}`, err: "field args is a JSON string, want an array of strings"},
		{name: "env value is a number", entry: `{"command": "x", "env": {"A": "b", "PIN": 918273}}`, err: `field env["PIN"] is a JSON number, want a string`},
		{name: "header value is a boolean", entry: `{"url": "https://h/", "headers": {"X-Key": true}}`, err: `field headers["X-Key"] is a JSON bool, want a string`},
		{name: "arg is a number", entry: `{"command": "x", "args": ["-y", 918273]}`, err: `field args[1] is a JSON number, want a string`},
		{name: "oauth scope is a number", entry: `{"url": "https://h/", "oauth": {"scopes": ["a", 918273]}}`, err: `field oauth.scopes[1] is a JSON number, want a string`},
		{name: "bad tool pattern", entry: `{"command": "x", "toolsDeny": ["*_admin"]}`, err: `toolsDeny[0]: tool pattern "*_admin"`},
		{name: "entry is a string", entry: `"npx -y pkg"`, err: "entry is a JSON string, want an object"},
		{name: "entry is null", entry: `null`, err: "needs a command"},
		{name: "disabled not a bool", entry: `{"command": "x", "disabled": "yes"}`, err: "field disabled is a JSON string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := `{"mcpServers": {"ok": {"command": "true"}, "s": ` + tt.entry + `}}`
			f, err := Parse([]byte(data), mapLookup(testEnv))
			if err != nil {
				t.Fatalf("Parse: got %v, want nil", err)
			}
			// The neighbouring entry is never affected.
			if len(f.Servers) == 0 || f.Servers[0].Name != "ok" {
				t.Fatalf("Servers: got %q, want ok first", names(f.Servers))
			}
			if tt.want != nil {
				tt.want.Name = "s"
				if len(f.Invalid) != 0 {
					t.Fatalf("Invalid: got %v, want none", f.Invalid)
				}
				if len(f.Servers) != 2 {
					t.Fatalf("Servers: got %q, want [ok s]", names(f.Servers))
				}
				if diff := cmp.Diff(tt.want, &f.Servers[1], cmpopts.IgnoreUnexported(Server{}), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("server mismatch (-want +got):\n%s", diff)
				}
				return
			}
			if len(f.Servers) != 1 {
				t.Errorf("Servers: got %q, want [ok]", names(f.Servers))
			}
			if len(f.Invalid) != 1 || f.Invalid[0].Name != "s" {
				t.Fatalf("Invalid: got %v, want one error for s", f.Invalid)
			}
			got := f.Invalid[0].Error()
			if !strings.HasPrefix(got, `server "s": `) || !strings.Contains(got, tt.err) {
				t.Errorf("entry error: got %q, want `server \"s\": ...%s...`", got, tt.err)
			}
			for _, leak := range []string{testSecret, "918273"} {
				if strings.Contains(got, leak) {
					t.Errorf("entry error %q contains a value", got)
				}
			}
		})
	}
}

func TestParseNames(t *testing.T) {
	data := `{"mcpServers": {
		"good-1": {"command": "x"},
		"bad__name": {"command": "x"},
		"has space": {"command": "x"},
		"": {"command": "x"}
	}}`
	f, err := Parse([]byte(data), mapLookup(testEnv))
	if err != nil {
		t.Fatalf("Parse: got %v, want nil", err)
	}
	if got := names(f.Servers); len(got) != 1 || got[0] != "good-1" {
		t.Errorf("Servers: got %q, want [good-1]", got)
	}
	errs := entryErrors(f)
	for name, want := range map[string]string{"bad__name": `contains "__"`, "has space": "invalid character ' '", "": "server name is empty"} {
		if !strings.Contains(errs[name], want) {
			t.Errorf("error for %q: got %q, want it to contain %q", name, errs[name], want)
		}
	}
	for _, e := range f.Invalid {
		if !errors.Is(e, ErrInvalid) {
			t.Errorf("error for %q: got %v, want it to wrap ErrInvalid", e.Name, e)
		}
	}
}

func TestParseDisabled(t *testing.T) {
	data := `{"mcpServers": {
		"on": {"command": "x"},
		"off": {"command": "x", "disabled": true},
		"off-and-broken": {"disabled": true, "args": "not an array", "env": {"A": "${NOT_SET}"}}
	}}`
	f, err := Parse([]byte(data), mapLookup(testEnv))
	if err != nil {
		t.Fatalf("Parse: got %v, want nil", err)
	}
	if got := names(f.Servers); len(got) != 1 || got[0] != "on" {
		t.Errorf("Servers: got %q, want [on]", got)
	}
	if len(f.Invalid) != 0 {
		t.Errorf("Invalid: got %v, want none", f.Invalid)
	}
	if diff := cmp.Diff([]string{"off", "off-and-broken"}, f.Disabled); diff != "" {
		t.Errorf("Disabled mismatch (-want +got):\n%s", diff)
	}
}

func TestParseBothKeys(t *testing.T) {
	data := `{
		"mcpServers": {"a": {"command": "x"}, "dup": {"command": "x"}, "twice": {"command": "1"}, "twice": {"command": "2"}},
		"servers": {"b": {"type": "http", "url": "https://h/"}, "dup": {"command": "y"}}
	}`
	f, err := Parse([]byte(data), mapLookup(testEnv))
	if err != nil {
		t.Fatalf("Parse: got %v, want nil", err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, names(f.Servers)); diff != "" {
		t.Errorf("Servers mismatch (-want +got):\n%s", diff)
	}
	want := map[string]string{
		"dup":   `server "dup": invalid server config: defined under both "mcpServers" and "servers"`,
		"twice": `server "twice": invalid server config: defined twice under "mcpServers"`,
	}
	if diff := cmp.Diff(want, entryErrors(f)); diff != "" {
		t.Errorf("Invalid mismatch (-want +got):\n%s", diff)
	}
}

func TestParseFileErrors(t *testing.T) {
	tests := []struct {
		name string
		data string
		err  string // "" = no error
	}{
		{name: "empty", data: ``, err: "unexpected end of JSON input"},
		{name: "not JSON", data: "{\n  \"mcpServers\": {\n    \"a\": {command: 1}\n  }\n}", err: "invalid JSON at line 3, column 11"},
		{name: "unterminated comment", data: `{"mcpServers": {}} /* x`, err: "invalid JSON"},
		{name: "trailing data", data: `{"mcpServers": {}} {}`, err: "invalid JSON"},
		{name: "array", data: `[]`, err: "top level: is a JSON array, want an object"},
		{name: "neither key", data: `{"mcp": {}}`, err: `no "mcpServers" or "servers" object`},
		{name: "key with wrong case", data: `{"McpServers": {}}`, err: `no "mcpServers" or "servers" object`},
		{name: "mcpServers is an array", data: `{"mcpServers": [{"command": "x"}]}`, err: `"mcpServers": is a JSON array, want an object`},
		{name: "servers is a string", data: `{"mcpServers": {}, "servers": "x"}`, err: `"servers": is a JSON string, want an object`},
		{name: "key twice", data: `{"mcpServers": {}, "mcpServers": {}}`, err: `key "mcpServers" appears twice`},
		{name: "null servers", data: `{"mcpServers": null}`},
		{name: "empty servers", data: `{"servers": {}}`},
		{name: "byte order mark", data: "\ufeff{\"servers\": {}}"},
		{name: "byte order mark, then not JSON", data: "\ufeff{x}", err: "invalid JSON at line 1, column 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.data), mapLookup(testEnv))
			if tt.err == "" {
				if err != nil {
					t.Fatalf("Parse: got %v, want nil", err)
				}
				if len(f.Servers)+len(f.Invalid)+len(f.Disabled) != 0 {
					t.Errorf("Parse: got %+v, want an empty File", f)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse: got %+v and no error, want an error containing %q", f, tt.err)
			}
			if !strings.HasPrefix(err.Error(), "parse config: ") || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Parse: got %q, want \"parse config: ...%s...\"", err, tt.err)
			}
		})
	}
}

func TestStripJSONC(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "plain", in: `{"a": [1, 2]}`, want: `{"a": [1, 2]}`},
		{name: "line comment", in: "{\"a\": 1 // c\n}", want: "{\"a\": 1     \n}"},
		{name: "block comment keeps newlines", in: "{/* a\nb */\"a\": 1}", want: "{    \n    \"a\": 1}"},
		{name: "trailing commas", in: "{\"a\": [1,2,],\n}", want: "{\"a\": [1,2 ] \n}"},
		{name: "comment markers in strings", in: `{"u": "http://x/*y*/", "c": ",]"}`, want: `{"u": "http://x/*y*/", "c": ",]"}`},
		{name: "escaped quote in string", in: `{"a": "\"//", "b": 1,}`, want: `{"a": "\"//", "b": 1 }`},
		{name: "comma before comment and brace", in: "[1, // c\n]", want: "[1      \n]"},
		// Some Windows editors start a UTF-8 file with one.
		{name: "byte order mark", in: "\ufeff{\"a\": 1}", want: "{\"a\": 1}"},
		{name: "byte order mark and a comment", in: "\ufeff{\"a\": 1} // c", want: "{\"a\": 1}     "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(stripJSONC([]byte(tt.in))); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseKeepsTemplatesForString(t *testing.T) {
	data := `{"mcpServers": {
		"gh": {"command": "srv", "args": ["--token", "${GITHUB_TOKEN}"], "env": {"K": "${API_KEY}"}},
		"web": {"url": "https://h/${API_KEY}/mcp", "headers": {"Authorization": "Bearer ${API_KEY}"}}
	}}`
	f, err := Parse([]byte(data), mapLookup(testEnv))
	if err != nil {
		t.Fatalf("Parse: got %v, want nil", err)
	}
	want := []string{
		`gh (stdio): srv --token "${GITHUB_TOKEN}" env=[K]`,
		"web (auto): https://h/${API_KEY}/mcp headers=[Authorization]",
	}
	for i, s := range f.Servers {
		if got := s.String(); got != want[i] {
			t.Errorf("String: got %q, want %q", got, want[i])
		}
		c := s.Clone()
		if got := c.String(); got != want[i] {
			t.Errorf("Clone().String: got %q, want %q", got, want[i])
		}
	}
}

func TestLoadExample(t *testing.T) {
	env := map[string]string{"GITHUB_TOKEN": testSecret, "HOME": "/home/me", "DOCS_API_KEY": testSecret}
	f, err := Load(filepath.Join("testdata", "example.mcp.json"), mapLookup(env))
	if err != nil {
		t.Fatalf("Load: got %v, want nil", err)
	}
	want := &File{
		Servers: []Server{
			{Name: "docs", Kind: TransportHTTP, URL: "https://mcp.example.com/mcp",
				Headers:        map[string]string{"Authorization": "Bearer " + testSecret},
				ConnectTimeout: 10 * time.Second, ProtocolVersion: "2025-06-18"},
			{Name: "filesystem", Kind: TransportStdio, Command: "npx",
				Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/project"}},
			{Name: "github", Kind: TransportStdio, Command: "npx",
				Args:        []string{"-y", "@modelcontextprotocol/server-github"},
				Env:         map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": testSecret},
				CallTimeout: 30 * time.Second, ToolsDeny: []string{"delete_*", "merge_pull_request"}},
			{Name: "legacy-events", Kind: TransportSSE, URL: "http://127.0.0.1:8931/sse"},
			{Name: "memory", Kind: TransportStdio, Command: "npx",
				Args: []string{"-y", "@modelcontextprotocol/server-memory"}, Cwd: "/home/me",
				ToolsAllow: []string{"read_graph", "search_nodes", "open_nodes"}},
		},
		Disabled: []string{"old-experiment"},
	}
	if diff := cmp.Diff(want, f, cmpopts.IgnoreUnexported(Server{}, File{})); diff != "" {
		t.Errorf("Load mismatch (-want +got):\n%s", diff)
	}

	// Without GITHUB_TOKEN only the github entry fails.
	delete(env, "GITHUB_TOKEN")
	f, err = Load(filepath.Join("testdata", "example.mcp.json"), mapLookup(env))
	if err != nil {
		t.Fatalf("Load: got %v, want nil", err)
	}
	if got := len(f.Servers); got != 4 {
		t.Errorf("Servers: got %d (%q), want 4", got, names(f.Servers))
	}
	wantErrs := map[string]string{"github": `server "github": env.GITHUB_PERSONAL_ACCESS_TOKEN: variable GITHUB_TOKEN is not set (use ${GITHUB_TOKEN:-default} for a default)`}
	if diff := cmp.Diff(wantErrs, entryErrors(f)); diff != "" {
		t.Errorf("Invalid mismatch (-want +got):\n%s", diff)
	}
	var ue *UnsetVariableError
	if !errors.As(f.Invalid[0], &ue) || ue.Name != "GITHUB_TOKEN" {
		t.Errorf("errors.As: got %v, want *UnsetVariableError for GITHUB_TOKEN", f.Invalid[0])
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(filepath.Join(dir, "missing.json"), nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load missing file: got %v, want os.ErrNotExist", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"mcpServers": `), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad, nil)
	if err == nil || !strings.Contains(err.Error(), "load config "+bad+": parse config: ") {
		t.Errorf("Load bad file: got %v, want an error naming %s", err, bad)
	}
	_, err = Load("/dev/zero", nil)
	if want := "load config: read /dev/zero: is a character device, not a regular file"; err == nil || err.Error() != want {
		t.Errorf("Load /dev/zero: got %v, want %q", err, want)
	}
}

func TestParsePermissions(t *testing.T) {
	data := `{
  "permissions": {"allow": ["mcp__a__*"], "ask": ["mcp__*__write_*"], "deny": ["mcp__*__delete_*"], "default": "ask", "defaultMode": "plan"},
  "mcpServers": {
    "a": {"command": "cat", "permissions": {"deny": ["rm"], "mode": 1}, "autoApprove": ["x"], "alwaysAllow": ["y"], "trace": true, "traceRedact": ["q"], "bogus": 1}
  }
}`
	f, err := Parse([]byte(data), mapLookup(testEnv))
	if err != nil {
		t.Fatalf("Parse: got %v, want nil", err)
	}
	wantRules := ToolRules{Allow: []string{"mcp__a__*"}, Ask: []string{"mcp__*__write_*"}, Deny: []string{"mcp__*__delete_*"}, Default: "ask"}
	if diff := cmp.Diff(wantRules, f.Permissions); diff != "" {
		t.Errorf("Permissions mismatch (-want +got):\n%s", diff)
	}
	if want := []string{`permissions field "defaultMode" is not understood by mcpd; ignored`}; !slices.Equal(f.Warnings, want) {
		t.Errorf("Warnings: got %q, want %q", f.Warnings, want)
	}
	want := []Server{{Name: "a", Kind: TransportStdio, Command: "cat",
		Permissions: ToolRules{Deny: []string{"rm"}}, AlwaysAllow: []string{"y", "x"}, Trace: true, TraceRedact: []string{"q"},
		Warnings: []string{`field "bogus" is not understood by mcpd; ignored`, `permissions field "mode" is not understood by mcpd; ignored`}}}
	if diff := cmp.Diff(want, f.Servers, cmpopts.IgnoreUnexported(Server{})); diff != "" {
		t.Errorf("Servers mismatch (-want +got):\n%s", diff)
	}
	for _, bad := range []string{
		`{"permissions": {"default": "maybe"}, "mcpServers": {}}`,
		`{"permissions": {"allow": "mcp__a__*"}, "mcpServers": {}}`,
	} {
		if _, err := Parse([]byte(bad), mapLookup(testEnv)); err == nil {
			t.Errorf("Parse(%s): got nil, want an error", bad)
		}
	}
}

// A repeated key in a permissions block would let the last value win
// unseen: {"deny": [...], "deny": []} would drop the deny rules.
func TestParsePermissionsRepeatedKey(t *testing.T) {
	_, err := Parse([]byte(`{"permissions": {"deny": ["mcp__*__delete_*"], "deny": []}, "mcpServers": {}}`), mapLookup(testEnv))
	if want := `"permissions": invalid server config: key "deny" appears twice`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("top-level block: got %v, want an error containing %q", err, want)
	}
	f, err := Parse([]byte(`{"mcpServers": {
  "twice": {"command": "cat", "permissions": {"deny": ["rm"], "deny": []}},
  "blocks": {"command": "cat", "permissions": {"deny": ["rm"]}, "permissions": {}},
  "ok": {"command": "cat", "permissions": {"deny": ["rm"]}, "alwaysAllow": ["rm"]}
}}`), mapLookup(testEnv))
	if err != nil {
		t.Fatal(err)
	}
	errs := entryErrors(f)
	for name, want := range map[string]string{
		"twice":  `invalid server config: permissions: key "deny" appears twice`,
		"blocks": `invalid server config: key "permissions" appears twice`,
	} {
		if !strings.Contains(errs[name], want) {
			t.Errorf("%s: got %q, want an error containing %q", name, errs[name], want)
		}
	}
	if len(f.Servers) != 1 || f.Servers[0].Name != "ok" {
		t.Errorf("Servers: got %v, want ok only", f.Servers)
	}
}

// TestParseEntryFieldsExactCase: encoding/json matches keys to fields
// without case, but mcpd reads an entry's fields as spelled: a key in
// another case is ignored, as its warning says, and cannot override the
// real one; a field given twice, in any case, refuses the entry.
func TestParseEntryFieldsExactCase(t *testing.T) {
	f, err := Parse([]byte(`{"mcpServers": {
  "other-case": {"command": "npx", "ToolsDeny": ["delete_*"], "Disabled": true, "permissions": {"Deny": ["rm"]}},
  "both-cases": {"command": "npx", "Command": "sh"},
  "deny-both": {"command": "npx", "toolsDeny": ["delete_*"], "ToolsDeny": []},
  "twice": {"command": "npx", "args": ["-y", "x"], "command": "sh"}
}}`), mapLookup(testEnv))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Servers) != 1 || f.Servers[0].Name != "other-case" {
		t.Fatalf("Servers: got %v, want other-case only", f.Servers)
	}
	s := f.Servers[0]
	if s.Command != "npx" || len(s.ToolsDeny) != 0 || !s.Permissions.Empty() {
		t.Errorf("other-case: got command %q, toolsDeny %q, deny %q; want npx and the keys in another case ignored", s.Command, s.ToolsDeny, s.Permissions.Deny)
	}
	for _, key := range []string{"ToolsDeny", "Disabled"} {
		if !slices.ContainsFunc(s.Warnings, func(w string) bool { return strings.Contains(w, `"`+key+`"`) }) {
			t.Errorf("other-case: warnings %q, want one naming %q", s.Warnings, key)
		}
	}
	errs := entryErrors(f)
	for name, want := range map[string]string{
		"both-cases": `keys "command" and "Command" differ only in case`,
		"deny-both":  `keys "toolsDeny" and "ToolsDeny" differ only in case`,
		"twice":      `key "command" appears twice`,
	} {
		if !strings.Contains(errs[name], want) {
			t.Errorf("%s: got %q, want an error containing %q", name, errs[name], want)
		}
	}
}

func TestRepeatedKey(t *testing.T) {
	for _, tc := range []struct {
		data, want string // want "": no error
	}{
		{`{"a": 1, "b": {"a": 1}, "c": [{"a": 1}, {"a": 2}]}`, ""},
		{`[1, "x", null, 1e999]`, ""},
		{`{"a": 1, "a": 1}`, `key "a" appears twice`},
		{`{"a": {"b": [{}, {"c": 1, "c": 2}]}}`, `key "c" appears twice in a.b[1]`},
		{`{"a": [1, }`, ""}, // not JSON: the decoder's business
		// encoding/json reads keys without case: "Tools" is "tools".
		{`{"x": {"tools": ["a"], "Tools": ["*"]}}`, `keys "tools" and "Tools" in x differ only in case, which JSON reads as one key: it appears twice`},
		{`{"k": 1, "K": 2}`, `keys "k" and "K" differ only in case, which JSON reads as one key: it appears twice`},
	} {
		err := RepeatedKey([]byte(tc.data))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || err.Error() != tc.want) {
			t.Errorf("RepeatedKey(%s): got %v, want %q", tc.data, err, tc.want)
		}
	}
}

func TestParseWarningsExplainUnusableEntries(t *testing.T) {
	data := `{"mcpServers": {
  "typo": {"comand": "cat"},
  "remote": {"url": "https://example.com/mcp", "oauth": {"clientId": "x", "scope": "a", "idp": {"issuer": "https://idp.example.com", "tenant": "t"}}}
}}`
	f, err := Parse([]byte(data), mapLookup(testEnv))
	if err != nil {
		t.Fatal(err)
	}
	errs := entryErrors(f)
	if e := errs["typo"]; !strings.Contains(e, "needs a command") || !strings.Contains(e, `field "comand" is not understood`) {
		t.Errorf("typo: got %q, want the missing command and the unknown field", e)
	}
	if len(f.Servers) != 1 {
		t.Fatalf("Servers: got %d, want remote", len(f.Servers))
	}
	want := []string{`oauth field "scope" is not understood by mcpd; ignored`, `oauth.idp field "tenant" is not understood by mcpd; ignored`}
	if got := f.Servers[0].Warnings; !slices.Equal(got, want) {
		t.Errorf("remote warnings: got %q, want %q", got, want)
	}
}

// TestEntryKeysAreTheClientsList checks the keys of a server entry, its
// oauth block, the block's idp object and its tls block against the list the Python and
// TypeScript clients' tests read (clients/testdata/mcp-json-keys.json): a
// key added here must be added there, where ServerConfig.from_mcp_json and
// ServerConfig.fromMcpJson have to read it or refuse it by name rather
// than drop it.
func TestEntryKeysAreTheClientsList(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "clients", "testdata", "mcp-json-keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	var shared map[string]any
	if err := json.Unmarshal(data, &shared); err != nil {
		t.Fatalf("mcp-json-keys.json: %v", err)
	}
	for _, tc := range []struct {
		list  string
		known map[string]bool
	}{
		{"entry", entryFields},
		{"oauth", oauthFields},
		{"oauth.idp", idpFields},
		{"tls", tlsFields},
	} {
		var got []string
		raw, _ := shared[tc.list].([]any)
		for _, k := range raw {
			s, _ := k.(string)
			got = append(got, s)
		}
		if want := slices.Sorted(maps.Keys(tc.known)); !slices.Equal(got, want) {
			t.Errorf("mcp-json-keys.json %q: got %q, want the keys internal/config reads, sorted: %q", tc.list, got, want)
		}
	}
}

// TestParseDisabledTools reads Windsurf's, Roo Code's and Kiro's
// "disabledTools" as more toolsDeny, and refuses a name that is no tool
// pattern as it refuses one in toolsDeny.
func TestParseDisabledTools(t *testing.T) {
	f, err := Parse([]byte(`{"mcpServers": {
		"a": {"command": "cat", "toolsDeny": ["rm_*"], "disabledTools": ["delete_repo", "push"]},
		"b": {"command": "cat", "disabledTools": ["x", ""]}
	}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Servers) != 1 || len(f.Servers[0].Warnings) > 0 || !slices.Equal(f.Servers[0].ToolsDeny, []string{"rm_*", "delete_repo", "push"}) {
		t.Fatalf("servers: got %+v, want a with toolsDeny [rm_* delete_repo push] and no warning", f.Servers)
	}
	if !f.Servers[0].AllowsTool("read") || f.Servers[0].AllowsTool("delete_repo") {
		t.Error("a: want read allowed and delete_repo denied")
	}
	if len(f.Invalid) != 1 || f.Invalid[0].Name != "b" || !strings.Contains(f.Invalid[0].Error(), "disabledTools[1]: empty tool pattern") {
		t.Errorf("invalid: got %v, want b refused for disabledTools[1]", f.Invalid)
	}
}
