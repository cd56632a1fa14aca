package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestMarshalEntryRoundTrip: an entry read back with the referenced
// variables set is the server that was written, and the written text
// holds none of its secrets.
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
	}
	env := map[string]string{
		"GITHUB_TOKEN": secret, "MCPD_GH_ENV_ODD_NAME": secret,
		"MCPD_DOCS_URL": "https://h.example/mcp?key=" + secret, "MCPD_DOCS_AUTHORIZATION": "Bearer " + secret,
		"MCPD_DOCS_OAUTH_CLIENT_SECRET": secret,
	}
	var b strings.Builder
	b.WriteString(`{"mcpServers": {`)
	for i, s := range servers {
		data, _, err := MarshalEntry(&s)
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
	f, err := Parse([]byte(b.String()), mapLookup(env))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(f.Invalid) > 0 {
		t.Fatalf("Parse: invalid entries %v", f.Invalid)
	}
	want := map[string]Server{}
	for _, s := range servers {
		want[s.Name] = s
	}
	got := map[string]Server{}
	for _, s := range f.Servers {
		got[s.Name] = s
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Server{})); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}
