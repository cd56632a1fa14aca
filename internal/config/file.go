package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/mcpd-project/mcpd/internal/localfile"
)

// The two top-level keys that hold servers: "mcpServers" (Claude Desktop,
// Claude Code, Cursor, Cline, ...) and "servers" (VS Code).
const (
	keyMCPServers = "mcpServers"
	keyServers    = "servers"
)

// File is a parsed .mcp.json.
//
// One bad entry must not keep the other servers from starting, so Parse
// splits entries three ways instead of failing: every entry appears in
// exactly one of Servers, Invalid and Disabled. The daemon starts Servers,
// reports each Invalid entry as a FAILED server whose last error is the
// entry's error, and lists Disabled ones as DISABLED without starting them
// (see [File.Entries]).
type File struct {
	// Servers holds the enabled, valid entries, sorted by name. Each has
	// passed [Server.Validate] and has its ${VAR} references expanded.
	Servers []Server
	// Invalid holds one error per entry that could not be used (wrong JSON
	// types, unset variable, missing command, invalid name, duplicate
	// name, ...), sorted by name.
	Invalid []*EntryError
	// Disabled holds the names of entries with "disabled": true, sorted.
	Disabled []string

	// parked holds the entries named in Disabled, parsed as far as they
	// go, so that enabling one later needs no second read.
	parked map[string]Entry
	// Permissions is the top-level "permissions" block: tool rules on
	// qualified names, over every server.
	Permissions ToolRules
	// Warnings say what the file held outside the server entries that mcpd
	// does not understand (an unknown top-level key or permissions field).
	// Each entry's own warnings are in its Server.Warnings.
	Warnings []string
}

// EntryError reports why the entry for one server could not be used.
type EntryError struct {
	Name string // the entry's key in the file, even if it is not a valid name
	Err  error
}

func (e *EntryError) Error() string { return fmt.Sprintf("server %q: %v", e.Name, e.Err) }

func (e *EntryError) Unwrap() error { return e.Err }

// Load reads and parses the .mcp.json file at path; see [Parse].
func Load(path string, lookup func(string) (string, bool)) (*File, error) {
	data, err := localfile.Read(path, localfile.ConfigLimit)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	f, err := Parse(data, lookup)
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return f, nil
}

// Parse parses the contents of a .mcp.json file. lookup resolves ${VAR}
// references (os.LookupEnv when nil; see [Expand]).
//
// The file is a JSON object with servers under "mcpServers", "servers" or
// both (merged; a name under both is an error for that name). Comments and
// trailing commas, which VS Code allows in its mcp.json, are accepted.
// A top-level "permissions" object holds tool rules ("allow", "ask",
// "deny" arrays of qualified-name patterns and a "default" effect). Other
// top-level keys (VS Code's "inputs", ...) are not understood and are
// reported in [File.Warnings]. An entry is
//
//	{"command": "npx", "args": [...], "env": {...}, "cwd": "..."}       stdio ("type": "stdio" optional)
//	{"type": "http" | "sse" | "streamable-http", "url": "...", "headers": {...}}
//
// A url entry may have a "tls" block, {"ca": "...", "cert": "...",
// "key": "..."}: absolute paths of PEM files, the CA its certificate must
// chain to and the client certificate mcpd presents (see [TLS]). Reading
// the entry checks the paths only; mcpd reads the files for every
// session, and a file that does not load fails that connect.
//
// An entry with a url and no type (or "type": "auto") has its transport
// detected when mcpd connects: Streamable HTTP, then legacy SSE;
// "serverUrl" (Windsurf) is read as "url". "disabled": true parks the
// entry: it is listed in [File.Disabled] and not started. mcpd reads these
// option fields in an entry: "timeout" and "connectTimeout" (seconds, a
// number), "protocolVersion", "toolsAllow", "toolsDeny" and "toolsAsk"
// (arrays of tool patterns; "disabledTools", as Windsurf, Roo Code and
// Kiro write it, adds to "toolsDeny"), "strictCapabilities", "permissions" (tool rules on the
// server's own tool names), "alwaysAllow" and "autoApprove" (tools that
// run without asking), "trace" and "traceRedact". Any other field is
// reported in the server's [Server.Warnings] and otherwise ignored.
//
// ${VAR} and ${VAR:-default} expand in command, args, env values, cwd, url,
// header values, the oauth block's secrets, URLs and paths, and the tls
// block's paths; not in names, keys or options.
//
// Parse returns an error only when the whole file is unusable: not JSON, not
// an object, no "mcpServers" or "servers" key, or one of those not an
// object. Problems with single entries are reported in [File.Invalid].
func Parse(data []byte, lookup func(string) (string, bool)) (*File, error) {
	return parse(data, parseOptions{expand: expandWith(lookup)})
}

