package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// UnsetVariableError reports a ${NAME} reference whose variable is not set
// and has no default.
type UnsetVariableError struct {
	Name string
}

func (e *UnsetVariableError) Error() string {
	return "variable " + e.Name + " is not set (use ${" + e.Name + ":-default} for a default)"
}

// Expand replaces ${VAR} and ${VAR:-default} in s with values from lookup
// (os.LookupEnv when lookup is nil). It follows the rules Claude Code uses
// for .mcp.json, so one file means the same thing to both:
//
//   - ${VAR} is VAR's value; VAR unset is an [*UnsetVariableError]. Set but
//     empty expands to "".
//   - ${VAR:-default} is default when VAR is unset or empty (as in sh). The
//     default is literal text up to the first '}', so it may contain ':'
//     and '-' but not '}' or a nested "${".
//   - ${env:VAR}, as Cursor and VS Code write it, is ${VAR} (and
//     ${env:VAR:-default} has a default); ${env:-x} stays the variable
//     env with a default.
//   - A '$' not followed by '{' is literal, so "$$", "$HOME" and "a$" stay
//     as written. There is no escape: "$${VAR}" is "$" followed by VAR's
//     value.
//   - VAR is [A-Za-z_][A-Za-z0-9_]*. An unterminated "${", an empty or
//     malformed name, and other shell forms (${VAR-x}, ${VAR:=x}) are
//     errors. So is VS Code's ${input:id}, a value the editor prompts
//     for: its error says so, as "unsupported expansion" would not.
//
// Errors name the variable but never print a value.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		rest := s[i+2:]
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return "", errors.New(`unterminated "${" (missing "}")`)
		}
		v, err := expandRef(rest[:end], lookup)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		s = rest[end+1:]
	}
}

// expandRef expands the body of one ${...} reference.
func expandRef(body string, lookup func(string) (string, bool)) (string, error) {
	// ${env:NAME}, as Cursor and VS Code write it, is ${NAME}; ${env:-x}
	// stays variable env with a default.
	if rest, ok := strings.CutPrefix(body, "env:"); ok && !strings.HasPrefix(rest, "-") {
		body = rest
	}
	if id, ok := strings.CutPrefix(body, "input:"); ok && !strings.HasPrefix(id, "-") {
		// An input id names a prompt in the file, not a secret.
		return "", fmt.Errorf("${input:%s} is a VS Code input, which mcpd cannot prompt for: give the value as ${VAR} from mcpd's environment", id)
	}
	n := 0
	for n < len(body) && isVarByte(body[n], n == 0) {
		n++
	}
	name, op := body[:n], body[n:]
	switch {
	case name == "" && (op == "" || op[0] == ':'):
		return "", errors.New("empty variable name in ${}")
	case name == "":
		// Not printing the body: it is not a name and may be anything.
		return "", errors.New("invalid variable name in ${...} (want [A-Za-z_][A-Za-z0-9_]*)")
	case op == "":
		v, ok := lookup(name)
		if !ok {
			return "", &UnsetVariableError{Name: name}
		}
		return v, nil
	case strings.HasPrefix(op, ":-"):
		def := op[2:]
		if strings.Contains(def, "${") {
			return "", fmt.Errorf("default of variable %s contains a nested ${...}, which is not supported", name)
		}
		if v, ok := lookup(name); ok && v != "" {
			return v, nil
		}
		return def, nil
	case !strings.ContainsAny(op[:1], ":-=?+#%/"):
		return "", fmt.Errorf("invalid character in variable name after %s (want [A-Za-z_][A-Za-z0-9_]*)", name)
	}
	return "", fmt.Errorf("unsupported expansion after variable %s: only ${%s} and ${%s:-default} are supported", name, name, name)
}

func isVarByte(c byte, first bool) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || !first && '0' <= c && c <= '9'
}
