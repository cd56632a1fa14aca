package demoserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// JSON Schema type names used by tool parameters.
const (
	typeString  = "string"
	typeNumber  = "number"
	typeInteger = "integer"
)

// param describes one tool argument. A tool's parameters are the single
// source of both its advertised input schema and the validation of its
// arguments, so the two cannot drift apart.
//
// The SDK's generic mcp.AddTool reports bad arguments as a tool error
// (isError); this server answers JSON-RPC -32602 instead, so clients can
// exercise the invalid-params path.
type param struct {
	name     string
	typ      string // typeString, typeNumber or typeInteger
	desc     string
	required bool
	def      any      // default when absent (int64 for integers); nil for none
	min, max *float64 // inclusive bounds for numbers and integers
	minLen   int      // minimum length for strings
}

type params []param

// schema renders the parameters as a JSON Schema object that rejects
// unknown properties.
func (ps params) schema() map[string]any {
	props := make(map[string]any, len(ps))
	required := []string{}
	for _, p := range ps {
		prop := map[string]any{"type": p.typ, "description": p.desc}
		if p.def != nil {
			prop["default"] = p.def
		}
		if p.min != nil {
			prop["minimum"] = *p.min
		}
		if p.max != nil {
			prop["maximum"] = *p.max
		}
		if p.minLen > 0 {
			prop["minLength"] = p.minLen
		}
		props[p.name] = prop
		if p.required {
			required = append(required, p.name)
		}
	}
	s := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// args holds validated arguments: string, float64 or int64 values by name,
// with defaults applied.
type args map[string]any

func (a args) str(name string) string {
	v, _ := a[name].(string)
	return v
}

func (a args) num(name string) float64 {
	v, _ := a[name].(float64)
	return v
}

func (a args) int(name string) int64 {
	v, _ := a[name].(int64)
	return v
}

// parse validates raw tool arguments against ps. Every failure is a
// JSON-RPC invalid-params error naming the tool and the argument.
func (ps params) parse(tool string, raw json.RawMessage) (args, error) {
	var fields map[string]json.RawMessage
	if raw = bytes.TrimSpace(raw); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if raw[0] != '{' {
			return nil, invalidArgs(tool, "arguments must be an object")
		}
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, invalidArgs(tool, "arguments must be an object")
		}
	}
	for name := range fields {
		if !slices.ContainsFunc(ps, func(p param) bool { return p.name == name }) {
			return nil, invalidArgs(tool, fmt.Sprintf("unknown argument %q", name))
		}
	}
	out := make(args, len(ps))
	for _, p := range ps {
		v, ok := fields[p.name]
		if !ok {
			if p.required {
				return nil, invalidArgs(tool, fmt.Sprintf("missing required argument %q", p.name))
			}
			if p.def != nil {
				out[p.name] = p.def
			}
			continue
		}
		val, err := p.decode(v)
		if err != nil {
			return nil, invalidArgs(tool, fmt.Sprintf("argument %q: %v", p.name, err))
		}
		out[p.name] = val
	}
	return out, nil
}

// decode checks one argument's JSON value against p.
func (p param) decode(v json.RawMessage) (any, error) {
	wrongType := fmt.Errorf("must be %s %s", article(p.typ), p.typ)
	if bytes.Equal(v, []byte("null")) { // json.Unmarshal accepts null for anything
		return nil, wrongType
	}
	switch p.typ {
	case typeString:
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, wrongType
		}
		if len([]rune(s)) < p.minLen {
			return nil, fmt.Errorf("must be at least %d characters long", p.minLen)
		}
		return s, nil
	case typeNumber, typeInteger:
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return nil, wrongType
		}
		if p.typ == typeInteger && (f != math.Trunc(f) || math.Abs(f) > 1<<53) {
			return nil, wrongType
		}
		if p.min != nil && f < *p.min {
			return nil, fmt.Errorf("must be >= %g", *p.min)
		}
		if p.max != nil && f > *p.max {
			return nil, fmt.Errorf("must be <= %g", *p.max)
		}
		if p.typ == typeInteger {
			return int64(f), nil
		}
		return f, nil
	default:
		return nil, fmt.Errorf("unsupported parameter type %q", p.typ)
	}
}

func article(typ string) string {
	if typ == typeInteger {
		return "an"
	}
	return "a"
}

func invalidArgs(tool, msg string) error {
	return &jsonrpc.Error{
		Code:    jsonrpc.CodeInvalidParams,
		Message: fmt.Sprintf("invalid arguments for tool %q: %s", tool, msg),
	}
}

func ptr[T any](v T) *T { return &v }
