package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The keys of Claude Code's settings that restrict which MCP servers run
// (its "managed MCP" policy).
const (
	keyAllowedServers  = "allowedMcpServers"
	keyDeniedServers   = "deniedMcpServers"
	keyManagedOnly     = "allowManagedMcpServersOnly"
	policyEntryName    = "serverName"
	policyEntryCommand = "serverCommand"
	policyEntryURL     = "serverUrl"
)

// ClaudePolicy is Claude Code's MCP server policy as an organisation
// deploys it (managed-mcp.json, and allowedMcpServers, deniedMcpServers
// and allowManagedMcpServersOnly in its settings), so that servers mcpd
// reads from Claude Code's files, or from any other source, run only where
// Claude Code would run them. A nil policy allows every server.
type ClaudePolicy struct {
	// Exclusive names Claude Code's managed-mcp.json when one was read: it
	// takes exclusive control, and only the managed scope's servers run.
	Exclusive string
	// allowSet reports that some settings file set an allowlist, even an
	// empty one (which allows nothing).
	allowSet bool
	allow    []policyEntry
	deny     []policyEntry
	// allowFiles names the files whose allowlists count, for messages.
	allowFiles []string
}

// policyEntry is one entry of an allowlist or a denylist: exactly one of
// name, command and url is set.
type policyEntry struct {
	name    string
	command []string
	url     *urlPattern
	// where names the entry for messages: the list, its index and the
	// file, never the value (which the server's own value may echo).
	where string
}

// Check returns nil if the policy lets server s run, and otherwise an
// error that says which rule stops it. Servers an agent serves itself
// (type "sdk") are not checked, as Claude Code does not check its
// in-process servers. The denylist wins over everything; an allowlist
// admits a stdio server by its command and a remote one by its URL, and
// by name only where the allowlist has no entry of that kind.
func (p *ClaudePolicy) Check(s Server) error {
	if p == nil || s.Kind == TransportAgent {
		return nil
	}
	if p.Exclusive != "" && s.Source.Scope != ScopeManaged {
		return fmt.Errorf("Claude Code's %s has exclusive control: only the servers of the managed scope run", p.Exclusive)
	}
	for _, e := range p.deny {
		if e.matches(s, false) {
			return fmt.Errorf("blocked by Claude Code's policy: %s", e.where)
		}
	}
	if !p.allowSet {
		return nil
	}
	byKind := func(e policyEntry) bool { return e.command != nil }
	kind := "serverCommand"
	if s.Kind != TransportStdio {
		byKind = func(e policyEntry) bool { return e.url != nil }
		kind = "serverUrl"
	}
	nameCounts := !slices.ContainsFunc(p.allow, byKind)
	for _, e := range p.allow {
		if byKind(e) || (nameCounts && e.name != "") {
			if e.matches(s, true) {
				return nil
			}
		}
	}
	how := "matches none of its " + kind + " entries"
	if nameCounts {
		how = "has no " + kind + " entry and no serverName entry names it"
	}
	if len(p.allow) == 0 {
		how = "is empty, which allows no server"
	}
	return fmt.Errorf("not allowed by Claude Code's policy: allowedMcpServers (%s) %s", strings.Join(p.allowFiles, ", "), how)
}

// matches reports whether the entry names server s. For an allowlist
// (allow), a URL with user information never matches.
func (e policyEntry) matches(s Server, allow bool) bool {
	switch {
	case e.name != "":
		return e.name == s.Name
	case e.command != nil:
		return s.Kind == TransportStdio && slices.Equal(e.command, append([]string{s.Command}, s.Args...))
	case e.url != nil:
		return s.Kind.remote() && e.url.matches(s.URL, allow)
	}
	return false
}

// remote reports whether a server of kind k is reached by its URL:
// Streamable HTTP, SSE, or either as mcpd detects it.
func (k TransportKind) remote() bool {
	return k == TransportHTTP || k == TransportSSE || k == TransportAuto
}

// urlPattern is a serverUrl entry, matched part by part so that a '*'
// in the host cannot reach into the path, nor one in the path into the
// host: scheme and host compare without regard to case (the host without
// a trailing dot), the path with it.
type urlPattern struct {
	scheme, host, port string
	// path is "" when the pattern has none: any path matches.
	path string
}

// parseURLPattern reads a serverUrl entry: scheme://host[:port][/path],
// where '*' stands for any run of characters in each part. User
// information, a query and a fragment are refused: Claude Code's
// documentation gives them no meaning.
func parseURLPattern(s string) (*urlPattern, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("want scheme://host[:port][/path]")
	}
	if strings.ContainsAny(rest, "?#") {
		return nil, fmt.Errorf("has a query or fragment")
	}
	authority, path, _ := strings.Cut(rest, "/")
	if strings.Contains(authority, "@") {
		return nil, fmt.Errorf("has user information")
	}
	p := &urlPattern{scheme: strings.ToLower(scheme)}
	if strings.Contains(rest, "/") {
		p.path = "/" + path
	}
	host, port := authority, ""
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.Contains(authority[i:], "]") {
		host, port = authority[:i], authority[i+1:]
		if port == "" {
			return nil, fmt.Errorf("has an empty port")
		}
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "" {
		return nil, fmt.Errorf("has no host")
	}
	p.host, p.port = host, port
	return p, nil
}

