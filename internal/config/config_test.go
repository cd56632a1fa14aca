package config

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestTransportKindString(t *testing.T) {
	tests := []struct {
		k    TransportKind
		want string
	}{
		{TransportUnspecified, "unspecified"},
		{TransportStdio, "stdio"},
		{TransportHTTP, "http"},
		{TransportSSE, "sse"},
		{TransportAgent, "agent"},
		{TransportKind(9), "TransportKind(9)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.k.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseTransportKind(t *testing.T) {
	tests := []struct {
		in      string
		want    TransportKind
		wantErr bool
	}{
		{"stdio", TransportStdio, false},
		{"http", TransportHTTP, false},
		{"HTTP", TransportHTTP, false},
		{"streamable-http", TransportHTTP, false},
		{"streamableHttp", TransportHTTP, false},
		{"streamable_http", TransportHTTP, false},
		{"sse", TransportSSE, false},
		{"sdk", TransportAgent, false},
		{"", TransportUnspecified, true},
		{"websocket", TransportUnspecified, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTransportKind(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("got error %v, want it to wrap ErrInvalid", err)
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		err  string // "" = valid
	}{
		{name: "github"},
		{name: "a"},
		{name: "A-b_c9"},
		{name: "_leading"},
		{name: "trailing_", err: `ends in "_"`},
		{name: "_", err: `ends in "_"`},
		{name: "-"},
		{name: "my-server_2"},
		{name: strings.Repeat("x", 64)},
		{name: "", err: "empty"},
		{name: strings.Repeat("x", 65), err: "65 bytes long, the limit is 64"},
		{name: "a__b", err: `contains "__"`},
		{name: "__", err: `contains "__"`},
		{name: "a b", err: "invalid character ' ' at byte 1"},
		{name: "a.b", err: "invalid character '.'"},
		{name: "a/b", err: "invalid character '/'"},
		{name: "ä", err: "invalid character 'ä' at byte 0"},
		{name: "Ünï", err: "invalid character 'Ü' at byte 0"},
		{name: "aé", err: "invalid character 'é' at byte 1"},
		{name: "a\xffb", err: "byte 0xff at byte 1 is not UTF-8"},
		{name: "a:b", err: "invalid character ':'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateName(tt.name)
			if tt.err == "" {
				if err != nil {
					t.Fatalf("ValidateName(%q): got %v, want nil", tt.name, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateName(%q): got nil, want error containing %q", tt.name, tt.err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("ValidateName(%q): got %v, want it to wrap ErrInvalid", tt.name, err)
			}
			for _, want := range []string{tt.err, "A-Z a-z 0-9 _ -", "mcp__<server>__<tool>"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("ValidateName(%q): got %q, want it to contain %q", tt.name, err, want)
				}
			}
		})
	}
}

func stdioServer() Server {
	return Server{Name: "fs", Kind: TransportStdio, Command: "npx", Args: []string{"-y", "server"}, Env: map[string]string{"TOKEN": "v"}, Cwd: "/tmp"}
}

func httpServer() Server {
	return Server{Name: "remote", Kind: TransportHTTP, URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer v"}}
}

func TestValidate(t *testing.T) {
	const secret = "s3cr3t-value"
	tests := []struct {
		name string
		edit func(s *Server)
		base func() Server
		errs []string // nil = valid
	}{
		{name: "stdio", base: stdioServer},
		{name: "http", base: httpServer},
		{name: "sse", base: httpServer, edit: func(s *Server) { s.Kind = TransportSSE; s.URL = "http://127.0.0.1:8931/sse" }},
		{name: "stdio minimal", base: func() Server { return Server{Name: "x", Kind: TransportStdio, Command: "cat"} }},
		{name: "all options", base: stdioServer, edit: func(s *Server) {
			s.CallTimeout, s.ConnectTimeout = time.Second, time.Minute
			s.ProtocolVersion = "2026-07-28"
			s.ToolsAllow, s.ToolsDeny = []string{"get_*", "list"}, []string{"*"}
		}},
		{name: "bad name", base: stdioServer, edit: func(s *Server) { s.Name = "a__b" }, errs: []string{`contains "__"`}},
		{name: "no kind", base: stdioServer, edit: func(s *Server) { s.Kind = TransportUnspecified }, errs: []string{"transport is unspecified"}},
		{name: "stdio without command", base: stdioServer, edit: func(s *Server) { s.Command = "" }, errs: []string{"needs a command"}},
		{name: "stdio with url", base: stdioServer, edit: func(s *Server) { s.URL = "https://x" }, errs: []string{"stdio server takes no url"}},
		{name: "stdio with headers", base: stdioServer, edit: func(s *Server) { s.Headers = map[string]string{"A": "b"} }, errs: []string{"takes no headers"}},
		{name: "NUL in arg", base: stdioServer, edit: func(s *Server) { s.Args = []string{"ok", "a\x00b"} }, errs: []string{"args[1] contains a NUL"}},
		{name: "env name with =", base: stdioServer, edit: func(s *Server) { s.Env = map[string]string{"A=B": "c"} }, errs: []string{`env name "A=B"`}},
		{name: "empty env name", base: stdioServer, edit: func(s *Server) { s.Env = map[string]string{"": "c"} }, errs: []string{"empty variable name"}},
		{name: "env value with NUL", base: stdioServer, edit: func(s *Server) { s.Env = map[string]string{"K": secret + "\x00"} }, errs: []string{"env K value contains a NUL"}},
		{name: "http with command", base: httpServer, edit: func(s *Server) { s.Command = "npx" }, errs: []string{"http server takes no command"}},
		{name: "sse with env", base: httpServer, edit: func(s *Server) { s.Kind = TransportSSE; s.Env = map[string]string{"A": "b"} }, errs: []string{"sse server takes no"}},
		{name: "http without url", base: httpServer, edit: func(s *Server) { s.URL = "" }, errs: []string{"need a url"}},
		{name: "relative url", base: httpServer, edit: func(s *Server) { s.URL = "/mcp" }, errs: []string{`url scheme is ""`}},
		{name: "ftp url", base: httpServer, edit: func(s *Server) { s.URL = "ftp://host/x" }, errs: []string{`url scheme is "ftp"`}},
		{name: "url without host", base: httpServer, edit: func(s *Server) { s.URL = "http:///mcp" }, errs: []string{"url has no host"}},
		{name: "unparsable url with secret", base: httpServer, edit: func(s *Server) { s.URL = "https://h/x?k=" + secret + "%zz\x7f" }, errs: []string{"not a valid URL"}},
		{name: "bad header name", base: httpServer, edit: func(s *Server) { s.Headers = map[string]string{"X Key": "v"} }, errs: []string{`header name "X Key"`}},
		// Sent as one header, the two values would take turns by map order.
		{name: "header names differing in case", base: httpServer, edit: func(s *Server) {
			s.Headers = map[string]string{"Authorization": "Bearer " + secret, "authorization": "Bearer other", "X-Key": "a"}
		}, errs: []string{`headers "Authorization" and "authorization" name one HTTP header`}},
		{name: "header value with newline", base: httpServer, edit: func(s *Server) { s.Headers = map[string]string{"X-Key": secret + "\r\nEvil: 1"} }, errs: []string{"header X-Key value contains a line break"}},
		{name: "unknown protocol", base: stdioServer, edit: func(s *Server) { s.ProtocolVersion = "2025-01-01" }, errs: []string{`protocol version "2025-01-01" is not one of 2024-11-05`}},
		{name: "negative call timeout", base: stdioServer, edit: func(s *Server) { s.CallTimeout = -time.Second }, errs: []string{"call timeout -1s is negative"}},
		{name: "negative connect timeout", base: stdioServer, edit: func(s *Server) { s.ConnectTimeout = -1 }, errs: []string{"connect timeout"}},
		{name: "star inside pattern", base: stdioServer, edit: func(s *Server) { s.ToolsAllow = []string{"ok", "a*b"} }, errs: []string{`toolsAllow[1]: tool pattern "a*b" may only end with "*"`}},
		{name: "empty pattern", base: stdioServer, edit: func(s *Server) { s.ToolsDeny = []string{""} }, errs: []string{"toolsDeny[0]: empty tool pattern"}},
		{name: "bad ask pattern", base: stdioServer, edit: func(s *Server) { s.ToolsAsk = []string{"ok", "*_x"} }, errs: []string{`toolsAsk[1]: tool pattern "*_x" may only end with "*"`}},
		{name: "several problems", base: stdioServer, edit: func(s *Server) {
			s.Name, s.Command, s.URL = "", "", "https://x"
		}, errs: []string{"server name is empty", "needs a command", "takes no url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.base()
			if tt.edit != nil {
				tt.edit(&s)
			}
			err := s.Validate()
			if tt.errs == nil {
				if err != nil {
					t.Fatalf("Validate: got %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: got nil, want an error containing %q", tt.errs)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate: got %v, want it to wrap ErrInvalid", err)
			}
			for _, want := range tt.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate: got %q, want it to contain %q", err, want)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Validate: error %q contains a secret value", err)
			}
		})
	}
}

func TestValidateKnownProtocolVersions(t *testing.T) {
	for _, v := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			s := stdioServer()
			s.ProtocolVersion = v
			if err := s.Validate(); err != nil {
				t.Errorf("Validate: got %v, want nil", err)
			}
		})
	}
}

func TestAllowsTool(t *testing.T) {
	tests := []struct {
		name        string
		allow, deny []string
		tool        string
		want        bool
	}{
		{name: "no filters", tool: "anything", want: true},
		{name: "exact allow", allow: []string{"read"}, tool: "read", want: true},
		{name: "not in allow", allow: []string{"read"}, tool: "write", want: false},
		{name: "allow is exact, not prefix", allow: []string{"read"}, tool: "read_file", want: false},
		{name: "glob allow", allow: []string{"get_*"}, tool: "get_issue", want: true},
		{name: "glob matches the bare prefix", allow: []string{"get_*"}, tool: "get_", want: true},
		{name: "glob allow miss", allow: []string{"get_*"}, tool: "list_issues", want: false},
		{name: "star allows all", allow: []string{"*"}, tool: "x", want: true},
		{name: "exact deny", deny: []string{"delete"}, tool: "delete", want: false},
		{name: "deny other", deny: []string{"delete"}, tool: "read", want: true},
		{name: "glob deny", deny: []string{"delete_*"}, tool: "delete_repo", want: false},
		{name: "deny wins over allow", allow: []string{"*"}, deny: []string{"push"}, tool: "push", want: false},
		{name: "allow and deny pass", allow: []string{"get_*"}, deny: []string{"get_secret"}, tool: "get_issue", want: true},
		{name: "deny all", deny: []string{"*"}, tool: "x", want: false},
		{name: "case sensitive", allow: []string{"Read"}, tool: "read", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{ToolsAllow: tt.allow, ToolsDeny: tt.deny}
			if got := s.AllowsTool(tt.tool); got != tt.want {
				t.Errorf("AllowsTool(%q) with allow %q deny %q: got %v, want %v", tt.tool, tt.allow, tt.deny, got, tt.want)
			}
		})
	}
}

