package access

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func hashHex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

const testCallers = `{"callers": [
  {"name": "reader", "token_sha256": "%READER%",
   "permissions": {"servers": ["demo", "docs-*"], "tools": ["mcp__demo__get_*"],
     "resources": [{"server": "docs-*", "uri": "file:///srv/*"}],
     "prompts": [{"server": "demo", "name": "greet"}],
     "server_requests": ["roots"]}},
  {"name": "ops", "token_file": "ops.token", "permissions": {"servers": ["*"], "manage": true}},
  {"name": "ci", "token": "${CI_TOKEN}", "permissions": {}},
  {"name": "agent", "spiffe_id": "spiffe://example.org/agent", "permissions": {"servers": ["*"], "tools": ["*"]}},
  {"name": "host", "dns_name": "host.example.org", "permissions": {}},
  {"name": "cn", "common_name": "legacy-client", "permissions": {}}
]}`

func newTestAuthorizer(t *testing.T) *Authorizer {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "ops.token", "ops-token\n")
	path := writeFile(t, dir, "callers.json", strings.ReplaceAll(testCallers, "%READER%", hashHex("reader-token")))
	a, err := New(&Options{
		APIToken:           "api-token-value",
		CallersFile:        path,
		ClientCertificates: true,
		Lookup:             func(k string) (string, bool) { return map[string]string{"CI_TOKEN": "ci-token"}[k], k == "CI_TOKEN" },
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAuthenticate(t *testing.T) {
	a := newTestAuthorizer(t)
	spiffe, _ := url.Parse("spiffe://example.org/agent")
	for _, tc := range []struct {
		name  string
		creds Credentials
		want  string // caller name; "" = unauthenticated
	}{
		{"api token", Credentials{Token: "api-token-value"}, TokenCallerName},
		{"hashed token", Credentials{Token: "reader-token"}, "reader"},
		{"token file", Credentials{Token: "ops-token"}, "ops"},
		{"token from variable", Credentials{Token: "ci-token"}, "ci"},
		{"unknown token", Credentials{Token: "nope"}, ""},
		{"spiffe id", Credentials{Certificate: &x509.Certificate{URIs: []*url.URL{spiffe}}}, "agent"},
		{"dns name", Credentials{Certificate: &x509.Certificate{DNSNames: []string{"other", "host.example.org"}}}, "host"},
		{"common name", Credentials{Certificate: &x509.Certificate{Subject: pkix.Name{CommonName: "legacy-client"}}}, "cn"},
		{"unknown certificate", Credentials{Certificate: &x509.Certificate{Subject: pkix.Name{CommonName: "stranger"}}}, ""},
		{"a wrong token beats a good certificate", Credentials{Token: "nope", Certificate: &x509.Certificate{URIs: []*url.URL{spiffe}}}, ""},
		{"nothing", Credentials{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := a.Authenticate(tc.creds)
			if tc.want == "" {
				if !errors.Is(err, ErrUnauthenticated) {
					t.Fatalf("got caller %q, %v; want ErrUnauthenticated", c.Name, err)
				}
				if tc.creds.Token != "" && strings.Contains(err.Error(), tc.creds.Token) {
					t.Errorf("error %q quotes the token", err)
				}
				return
			}
			if err != nil || c.Name != tc.want {
				t.Fatalf("got caller %q, %v; want %q", c.Name, err, tc.want)
			}
		})
	}
}

func TestTokenVariable(t *testing.T) {
	a := newTestAuthorizer(t)
	for name, want := range map[string]bool{"CI_TOKEN": true, "ci_token": false, "HOME": false, "": false} {
		if got := a.TokenVariable(name); got != want {
			t.Errorf("TokenVariable(%q) = %v, want %v", name, got, want)
		}
	}
	if open, _ := New(nil); open.TokenVariable("CI_TOKEN") {
		t.Error("without a callers file, TokenVariable(CI_TOKEN) = true")
	}
}

func TestAuthenticateWithoutCallersFile(t *testing.T) {
	open, _ := New(nil)
	if c, err := open.Authenticate(Credentials{}); err != nil || c.Name != AnonymousCallerName || !open.Allowed(c, Action{Verb: ManageServers}) {
		t.Errorf("no credentials configured: got %q, %v; want an anonymous caller with every permission", c.Name, err)
	}
	mtls, _ := New(&Options{ClientCertificates: true})
	c, err := mtls.Authenticate(Credentials{Certificate: &x509.Certificate{DNSNames: []string{"a.example"}}})
	if err != nil || c.Name != "a.example" || !mtls.Allowed(c, Action{Verb: ManageServers}) {
		t.Errorf("mutual TLS alone: got %q, %v; want the certificate's identity with every permission", c.Name, err)
	}
	// A certificate without an identity, or with one of the names mcpd
	// gives its own callers, is named by its fingerprint, each its own.
	named := map[string]bool{}
	for _, cert := range []*x509.Certificate{
		{Raw: []byte("no identity 1")},
		{Raw: []byte("no identity 2")},
		{Raw: []byte("cn api-token"), Subject: pkix.Name{CommonName: TokenCallerName}},
		{Raw: []byte("dns anonymous"), DNSNames: []string{AnonymousCallerName}},
	} {
		c, err := mtls.Authenticate(Credentials{Certificate: cert})
		if err != nil || !strings.HasPrefix(c.Name, "certificate sha256:") || named[c.Name] {
			t.Errorf("mutual TLS alone, certificate %q: got %q, %v; want a name of its own from its fingerprint", cert.Raw, c.Name, err)
		}
		named[c.Name] = true
	}
	if _, err := mtls.Authenticate(Credentials{}); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("mutual TLS, no certificate: got %v, want ErrUnauthenticated", err)
	}
}

func TestAuthorize(t *testing.T) {
	a := newTestAuthorizer(t)
	reader := Caller{Name: "reader"}
	ops := Caller{Name: "ops"}
	for _, tc := range []struct {
		name   string
		caller Caller
		act    Action
		denied string // missing permission; "" = allowed
	}{
		{"view allowed server", reader, Action{Verb: ViewServer, Server: "docs-a"}, ""},
		{"view other server", reader, Action{Verb: ViewServer, Server: "secret"}, "servers"},
		{"tool allowed", reader, Action{Verb: CallTool, Server: "demo", Tool: "mcp__demo__get_x"}, ""},
		{"tool denied", reader, Action{Verb: CallTool, Server: "demo", Tool: "mcp__demo__delete_x"}, "tools"},
		{"tool on hidden server", reader, Action{Verb: CallTool, Server: "gh", Tool: "mcp__gh__get_x"}, "servers"},
		{"resource allowed", reader, Action{Verb: ReadResource, Server: "docs-a", URI: "file:///srv/a.md"}, ""},
		{"resource denied", reader, Action{Verb: ReadResource, Server: "docs-a", URI: "file:///etc/passwd"}, "resources"},
		{"resource stepping out", reader, Action{Verb: ReadResource, Server: "docs-a", URI: "file:///srv/../etc/passwd"}, "resources"},
		{"resource stepping out, encoded", reader, Action{Verb: ReadResource, Server: "docs-a", URI: "file:///srv/%2e%2E/etc/passwd"}, "resources"},
		{"resource stepping out, backslash", reader, Action{Verb: ReadResource, Server: "docs-a", URI: `file:///srv/..\etc\passwd`}, "resources"},
		{"resource with dots in a name", reader, Action{Verb: ReadResource, Server: "docs-a", URI: "file:///srv/a..b/c.md"}, ""},
		{"resource pattern is per server", reader, Action{Verb: ReadResource, Server: "demo", URI: "file:///srv/a.md"}, "resources"},
		{"prompt allowed", reader, Action{Verb: GetPrompt, Server: "demo", Prompt: "greet"}, ""},
		{"prompt denied", reader, Action{Verb: GetPrompt, Server: "demo", Prompt: "other"}, "prompts"},
		{"manage denied", reader, Action{Verb: ManageServers, Server: "demo"}, "manage"},
		{"manage allowed", ops, Action{Verb: ManageServers, Server: "new"}, ""},
		{"request kind allowed", reader, Action{Verb: AnswerRequests, Server: "demo", RequestKind: "roots"}, ""},
		{"request kind denied", reader, Action{Verb: AnswerRequests, Server: "demo", RequestKind: "sampling"}, "server_requests"},
		{"every server needs *", reader, Action{Verb: AnswerRequests, Server: AllServers, RequestKind: "roots"}, "servers"},
		{"every server with *", ops, Action{Verb: ManageServers, Server: AllServers}, ""},
		{"unknown verb needs manage", reader, Action{Verb: Verb(99)}, "manage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := a.Authorize(tc.caller, tc.act)
			if tc.denied == "" {
				if err != nil {
					t.Fatalf("got %v, want allowed", err)
				}
				return
			}
			var d *DeniedError
			if !errors.As(err, &d) || !errors.Is(err, ErrPermissionDenied) || d.Permission != tc.denied {
				t.Fatalf("got %v, want a denial of permission %q", err, tc.denied)
			}
		})
	}
	if err := a.Authorize(Caller{Name: "gone"}, Action{Verb: ViewServer}); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("caller not in the file: got %v, want ErrUnauthenticated", err)
	}
}

func TestCallersFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, content, want string
	}{
		{"malformed", `{"callers": [`, "callers file"},
		{"unknown field", `{"callers": [{"name": "a", "token_sha256": "` + hashHex("x") + `", "permisions": {}}]}`, "permisions"},
		{"no identity", `{"callers": [{"name": "a"}]}`, "no identity"},
		{"bad name", `{"callers": [{"name": "a b", "common_name": "x"}]}`, "name"},
		{"reserved name", `{"callers": [{"name": "api-token", "common_name": "x"}]}`, "reserved"},
		{"duplicate name", `{"callers": [{"name": "a", "common_name": "x"}, {"name": "a", "common_name": "y"}]}`, "another caller"},
		{"bad hash", `{"callers": [{"name": "a", "token_sha256": "abc"}]}`, "64 hexadecimal"},
		{"literal token", `{"callers": [{"name": "a", "token": "sekret-literal"}]}`, "${VAR}"},
		{"token as a default", `{"callers": [{"name": "a", "token": "${NOPE_UNSET:-sekret-literal}"}]}`, "no default"},
		{"unset variable", `{"callers": [{"name": "a", "token": "${NOPE_UNSET}"}]}`, "NOPE_UNSET"},
		{"missing token file", `{"callers": [{"name": "a", "token_file": "nope"}]}`, "token_file"},
		{"token file a device", `{"callers": [{"name": "a", "token_file": "/dev/zero"}]}`, "token_file: read /dev/zero: is a character device, not a regular file"},
		{"token file a directory", `{"callers": [{"name": "a", "token_file": "/"}]}`, "token_file: read /: is a directory, not a regular file"},
		{"same token", `{"callers": [{"name": "a", "token_sha256": "` + hashHex("x") + `"}, {"name": "b", "token_sha256": "` + hashHex("x") + `"}]}`, "same token"},
		{"same identity", `{"callers": [{"name": "a", "dns_name": "h"}, {"name": "b", "dns_name": "h"}]}`, "same identity"},
		{"bad spiffe", `{"callers": [{"name": "a", "spiffe_id": "https://x"}]}`, "spiffe://"},
		{"bad request kind", `{"callers": [{"name": "a", "common_name": "x", "permissions": {"server_requests": ["everything"]}}]}`, "server_requests"},
		{"resource without uri", `{"callers": [{"name": "a", "common_name": "x", "permissions": {"resources": [{"server": "*"}]}}]}`, "resources[0]"},
		{"the API token", `{"callers": [{"name": "a", "token_sha256": "` + hashHex("the-api-token") + `"}]}`, "has the API token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "callers.json", tc.content)
			_, err := New(&Options{CallersFile: path, APIToken: "the-api-token", Lookup: func(string) (string, bool) { return "", false }})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "sekret-literal") {
				t.Errorf("error %q quotes the token", err)
			}
		})
	}
}

