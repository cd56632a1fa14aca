// Package config describes upstream MCP servers and reads the .mcp.json
// file format that lists them, from the scopes mcpd merges (managed, user,
// project, local, --config; see [LoadLayers]).
//
// A [Server] is the transport-independent description of one upstream: how
// to reach it (a child process, a Streamable HTTP endpoint or a legacy SSE
// endpoint) and the per-server options mcpd applies on top (timeouts, a
// forced protocol version, tool filters). The gRPC edge builds Servers from
// ConnectServer requests; [Parse] and [Load] build them from a file.
//
// The package imports only the standard library and [localfile], which
// reads its files.
package config

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrInvalid is wrapped by every error that reports an invalid server
// description (bad name, missing command, bad URL, unknown protocol
// version, ...). The gRPC edge maps it to INVALID_ARGUMENT.
var ErrInvalid = errors.New("invalid server config")

// TransportKind says how mcpd reaches a server.
type TransportKind int

// Transport kinds. The zero value is deliberately invalid so that a Server
// whose kind was never set fails [Server.Validate].
const (
	TransportUnspecified TransportKind = iota
	TransportStdio                     // a child process speaking newline-delimited JSON-RPC on stdin/stdout
	TransportHTTP                      // Streamable HTTP (2025-03-26 and later)
	TransportSSE                       // the legacy HTTP+SSE transport (2024-11-05)
	// TransportAuto is a URL whose transport mcpd detects as the spec
	// describes: Streamable HTTP first (2026-07-28, then initialize), then
	// the legacy HTTP+SSE transport.
	TransportAuto
	// TransportAgent is a server whose tools an agent serves itself over
	// the ServeTools stream ("type": "sdk" in .mcp.json). It has no
	// command and no URL: it waits for an agent to serve it.
	TransportAgent
)

// String returns "stdio", "http", "sse", "auto" (the names used in
// .mcp.json) or "agent" (written "sdk" in .mcp.json).
func (k TransportKind) String() string {
	switch k {
	case TransportUnspecified:
		return "unspecified"
	case TransportStdio:
		return "stdio"
	case TransportHTTP:
		return "http"
	case TransportSSE:
		return "sse"
	case TransportAuto:
		return "auto"
	case TransportAgent:
		return "agent"
	}
	return "TransportKind(" + strconv.Itoa(int(k)) + ")"
}

// ParseTransportKind maps a .mcp.json "type" value to a TransportKind. It
// accepts "stdio", "http", "sse" and the aliases other tools write for
// Streamable HTTP ("streamable-http", "streamable_http", "streamableHttp"),
// ignoring case.
func ParseTransportKind(s string) (TransportKind, error) {
	switch strings.ToLower(s) {
	case "stdio":
		return TransportStdio, nil
	case "http", "streamable-http", "streamable_http", "streamablehttp":
		return TransportHTTP, nil
	case "sse":
		return TransportSSE, nil
	case "auto":
		return TransportAuto, nil
	case "sdk", "agent":
		// An agent SDK's in-process server: an agent serves its tools
		// over ServeTools.
		return TransportAgent, nil
	}
	return TransportUnspecified, fmt.Errorf("%w: unknown type %q (want stdio, http, sse, auto, streamable-http or sdk)", ErrInvalid, s)
}

// KnownProtocolVersions returns the MCP protocol revisions a forced
// ProtocolVersion may name, oldest first. The slice is a fresh copy.
func KnownProtocolVersions() []string {
	return []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}
}

