package server

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// This file bounds what a request may carry. The JSON a caller hands on,
// as google.protobuf.Struct and Value, to servers (tool arguments, _meta,
// an agent's answers to server requests) and to other callers (an
// agent's tool declarations and results) becomes JSON through structToMap
// or valueToAny, which refuse what JSON cannot carry or a server cannot
// decode. The names a request gives are no longer than a server's or a
// tool's can be (checkRequest).

// maxJSONDepth bounds how deeply a caller's JSON may nest: see
// mcpclient.MaxJSONDepth, which the MCP endpoint applies too.
const maxJSONDepth = mcpclient.MaxJSONDepth

// structToMap is s, a caller's JSON object in field (the name an error
// gives it), as a JSON object for the MCP SDK. It refuses an object
// nested deeper than maxJSONDepth, and a NaN or infinite number, which
// JSON has no form for (structpb would make it a string), with a
// *jsonError: INVALID_ARGUMENT. The error names where the problem is,
// never a value. A nil s is an empty object, as Struct.AsMap has it.
func structToMap(field string, s *structpb.Struct) (map[string]any, error) {
	if err := checkStruct(field, s); err != nil {
		return nil, err
	}
	return s.AsMap(), nil
}

// valueToAny is structToMap for a JSON value of any kind; nil is null.
func valueToAny(field string, v *structpb.Value) (any, error) {
	if p := walkValue(v, 0); p != nil {
		return nil, p.err(field)
	}
	return v.AsInterface(), nil
}

// checkRequest is the guard's first check of a request (the first
// message of a stream), on every listener. It refuses, as
// INVALID_ARGUMENT, a server or tool name longer than any can be
// (mcpclient.CheckServerNameLength, CheckToolNameLength): such a name
// names nothing, and every later refusal would quote it whole, in the
// answer, the log and the audit line. And it refuses a tool call's JSON
// as the handler would, before anything else sees it: the audit line
// (with --audit-arguments) and an agent asked to approve the call show
// the arguments.
func checkRequest(msg any) error {
	switch m := msg.(type) {
	case *mcpdv1.GetServerRequest:
		return mcpclient.CheckServerNameLength("name", m.GetName())
	case *mcpdv1.DisconnectServerRequest:
		return mcpclient.CheckServerNameLength("name", m.GetName())
	case *mcpdv1.RestartServerRequest:
		return mcpclient.CheckServerNameLength("name", m.GetName())
	case *mcpdv1.SetServerEnabledRequest:
		return mcpclient.CheckServerNameLength("name", m.GetName())
	case *mcpdv1.ConnectServerRequest:
		return mcpclient.CheckServerNameLength("server.name", m.GetServer().GetName())
	case *mcpdv1.ServeToolsRequest:
		return mcpclient.CheckServerNameLength("declare.server", m.GetDeclare().GetServer())
	case *mcpdv1.CompleteAuthorizationRequest:
		return mcpclient.CheckServerNameLength("server", m.GetServer())
	case *mcpdv1.ForgetAuthorizationRequest:
		return mcpclient.CheckServerNameLength("server", m.GetServer())
	case *mcpdv1.ListToolsRequest:
		return mcpclient.CheckServerNameLength("server", m.GetServer())
	case *mcpdv1.ListResourcesRequest:
		return mcpclient.CheckServerNameLength("server", m.GetServer())
	case *mcpdv1.ListResourceTemplatesRequest:
		return mcpclient.CheckServerNameLength("server", m.GetServer())
	case *mcpdv1.ListPromptsRequest:
		return mcpclient.CheckServerNameLength("server", m.GetServer())
	case *mcpdv1.ReadResourceRequest:
		return errors.Join(mcpclient.CheckServerNameLength("server", m.GetServer()), mcpclient.CheckURILength("uri", m.GetUri()))
	case *mcpdv1.GetPromptRequest:
		return errors.Join(mcpclient.CheckServerNameLength("server", m.GetServer()), mcpclient.CheckPromptNameLength("name", m.GetName()))
	case *mcpdv1.CompleteRequest:
		return errors.Join(mcpclient.CheckServerNameLength("server", m.GetServer()),
			mcpclient.CheckPromptNameLength("prompt", m.GetPrompt()), mcpclient.CheckURILength("resource_template", m.GetResourceTemplate()))
	case *mcpdv1.SetLogLevelRequest:
		return mcpclient.CheckServerNameLength("server", m.GetServer())
	case *mcpdv1.SetRootsRequest:
		return mcpclient.CheckServerNameLength("server", m.GetServer())
	case *mcpdv1.SubscribeRequest:
		if err := checkServerNames("servers", m.GetServers()); err != nil {
			return err
		}
		for i, r := range m.GetResources() {
			at := "resources[" + strconv.Itoa(i) + "]"
			if err := errors.Join(mcpclient.CheckServerNameLength(at+".server", r.GetServer()), mcpclient.CheckURILength(at+".uri", r.GetUri())); err != nil {
				return err
			}
		}
	case *mcpdv1.SearchToolsRequest:
		return checkServerNames("servers", m.GetServers())
	case *mcpdv1.HandleServerRequestsRequest:
		return checkServerNames("register.servers", m.GetRegister().GetServers())
	case *mcpdv1.CallToolRequest:
		return checkCall(m.GetName(), m.GetArguments(), m.GetMeta())
	case *mcpdv1.CallToolStreamRequest:
		return checkCall(m.GetName(), m.GetArguments(), m.GetMeta())
	case *mcpdv1.StartPollRequest:
		if err := errors.Join(mcpclient.CheckServerNameLength("server", m.GetServer()), mcpclient.CheckURILength("resource_uri", m.GetResourceUri())); err != nil {
			return err
		}
		if err := mcpclient.CheckToolNameLength("tool.name", m.GetTool().GetName()); err != nil {
			return err
		}
		return checkStruct("tool.arguments", m.GetTool().GetArguments())
	}
	return nil
}

