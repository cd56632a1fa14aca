package config

import (
	"errors"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	const secret = "s3cr3t-value"
	env := map[string]string{
		"A":      "1",
		"B":      "two",
		"EMPTY":  "",
		"SECRET": secret,
		"_X9":    "x9",
	}
	tests := []struct {
		name  string
		in    string
		want  string
		unset string // want an *UnsetVariableError for this name
		err   string // want an error containing this text
	}{
		{name: "no reference", in: "plain text", want: "plain text"},
		{name: "empty", in: "", want: ""},
		{name: "whole", in: "${A}", want: "1"},
		{name: "text around", in: "pre-${A}-post", want: "pre-1-post"},
		{name: "multiple", in: "${A}/${B}?${A}", want: "1/two?1"},
		{name: "adjacent", in: "${A}${B}", want: "1two"},
		{name: "underscore and digits", in: "${_X9}", want: "x9"},
		{name: "set but empty", in: "[${EMPTY}]", want: "[]"},
		{name: "default unset", in: "${NOPE:-fallback}", want: "fallback"},
		{name: "default empty", in: "${EMPTY:-fallback}", want: "fallback"},
		{name: "default not used", in: "${A:-fallback}", want: "1"},
		{name: "default with colon and dash", in: "${NOPE:-http://a-b.example:8080/x}", want: "http://a-b.example:8080/x"},
		{name: "default starting with dash", in: "${NOPE:--v}", want: "-v"},
		{name: "default with :-", in: "${NOPE:-a:-b}", want: "a:-b"},
		{name: "empty default", in: "<${NOPE:-}>", want: "<>"},
		{name: "env: prefix, as Cursor and VS Code write it", in: "Bearer ${env:SECRET}", want: "Bearer " + secret},
		{name: "env: prefix with a default", in: "${env:NOPE:-fallback}", want: "fallback"},
		{name: "env: prefix, unset", in: "${env:NOPE}", unset: "NOPE"},
		{name: "variable env with a default", in: "${env:-fallback}", want: "fallback"},
		{name: "default with dollar", in: "${NOPE:-$x}", want: "$x"},
		{name: "default and text", in: "Bearer ${NOPE:-anon} ${B}", want: "Bearer anon two"},
		{name: "double dollar literal", in: "pa$$word", want: "pa$$word"},
		{name: "lone dollar var", in: "$HOME/x", want: "$HOME/x"},
		{name: "trailing dollar", in: "cost$", want: "cost$"},
		{name: "only dollar", in: "$", want: "$"},
		{name: "dollar space brace", in: "$ {A}", want: "$ {A}"},
		{name: "double dollar before reference", in: "$${A}", want: "$1"},
		{name: "braces without dollar", in: "{A} }", want: "{A} }"},
		{name: "closing brace after", in: "${A}}", want: "1}"},

		{name: "unset", in: "${NOPE}", unset: "NOPE"},
		{name: "unset after set", in: "${A}-${MISSING}", unset: "MISSING"},
		{name: "unterminated", in: "${A", err: "unterminated"},
		{name: "unterminated at end", in: "x${", err: "unterminated"},
		{name: "unterminated default", in: "${NOPE:-x", err: "unterminated"},
		{name: "empty name", in: "${}", err: "empty variable name"},
		{name: "empty name with default", in: "${:-x}", err: "empty variable name"},
		{name: "name starts with digit", in: "${1A}", err: "invalid variable name"},
		{name: "name with space", in: "${A B}", err: "invalid character in variable name after A"},
		{name: "dash without colon", in: "${A-x}", err: "unsupported expansion after variable A"},
		{name: "assign default", in: "${A:=x}", err: "unsupported expansion after variable A"},
		{name: "vscode input", in: "${input:token}", err: "${input:token} is a VS Code input, which mcpd cannot prompt for"},
		{name: "variable input with a default", in: "${input:-x}", want: "x"},
		{name: "nested default", in: "${NOPE:-${A}}", err: "nested"},
		{name: "secret then unset", in: "${SECRET}${NOPE}", unset: "NOPE"},
		{name: "secret then bad syntax", in: "${SECRET}${", err: "unterminated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Expand(tt.in, mapLookup(env))
			if tt.unset == "" && tt.err == "" {
				if err != nil {
					t.Fatalf("Expand(%q): got error %v, want %q", tt.in, err, tt.want)
				}
				if got != tt.want {
					t.Errorf("Expand(%q): got %q, want %q", tt.in, got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Expand(%q): got %q and no error, want an error", tt.in, got)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Expand(%q): error %q contains a variable's value", tt.in, err)
			}
			if tt.unset != "" {
				var ue *UnsetVariableError
				if !errors.As(err, &ue) {
					t.Fatalf("Expand(%q): got error %v (%T), want *UnsetVariableError", tt.in, err, err)
				}
				if ue.Name != tt.unset {
					t.Errorf("Expand(%q): got unset variable %q, want %q", tt.in, ue.Name, tt.unset)
				}
				if want := "variable " + tt.unset + " is not set"; !strings.Contains(err.Error(), want) {
					t.Errorf("Expand(%q): got error %q, want it to contain %q", tt.in, err, want)
				}
				return
			}
			if !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Expand(%q): got error %q, want it to contain %q", tt.in, err, tt.err)
			}
		})
	}
}

func TestExpandNilLookupUsesEnvironment(t *testing.T) {
	t.Setenv("MCPD_CONFIG_TEST_VAR", "from-env")
	got, err := Expand("x=${MCPD_CONFIG_TEST_VAR}", nil)
	if err != nil {
		t.Fatalf("Expand: got error %v, want nil", err)
	}
	if want := "x=from-env"; got != want {
		t.Errorf("Expand: got %q, want %q", got, want)
	}
}
