// Package access decides who is calling mcpd and what they may do. It owns
// the callers file, caller identities (bearer tokens, kept as SHA-256
// hashes, and client-certificate SPIFFE IDs, DNS names and common names),
// the permissions of each caller, the one check every edge calls
// ([Authorizer.Authorize]), the TLS configuration of mcpd's listeners
// ([NewServerTLS]) and the audit trail ([Auditor]).
//
// An edge (gRPC today; HTTP and an MCP endpoint may follow) turns what
// arrived on its wire into [Credentials], asks [Authorizer.Authenticate]
// for the [Caller], and asks [Authorizer.Authorize] whether that caller may
// perform each [Action] of the request. Both return typed errors
// ([ErrUnauthenticated], [ErrPermissionDenied]) that the edge maps to its
// wire's status once.
package access

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrUnauthenticated means no credential, or one that names no caller.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrPermissionDenied means a known caller lacks a permission.
	ErrPermissionDenied = errors.New("permission denied")
)

// authError is an ErrUnauthenticated with a message that never quotes the
// credential.
type authError struct{ msg string }

func (e *authError) Error() string        { return e.msg }
func (e *authError) Is(target error) bool { return target == ErrUnauthenticated }

// DeniedError says which permission a caller lacks for which action. It
// names the caller and the permission, never a credential.
type DeniedError struct {
	// Caller is the caller's name.
	Caller string
	// Permission is the permission that is missing, as the callers file
	// spells it: "servers", "tools", "resources", "prompts", "manage" or
	// "server_requests".
	Permission string
	// Target is what the action was about, for example a qualified tool
	// name or "server \"demo\"".
	Target string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("caller %q lacks permission %q for %s", e.Caller, e.Permission, e.Target)
}

// Is makes errors.Is(err, ErrPermissionDenied) true.
func (e *DeniedError) Is(target error) bool { return target == ErrPermissionDenied }

// Names of the callers mcpd makes up itself; a callers file cannot use
// them.
const (
	// TokenCallerName is the caller that presents MCPD_API_TOKEN (or the
	// --api-token-file token); it has every permission.
	TokenCallerName = "api-token"
	// AnonymousCallerName is every caller when mcpd checks no credential
	// at all (no token, no callers file, no client CA); it has every
	// permission, as whoever reaches a private socket does.
	AnonymousCallerName = "anonymous"
)

// Caller is an authenticated caller. A Caller is a value: it holds the
// caller's name, and Authorize looks its permissions up in the callers
// file loaded at the time of the check, so a reload applies to streams
// that are already open.
type Caller struct {
	// Name is the caller's name from the callers file, TokenCallerName,
	// AnonymousCallerName, or the certificate identity of a client when
	// mutual TLS runs without a callers file.
	Name string
	// all grants every permission (the API token, anonymous callers, and
	// client certificates when no callers file names callers).
	all bool
}

// AllServers stands in Action.Server for "every server", for example a
// SetRoots without a server, or a server-request registration that names
// no server. Only the servers pattern "*" grants it.
const AllServers = "*"

// Verb is the kind of an Action.
type Verb int

// Verbs. Every action on a server also needs the "servers" permission for
// that server.
const (
	// ViewServer is seeing a server: its status, its events, its
	// completions. Permission: servers.
	ViewServer Verb = iota + 1
	// CallTool is calling Action.Tool (a qualified name). Permission:
	// tools.
	CallTool
	// ReadResource is reading, or subscribing to, Action.URI on
	// Action.Server (a resource template counts as its URI template).
	// Permission: resources.
	ReadResource
	// GetPrompt is rendering (or completing) prompt Action.Prompt.
	// Permission: prompts.
	GetPrompt
	// ManageServers is connecting, disconnecting and restarting servers,
	// setting their roots and log level, and any other daemon-changing
	// RPC. Permission: manage.
	ManageServers
	// AnswerRequests is answering Action.RequestKind requests ("sampling",
	// "elicitation", "roots", "authorization", "approval") from Action.Server. Permission:
	// server_requests.
	AnswerRequests
)

// Action is one thing a caller asks to do. Edges build it from a request;
// fields that do not apply to its Verb are empty.
type Action struct {
	Verb Verb
	// Server is the server's name, AllServers, or empty when the action
	// is not about one server.
	Server string
	// Tool is the qualified tool name (mcp__<server>__<tool>).
	Tool string
	// URI is the resource URI or URI template.
	URI string
	// Prompt is the prompt's name.
	Prompt string
	// RequestKind is the server-request kind: "sampling", "elicitation"
	// or "roots".
	RequestKind string
}

// target describes the action in a denial, without any credential.
func (a Action) target() string {
	switch a.Verb {
	case CallTool:
		return fmt.Sprintf("tool %q", a.Tool)
	case ReadResource:
		return fmt.Sprintf("resource %q on server %q", a.URI, a.Server)
	case GetPrompt:
		return fmt.Sprintf("prompt %q on server %q", a.Prompt, a.Server)
	case AnswerRequests:
		return fmt.Sprintf("%s requests from %s", a.RequestKind, serverText(a.Server))
	case ManageServers:
		if a.Server == "" {
			return "managing servers"
		}
		return "managing " + serverText(a.Server)
	}
	return serverText(a.Server)
}

func serverText(s string) string {
	if s == AllServers {
		return "every server"
	}
	return fmt.Sprintf("server %q", s)
}

type callerKey struct{}

// NewContext returns ctx carrying caller, for the handlers behind an edge's
// authentication.
func NewContext(ctx context.Context, caller Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// FromContext returns the caller NewContext stored in ctx. Without one it
// returns a Caller with no name, whom Authorize refuses everything.
func FromContext(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}