// parseOptions say how a file is read.
type parseOptions struct {
	expand expander
	// shared: the file belongs to another program, whose own top-level
	// keys are no news.
	shared bool
}

// expander resolves the ${VAR} references in value v of field of server.
type expander func(server, field, v string) (string, error)

// expandWith is the expander of a .mcp.json file: every reference expands.
func expandWith(lookup func(string) (string, bool)) expander {
	return func(_, _, v string) (string, error) { return Expand(v, lookup) }
}

func parse(data []byte, opts parseOptions) (*File, error) {
	data = stripJSONC(data)
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		return nil, fmt.Errorf("parse config: %w", describeSyntaxError(data, err))
	}
	top, err := objectMembers(data)
	if err != nil {
		return nil, fmt.Errorf("parse config: top level: %w", err)
	}

	type candidate struct {
		key string // top-level key the entry came from
		raw json.RawMessage
		dup string // non-empty: why this name is unusable
	}
	cands := make(map[string]*candidate)
	seenKeys := make(map[string]bool)
	f := &File{}
	for _, m := range top {
		if m.key == keyPermissions {
			if seenKeys[m.key] {
				return nil, fmt.Errorf("parse config: key %q appears twice", m.key)
			}
			seenKeys[m.key] = true
			if f.Permissions, err = parsePermissions(m.value, &f.Warnings); err != nil {
				return nil, fmt.Errorf("parse config: %q: %w", m.key, err)
			}
			continue
		}
		if m.key != keyMCPServers && m.key != keyServers {
			if !opts.shared {
				f.Warnings = append(f.Warnings, fmt.Sprintf("top-level key %q is not understood by mcpd; ignored", m.key))
			}
			continue
		}
		if seenKeys[m.key] {
			return nil, fmt.Errorf("parse config: key %q appears twice", m.key)
		}
		seenKeys[m.key] = true
		if string(m.value) == "null" {
			continue
		}
		entries, err := objectMembers(m.value)
		if err != nil {
			return nil, fmt.Errorf("parse config: %q: %w", m.key, err)
		}
		for _, e := range entries {
			c, ok := cands[e.key]
			switch {
			case !ok:
				cands[e.key] = &candidate{key: m.key, raw: e.value}
			case c.key == m.key:
				c.dup = fmt.Sprintf("defined twice under %q", m.key)
			default:
				c.dup = fmt.Sprintf("defined under both %q and %q", c.key, m.key)
			}
		}
	}
	if !seenKeys[keyMCPServers] && !seenKeys[keyServers] {
		return nil, fmt.Errorf("parse config: %w", errNoServersKey)
	}

	for _, name := range slices.Sorted(maps.Keys(cands)) {
		c := cands[name]
		if c.dup != "" {
			f.Invalid = append(f.Invalid, &EntryError{Name: name, Err: fmt.Errorf("%w: %s", ErrInvalid, c.dup)})
			continue
		}
		s, disabled, err := parseEntry(name, c.raw, opts.expand)
		switch {
		case disabled:
			f.Disabled = append(f.Disabled, name)
			if f.parked == nil {
				f.parked = make(map[string]Entry)
			}
			f.parked[name] = Entry{Name: name, Server: s, Disabled: true, Err: err}
		case err != nil:
			f.Invalid = append(f.Invalid, &EntryError{Name: name, Err: err})
		default:
			f.Servers = append(f.Servers, s)
		}
	}
	return f, nil
}