func checkServerNames(field string, names []string) error {
	for i, name := range names {
		if err := mcpclient.CheckServerNameLength(field+"["+strconv.Itoa(i)+"]", name); err != nil {
			return err
		}
	}
	return nil
}

func checkCall(name string, args, meta *structpb.Struct) error {
	if err := mcpclient.CheckToolNameLength("name", name); err != nil {
		return err
	}
	if err := checkStruct("arguments", args); err != nil {
		return err
	}
	return checkStruct("meta", meta)
}

// checkStruct refuses s as structToMap does, without converting it.
func checkStruct(field string, s *structpb.Struct) error {
	if p := walkStruct(s, 1); p != nil {
		return p.err(field)
	}
	return nil
}

// jsonProblem is what is wrong with a caller's JSON, and where.
type jsonProblem struct {
	tooDeep bool
	// path leads from the field to the problem, innermost step first
	// (".key", `["key"]` or "[index]"); empty for a problem of depth,
	// whose path would be as long as the bound.
	path []string
}

func (p *jsonProblem) err(field string) error {
	if p.tooDeep {
		return &jsonError{msg: field + ": nested more than " + strconv.Itoa(maxJSONDepth) + " levels deep (objects and arrays)"}
	}
	slices.Reverse(p.path)
	return &jsonError{msg: field + strings.Join(p.path, "") + ": not a finite number (JSON has no NaN or Infinity)"}
}

// jsonError refuses a caller's JSON that mcpd does not pass on; toStatus
// makes it INVALID_ARGUMENT. Its message names the field and the path in
// it, and no value.
type jsonError struct{ msg string }

func (e *jsonError) Error() string { return e.msg }

// walkStruct checks s, at depth (the depth of the object s is).
func walkStruct(s *structpb.Struct, depth int) *jsonProblem {
	if depth > maxJSONDepth {
		return &jsonProblem{tooDeep: true}
	}
	for k, v := range s.GetFields() {
		if p := walkValue(v, depth); p != nil {
			if !p.tooDeep {
				p.path = append(p.path, keyStep(k))
			}
			return p
		}
	}
	return nil
}

// walkValue checks v, a value inside an object or array at depth (0: a
// value of its own).
func walkValue(v *structpb.Value, depth int) *jsonProblem {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return &jsonProblem{}
		}
	case *structpb.Value_StructValue:
		return walkStruct(k.StructValue, depth+1)
	case *structpb.Value_ListValue:
		if depth+1 > maxJSONDepth {
			return &jsonProblem{tooDeep: true}
		}
		for i, e := range k.ListValue.GetValues() {
			if p := walkValue(e, depth+1); p != nil {
				if !p.tooDeep {
					p.path = append(p.path, "["+strconv.Itoa(i)+"]")
				}
				return p
			}
		}
	}
	return nil
}

// maxKeyInPath bounds how much of an object key an error quotes: a key
// may be as long as the message.
const maxKeyInPath = 64

// keyStep is the step into the member key of an object: ".key" for a
// key that reads as a name, else the key quoted in brackets.
func keyStep(key string) string {
	plain := key != "" && len(key) <= maxKeyInPath
	for i := 0; plain && i < len(key); i++ {
		c := key[i]
		plain = c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9'
	}
	if plain {
		return "." + key
	}
	return "[" + quotePrefix(key, maxKeyInPath) + "]"
}

// quotePrefix is s quoted, as %q quotes it, or the quoted first max bytes
// of a longer s (cut where a character starts), followed by "...".
func quotePrefix(s string, max int) string {
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}
