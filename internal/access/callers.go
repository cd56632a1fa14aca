package access

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/localfile"
)

// callersFile is the form of a callers file, JSON or YAML.
type callersFile struct {
	Callers []callerEntry `json:"callers"`
}

type callerEntry struct {
	Name string `json:"name"`
	// How the caller is recognised: any of these.
	TokenSHA256 string `json:"token_sha256,omitempty"`
	TokenFile   string `json:"token_file,omitempty"`
	Token       string `json:"token,omitempty"`
	SPIFFEID    string `json:"spiffe_id,omitempty"`
	DNSName     string `json:"dns_name,omitempty"`
	CommonName  string `json:"common_name,omitempty"`

	Permissions permissionsEntry `json:"permissions"`
}

type permissionsEntry struct {
	Servers        []string       `json:"servers"`
	Tools          []string       `json:"tools"`
	Resources      []resourceRule `json:"resources"`
	Prompts        []promptRule   `json:"prompts"`
	Manage         bool           `json:"manage"`
	ServerRequests []string       `json:"server_requests"`
}

type resourceRule struct {
	Server string `json:"server"`
	URI    string `json:"uri"`
}

type promptRule struct {
	Server string `json:"server"`
	Name   string `json:"name"`
}

// Permissions is what one caller may do.
type Permissions struct {
	// Servers are the servers the caller may see and use at all.
	Servers Globs
	// Tools are the qualified tool names the caller may call.
	Tools Globs
	// Resources are (server, URI) patterns the caller may read.
	Resources []ServerGlob
	// Prompts are (server, prompt name) patterns the caller may get.
	Prompts []ServerGlob
	// Manage allows ConnectServer, DisconnectServer, RestartServer,
	// SetRoots, SetLogLevel and other daemon-changing RPCs.
	Manage bool
	// ServerRequests are the server-request kinds the caller may answer.
	ServerRequests []string
}

// ServerGlob is a pair of patterns: one on the server name, one on a name
// inside the server (a resource URI or a prompt name).
type ServerGlob struct {
	Server Glob
	Name   Glob
}

func matchPair(rules []ServerGlob, server, name string) bool {
	for _, r := range rules {
		if r.Server.Match(server) && r.Name.Match(name) {
			return true
		}
	}
	return false
}

// matchResource is matchPair for a resource URI. A URI with a dot-segment
// ("." or "..") in its path, or with a dot, slash or backslash percent-encoded,
// matches only a pattern that allows every URI of the server: a grant of
// "file:///srv/docs/*" must not cover "file:///srv/docs/../../etc/passwd",
// which a server that resolves paths reads as /etc/passwd.
func matchResource(rules []ServerGlob, server, uri string) bool {
	if !stepsOut(uri) {
		return matchPair(rules, server, uri)
	}
	for _, r := range rules {
		if r.Server.Match(server) && r.Name.MatchesEverything() {
			return true
		}
	}
	return false
}

// stepsOut reports whether uri has a dot-segment, or hides one (or a
// separator) in percent-encoding.
func stepsOut(uri string) bool {
	lower := strings.ToLower(uri)
	for _, enc := range []string{"%2e", "%2f", "%5c"} {
		if strings.Contains(lower, enc) {
			return true
		}
	}
	// The path ends at the query or fragment: "/srv/docs/..?x" has the
	// path "/srv/docs/..". The whole URI is checked too, for a server
	// that does not split the query off before it resolves the path.
	path := uri
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	return hasDotSegment(path) || hasDotSegment(uri)
}