// entry is one server as written in the file.
type entry struct {
	Type            string            `json:"type"`
	Command         string            `json:"command"`
	Args            []string          `json:"args"`
	Env             map[string]string `json:"env"`
	Cwd             string            `json:"cwd"`
	URL             string            `json:"url"`
	ServerURL       string            `json:"serverUrl"`
	Headers         map[string]string `json:"headers"`
	Disabled        bool              `json:"disabled"`
	Timeout         float64           `json:"timeout"`
	ConnectTimeout  float64           `json:"connectTimeout"`
	ProtocolVersion string            `json:"protocolVersion"`
	ToolsAllow      []string          `json:"toolsAllow"`
	ToolsDeny       []string          `json:"toolsDeny"`
	ToolsAsk        []string          `json:"toolsAsk"`
	// DisabledTools is how Windsurf, Roo Code and Kiro keep a server's
	// tools from the model: read as more toolsDeny, so that a file
	// written for them hides what it hides there.
	DisabledTools []string `json:"disabledTools"`
	// StrictCapabilities: see Server.StrictCapabilities.
	StrictCapabilities bool       `json:"strictCapabilities"`
	OAuth              *OAuth     `json:"oauth"`
	TLS                *TLS       `json:"tls"`
	Permissions        *ToolRules `json:"permissions"`
	AlwaysAllow        []string   `json:"alwaysAllow"`
	AutoApprove        []string   `json:"autoApprove"`
	Trace              bool       `json:"trace"`
	TraceRedact        []string   `json:"traceRedact"`
	// SDKName is the name an agent SDK writes into its "type": "sdk"
	// entries; the entry's key names the server, so it is read and left.
	SDKName string `json:"name"`
}

// keyPermissions is the top-level key of the tool rules.
const keyPermissions = "permissions"

// entryFields are the JSON names of entry's fields: any other key of an
// entry is reported as not understood.
var entryFields = jsonNames(reflect.TypeFor[entry]())

// permissionFields are the keys a "permissions" block may hold.
var permissionFields = jsonNames(reflect.TypeFor[ToolRules]())

// oauthFields and idpFields are the keys of an "oauth" block and of its
// "idp" object; tlsFields those of a "tls" block.
var (
	oauthFields = jsonNames(reflect.TypeFor[OAuth]())
	idpFields   = jsonNames(reflect.TypeFor[IdP]())
	tlsFields   = jsonNames(reflect.TypeFor[TLS]())
)

// entryWarnings names every key of an entry, and of its nested blocks,
// that mcpd does not understand.
func entryWarnings(raw json.RawMessage) []string {
	ws := unknownKeys(raw, entryFields, "field")
	if pm, ok := rawMember(raw, keyPermissions); ok {
		ws = append(ws, unknownKeys(pm, permissionFields, "permissions field")...)
	}
	if om, ok := rawMember(raw, "oauth"); ok {
		ws = append(ws, unknownKeys(om, oauthFields, "oauth field")...)
		if im, ok := rawMember(om, "idp"); ok {
			ws = append(ws, unknownKeys(im, idpFields, "oauth.idp field")...)
		}
	}
	if tm, ok := rawMember(raw, "tls"); ok {
		ws = append(ws, unknownKeys(tm, tlsFields, "tls field")...)
	}
	return ws
}

func jsonNames(t reflect.Type) map[string]bool {
	names := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names[name] = true
	}
	return names
}

// unknownKeys returns a warning for every key of the JSON object raw that
// is not in known, prefixed with where (for example `field`).
func unknownKeys(raw json.RawMessage, known map[string]bool, where string) []string {
	ms, err := objectMembers(raw)
	if err != nil {
		return nil // the decoder reports what is wrong with it
	}
	var out []string
	for _, m := range ms {
		if !known[m.key] {
			out = append(out, fmt.Sprintf("%s %q is not understood by mcpd; ignored", where, m.key))
		}
	}
	return out
}