func fullServer() *Server {
	return &Server{
		Name: "s", Kind: TransportStdio, Command: "c", Args: []string{"a"}, Env: map[string]string{"K": "v"}, Cwd: "/d",
		URL: "https://h/", Headers: map[string]string{"H": "v"},
		CallTimeout: time.Second, ConnectTimeout: time.Second, ProtocolVersion: "2025-06-18",
		ToolsAllow: []string{"a"}, ToolsDeny: []string{"d"}, ToolsAsk: []string{"w*"},
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		name string
		a, b *Server
		want bool
	}{
		{name: "same", a: fullServer(), b: fullServer(), want: true},
		{name: "both nil", want: true},
		{name: "nil and non-nil", a: fullServer(), want: false},
		{name: "nil and empty slices and maps", a: &Server{Name: "x"}, b: &Server{Name: "x", Args: []string{}, Env: map[string]string{}, Headers: map[string]string{}, ToolsAllow: []string{}, ToolsDeny: []string{}}, want: true},
		{name: "arg order matters", a: &Server{Args: []string{"a", "b"}}, b: &Server{Args: []string{"b", "a"}}, want: false},
		{name: "env value differs", a: &Server{Env: map[string]string{"K": "1"}}, b: &Server{Env: map[string]string{"K": "2"}}, want: false},
		{name: "templates ignored", a: &Server{Args: []string{"v"}, argsTemplate: []string{"${X}"}}, b: &Server{Args: []string{"v"}}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Equal(tt.b); got != tt.want {
				t.Errorf("a.Equal(b): got %v, want %v", got, tt.want)
			}
			if got := tt.b.Equal(tt.a); got != tt.want {
				t.Errorf("b.Equal(a): got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestEqualComparesEveryField changes each exported field in turn, so a
// field added to Server but not to Equal fails here.
// rulesOnly are the fields Equal leaves out: the daemon's tool rules read
// them, and changing them must not restart the server.
var rulesOnly = map[string]bool{"Permissions": true, "AlwaysAllow": true}

func TestEqualComparesEveryField(t *testing.T) {
	typ := reflect.TypeFor[Server]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		// Source and Warnings are labels: see TestEqualIgnoresSource and
		// TestReload (a field mcpd ignores restarts nothing).
		if !f.IsExported() || f.Name == "Source" || f.Name == "Warnings" || rulesOnly[f.Name] {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			a, b := fullServer(), fullServer()
			v := reflect.ValueOf(b).Elem().Field(i)
			switch v.Kind() {
			case reflect.String:
				v.SetString(v.String() + "x")
			case reflect.Bool:
				v.SetBool(!v.Bool())
			case reflect.Int, reflect.Int64:
				v.SetInt(v.Int() + 1)
			case reflect.Slice:
				v.Set(reflect.Append(v, reflect.ValueOf("x")))
			case reflect.Map:
				v.SetMapIndex(reflect.ValueOf("new"), reflect.ValueOf("x"))
			case reflect.Pointer:
				v.Set(reflect.New(v.Type().Elem()))
			default:
				t.Fatalf("field %s has kind %v; teach this test to change it", f.Name, v.Kind())
			}
			if a.Equal(b) {
				t.Errorf("Equal: got true after changing %s, want false", f.Name)
			}
		})
	}
}

// TestEqualIgnoresSource: a server that moves to another scope unchanged
// is not restarted.
func TestEqualIgnoresSource(t *testing.T) {
	a, b := fullServer(), fullServer()
	a.Source = Source{Scope: ScopeProject, Name: "/p/.mcp.json"}
	b.Source = Source{Scope: ScopeLocal, Name: "/p/.mcp.local.json"}
	if !a.Equal(b) {
		t.Errorf("Equal: got false for servers that differ only in Source, want true")
	}
}

func TestClone(t *testing.T) {
	orig := fullServer()
	c := orig.Clone()
	if !c.Equal(orig) {
		t.Fatalf("Clone: got %v, want a copy of %v", c, orig)
	}
	c.Args[0] = "changed"
	c.Env["K"] = "changed"
	c.Headers["H"] = "changed"
	c.ToolsAllow[0] = "changed"
	c.ToolsDeny[0] = "changed"
	c.ToolsAsk[0] = "changed"
	if !orig.Equal(fullServer()) {
		t.Errorf("Clone: changing the copy changed the original: got %v", orig)
	}
	if got := (*Server)(nil).Clone(); got != nil {
		t.Errorf("nil Clone: got %v, want nil", got)
	}
}

func TestString(t *testing.T) {
	const secret = "s3cr3t"
	tests := []struct {
		name   string
		s      Server
		want   string
		absent []string
	}{
		{
			name: "stdio",
			s: Server{Name: "github", Kind: TransportStdio, Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-github", "a b"},
				Env: map[string]string{"GITHUB_TOKEN": secret, "DEBUG": secret}, Cwd: "/srv"},
			want:   `github (stdio): npx -y @modelcontextprotocol/server-github "a b" cwd=/srv env=[DEBUG GITHUB_TOKEN]`,
			absent: []string{secret},
		},
		{
			name: "args from template",
			s: Server{Name: "x", Kind: TransportStdio, Command: "srv", Args: []string{"--token", secret},
				argsTemplate: []string{"", "${TOKEN}"}},
			want:   `x (stdio): srv --token "${TOKEN}"`,
			absent: []string{secret},
		},
		{
			name: "http",
			s: Server{Name: "remote", Kind: TransportHTTP, URL: "https://user:" + secret + "@mcp.example.com/mcp?key=" + secret + "&v=1",
				Headers: map[string]string{"Authorization": "Bearer " + secret}, CallTimeout: 30 * time.Second},
			want:   "remote (http): https://xxxxx@mcp.example.com/mcp?key=xxxxx&v=xxxxx headers=[Authorization] timeout=30s",
			absent: []string{secret, "user"},
		},
		{
			name:   "url from template",
			s:      Server{Name: "docs", Kind: TransportSSE, URL: "https://h/" + secret, urlTemplate: "https://h/${KEY}"},
			want:   "docs (sse): https://h/${KEY}",
			absent: []string{secret},
		},
		{
			name: "url from template with literal secrets",
			s: Server{Name: "docs", Kind: TransportHTTP, URL: "https://u:" + secret + "@h:8443/mcp?sig=" + secret + "&key=v",
				urlTemplate: "https://u:" + secret + "@${HOST}:${PORT}/mcp?sig=" + secret + "&key=${KEY}&d=${D:-" + secret + "}"},
			want:   "docs (http): https://xxxxx@${HOST}:${PORT}/mcp?d=xxxxx&key=${KEY}&sig=xxxxx",
			absent: []string{secret},
		},
		{
			name:   "url from template that is no URL until expanded",
			s:      Server{Name: "docs", Kind: TransportHTTP, URL: "https://h/mcp", urlTemplate: "${SCHEME}://h/mcp"},
			want:   "docs (http): ${SCHEME}://h/mcp",
			absent: []string{secret},
		},
		{
			name: "options",
			s: Server{Name: "o", Kind: TransportStdio, Command: "c", ConnectTimeout: time.Second, ProtocolVersion: "2025-06-18",
				ToolsAllow: []string{"a", "b_*"}, ToolsDeny: []string{"d"}, ToolsAsk: []string{"w*"}},
			want: "o (stdio): c connect-timeout=1s protocol=2025-06-18 allow=[a b_*] deny=[d] ask=[w*]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, got := range []string{tt.s.String(), fmt.Sprintf("%v", tt.s), fmt.Sprintf("%+v", &tt.s), fmt.Sprint([]Server{tt.s})} {
				if !strings.Contains(got, tt.want) {
					t.Errorf("got %q, want %q", got, tt.want)
				}
				for _, a := range tt.absent {
					if strings.Contains(got, a) {
						t.Errorf("got %q, want no %q in it", got, a)
					}
				}
			}
		})
	}
}

func TestDisplayURLAndRedact(t *testing.T) {
	s := Server{Name: "r", Kind: TransportHTTP, URL: "https://h.example/mcp?key=s3cret"}
	if got := s.DisplayURL(); strings.Contains(got, "s3cret") || !strings.HasPrefix(got, "https://h.example/mcp?key=") {
		t.Errorf("DisplayURL: got %q, want the query value redacted", got)
	}
	msg := `Post "https://h.example/mcp?key=s3cret": connection refused`
	if got := s.Redact(msg); strings.Contains(got, "s3cret") || !strings.Contains(got, "connection refused") {
		t.Errorf("Redact: got %q, want the URL redacted and the rest kept", got)
	}
	// net/http prints the URL re-encoded, with the password as "***".
	for _, raw := range []string{"http://bob:pw@h.example/mcp?key=s3cret", "HTTP://h.example/mcp?key=s3cret"} {
		s := Server{Name: "r", Kind: TransportHTTP, URL: raw}
		// A transport that fails at once: net/http formats the error, and
		// nothing goes on the network.
		c := &http.Client{Transport: failingTransport{}}
		_, err := c.Post(raw, "application/json", nil)
		if err == nil {
			t.Fatalf("POST %s: got no error", raw)
		}
		if got := s.Redact(err.Error()); strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q): got %q, want the query value redacted", err, got)
		}
	}
	stdio := Server{Name: "s", Kind: TransportStdio, Command: "x"}
	if got := stdio.DisplayURL(); got != "" {
		t.Errorf("DisplayURL of a stdio server: got %q, want empty", got)
	}
	if got := stdio.Redact("unchanged"); got != "unchanged" {
		t.Errorf("Redact without a URL: got %q", got)
	}
}