// hasDotSegment reports whether s, split at slashes and backslashes, has
// a "." or ".." segment.
func hasDotSegment(s string) bool {
	for _, seg := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// callers is one loaded callers file: who is who, and their permissions.
type callers struct {
	byName  map[string]*Permissions
	tokens  []tokenCaller // SHA-256 of each token
	spiffe  map[string]string
	dnsName map[string]string
	cn      map[string]string
	// tokenVars are the variables the file's token references read.
	tokenVars map[string]bool
}

type tokenCaller struct {
	hash [sha256.Size]byte
	name string
}

// requestKinds are the server-request kinds a file may grant.
var requestKinds = []string{"sampling", "elicitation", "roots", "authorization", "approval"}

// callerName is what a caller's name may be: it shows in logs and errors.
var callerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$`)

// loadCallers reads and checks a callers file. Relative token_file paths
// are relative to the file's directory; ${VAR} in token reads lookup.
// Errors name the caller and field, never a token.
func loadCallers(path string, lookup func(string) (string, bool)) (*callers, error) {
	data, err := localfile.Read(path, localfile.CallersLimit)
	if err != nil {
		return nil, fmt.Errorf("callers file: %w", err)
	}
	// Some Windows editors start a UTF-8 file with a byte order mark,
	// which JSON does not allow.
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if isYAML(path) {
		// YAML is read as the JSON it stands for, so that both forms
		// share one set of fields and one strict decoder.
		if data, err = yaml.YAMLToJSONStrict(data); err != nil {
			return nil, fmt.Errorf("callers file %s: %w", path, err)
		}
	}
	var f callersFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("callers file %s: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("callers file %s: data after the JSON object", path)
	}
	// Decode keeps the last of a repeated key: refuse it instead, as the
	// YAML reader does, so that the file grants what it seems to.
	if err := config.RepeatedKey(data); err != nil {
		return nil, fmt.Errorf("callers file %s: %w", path, err)
	}
	c := &callers{
		byName:    make(map[string]*Permissions),
		tokenVars: make(map[string]bool),
		spiffe:    make(map[string]string),
		dnsName:   make(map[string]string),
		cn:        make(map[string]string),
	}
	dir := filepath.Dir(path)
	for i, e := range f.Callers {
		if err := c.add(e, dir, lookup); err != nil {
			return nil, fmt.Errorf("callers file %s: callers[%d] (%q): %w", path, i, e.Name, err)
		}
	}
	return c, nil
}

// isYAML reports whether a callers file is YAML, by its name: .yaml or
// .yml. Anything else is read as JSON.
func isYAML(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".yaml" || ext == ".yml"
}

func (c *callers) add(e callerEntry, dir string, lookup func(string) (string, bool)) error {
	switch {
	case !callerName.MatchString(e.Name):
		return errors.New("name: want letters, digits and ._:@/- (at most 128), starting with a letter or digit")
	case e.Name == TokenCallerName || e.Name == AnonymousCallerName:
		return fmt.Errorf("name: %q is reserved", e.Name)
	case c.byName[e.Name] != nil:
		return errors.New("name: another caller has this name")
	}
	perms, err := e.Permissions.compile()
	if err != nil {
		return err
	}
	identified := false
	var tokens [][sha256.Size]byte
	if e.TokenSHA256 != "" {
		b, err := hex.DecodeString(e.TokenSHA256)
		if err != nil || len(b) != sha256.Size {
			return errors.New("token_sha256: want 64 hexadecimal digits (sha256sum of the token)")
		}
		tokens = append(tokens, [sha256.Size]byte(b))
	}
	if e.TokenFile != "" {
		p := e.TokenFile
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		b, err := localfile.Read(p, localfile.CredentialLimit)
		if err != nil {
			return fmt.Errorf("token_file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return errors.New("token_file: the file is empty")
		}
		tokens = append(tokens, sha256.Sum256([]byte(tok)))
	}
	if e.Token != "" {
		// A token in clear text in the file would be one more copy of
		// the secret to guard: only a ${VAR} reference is accepted.
		// Nor as a ${VAR:-default}, whose default is the token in clear.
		if !strings.HasPrefix(e.Token, "${") || !strings.HasSuffix(e.Token, "}") || strings.Count(e.Token, "${") != 1 || strings.Contains(e.Token, ":-") {
			return errors.New("token: want a ${VAR} reference (no default); store a literal token as token_sha256 or in a token_file")
		}
		tok, err := config.Expand(e.Token, lookup)
		if err != nil {
			return fmt.Errorf("token: %w", err)
		}
		if tok = strings.TrimSpace(tok); tok == "" {
			return errors.New("token: the variable is empty")
		}
		tokens = append(tokens, sha256.Sum256([]byte(tok)))
		c.tokenVars[e.Token[len("${"):len(e.Token)-len("}")]] = true
	}
	for _, h := range tokens {
		for _, other := range c.tokens {
			if other.hash == h {
				return fmt.Errorf("token: caller %q has the same token", other.name)
			}
		}
		c.tokens = append(c.tokens, tokenCaller{hash: h, name: e.Name})
		identified = true
	}
	for _, id := range []struct {
		field, value string
		index        map[string]string
	}{
		{"spiffe_id", e.SPIFFEID, c.spiffe},
		{"dns_name", e.DNSName, c.dnsName},
		{"common_name", e.CommonName, c.cn},
	} {
		if id.value == "" {
			continue
		}
		if id.field == "spiffe_id" && !strings.HasPrefix(id.value, "spiffe://") {
			return errors.New("spiffe_id: want a spiffe:// URI")
		}
		if other, ok := id.index[id.value]; ok {
			return fmt.Errorf("%s: caller %q has the same identity", id.field, other)
		}
		id.index[id.value] = e.Name
		identified = true
	}
	if !identified {
		return errors.New("no identity: set token_sha256, token_file, token, spiffe_id, dns_name or common_name")
	}
	c.byName[e.Name] = perms
	return nil
}

func (p permissionsEntry) compile() (*Permissions, error) {
	out := &Permissions{Manage: p.Manage}
	for _, s := range p.Servers {
		out.Servers = append(out.Servers, NewGlob(s))
	}
	for _, s := range p.Tools {
		out.Tools = append(out.Tools, NewGlob(s))
	}
	for i, r := range p.Resources {
		if r.Server == "" || r.URI == "" {
			return nil, fmt.Errorf("permissions.resources[%d]: want server and uri (patterns)", i)
		}
		out.Resources = append(out.Resources, ServerGlob{Server: NewGlob(r.Server), Name: NewGlob(r.URI)})
	}
	for i, r := range p.Prompts {
		if r.Server == "" || r.Name == "" {
			return nil, fmt.Errorf("permissions.prompts[%d]: want server and name (patterns)", i)
		}
		out.Prompts = append(out.Prompts, ServerGlob{Server: NewGlob(r.Server), Name: NewGlob(r.Name)})
	}
	for _, k := range p.ServerRequests {
		if !slices.Contains(requestKinds, k) {
			return nil, fmt.Errorf("permissions.server_requests: %q: want %s", k, strings.Join(requestKinds, ", "))
		}
		out.ServerRequests = append(out.ServerRequests, k)
	}
	return out, nil
}