// parsePermissions reads the top-level "permissions" block. Unknown
// fields become warnings; a wrong type or an unknown default is an error
// for the whole file, since the rules guard every server.
func parsePermissions(raw json.RawMessage, warnings *[]string) (ToolRules, error) {
	var r ToolRules
	if string(raw) == "null" {
		return r, nil
	}
	if err := json.Unmarshal(onlyKeys(raw, permissionFields), &r); err != nil {
		return r, describeDecodeError(err, raw)
	}
	if err := RepeatedKey(raw); err != nil {
		return r, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	*warnings = append(*warnings, unknownKeys(raw, permissionFields, "permissions field")...)
	switch r.Default {
	case "", "allow", "ask", "deny":
	default:
		return r, fmt.Errorf("%w: default %q: want allow, ask or deny", ErrInvalid, r.Default)
	}
	return r, nil
}

// onlyKeys is the JSON object raw without the members whose key is not
// exactly in known. encoding/json matches keys to fields without case, so
// a "Command" or "ToolsDeny" that entryWarnings reports as ignored would
// otherwise be decoded, and override "command" or "toolsDeny".
func onlyKeys(raw json.RawMessage, known map[string]bool) json.RawMessage {
	ms, err := objectMembers(raw)
	if err != nil {
		return raw // not an object: the decoder reports it
	}
	return joinMembers(slices.DeleteFunc(ms, func(m member) bool { return !known[m.key] }))
}

// knownOnly is the entry raw with only the fields mcpd reads, in its
// nested permissions, oauth and tls blocks too.
func knownOnly(raw json.RawMessage) json.RawMessage {
	out := onlyKeys(raw, entryFields)
	ms, err := objectMembers(out)
	if err != nil {
		return out
	}
	for i, m := range ms {
		switch m.key {
		case keyPermissions:
			ms[i].value = onlyKeys(m.value, permissionFields)
		case "oauth":
			o := onlyKeys(m.value, oauthFields)
			if om, err := objectMembers(o); err == nil {
				for j, x := range om {
					if x.key == "idp" {
						om[j].value = onlyKeys(x.value, idpFields)
					}
				}
				o = joinMembers(om)
			}
			ms[i].value = o
		case "tls":
			ms[i].value = onlyKeys(m.value, tlsFields)
		}
	}
	return joinMembers(ms)
}

func joinMembers(ms []member) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// rawMember returns the value of key in the JSON object raw.
func rawMember(raw json.RawMessage, key string) (json.RawMessage, bool) {
	ms, err := objectMembers(raw)
	if err != nil {
		return nil, false
	}
	for _, m := range ms {
		if m.key == key {
			return m.value, true
		}
	}
	return nil, false
}

// repeatedPermissions refuses an entry whose tool rules say two things at
// once: a "permissions" key written twice, or a key repeated inside it.
func repeatedPermissions(raw json.RawMessage) error {
	ms, err := objectMembers(raw)
	if err != nil {
		return nil // the decoder reports what is wrong with it
	}
	seen := false
	for _, m := range ms {
		if !strings.EqualFold(m.key, keyPermissions) {
			continue
		}
		if seen {
			return fmt.Errorf("%w: key %q %w", ErrInvalid, keyPermissions, errRepeatedKey)
		}
		seen = true
		if err := RepeatedKey(m.value); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalid, keyPermissions, err)
		}
	}
	return nil
}

// repeatedField refuses an entry that writes one of its fields twice
// (in any case): encoding/json would keep the last without a word.
func repeatedField(raw json.RawMessage) error {
	ms, err := objectMembers(raw)
	if err != nil {
		return nil // the decoder reports what is wrong with it
	}
	seen := make(map[string]string)
	for _, m := range ms {
		k := foldKey(m.key)
		if first, ok := seen[k]; ok {
			if first != m.key {
				return fmt.Errorf("%w: keys %q and %q differ only in case, which JSON reads as one key: it %w", ErrInvalid, first, m.key, errRepeatedKey)
			}
			return fmt.Errorf("%w: key %q %w", ErrInvalid, m.key, errRepeatedKey)
		}
		seen[k] = m.key
	}
	return nil
}

// maxTimeoutSeconds bounds timeouts far below time.Duration overflow.
const maxTimeoutSeconds = 365 * 24 * 60 * 60

// parseEntry turns one entry into a valid Server, or says why it cannot be
// used. disabled reports "disabled": true; such an entry is parsed too (its
// error then matters only if it is enabled later), because people park
// half-written entries this way.
func parseEntry(name string, raw json.RawMessage, ex expander) (_ Server, disabled bool, _ error) {
	var e entry
	known := knownOnly(raw)
	err := json.Unmarshal(known, &e)
	if err != nil {
		return Server{Name: name}, e.Disabled, describeDecodeError(err, known)
	}
	if err := repeatedPermissions(raw); err != nil {
		return Server{Name: name}, e.Disabled, err
	}
	if err := repeatedField(raw); err != nil {
		return Server{Name: name}, e.Disabled, err
	}
	s, err := e.server(name, ex, entryWarnings(raw))
	return s, e.Disabled, err
}

