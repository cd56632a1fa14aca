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
//     (upper case, other characters as '_').
//
// Command, args, cwd, options and the other OAuth fields are written as
// they are. secrets reports the references written.
func MarshalEntry(s *Server) (data []byte, secrets []string, err error) {
	ref := func(name string) string {
		secrets = append(secrets, name)
		return "${" + name + "}"
	}
	field := func(parts ...string) string {
		return ref(envName(append([]string{"MCPD", s.Name}, parts...)...))
	}
	e := persistedEntry{
		Command:         s.Command,
		Args:            s.Args,
		Cwd:             s.Cwd,
		ProtocolVersion: s.ProtocolVersion,
		ToolsAllow:      s.ToolsAllow,
		ToolsDeny:       s.ToolsDeny,
		ToolsAsk:        s.ToolsAsk,
		Timeout:         s.CallTimeout.Seconds(),
		ConnectTimeout:  s.ConnectTimeout.Seconds(),
	}
	if s.Kind != TransportAuto {
		e.Type = s.Kind.String()
	}
	if len(s.Env) > 0 {
		e.Env = make(map[string]string, len(s.Env))
		for k := range maps.Keys(s.Env) {
			if isVarName(k) {
				e.Env[k] = ref(k)
			} else {
				e.Env[k] = field("ENV", k)
			}
		}
	}
	if len(s.Headers) > 0 {
		e.Headers = make(map[string]string, len(s.Headers))
		for k := range maps.Keys(s.Headers) {
			e.Headers[k] = field(k)
		}
	}
	e.URL = s.URL
	if u, perr := url.Parse(s.URL); s.URL != "" && (perr != nil || u.User != nil || u.RawQuery != "") {
		e.URL = field("URL")
	}
	if s.OAuth != nil {
		o := s.OAuth.Clone()
		secret := func(v *string, parts ...string) {
			if *v != "" {
				*v = field(parts...)
			}
		}
		secret(&o.ClientSecret, "OAUTH", "CLIENT_SECRET")
		secret(&o.Assertion, "OAUTH", "ASSERTION")
		if o.IdP != nil {
			secret(&o.IdP.ClientSecret, "OAUTH", "IDP", "CLIENT_SECRET")
			secret(&o.IdP.IDToken, "OAUTH", "IDP", "ID_TOKEN")
		}
		e.OAuth = o
	}
	data, err = json.Marshal(e)
	return data, secrets, err
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