// Server describes one upstream MCP server. The zero value of each option
// means "use the daemon's default".
//
// Values in a Server are final: ${VAR} references are already expanded
// (see [Expand]). Env and Headers values are secrets and are never printed
// by this package; use [Server.String] to log a Server.
type Server struct {
	// Name identifies the server; tools are exposed as mcp__<Name>__<tool>.
	// See [ValidateName].
	Name string
	Kind TransportKind

	// Stdio transport.
	Command string
	Args    []string
	Env     map[string]string // merged over the daemon's environment
	Cwd     string            // "" = the daemon's working directory

	// HTTP and SSE transports.
	URL     string
	Headers map[string]string
	// OAuth configures authorization for an HTTP or SSE server; nil means
	// the defaults (see [OAuth]).
	OAuth *OAuth
	// TLS names a private CA and a client certificate for an HTTP or SSE
	// server; nil means the system's roots and no client certificate.
	// Validate checks its paths; mcpd reads the files for every session.
	TLS *TLS

	// Options.
	CallTimeout     time.Duration // per-call timeout when the caller sets none
	ConnectTimeout  time.Duration // bound on connect + initialize
	ProtocolVersion string        // forced protocol revision; "" = negotiate
	// ToolsAllow, if not empty, lists the only tools exposed; ToolsDeny
	// hides tools. Entries are exact tool names or a prefix followed by
	// "*" (e.g. "get_*"; "*" alone matches every tool). Deny wins.
	ToolsAllow []string
	ToolsDeny  []string
	// ToolsAsk lists tools, in the same form, whose calls wait for an
	// agent's approval. It only adds to the daemon's tool rules: a call
	// the rules allow asks, one they hold or deny stays so. That makes it
	// safe to take from a caller who may connect servers but not write
	// the rules.
	ToolsAsk []string
	// StrictCapabilities lists tools only when the server declares the
	// tools capability. By default mcpd also asks a server that omits it,
	// as hand-written servers often do, and uses the answer.
	StrictCapabilities bool

	// Source says which scope and file the server came from. It is a
	// label, not part of equality: a server that moves from one scope to
	// another unchanged keeps running.
	Source Source
	// Permissions are tool rules on this server's own tool names; the
	// daemon qualifies them (mcp__<Name>__<pattern>) and weighs them with
	// the file's top-level rules. They never hide tools the way
	// ToolsAllow and ToolsDeny do; a deny rule hides a tool from lists
	// through the same check that refuses its calls.
	Permissions ToolRules
	// AlwaysAllow lists tools, by their own names, that run without asking
	// ("alwaysAllow" and "autoApprove" of editors' configs): each is an
	// allow rule on the exact qualified name.
	AlwaysAllow []string
	// Trace logs every JSON-RPC message of the server at debug level.
	Trace bool
	// TraceRedact names argument fields whose values traces redact, beside
	// those whose names look secret.
	TraceRedact []string
	// Warnings say what the entry held that mcpd does not understand, for
	// example an unknown field; mcpd logs them and shows them in the
	// server's status.
	Warnings []string

	// Templates kept by Parse so that String can show ${VAR} instead of a
	// possibly secret expanded value. Not part of equality.
	argsTemplate []string // parallel to Args, or nil
	urlTemplate  string   // "" unless the URL came from a ${...} template
}

// MaxNameLen bounds a server name, in bytes; together with the "mcp__"
// prefix and the tool name it keeps qualified names within what model
// APIs accept.
const MaxNameLen = 64

// The longest tool name, qualified tool name and resource URI mcpd
// takes, in bytes (see mcpclient.MaxToolNameLen and mcpclient.MaxURILen,
// which say why); here, so that the metrics and traces can bound what
// they record by them too.
const (
	MaxToolNameLen          = 1024
	MaxQualifiedToolNameLen = len("mcp__") + MaxNameLen + len("__") + MaxToolNameLen
	MaxURILen               = 16 << 10
)

// ValidateName reports whether name can be a server name: 1 to 64
// characters from A-Z, a-z, 0-9, '_' and '-', without "__" (the qualified
// tool name mcp__<server>__<tool> must split unambiguously). The error wraps
// [ErrInvalid] and states the rule.
func ValidateName(name string) error {
	if p := nameProblem(name); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalid, p)
	}
	return nil
}

const nameRule = `names are 1-64 characters from A-Z a-z 0-9 _ - without "__" and not ending in "_", so that mcp__<server>__<tool> splits unambiguously`