// server turns the entry into a valid Server, or says why it cannot.
// warnings are what the entry holds that mcpd does not understand.
func (e *entry) server(name string, ex expander, warnings []string) (Server, error) {
	var err error

	var ps problems
	fail := func(err error) { ps = append(ps, err) }
	s := Server{
		Name:            name,
		ProtocolVersion: e.ProtocolVersion,
		ToolsAllow:      e.ToolsAllow,
		ToolsDeny:       e.ToolsDeny,
		ToolsAsk:        e.ToolsAsk,
		AlwaysAllow:     append(slices.Clone(e.AlwaysAllow), e.AutoApprove...),
		Trace:           e.Trace,
		TraceRedact:     e.TraceRedact,
		Warnings:        warnings,

		StrictCapabilities: e.StrictCapabilities,
	}
	for i, name := range e.DisabledTools {
		if p := patternProblem(name); p != "" {
			fail(fmt.Errorf("%w: disabledTools[%d]: %s", ErrInvalid, i, p))
		}
	}
	if len(e.DisabledTools) > 0 {
		s.ToolsDeny = append(slices.Clone(e.ToolsDeny), e.DisabledTools...)
	}
	if e.Permissions != nil {
		s.Permissions = *e.Permissions
		if s.Permissions.Default != "" {
			fail(fmt.Errorf("%w: permissions.default is only read at the top level of the file", ErrInvalid))
		}
	}
	if e.URL == "" {
		e.URL = e.ServerURL
	}
	switch {
	case e.Type != "":
		k, err := ParseTransportKind(e.Type)
		if err != nil {
			fail(err)
		}
		s.Kind = k
	case e.URL != "" && e.Command != "":
		fail(fmt.Errorf("%w: entry has both command and url; set \"type\" or remove one", ErrInvalid))
	case e.URL != "":
		s.Kind = TransportAuto
	case e.Command != "":
		s.Kind = TransportStdio
	default:
		fail(fmt.Errorf("%w: entry needs a command (stdio) or a url (http, sse)", ErrInvalid))
	}

	expand := func(field, v string) string {
		out, err := ex(name, field, v)
		if err != nil {
			fail(fmt.Errorf("%s: %w", field, err))
		}
		return out
	}
	s.Command = expand("command", e.Command)
	if e.Args != nil {
		s.Args = make([]string, len(e.Args))
		for i, a := range e.Args {
			s.Args[i] = expand("args["+strconv.Itoa(i)+"]", a)
			if strings.Contains(a, "${") {
				if s.argsTemplate == nil {
					s.argsTemplate = make([]string, len(e.Args))
				}
				s.argsTemplate[i] = a
			}
		}
	}
	s.Env = expandMap("env", e.Env, expand)
	s.Cwd = expand("cwd", e.Cwd)
	s.URL = expand("url", e.URL)
	if strings.Contains(e.URL, "${") {
		s.urlTemplate = e.URL
	}
	s.Headers = expandMap("headers", e.Headers, expand)
	if e.OAuth != nil {
		s.OAuth = expandOAuth(e.OAuth, expand)
	}
	if e.TLS != nil {
		s.TLS = &TLS{CA: expand("tls.ca", e.TLS.CA), Cert: expand("tls.cert", e.TLS.Cert), Key: expand("tls.key", e.TLS.Key)}
	}

	s.CallTimeout, err = seconds("timeout", e.Timeout)
	if err != nil {
		fail(err)
	}
	s.ConnectTimeout, err = seconds("connectTimeout", e.ConnectTimeout)
	if err != nil {
		fail(err)
	}
	if len(ps) == 0 { // else Validate would only repeat them as missing fields
		if err := s.Validate(); err != nil {
			ps = append(ps, err)
		}
	}
	if len(ps) > 0 {
		// A misspelt field often explains the problem: say so in the
		// entry's error, the only place an unusable entry reports.
		for _, w := range warnings {
			ps = append(ps, errors.New(w))
		}
		return Server{Name: name}, ps.err()
	}
	return s, nil
}

// expandOAuth expands ${VAR} in the block's secrets, URLs and paths.
func expandOAuth(o *OAuth, expand func(field, v string) string) *OAuth {
	out := o.Clone()
	type field struct {
		name string
		v    *string
	}
	fields := []field{
		{"oauth.clientId", &out.ClientID},
		{"oauth.clientSecret", &out.ClientSecret},
		{"oauth.clientMetadataUrl", &out.ClientMetadataURL},
		{"oauth.privateKeyFile", &out.PrivateKeyFile},
		{"oauth.assertion", &out.Assertion},
		{"oauth.assertionFile", &out.AssertionFile},
	}
	if out.IdP != nil {
		fields = append(fields,
			field{"oauth.idp.tokenEndpoint", &out.IdP.TokenEndpoint},
			field{"oauth.idp.issuer", &out.IdP.Issuer},
			field{"oauth.idp.clientId", &out.IdP.ClientID},
			field{"oauth.idp.clientSecret", &out.IdP.ClientSecret},
			field{"oauth.idp.idToken", &out.IdP.IDToken},
			field{"oauth.idp.idTokenFile", &out.IdP.IDTokenFile},
		)
	}
	for _, f := range fields {
		*f.v = expand(f.name, *f.v)
	}
	return out
}