// failingTransport fails every request without sending it.
type failingTransport struct{}

func (failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("connection refused")
}

// TestRedactURI: a resource URI keeps what cannot carry a credential and
// loses what can, for log lines, audit lines and spans, in the URIs of the MCP
// endpoint (mcpd://<server>/<the server's URI>) too.
func TestRedactURI(t *testing.T) {
	for uri, want := range map[string]string{
		"file:///srv/docs/plan.md":               "file:///srv/docs/plan.md",
		"demo://readme":                          "demo://readme",
		"postgres://alice:s3cret@db/orders":      "postgres://xxxxx@db/orders",
		"https://api.example.com/x?token=s3cret": "https://api.example.com/x?token=xxxxx",

		"demo://clock":                     "demo://clock",
		"mcpd://demo/demo://clock":         "mcpd://demo/demo://clock",
		"file:///notes/a@b.txt":            "file:///notes/a@b.txt",
		"https://h.example/doc?token=s3cr": "https://h.example/doc?token=xxxxx",
		"https://me:s3cr@h.example/doc":    "https://xxxxx@h.example/doc",
		// The endpoint's URIs: the server's URI is masked as a URI.
		"mcpd://db/postgres://alice:s3cr@db.internal/app":    "mcpd://db/postgres://xxxxx@db.internal/app",
		"mcpd://srv/postgres://alice:s3cr@db/x?sslmode=s3cr": "mcpd://srv/postgres://xxxxx@db/x?sslmode=xxxxx",
		"mcpd://srv/redis:alice:s3cr@host":                   "mcpd://srv/redis:xxxxx@host",
		"mcpd://a/mcpd://b/https://u:s3cr@h.example/x":       "mcpd://a/mcpd://b/https://xxxxx@h.example/x",
		// Not the endpoint's: a user info where the server's name would be.
		"mcpd://alice:s3cr@srv/x": "mcpd://xxxxx@srv/x",
		// Opaque URIs, fragments, and URIs nested in a path.
		"redis:alice:s3cr@host":                                  "redis:xxxxx@host",
		"https://h.example/cb#access_token=s3cr&state=s3cr":      "https://h.example/cb#access_token=xxxxx&state=xxxxx",
		"https://h.example/doc#section-2":                        "https://h.example/doc#section-2",
		"https://proxy.example/fetch/https://alice:s3cr@h/x":     "https://proxy.example/fetch/https://xxxxx@h/x",
		"https://proxy.example/fetch/https://alice:p%40s3cr@h/x": "https://proxy.example/fetch/https://xxxxx@h/x",
	} {
		if got := RedactURI(uri); got != want {
			t.Errorf("RedactURI(%q) = %q, want %q", uri, got, want)
		}
	}
}