// TestCallersFileByteOrderMark: a callers file that an editor started
// with a UTF-8 byte order mark reads as without it.
func TestCallersFileByteOrderMark(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"callers.json": "\ufeff" + `{"callers": [{"name": "a", "common_name": "a"}]}`,
		"callers.yaml": "\ufeff" + "callers:\n  - name: a\n    common_name: a\n",
	} {
		if _, err := New(&Options{CallersFile: writeFile(t, dir, name, content)}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestCallersFileNotAFile: a callers file that is a device, or larger
// than a callers file can be, is refused before it is read, by its path.
func TestCallersFileNotAFile(t *testing.T) {
	dir := t.TempDir()
	device := filepath.Join(dir, "callers.json")
	if err := os.Symlink("/dev/zero", device); err != nil {
		t.Fatal(err)
	}
	_, err := New(&Options{CallersFile: device})
	if want := "callers file: read " + device + ": is a character device, not a regular file"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("device: got %v, want an error containing %q", err, want)
	}
	large := filepath.Join(dir, "large.json")
	if err := os.WriteFile(large, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Sparse: the size is all that is looked at.
	if err := os.Truncate(large, 64<<20+1); err != nil {
		t.Fatal(err)
	}
	_, err = New(&Options{CallersFile: large})
	if want := "callers file: read " + large + ": too large: more than 64 MiB"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("too large: got %v, want an error containing %q", err, want)
	}
}

// TestTokenFileTooLarge: a token file is read up to 1 MiB.
func TestTokenFileTooLarge(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "big.token", strings.Repeat("t", 1<<20+1))
	path := writeFile(t, dir, "callers.json", `{"callers": [{"name": "a", "token_file": "big.token"}]}`)
	_, err := New(&Options{CallersFile: path})
	if want := "token_file: read " + filepath.Join(dir, "big.token") + ": too large: more than 1 MiB"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want an error containing %q", err, want)
	}
}

