package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestMarshalEntryRoundTrip: an entry read back as a state file, with the
// referenced variables set, is the server that was written, and the
// written text holds none of its secrets. A "${" that ConnectServer took
// as text stays text: it never reaches into mcpd's environment.
func TestMarshalEntryRoundTrip(t *testing.T) {
	const secret = "s3cret-value-91f2"
	servers := []Server{
		{Name: "gh", Kind: TransportStdio, Command: "npx", Args: []string{"-y", "server-github"},
			Env: map[string]string{"GITHUB_TOKEN": secret, "odd-name": secret}, Cwd: "/srv",
			CallTimeout: 30 * time.Second, ToolsDeny: []string{"delete_*"}, ToolsAsk: []string{"create_*"}},
		{Name: "docs", Kind: TransportHTTP, URL: "https://h.example/mcp?key=" + secret,
			Headers:        map[string]string{"Authorization": "Bearer " + secret},
			ConnectTimeout: 2500 * time.Millisecond, ProtocolVersion: "2025-06-18",
			OAuth: &OAuth{ClientID: "mcpd", ClientSecret: secret, Scopes: []string{"read"}}},
		{Name: "plain", Kind: TransportAuto, URL: "https://h.example/mcp"},
		{Name: "options", Kind: TransportStdio, Command: "srv", StrictCapabilities: true, Trace: true, TraceRedact: []string{"query"}},
		{Name: "literal", Kind: TransportHTTP, URL: "http://127.0.0.1:1/c/${AWS_SECRET_ACCESS_KEY}",
			OAuth: &OAuth{ClientID: "${GITHUB_TOKEN}"}},
		{Name: "literal-stdio", Kind: TransportStdio, Command: "${HOME}/bin/srv", Cwd: "${HOME}",
			Args: []string{"-c", `echo "${GITHUB_TOKEN}"`, "${name}", "${", "${HOME:-/x}"}},
		// Names of mcpd's own: references to them are written longer.
		{Name: "api", Kind: TransportHTTP, URL: "https://h.example/mcp", Headers: map[string]string{"Token": secret}},
		{Name: "own", Kind: TransportStdio, Command: "srv",
			Env: map[string]string{"MCPD_API_TOKEN": secret, "CALLER_TOKEN": secret, "MCPD_OTHER": secret}},
	}
	env := map[string]string{
		"GITHUB_TOKEN": secret, "MCPD_GH_ENV_ODD_NAME": secret,
		"MCPD_DOCS_URL": "https://h.example/mcp?key=" + secret, "MCPD_DOCS_AUTHORIZATION": "Bearer " + secret,
		"MCPD_DOCS_OAUTH_CLIENT_SECRET": secret,
		"AWS_SECRET_ACCESS_KEY":         secret, "HOME": secret,
		"MCPD_STATE_API_TOKEN": secret, "MCPD_OWN_ENV_MCPD_API_TOKEN": secret,
		"MCPD_OWN_ENV_CALLER_TOKEN": secret, "MCPD_OWN_ENV_MCPD_OTHER": secret,
		// mcpd's own variables, which no reference may read.
		"MCPD_API_TOKEN": "daemon-token", "CALLER_TOKEN": "caller-token", "MCPD_OTHER": "other",
	}
	var b strings.Builder
	b.WriteString(`{"mcpServers": {`)
	for i, s := range servers {
		data, _, err := MarshalEntry(&s, reservedForTest)
		if err != nil {
			t.Fatalf("MarshalEntry(%s): %v", s.Name, err)
		}
		if strings.Contains(string(data), secret) {
			t.Errorf("MarshalEntry(%s) = %s: holds the secret", s.Name, data)
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"` + s.Name + `": ` + string(data))
	}
	b.WriteString("}}")
	m, err := LoadLayers([]Layer{{Scope: ScopeAPI, Path: "state.json", Inline: []byte(b.String()), State: true, Reserved: reservedForTest}}, mapLookup(env))
	if err != nil {
		t.Fatalf("LoadLayers: %v", err)
	}
	want := map[string]Server{}
	for _, s := range servers {
		want[s.Name] = s
	}
	got := map[string]Server{}
	for _, e := range m.Entries {
		if e.Err != nil {
			t.Errorf("%s: %v", e.Name, e.Err)
		}
		got[e.Name] = e.Server
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Server{}), cmpopts.IgnoreFields(Server{}, "Source")); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// reservedForTest stands for mcpd's own variables: its settings, and a
// callers file's token variable.
func reservedForTest(name string) bool {
	return name == "MCPD_API_TOKEN" || name == "MCPD_LISTEN" || name == "CALLER_TOKEN"
}

// TestStateFileReservedNames: a state file whose references name mcpd's
// own variables (as one written before they were reserved could) reads
// them as text, never mcpd's values.
func TestStateFileReservedNames(t *testing.T) {
	state := `{"mcpServers": {
	  "api": {"type": "http", "url": "https://h.example/mcp", "headers": {"Token": "${MCPD_API_TOKEN}"}},
	  "listen": {"command": "srv", "env": {"MCPD_API_TOKEN": "${MCPD_API_TOKEN}", "CALLER_TOKEN": "${CALLER_TOKEN}"}}
	}}`
	env := map[string]string{"MCPD_API_TOKEN": "daemon-token", "CALLER_TOKEN": "caller-token"}
	m, err := LoadLayers([]Layer{{Scope: ScopeAPI, Path: "state.json", Inline: []byte(state), State: true, Reserved: reservedForTest}}, mapLookup(env))
	if err != nil {
		t.Fatalf("LoadLayers: %v", err)
	}
	for _, e := range m.Entries {
		if e.Err != nil {
			t.Fatalf("%s: %v", e.Name, e.Err)
		}
		for k, v := range e.Server.Headers {
			if v != "${MCPD_API_TOKEN}" {
				t.Errorf("%s: header %s = %q, want the text ${MCPD_API_TOKEN}", e.Name, k, v)
			}
		}
		for k, v := range e.Server.Env {
			if v != "${"+k+"}" {
				t.Errorf("%s: env %s = %q, want the text ${%s}", e.Name, k, v, k)
			}
		}
	}
}

// TestTimeoutBoundShared: a timeout ConnectServer accepts is one a file
// (and so the state file) accepts too.
func TestTimeoutBoundShared(t *testing.T) {
	for _, d := range []time.Duration{maxTimeoutSeconds * time.Second, maxTimeoutSeconds*time.Second + time.Second} {
		s := Server{Name: "x", Kind: TransportStdio, Command: "srv", CallTimeout: d, ConnectTimeout: d}
		valid := s.Validate() == nil
		data, _, err := MarshalEntry(&s, nil)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse([]byte(`{"mcpServers": {"x": `+string(data)+`}}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if parsed := len(f.Servers) == 1; parsed != valid {
			t.Errorf("timeout %v: Validate ok %v, read back from a file ok %v (%v)", d, valid, parsed, f.Invalid)
		}
	}
}