func nameProblem(name string) string {
	if name == "" {
		return "server name is empty (" + nameRule + ")"
	}
	if len(name) > MaxNameLen {
		return fmt.Sprintf("server name is %d bytes long, the limit is %d (%s)", len(name), MaxNameLen, nameRule)
	}
	for i := 0; i < len(name); i++ {
		if isNameByte(name[i]) {
			continue
		}
		// The character, not its first byte: 'Ü', not 'Ã'.
		r, size := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError && size == 1 {
			return fmt.Sprintf("server name %q: byte 0x%02x at byte %d is not UTF-8 (%s)", name, name[i], i, nameRule)
		}
		return fmt.Sprintf("server name %q has invalid character %q at byte %d (%s)", name, r, i, nameRule)
	}
	if strings.Contains(name, "__") {
		return fmt.Sprintf(`server name %q contains "__" (%s)`, name, nameRule)
	}
	// mcp__a___b would split as server "a", tool "_b".
	if strings.HasSuffix(name, "_") {
		return fmt.Sprintf(`server name %q ends in "_" (%s)`, name, nameRule)
	}
	return ""
}

func isNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// Validate checks that s describes a server mcpd can start: a valid name,
// a command for stdio, an absolute http(s) URL for http and sse, no fields
// of the other transport, a known ProtocolVersion, non-negative timeouts,
// well-formed tool filters, env names and header names, and a tls block
// of absolute paths, cert and key both or neither (its files are read at
// connect, not here). It reports every
// problem it finds in one error wrapping [ErrInvalid]. Error messages name
// fields and keys but never print env or header values.
func (s *Server) Validate() error {
	var ps []string
	add := func(format string, args ...any) { ps = append(ps, fmt.Sprintf(format, args...)) }

	if p := nameProblem(s.Name); p != "" {
		ps = append(ps, p)
	}
	switch s.Kind {
	case TransportStdio:
		if s.Command == "" {
			add("stdio server needs a command")
		}
		if strings.IndexByte(s.Command, 0) >= 0 {
			add("command contains a NUL byte")
		}
		for i, a := range s.Args {
			if strings.IndexByte(a, 0) >= 0 {
				add("args[%d] contains a NUL byte", i)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(s.Env)) {
			switch {
			case k == "":
				add("env has an empty variable name")
			case strings.ContainsAny(k, "=\x00"):
				add("env name %q contains '=' or NUL", k)
			case strings.IndexByte(s.Env[k], 0) >= 0:
				add("env %s value contains a NUL byte", k)
			}
		}
		if s.URL != "" {
			add("stdio server takes no url")
		}
		if len(s.Headers) > 0 {
			add("stdio server takes no headers")
		}
		if s.OAuth != nil {
			add("stdio server takes no oauth block (OAuth is for http and sse servers)")
		}
		if s.TLS != nil {
			add("stdio server takes no tls block (tls is for http and sse servers)")
		}
	case TransportHTTP, TransportSSE, TransportAuto:
		if p := urlProblem(s.URL); p != "" {
			ps = append(ps, p)
		}
		// HTTP header names have no case: two keys that differ only in it
		// are one header, which would get either value by map order.
		canonical := make(map[string]string, len(s.Headers))
		for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
			switch {
			case !isHeaderName(k):
				add("header name %q is not a valid HTTP token", k)
			case strings.ContainsAny(s.Headers[k], "\r\n\x00"):
				add("header %s value contains a line break or NUL", k)
			}
			if first, ok := canonical[strings.ToLower(k)]; ok {
				add("headers %q and %q name one HTTP header (names have no case): keep one", first, k)
			}
			canonical[strings.ToLower(k)] = k
		}
		if s.Command != "" || len(s.Args) > 0 || len(s.Env) > 0 || s.Cwd != "" {
			add("%s server takes no command, args, env or cwd", s.Kind)
		}
		if s.OAuth != nil {
			ps = append(ps, s.OAuth.problems()...)
		}
		if s.TLS != nil {
			// The paths only: the files are read at every connect, so one
			// that does not load (or not yet, mid-rotation) fails that
			// connect, which is retried, rather than make the entry invalid
			// and a restart or an enable refused.
			ps = append(ps, s.TLS.problems()...)
		}
	case TransportAgent:
		if s.Command != "" || len(s.Args) > 0 || len(s.Env) > 0 || s.Cwd != "" || s.URL != "" || len(s.Headers) > 0 || s.OAuth != nil || s.TLS != nil {
			add("sdk server takes no command, args, env, cwd, url, headers, oauth or tls: an agent serves its tools")
		}
	default:
		add("transport is %s (want stdio, http or sse)", s.Kind)
	}
	if s.ProtocolVersion != "" && !slices.Contains(KnownProtocolVersions(), s.ProtocolVersion) {
		add("protocol version %q is not one of %s", s.ProtocolVersion, strings.Join(KnownProtocolVersions(), ", "))
	}
	if s.CallTimeout < 0 {
		add("call timeout %v is negative", s.CallTimeout)
	}
	if s.ConnectTimeout < 0 {
		add("connect timeout %v is negative", s.ConnectTimeout)
	}
	// The bound a file's timeouts have, so that a server connected through
	// the API reads back from the state file.
	if s.CallTimeout > maxTimeoutSeconds*time.Second {
		add("call timeout %v is more than %d seconds", s.CallTimeout, maxTimeoutSeconds)
	}
	if s.ConnectTimeout > maxTimeoutSeconds*time.Second {
		add("connect timeout %v is more than %d seconds", s.ConnectTimeout, maxTimeoutSeconds)
	}
	for i, p := range s.ToolsAllow {
		if q := patternProblem(p); q != "" {
			add("toolsAllow[%d]: %s", i, q)
		}
	}
	for i, p := range s.ToolsDeny {
		if q := patternProblem(p); q != "" {
			add("toolsDeny[%d]: %s", i, q)
		}
	}
	for i, p := range s.ToolsAsk {
		if q := patternProblem(p); q != "" {
			add("toolsAsk[%d]: %s", i, q)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(ps, "; "))
}

// urlProblem never prints the URL: it may carry a token in its userinfo,
// path or query.
func urlProblem(raw string) string {
	if raw == "" {
		return "http and sse servers need a url"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "url is not a valid URL"
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Sprintf("url scheme is %q (want http or https)", u.Scheme)
	}
	if u.Host == "" {
		return "url has no host"
	}
	return ""
}

// isHeaderName reports whether k is an RFC 9110 token.
func isHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

func patternProblem(p string) string {
	if p == "" {
		return "empty tool pattern"
	}
	if i := strings.IndexByte(p, '*'); i >= 0 && i != len(p)-1 {
		return fmt.Sprintf(`tool pattern %q may only end with "*"`, p)
	}
	return ""
}

// AllowsTool reports whether the tool named name (the server's own name,
// not the qualified one) passes the ToolsAllow and ToolsDeny filters.
func (s *Server) AllowsTool(name string) bool {
	if len(s.ToolsAllow) > 0 && !slices.ContainsFunc(s.ToolsAllow, func(p string) bool { return matchTool(p, name) }) {
		return false
	}
	return !slices.ContainsFunc(s.ToolsDeny, func(p string) bool { return matchTool(p, name) })
}

// AsksTool returns the first ToolsAsk pattern that matches the tool named
// name (the server's own name), or "" when none does.
func (s *Server) AsksTool(name string) string {
	for _, p := range s.ToolsAsk {
		if matchTool(p, name) {
			return p
		}
	}
	return ""
}

func matchTool(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return pattern == name
}

// Equal reports whether s and o describe the same server: every exported
// field but the tool rules (Permissions, AlwaysAllow, which apply without
// a restart) is compared, nil and empty slices and maps are equal, slice order
// matters. A reload restarts a server when Equal reports false (or when
// DisplayArgs or DisplayURL change: a value newly written as a ${VAR}
// template must stop showing); since values are compared after expansion,
// a changed environment variable counts as a change.
func (s *Server) Equal(o *Server) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.Name == o.Name &&
		s.Kind == o.Kind &&
		s.Command == o.Command &&
		slices.Equal(s.Args, o.Args) &&
		maps.Equal(s.Env, o.Env) &&
		s.Cwd == o.Cwd &&
		s.URL == o.URL &&
		maps.Equal(s.Headers, o.Headers) &&
		s.OAuth.Equal(o.OAuth) &&
		s.TLS.Equal(o.TLS) &&
		s.CallTimeout == o.CallTimeout &&
		s.ConnectTimeout == o.ConnectTimeout &&
		s.ProtocolVersion == o.ProtocolVersion &&
		s.StrictCapabilities == o.StrictCapabilities &&
		slices.Equal(s.ToolsAllow, o.ToolsAllow) &&
		slices.Equal(s.ToolsDeny, o.ToolsDeny) &&
		slices.Equal(s.ToolsAsk, o.ToolsAsk) &&
		s.Trace == o.Trace &&
		slices.Equal(s.TraceRedact, o.TraceRedact)
	// Warnings are left out: a field mcpd ignores changes no setting, so
	// adding one must not restart the server (Manager.Relabel shows the
	// new warnings).
}

