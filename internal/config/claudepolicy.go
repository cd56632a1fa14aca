package config

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
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

// Holds returns an error if s, the entry that names a server, is one the
// organisation holds under exclusive control (a server of the managed
// scope while managed-mcp.json is read): no agent's ServeTools takes its
// name, and the entry takes back a name an agent served before. Check
// leaves agents' own servers free; this keeps them from shadowing the
// organisation's.
func (p *ClaudePolicy) Holds(s Server) error {
	if p == nil || p.Exclusive == "" || s.Kind == TransportAgent || s.Source.Scope != ScopeManaged {
		return nil
	}
	return fmt.Errorf("the managed scope's server of this name stands: Claude Code's %s has exclusive control", p.Exclusive)
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
	authority, pathPart, _ := strings.Cut(rest, "/")
	if strings.Contains(authority, "@") {
		return nil, fmt.Errorf("has user information")
	}
	p := &urlPattern{scheme: strings.ToLower(scheme)}
	if strings.Contains(rest, "/") {
		p.path = "/" + pathPart
	}
	host, port := authority, ""
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.Contains(authority[i:], "]") {
		host, port = authority[:i], authority[i+1:]
		if port == "" {
			return nil, fmt.Errorf("has an empty port")
		}
	}
	host, err := patternHost(strings.Trim(host, "[]"))
	if err != nil {
		return nil, err
	}
	if port != "" && !strings.Contains(port, "*") {
		if port, err = canonicalPort(port); err != nil {
			return nil, err
		}
	}
	p.host, p.port = host, port
	p.path = canonicalEscapes(p.path)
	return p, nil
}

// patternHost is a pattern's host as a server's is compared: in lower
// case, without a trailing dot, an IP address in its usual form and a
// Unicode name in its ASCII form (label by label: a label with '*'
// must be ASCII).
func patternHost(host string) (string, error) {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return "", fmt.Errorf("has no host")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().String(), nil
	}
	labels := strings.Split(host, ".")
	for i, label := range labels {
		if isASCII(label) {
			continue
		}
		if strings.Contains(label, "*") {
			return "", fmt.Errorf("has a '*' in a label that is not ASCII")
		}
		a, err := idna.Lookup.ToASCII(label)
		if err != nil {
			return "", fmt.Errorf("has a host that is not a valid name")
		}
		labels[i] = strings.ToLower(a)
	}
	return strings.Join(labels, "."), nil
}

// dialedURL is a server's URL as the HTTP client dials it, read for
// matching.
type dialedURL struct {
	scheme, host, port string
	user               bool
	// paths are the readings of the path: as sent, and as a server
	// that decodes escaped letters and removes dot segments reads it.
	paths []string
}

// readDialedURL reads raw as net/http dials it: the host in its ASCII
// form (net/http converts a Unicode one), in lower case, without a
// trailing dot, an IP address in its usual form; the port as a number,
// the scheme's default when it names none. ok is false for a URL that
// does not read so (no host, which dials the local machine; a host that
// is no valid name; a port out of range).
func readDialedURL(raw string) (d dialedURL, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return d, false
	}
	host := u.Hostname()
	if !isASCII(host) {
		if host, err = idna.Lookup.ToASCII(host); err != nil {
			return d, false
		}
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	if host == "" {
		return d, false
	}
	port := u.Port()
	if port == "" {
		port = defaultPort(u.Scheme)
	} else if port, err = canonicalPort(port); err != nil {
		return d, false
	}
	sent := u.EscapedPath()
	if sent == "" {
		sent = "/"
	}
	d = dialedURL{scheme: strings.ToLower(u.Scheme), host: host, port: port, user: u.User != nil, paths: []string{sent}}
	if read := cleanPath(canonicalEscapes(sent)); read != sent {
		d.paths = append(d.paths, read)
	}
	return d, true
}

// matches reports whether raw, a server's URL, matches the pattern. A
// pattern without a port matches only the scheme's default port. For a
// denylist, a URL that cannot be read as it is dialed matches every
// pattern, and one path reading that matches is enough; for an allowlist
// (allow), such a URL and one with user information match none, and every
// reading of the path must match.
func (p *urlPattern) matches(raw string, allow bool) bool {
	u, ok := readDialedURL(raw)
	if !ok {
		return !allow
	}
	if allow && u.user {
		return false
	}
	wantPort := p.port
	if wantPort == "" {
		wantPort = defaultPort(u.scheme)
	}
	if !wildcardMatch(p.scheme, u.scheme) || !wildcardMatch(p.host, u.host) || !wildcardMatch(wantPort, u.port) {
		return false
	}
	if p.path == "" {
		return true
	}
	for _, path := range u.paths {
		if wildcardMatch(p.path, path) != allow {
			return !allow
		}
	}
	return allow
}

// canonicalPort is a port number without leading zeros, as the dialer
// reads it.
func canonicalPort(port string) (string, error) {
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", fmt.Errorf("has a port that is not a number from 0 to 65535")
	}
	return strconv.FormatUint(n, 10), nil
}

// canonicalEscapes decodes the escapes of unreserved characters (letters,
// digits, '-', '.', '_', '~'), which mean the character itself, and
// writes the others' hex digits in upper case (RFC 3986, 6.2.2).
func canonicalEscapes(path string) string {
	if !strings.Contains(path, "%") {
		return path
	}
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] != '%' || i+2 >= len(path) {
			b.WriteByte(path[i])
			continue
		}
		v, err := strconv.ParseUint(path[i+1:i+3], 16, 8)
		if err != nil {
			b.WriteByte(path[i])
			continue
		}
		c := byte(v)
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			b.WriteString(strings.ToUpper(path[i : i+3]))
		}
		i += 2
	}
	return b.String()
}

// cleanPath removes dot segments and empty ones from path, keeping a
// trailing '/'.
func cleanPath(p string) string {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

func isASCII(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r >= utf8.RuneSelf })
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
