package config

import (
	"encoding/json"
	"maps"
	"net/url"
	"strings"
)

// MarshalEntry writes s as a .mcp.json entry that holds no secret: every
// env value, header value and OAuth secret (clientSecret, assertion, the
// IdP's clientSecret and idToken) is written as a ${VAR} reference, never
// as its value, and so is a URL with userinfo or a query. Reading the
// entry back with [Parse] takes those values from the environment then:
//
//   - env NAME is written as ${NAME}: the variable of the same name;
//   - every other secret as ${MCPD_<SERVER>_<FIELD>}, for example
//     ${MCPD_DOCS_AUTHORIZATION} for the Authorization header of server
//     docs, ${MCPD_DOCS_OAUTH_CLIENT_SECRET}, ${MCPD_DOCS_URL}
//     (upper case, other characters as '_'), and so is env NAME when
//     NAME is not a plain variable name, starts with MCPD_, or is
//     reserved (${MCPD_DOCS_ENV_MCPD_API_TOKEN});
//   - a name reserved names (mcpd's own settings and credentials) is
//     never written: ${MCPD_API_TOKEN} for header Token of server api
//     becomes ${MCPD_STATE_API_TOKEN}.
//
// The reader ([Layer.Reserved]) must be given the same reserved. It
// must name finitely many variables.
//
// Command, args, cwd, options, the other OAuth fields and the tls block's
// paths are written as they are, "${" and all: read back as a state file
// (a [Layer] with State), only the references above expand, so every
// other value means what it meant to ConnectServer. secrets reports the references written.
func MarshalEntry(s *Server, reserved func(name string) bool) (data []byte, secrets []string, err error) {
	ref := func(field string) string {
		name, _ := stateRef(s.Name, field, reserved)
		secrets = append(secrets, name)
		return "${" + name + "}"
	}
	e := persistedEntry{
		Command:            s.Command,
		Args:               s.Args,
		Cwd:                s.Cwd,
		ProtocolVersion:    s.ProtocolVersion,
		ToolsAllow:         s.ToolsAllow,
		ToolsDeny:          s.ToolsDeny,
		ToolsAsk:           s.ToolsAsk,
		Timeout:            s.CallTimeout.Seconds(),
		ConnectTimeout:     s.ConnectTimeout.Seconds(),
		StrictCapabilities: s.StrictCapabilities,
		Trace:              s.Trace,
		TraceRedact:        s.TraceRedact,
	}
	if s.Kind != TransportAuto {
		e.Type = s.Kind.String()
	}
	if len(s.Env) > 0 {
		e.Env = make(map[string]string, len(s.Env))
		for k := range maps.Keys(s.Env) {
			e.Env[k] = ref("env." + k)
		}
	}
	if len(s.Headers) > 0 {
		e.Headers = make(map[string]string, len(s.Headers))
		for k := range maps.Keys(s.Headers) {
			e.Headers[k] = ref("headers." + k)
		}
	}
	e.URL = s.URL
	if u, perr := url.Parse(s.URL); s.URL != "" && (perr != nil || u.User != nil || u.RawQuery != "") {
		e.URL = ref("url")
	}
	e.TLS = s.TLS.Clone() // paths, not secrets: written as they are
	if s.OAuth != nil {
		o := s.OAuth.Clone()
		secret := func(v *string, field string) {
			if *v != "" {
				*v = ref(field)
			}
		}
		secret(&o.ClientSecret, "oauth.clientSecret")
		secret(&o.Assertion, "oauth.assertion")
		if o.IdP != nil {
			secret(&o.IdP.ClientSecret, "oauth.idp.clientSecret")
			secret(&o.IdP.IDToken, "oauth.idp.idToken")
		}
		e.OAuth = o
	}
	data, err = json.Marshal(e)
	return data, secrets, err
}

// stateRef is the variable MarshalEntry names in field of server's entry
// (a field as parse names it: "url", "env.NAME", "headers.NAME",
// "oauth.clientSecret", ...), and whether the field holds one. No name
// it returns is reserved (nil: none is).
func stateRef(server, field string, reserved func(string) bool) (string, bool) {
	isReserved := func(name string) bool { return reserved != nil && reserved(name) }
	mcpd := func(parts ...string) string {
		name := envName(append([]string{"MCPD", server}, parts...)...)
		for isReserved(name) {
			name = "MCPD_STATE_" + strings.TrimPrefix(name, "MCPD_")
		}
		return name
	}
	if k, ok := strings.CutPrefix(field, "env."); ok {
		// MCPD_ names are mcpd's own and the other references': an env
		// entry reads its own variable only outside them.
		if isVarName(k) && !strings.HasPrefix(k, "MCPD_") && !isReserved(k) {
			return k, true
		}
		return mcpd("ENV", k), true
	}
	if k, ok := strings.CutPrefix(field, "headers."); ok {
		return mcpd(k), true
	}
	switch field {
	case "url":
		return mcpd("URL"), true
	case "oauth.clientSecret":
		return mcpd("OAUTH", "CLIENT_SECRET"), true
	case "oauth.assertion":
		return mcpd("OAUTH", "ASSERTION"), true
	case "oauth.idp.clientSecret":
		return mcpd("OAUTH", "IDP", "CLIENT_SECRET"), true
	case "oauth.idp.idToken":
		return mcpd("OAUTH", "IDP", "ID_TOKEN"), true
	}
	return "", false
}

// stateExpander expands only a value that is exactly the reference
// MarshalEntry writes in its field; every other value is literal. A caller
// who may connect servers thus cannot have ${ANY_VAR} of mcpd's
// environment filled in when the state file is read again, nor, through
// a name that collides with one, mcpd's own reserved variables.
func stateExpander(lookup func(string) (string, bool), reserved func(string) bool) expander {
	return func(server, field, v string) (string, error) {
		if name, ok := stateRef(server, field, reserved); ok && v == "${"+name+"}" {
			return Expand(v, lookup)
		}
		return v, nil
	}
}

// persistedEntry is an entry as MarshalEntry writes it: the fields of
// entry that a Server holds, empty ones left out.
type persistedEntry struct {
	Type            string            `json:"type,omitempty"`
	Command         string            `json:"command,omitempty"`
	Args            []string          `json:"args,omitempty"`
	Env             map[string]string `json:"env,omitempty"`
	Cwd             string            `json:"cwd,omitempty"`
	URL             string            `json:"url,omitempty"`
	Headers         map[string]string `json:"headers,omitempty"`
	Disabled        bool              `json:"disabled,omitempty"`
	Timeout         float64           `json:"timeout,omitempty"`
	ConnectTimeout  float64           `json:"connectTimeout,omitempty"`
	ProtocolVersion string            `json:"protocolVersion,omitempty"`
	ToolsAllow      []string          `json:"toolsAllow,omitempty"`
	ToolsDeny       []string          `json:"toolsDeny,omitempty"`
	ToolsAsk        []string          `json:"toolsAsk,omitempty"`
	OAuth           *OAuth            `json:"oauth,omitempty"`
	TLS             *TLS              `json:"tls,omitempty"`

	StrictCapabilities bool     `json:"strictCapabilities,omitempty"`
	Trace              bool     `json:"trace,omitempty"`
	TraceRedact        []string `json:"traceRedact,omitempty"`
}

// envName joins parts into an environment variable name: upper case,
// every character but A-Z, 0-9 and '_' as '_'.
func envName(parts ...string) string {
	s := strings.ToUpper(strings.Join(parts, "_"))
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// isVarName reports whether name can be written as ${name} (see Expand).
func isVarName(name string) bool {
	if name == "" || '0' <= name[0] && name[0] <= '9' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