// Clone returns a deep copy of s, so that the copy can be kept while the
// caller keeps changing its own.
func (s *Server) Clone() *Server {
	if s == nil {
		return nil
	}
	c := *s
	c.Args = slices.Clone(s.Args)
	c.Env = maps.Clone(s.Env)
	c.Headers = maps.Clone(s.Headers)
	c.OAuth = s.OAuth.Clone()
	c.TLS = s.TLS.Clone()
	c.ToolsAllow = slices.Clone(s.ToolsAllow)
	c.ToolsDeny = slices.Clone(s.ToolsDeny)
	c.ToolsAsk = slices.Clone(s.ToolsAsk)
	c.Permissions = s.Permissions.Clone()
	c.AlwaysAllow = slices.Clone(s.AlwaysAllow)
	c.TraceRedact = slices.Clone(s.TraceRedact)
	c.Warnings = slices.Clone(s.Warnings)
	c.argsTemplate = slices.Clone(s.argsTemplate)
	return &c
}

// redacted replaces secrets in URLs shown by String.
const redacted = "xxxxx"

// DisplayArgs returns the arguments as they may be shown: an argument that
// came from a ${VAR} template in the config file shows the template, not
// the (possibly secret) value.
func (s *Server) DisplayArgs() []string {
	out := slices.Clone(s.Args)
	for i := range out {
		if len(s.argsTemplate) == len(s.Args) && strings.Contains(s.argsTemplate[i], "${") {
			out[i] = s.argsTemplate[i]
		}
	}
	return out
}