// matches reports whether raw, a server's URL, matches the pattern. A
// pattern without a port matches only the scheme's default port.
func (p *urlPattern) matches(raw string, allow bool) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (allow && u.User != nil) {
		return false
	}
	port := u.Port()
	if port == "" {
		port = defaultPort(u.Scheme)
	}
	wantPort := p.port
	if wantPort == "" {
		wantPort = defaultPort(u.Scheme)
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if !wildcardMatch(p.scheme, strings.ToLower(u.Scheme)) || !wildcardMatch(p.host, host) || !wildcardMatch(wantPort, port) {
		return false
	}
	if p.path == "" {
		return true
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return wildcardMatch(p.path, path)
}

// defaultPort is the port a URL of scheme uses when it names none.
func defaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// wildcardMatch reports whether s matches pattern, where '*' stands for
// any run of characters (none included) and every other character for
// itself.
func wildcardMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, last)
}

// policyBuilder gathers the lists of every settings file read.
type policyBuilder struct {
	exclusive string
	// managedAllow and userAllow are the allowlists of managed settings
	// and of the user's, project's and local settings; nil when no file
	// of the kind set one.
	managedAllow, userAllow []policyEntry
	managedFiles, userFiles []string
	deny                    []policyEntry
	managedOnly             bool
}

// readSettings adds the policy keys of a Claude Code settings file (data,
// already known to be a JSON object) at path. Managed settings are read
// as Claude Code reads them: an invalid entry is left out, with a
// warning, and the rest stays in force; an allowlist that is not a list
// allows nothing, an allowManagedMcpServersOnly that is not a boolean
// counts as true, and a denylist that is not a list is left out. In the
// user's, project's and local settings an allowManagedMcpServersOnly is
// ignored, and a list that is not a list stops the load, as their other
// lists do; an invalid entry is left out with a warning.
func (b *policyBuilder) readSettings(data []byte, path string, managed bool, warn func(string)) error {
	if raw, ok := rawMember(data, keyManagedOnly); ok && managed {
		var v bool
		if err := json.Unmarshal(raw, &v); err != nil {
			warn(path + ": " + keyManagedOnly + " is not true or false: taken as true")
			v = true
		}
		b.managedOnly = b.managedOnly || v
	}
	for _, key := range []string{keyAllowedServers, keyDeniedServers} {
		raw, ok := rawMember(data, key)
		if !ok {
			continue
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil || jsonKind(raw) != "array" {
			switch {
			case !managed:
				return fmt.Errorf("parse settings: %q: want a list of entries", key)
			case key == keyDeniedServers:
				warn(path + ": " + key + " is not a list: left out")
				continue
			default:
				warn(path + ": " + key + " is not a list: it allows no server")
				items = nil
			}
		}
		entries := []policyEntry{}
		for i, item := range items {
			where := key + "[" + strconv.Itoa(i) + "] in " + path
			e, err := parsePolicyEntry(item, key == keyAllowedServers)
			if err != nil {
				warn(where + ": " + err.Error() + ": left out")
				continue
			}
			e.where = where
			entries = append(entries, e)
		}
		switch {
		case key == keyDeniedServers:
			b.deny = append(b.deny, entries...)
		case managed:
			b.managedAllow = append(append([]policyEntry{}, b.managedAllow...), entries...)
			b.managedFiles = append(b.managedFiles, path)
		default:
			b.userAllow = append(append([]policyEntry{}, b.userAllow...), entries...)
			b.userFiles = append(b.userFiles, path)
		}
	}
	return nil
}

// parsePolicyEntry reads one entry of allowedMcpServers (allow) or
// deniedMcpServers: an object with exactly one of serverName,
// serverCommand and serverUrl.
func parsePolicyEntry(raw json.RawMessage, allow bool) (policyEntry, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || jsonKind(raw) != "object" {
		return policyEntry{}, fmt.Errorf("not an object")
	}
	if len(obj) != 1 {
		return policyEntry{}, fmt.Errorf("want exactly one of %s, %s and %s", policyEntryName, policyEntryCommand, policyEntryURL)
	}
	var e policyEntry
	for key, v := range obj {
		switch key {
		case policyEntryName:
			if json.Unmarshal(v, &e.name) != nil || e.name == "" {
				return e, fmt.Errorf("%s: want a name", key)
			}
			if allow && strings.Trim(e.name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
				return e, fmt.Errorf("%s: an allowed name holds only letters, digits, '-' and '_'", key)
			}
		case policyEntryCommand:
			if json.Unmarshal(v, &e.command) != nil || len(e.command) == 0 || e.command[0] == "" {
				return e, fmt.Errorf("%s: want a list of the command and its arguments", key)
			}
		case policyEntryURL:
			var s string
			if json.Unmarshal(v, &s) != nil {
				return e, fmt.Errorf("%s: want a URL pattern", key)
			}
			p, err := parseURLPattern(s)
			if err != nil {
				return e, fmt.Errorf("%s: %w", key, err)
			}
			e.url = p
		default:
			return e, fmt.Errorf("unknown key %q", key)
		}
	}
	return e, nil
}

// policy returns the policy the files read set, nil if they set none.
func (b *policyBuilder) policy() *ClaudePolicy {
	p := &ClaudePolicy{Exclusive: b.exclusive, deny: b.deny}
	switch {
	case b.managedOnly:
		// Only the managed allowlist counts; without one there is none.
		p.allowSet, p.allow, p.allowFiles = b.managedAllow != nil, b.managedAllow, b.managedFiles
	case b.managedAllow != nil || b.userAllow != nil:
		p.allowSet = true
		p.allow = append(append([]policyEntry{}, b.managedAllow...), b.userAllow...)
		p.allowFiles = append(append([]string{}, b.managedFiles...), b.userFiles...)
	}
	if p.Exclusive == "" && !p.allowSet && len(p.deny) == 0 {
		return nil
	}
	return p
}