func expandMap(field string, m map[string]string, expand func(field, v string) string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) { // sorted: stable error order
		out[k] = expand(field+"."+k, m[k])
	}
	return out
}

func seconds(field string, v float64) (time.Duration, error) {
	switch {
	case v < 0:
		return 0, fmt.Errorf("%w: %s is negative", ErrInvalid, field)
	case v > maxTimeoutSeconds:
		return 0, fmt.Errorf("%w: %s is more than %d seconds", ErrInvalid, field, maxTimeoutSeconds)
	}
	return time.Duration(v * float64(time.Second)), nil
}

// problems reports several errors on one line, so that each fits in a
// server's last_error.
type problems []error

func (p problems) Error() string {
	s := make([]string, len(p))
	for i, e := range p {
		s[i] = e.Error()
	}
	return strings.Join(s, "; ")
}

func (p problems) Unwrap() []error { return p }

func (p problems) err() error {
	if len(p) == 1 {
		return p[0]
	}
	return p
}

// member is one key/value pair of a JSON object, in file order.
type member struct {
	key   string
	value json.RawMessage
}

// objectMembers splits the JSON object in data into its members, keeping
// duplicate keys (encoding/json would silently keep the last one). data
// must be syntactically valid JSON.
func objectMembers(data []byte) ([]member, error) {
	if k := jsonKind(data); k != "object" {
		return nil, fmt.Errorf("is a JSON %s, want an object", k)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, err
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string) // keys are strings in valid JSON
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, member{key: key, value: v})
	}
	return ms, nil
}

// RepeatedKey returns an error naming the first key that appears twice in
// one object anywhere in the JSON value in data, with the path of that
// object ("callers[0].permissions"); nil when there is none. Keys that
// differ only in case count as one, as encoding/json matches them to a
// field ("tools" and "Tools"). encoding/json would keep the last value
// without a word, so that a reader of the file and mcpd could disagree on
// what it grants. data must be valid JSON: any other problem is left to
// the decoder, and reported as nil here. It is meant for objects whose
// keys are field names, not free-form maps.
func RepeatedKey(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // a number too large for a float64 is not this check's business
	err := repeatedKey(dec, "")
	if errors.Is(err, errRepeatedKey) {
		return err
	}
	return nil
}

var errRepeatedKey = errors.New("appears twice")

// repeatedKey reads one JSON value from dec; path is where it is.
func repeatedKey(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := make(map[string]string) // by foldKey, the key as written
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := tok.(string) // keys are strings in valid JSON
			if first, ok := seen[foldKey(key)]; ok {
				where := ""
				if path != "" {
					where = " in " + path
				}
				if first != key {
					return fmt.Errorf("keys %q and %q%s differ only in case, which JSON reads as one key: it %w", first, key, where, errRepeatedKey)
				}
				return fmt.Errorf("key %q %w%s", key, errRepeatedKey, where)
			}
			seen[foldKey(key)] = key
			inner := key
			if path != "" {
				inner = path + "." + key
			}
			if err := repeatedKey(dec, inner); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := repeatedKey(dec, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	default:
		return nil // a scalar
	}
	_, err = dec.Token() // the closing '}' or ']'
	return err
}

// foldKey is key as encoding/json compares it with a field name: without
// case (simple folding, so that the Kelvin sign is a k).
func foldKey(key string) string {
	return strings.Map(func(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }, key)
}