// DisplayURL returns the URL as it may be shown: the ${VAR} template it
// came from, or the URL, with userinfo and query values redacted (but for
// a query value that is one ${VAR} reference alone: it names the
// variable, not its value).
func (s *Server) DisplayURL() string {
	switch {
	case s.urlTemplate != "":
		return redactTemplate(s.urlTemplate)
	case s.URL == "":
		return ""
	}
	return RedactURL(s.URL)
}

// Redact replaces the server's URL in text (an error message, say) with
// DisplayURL, so that a token in its query or userinfo does not leak. It
// also finds the URL as net/http prints it in errors: re-encoded (a
// lower-case scheme, say) and with the password as "***".
func (s *Server) Redact(text string) string {
	if s.URL == "" {
		return text
	}
	forms := []string{s.URL}
	if u, err := url.Parse(s.URL); err == nil {
		forms = append(forms, u.String())
		if _, has := u.User.Password(); has {
			forms = append(forms, strings.Replace(u.String(), u.User.String()+"@", u.User.Username()+":***@", 1))
		}
	}
	// The configured URL becomes a placeholder first, so that the pass
	// below leaves its display form (perhaps a ${VAR} template) alone.
	const placeholder = "\x00server-url\x00"
	for _, f := range forms {
		text = strings.ReplaceAll(text, f, placeholder)
	}
	// Other URLs derived from it (the endpoint a legacy SSE server names,
	// a redirect's target) keep its user info, and may carry a token in
	// their query: mask them too, wherever net/http quotes them.
	text = RedactURLsIn(text)
	return strings.ReplaceAll(text, placeholder, s.DisplayURL())
}

// RedactURLsIn is text (an error message, say) with every http(s) URL in
// it that may carry a credential (user info, a query, a fragment) masked
// as RedactURL masks it.
func RedactURLsIn(text string) string {
	return urlInText.ReplaceAllStringFunc(text, func(m string) string {
		if !strings.ContainsAny(m, "@?#") {
			return m
		}
		return RedactURL(m)
	})
}

// urlInText finds http(s) URLs in an error message or a log line.
var urlInText = regexp.MustCompile(`(?i)\bhttps?://[^\s"'<>\x00]+`)