func TestReloadedWithoutCallersFile(t *testing.T) {
	a, err := New(&Options{APIToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Reloaded() != nil || a.Reload() != nil {
		t.Error("without a callers file: want no reload channel and a reload that does nothing")
	}
}

func TestReloadKeepsPreviousOnError(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "callers.json", `{"callers": [{"name": "a", "token_sha256": "`+hashHex("tok-a")+`"}]}`)
	a, err := New(&Options{CallersFile: path})
	if err != nil {
		t.Fatal(err)
	}
	reloaded := a.Reloaded()
	writeFile(t, dir, "callers.json", `{"callers": [{"name": "b", "token_sha256": "`+hashHex("tok-b")+`"}]}`)
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reloaded:
	default:
		t.Error("Reloaded's channel is still open after a reload")
	}
	if c, err := a.Authenticate(Credentials{Token: "tok-b"}); err != nil || c.Name != "b" {
		t.Fatalf("after reload: got %q, %v; want b", c.Name, err)
	}
	if _, err := a.Authenticate(Credentials{Token: "tok-a"}); err == nil {
		t.Errorf("removed caller a still authenticates")
	}
	reloaded = a.Reloaded()
	writeFile(t, dir, "callers.json", `{"callers": [`)
	if err := a.Reload(); err == nil {
		t.Fatal("reload of a broken file: got no error")
	}
	select {
	case <-reloaded:
		t.Error("a reload that failed closed Reloaded's channel")
	default:
	}
	if c, err := a.Authenticate(Credentials{Token: "tok-b"}); err != nil || c.Name != "b" {
		t.Errorf("after a broken reload: got %q, %v; want b still", c.Name, err)
	}
}

// testCallersYAML is testCallers written as YAML.
const testCallersYAML = `# the callers of TestAuthenticate, in YAML
callers:
  - name: reader
    token_sha256: "%READER%"
    permissions:
      servers: [demo, docs-*]
      tools: ["mcp__demo__get_*"]
      resources: [{server: docs-*, uri: "file:///srv/*"}]
      prompts: [{server: demo, name: greet}]
      server_requests: [roots]
  - name: ops
    token_file: ops.token
    permissions: {servers: ["*"], manage: true}
  - name: agent
    spiffe_id: spiffe://example.org/agent
    permissions: {servers: ["*"], tools: ["*"]}
`

