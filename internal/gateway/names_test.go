package gateway

import "testing"

func TestResourceURIRoundTrip(t *testing.T) {
	for _, tt := range []struct{ server, uri string }{
		{"demo", "demo://readme"},
		{"my_server-2", "file:///tmp/a b.txt"},
		{"ev", "test://template/{id}/data"},
		{"s", "https://example.com/x?y=/z"},
	} {
		got := ResourceURI(tt.server, tt.uri)
		server, uri, ok := SplitResourceURI(got)
		if !ok || server != tt.server || uri != tt.uri {
			t.Errorf("SplitResourceURI(%q): got %q, %q, %v; want %q, %q", got, server, uri, ok, tt.server, tt.uri)
		}
	}
	for _, bad := range []string{"demo://readme", "mcpd://", "mcpd://demo", "mcpd://demo/", "mcpd:///x"} {
		if s, u, ok := SplitResourceURI(bad); ok {
			t.Errorf("SplitResourceURI(%q): got %q, %q, want no gateway URI", bad, s, u)
		}
	}
}

func TestBodyIsStateless(t *testing.T) {
	for _, tt := range []struct {
		body string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18"}}}`, false},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, false},
		{`not json`, false},
	} {
		if got := bodyIsStateless([]byte(tt.body)); got != tt.want {
			t.Errorf("bodyIsStateless(%s): got %v, want %v", tt.body, got, tt.want)
		}
	}
}