// String describes s on one line for logs, for example
//
//	github (stdio): npx -y @modelcontextprotocol/server-github env=[GITHUB_TOKEN]
//	remote (http): https://mcp.example.com/mcp?key=xxxxx headers=[Authorization] timeout=30s
//
// It never prints env or header values, only their names. Arguments and
// URLs that Parse expanded from ${VAR} are shown as written in the file
// (naming the variable, not its value); other URLs are shown with userinfo
// and query values replaced by "xxxxx". Arguments given verbatim are
// printed as they are. Because String has a value receiver, %v and %+v
// of a Server use it too.
func (s Server) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s):", s.Name, s.Kind)
	switch s.Kind {
	case TransportStdio:
		b.WriteByte(' ')
		b.WriteString(shellQuote(s.Command))
		for _, a := range s.DisplayArgs() {
			b.WriteByte(' ')
			b.WriteString(shellQuote(a))
		}
		if s.Cwd != "" {
			b.WriteString(" cwd=")
			b.WriteString(shellQuote(s.Cwd))
		}
		writeKeys(&b, "env", s.Env)
	case TransportAgent:
		b.WriteString(" served by an agent")
	default:
		b.WriteByte(' ')
		b.WriteString(s.DisplayURL())
		writeKeys(&b, "headers", s.Headers)
		if s.TLS != nil {
			b.WriteString(" tls")
		}
	}
	if s.CallTimeout != 0 {
		fmt.Fprintf(&b, " timeout=%v", s.CallTimeout)
	}
	if s.ConnectTimeout != 0 {
		fmt.Fprintf(&b, " connect-timeout=%v", s.ConnectTimeout)
	}
	if s.ProtocolVersion != "" {
		fmt.Fprintf(&b, " protocol=%s", s.ProtocolVersion)
	}
	if len(s.ToolsAllow) > 0 {
		fmt.Fprintf(&b, " allow=[%s]", strings.Join(s.ToolsAllow, " "))
	}
	if len(s.ToolsDeny) > 0 {
		fmt.Fprintf(&b, " deny=[%s]", strings.Join(s.ToolsDeny, " "))
	}
	if len(s.ToolsAsk) > 0 {
		fmt.Fprintf(&b, " ask=[%s]", strings.Join(s.ToolsAsk, " "))
	}
	return b.String()
}

func writeKeys(b *strings.Builder, label string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	fmt.Fprintf(b, " %s=[%s]", label, strings.Join(slices.Sorted(maps.Keys(m)), " "))
}

// shellQuote quotes s when it would not read back as one word.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\"'\\`$;&|<>()*?[]#~") {
		return s
	}
	return strconv.Quote(s)
}

// RedactURI is a resource URI for a log line, an audit line or a span: as
// it is, unless it may carry credentials (user info, a query, a fragment),
// which RedactURL masks. Most URIs (file:///..., demo://readme) keep
// nothing to mask and stay readable. The server's URI inside an MCP
// endpoint's URI (mcpd://<server>/<uri>) is masked as a URI of its own:
// parsed whole, its user info would be path, and its opaque form too.
func RedactURI(uri string) string {
	prefix := 0
	for {
		rest, ok := strings.CutPrefix(uri[prefix:], endpointScheme)
		if !ok {
			break
		}
		server, inner, ok := strings.Cut(rest, "/")
		if !ok || ValidateName(server) != nil {
			break // not the endpoint's: RedactURL masks all of it
		}
		prefix = len(uri) - len(inner)
	}
	if !strings.ContainsAny(uri[prefix:], "?#@") {
		return uri
	}
	return uri[:prefix] + RedactURL(uri[prefix:])
}

// endpointScheme starts the URIs the MCP endpoint shows hosts:
// mcpd://<server>/<the server's own URI, byte for byte>.
const endpointScheme = "mcpd://"

// RedactURL is raw with every credential it may carry masked: its user
// info, that of a URI nested in its path (https://proxy/https://user:pw@host),
// what comes before the "@" of an opaque URI (redis:user:pw@host), and
// every value of its query and of a fragment in query form
// (#access_token=...); "" as `""`, and a string that does not parse as a
// URL as "<invalid url>".
func RedactURL(raw string) string {
	return redactURL(raw, nil)
}

// templateRef is one ${...} reference of a template, as Expand reads it:
// up to the first "}".
var templateRef = regexp.MustCompile(`\$\{[^}]*\}`)