func TestCallersFileYAML(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "ops.token", "ops-token\n")
	for _, name := range []string{"callers.yaml", "callers.YML"} {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, dir, name, strings.ReplaceAll(testCallersYAML, "%READER%", hashHex("reader-token")))
			a, err := New(&Options{CallersFile: path})
			if err != nil {
				t.Fatal(err)
			}
			for token, want := range map[string]string{"reader-token": "reader", "ops-token": "ops"} {
				if c, err := a.Authenticate(Credentials{Token: token}); err != nil || c.Name != want {
					t.Errorf("token of %s: got caller %q, %v", want, c.Name, err)
				}
			}
			reader := Caller{Name: "reader"}
			if err := a.Authorize(reader, Action{Verb: CallTool, Server: "demo", Tool: "mcp__demo__get_x"}); err != nil {
				t.Errorf("reader calls mcp__demo__get_x: %v", err)
			}
			if err := a.Authorize(reader, Action{Verb: CallTool, Server: "demo", Tool: "mcp__demo__delete_x"}); !errors.Is(err, ErrPermissionDenied) {
				t.Errorf("reader calls mcp__demo__delete_x: got %v, want a denial", err)
			}
		})
	}
	for _, tc := range []struct {
		name, content, want string
	}{
		{"unknown field", "callers:\n  - name: a\n    common_name: x\n    permisions: {}\n", "permisions"},
		{"duplicate key", "callers:\n  - name: a\n    name: b\n    common_name: x\n", "name"},
		{"not YAML", "callers: [\n", "callers file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "callers.yaml", tc.content)
			if _, err := New(&Options{CallersFile: path}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestWatch(t *testing.T) {
	dir := t.TempDir()
	file := func(names ...string) string {
		var entries []string
		for _, n := range names {
			entries = append(entries, `{"name": "`+n+`", "token_sha256": "`+hashHex("tok-"+n)+`"}`)
		}
		return `{"callers": [` + strings.Join(entries, ",") + `]}`
	}
	path := writeFile(t, dir, "callers.json", file("a", "b"))
	a, err := New(&Options{CallersFile: path})
	if err != nil {
		t.Fatal(err)
	}
	watch := func(name string) (gone, returned chan struct{}, stop context.CancelFunc) {
		caller, err := a.Authenticate(Credentials{Token: "tok-" + name})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		gone, returned = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(returned)
			a.Watch(ctx, caller, Credentials{Token: "tok-" + name}, func() { close(gone) })
		}()
		return gone, returned, cancel
	}
	goneA, returnedA, stopA := watch("a")
	defer stopA()
	goneB, returnedB, stopB := watch("b")

	// A reload that keeps both, then one that drops a.
	writeFile(t, dir, "callers.json", file("a", "b", "c"))
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "callers.json", file("b"))
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	<-goneA
	<-returnedA
	select {
	case <-goneB:
		t.Error("b is still in the file, yet its watch reported it gone")
	default:
	}
	stopB()
	<-returnedB

	// A watch that starts after the reload that dropped its caller (the
	// request was authenticated just before it) reports it gone at once.
	late, err := a.Authenticate(Credentials{Token: "tok-b"})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "callers.json", file("c"))
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	goneLate := false
	// Its request is over too: the check must come before any wait.
	over, cancel := context.WithCancel(t.Context())
	cancel()
	a.Watch(over, late, Credentials{Token: "tok-b"}, func() { goneLate = true })
	if !goneLate {
		t.Error("a watch that started after its caller was removed did not report it gone")
	}

	noFile, err := New(&Options{APIToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	noFile.Watch(t.Context(), Caller{Name: TokenCallerName, all: true}, Credentials{Token: "tok"}, func() { t.Error("gone without a callers file") })
}