// jsonKind names the kind of the JSON value in data.
func jsonKind(data []byte) string {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return "nothing"
	}
	switch data[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// UnmarshalJSONC decodes data as mcpd reads its config files: comments
// and trailing commas allowed (stripJSONC), a syntax error placed by line
// and column.
func UnmarshalJSONC(data []byte, v any) error {
	data = stripJSONC(data)
	if err := json.Unmarshal(data, v); err != nil {
		return describeSyntaxError(data, err)
	}
	return nil
}

// describeSyntaxError turns a byte offset into a line and column.
func describeSyntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return err
	}
	// Offset counts the offending byte; point at it.
	pos := max(min(int(se.Offset), len(data))-1, 0)
	line := 1 + bytes.Count(data[:pos], []byte{'\n'})
	col := pos - bytes.LastIndexByte(data[:pos], '\n')
	return fmt.Errorf("invalid JSON at line %d, column %d: %w", line, col, err)
}

// describeDecodeError rewords a type mismatch in an entry, raw (as it was
// decoded). It keeps only the kind of the offending JSON value:
// encoding/json includes a number's text, which may be a secret. A
// mismatch inside an object or array field (a number among env's values)
// names the key or index, which encoding/json leaves out.
func describeDecodeError(err error, raw json.RawMessage) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	got, _, _ := strings.Cut(te.Value, " ")
	if te.Field == "" {
		return fmt.Errorf("%w: entry is a JSON %s, want an object", ErrInvalid, got)
	}
	return fmt.Errorf("%w: field %s%s is a JSON %s, want %s", ErrInvalid, te.Field, offendingItem(raw, te), got, describeType(te.Type))
}

// offendingItem is where, inside the object or array at te.Field of raw,
// the first value of the wrong kind is: `["KEY"]` or `[INDEX]`; "" when
// the field itself has the wrong kind. Only fields whose items are strings
// have items of a wrong kind.
func offendingItem(raw json.RawMessage, te *json.UnmarshalTypeError) string {
	if te.Type.Kind() != reflect.String {
		return ""
	}
	v := raw
	for _, key := range strings.Split(te.Field, ".") {
		m, ok := rawMember(v, key)
		if !ok {
			return ""
		}
		v = m
	}
	// null decodes into a string as nothing: not the offender.
	wrong := func(item json.RawMessage) bool { k := jsonKind(item); return k != "string" && k != "null" }
	switch jsonKind(v) {
	case "object":
		ms, _ := objectMembers(v)
		for _, m := range ms {
			if wrong(m.value) {
				return fmt.Sprintf("[%q]", m.key)
			}
		}
	case "array":
		var items []json.RawMessage
		_ = json.Unmarshal(v, &items)
		for i, item := range items {
			if wrong(item) {
				return fmt.Sprintf("[%d]", i)
			}
		}
	}
	return ""
}

func describeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "an array of strings"
	case reflect.Map:
		return "an object with string values"
	}
	return t.String()
}

// byteOrderMark is the UTF-8 byte order mark, which some Windows editors
// write at the start of a file and JSON does not allow.
const byteOrderMark = "\ufeff"

// stripJSONC drops a leading byte order mark and blanks out // and /* */
// comments and trailing commas, which VS Code's mcp.json allows. It
// replaces them with spaces (keeping newlines) so that error offsets still
// point into the original file (but for the mark, which an editor does
// not show: the columns of line 1 are what it shows).
func stripJSONC(data []byte) []byte {
	data = bytes.TrimPrefix(data, []byte(byteOrderMark))
	if !bytes.ContainsAny(data, "/,") {
		return data
	}
	out := bytes.Clone(data)
	// Pass 1: comments.
	for i := 0; i < len(out); i++ {
		switch out[i] {
		case '"':
			i = skipString(out, i)
		case '/':
			if i+1 >= len(out) {
				continue
			}
			switch out[i+1] {
			case '/':
				for ; i < len(out) && out[i] != '\n'; i++ {
					out[i] = ' '
				}
			case '*':
				end := bytes.Index(out[i+2:], []byte("*/"))
				if end < 0 {
					continue // left for the JSON parser to report
				}
				end += i + 4
				for ; i < end; i++ {
					if out[i] != '\n' {
						out[i] = ' '
					}
				}
				i--
			}
		}
	}
	// Pass 2: trailing commas.
	for i := 0; i < len(out); i++ {
		switch out[i] {
		case '"':
			i = skipString(out, i)
		case ',':
			j := i + 1
			for j < len(out) && strings.IndexByte(" \t\r\n", out[j]) >= 0 {
				j++
			}
			if j < len(out) && (out[j] == '}' || out[j] == ']') {
				out[i] = ' '
			}
		}
	}
	return out
}

// skipString returns the index of the closing quote of the string that
// starts at data[i], or len(data) if it is unterminated.
func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(data)
}