// redactTemplate is a URL template (a URL with ${VAR} references) masked
// as RedactURL masks a URL: a literal password or key written in the
// template is as secret as one in a URL. A query value that is one
// reference without a default stays, naming its variable.
func redactTemplate(template string) string {
	var refs []string
	// Digits, which fit anywhere a reference may stand: a port too.
	placeholder := func(i int) string { return fmt.Sprintf("739461%04d8250", i) }
	masked := templateRef.ReplaceAllStringFunc(template, func(ref string) string {
		refs = append(refs, ref)
		return placeholder(len(refs) - 1)
	})
	keep := func(v string) bool {
		for i, ref := range refs {
			if v == placeholder(i) {
				return !strings.Contains(ref, ":-")
			}
		}
		return false
	}
	out := redactURL(masked, keep)
	if out == "<invalid url>" && !strings.ContainsAny(template, "@?#") {
		// A template that is no URL until expanded (${SCHEME}://...) and
		// has no user info or query to mask.
		return template
	}
	for i, ref := range refs {
		out = strings.ReplaceAll(out, placeholder(i), ref)
	}
	return out
}

// redactURL is RedactURL, but for query values keep says to leave.
func redactURL(raw string, keep func(string) bool) string {
	if raw == "" {
		return `""`
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "<invalid url>"
	}
	if u.User != nil {
		u.User = url.User(redacted)
	}
	if at := strings.LastIndexByte(u.Opaque, '@'); at >= 0 {
		u.Opaque = redacted + u.Opaque[at:]
	}
	if strings.Contains(u.Path, "@") && strings.Contains(u.Path, "://") {
		u.Path, u.RawPath = redactNestedUserinfo(u.Path), ""
	}
	if u.RawQuery != "" {
		u.RawQuery = redactValues(u.RawQuery, keep)
	}
	if strings.Contains(u.Fragment, "=") {
		// The fragment as sent in an OAuth implicit grant's redirect.
		u.RawFragment = redactValues(u.EscapedFragment(), keep)
		u.Fragment, _ = url.PathUnescape(u.RawFragment) // what Encode wrote decodes
	}
	return u.String()
}

// redactValues is the query (or fragment) q with every value masked but
// those keep (if set) leaves. A pair that does not parse is dropped: it
// cannot be shown masked.
func redactValues(q string, keep func(string) bool) string {
	vals, _ := url.ParseQuery(q)
	for _, vs := range vals {
		for i := range vs {
			if keep == nil || !keep(vs[i]) {
				vs[i] = redacted
			}
		}
	}
	return vals.Encode()
}

// redactNestedUserinfo masks the user info of every URI nested in path:
// the authority after a "://", up to its last "@".
func redactNestedUserinfo(path string) string {
	var b strings.Builder
	for {
		i := strings.Index(path, "://")
		if i < 0 {
			break
		}
		b.WriteString(path[:i+3])
		path = path[i+3:]
		end := strings.IndexByte(path, '/')
		if end < 0 {
			end = len(path)
		}
		if at := strings.LastIndexByte(path[:end], '@'); at >= 0 {
			b.WriteString(redacted)
			path = path[at:]
		}
	}
	b.WriteString(path)
	return b.String()
}

// ToolRules are allow, ask and deny patterns on tool names, as a
// "permissions" block writes them. At the top level of a file the patterns
// are qualified names (mcp__<server>__<tool>); in a server's entry they
// are the server's own tool names. '*' and '?' may stand anywhere.
type ToolRules struct {
	Allow []string `json:"allow"`
	Ask   []string `json:"ask"`
	Deny  []string `json:"deny"`
	// Default is the effect on calls no rule matches: "allow" (when
	// empty), "ask" or "deny". Only the top-level block has one.
	Default string `json:"default"`
}

// Empty reports whether the block holds no rule and no default.
func (r ToolRules) Empty() bool {
	return len(r.Allow) == 0 && len(r.Ask) == 0 && len(r.Deny) == 0 && r.Default == ""
}

// Clone returns a deep copy.
func (r ToolRules) Clone() ToolRules {
	return ToolRules{Allow: slices.Clone(r.Allow), Ask: slices.Clone(r.Ask), Deny: slices.Clone(r.Deny), Default: r.Default}
}
