package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// The MCP endpoint's one error mapping: the domain errors of mcpclient and
// access, by the table of the gRPC edge, turned into JSON-RPC errors. The
// messages are the domain errors' own, which name no secret.

// JSON-RPC codes mcpd answers beyond the standard ones. A host reads the
// message; the code groups the causes the way the gRPC codes do.
const (
	// codeUnavailable: the server is starting, reconnecting or failed, or
	// a limit was reached; retrying may succeed (gRPC UNAVAILABLE and
	// RESOURCE_EXHAUSTED).
	codeUnavailable = -32000
	// codePermissionDenied: the caller lacks a permission, or a tool
	// filter refuses the tool (gRPC PERMISSION_DENIED).
	codePermissionDenied = -32001
	// codeAuthorizationRequired: the server needs an OAuth consent
	// (gRPC FAILED_PRECONDITION with reason AUTHORIZATION_REQUIRED).
	codeAuthorizationRequired = -32003
	// codeFailedPrecondition: the request cannot succeed as things stand,
	// for example the server is disabled (gRPC FAILED_PRECONDITION,
	// ABORTED, ALREADY_EXISTS).
	codeFailedPrecondition = -32004
)

// wireError maps an error of a Manager method to the JSON-RPC error a host
// receives.
func wireError(err error) error {
	var rpc *mcpclient.RPCError
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je):
		return je
	case errors.As(err, &rpc):
		// The server's own answer, as it gave it.
		return &jsonrpc.Error{Code: rpc.Code, Message: rpc.Message, Data: rpc.Data}
	case errors.Is(err, mcpclient.ErrNotFound):
		return notFound(err.Error())
	case errors.Is(err, mcpclient.ErrInvalidArgument):
		return invalidParams(err.Error())
	case errors.Is(err, mcpclient.ErrPermissionDenied), errors.Is(err, access.ErrPermissionDenied),
		errors.Is(err, access.ErrUnauthenticated):
		return &jsonrpc.Error{Code: codePermissionDenied, Message: err.Error()}
	case errors.Is(err, mcpclient.ErrAuthorizationRequired):
		return &jsonrpc.Error{Code: codeAuthorizationRequired, Message: err.Error()}
	case errors.Is(err, mcpclient.ErrUnavailable), errors.Is(err, mcpclient.ErrResourceExhausted),
		errors.Is(err, context.DeadlineExceeded):
		return &jsonrpc.Error{Code: codeUnavailable, Message: err.Error()}
	case errors.Is(err, mcpclient.ErrUnimplemented):
		return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: err.Error()}
	case errors.Is(err, mcpclient.ErrDisabled), errors.Is(err, mcpclient.ErrFailedPrecondition),
		errors.Is(err, mcpclient.ErrAborted), errors.Is(err, mcpclient.ErrAlreadyExists):
		// The request cannot succeed as things stand (gRPC
		// FAILED_PRECONDITION, ABORTED, ALREADY_EXISTS): the message says
		// why.
		return &jsonrpc.Error{Code: codeFailedPrecondition, Message: err.Error()}
	case errors.Is(err, context.Canceled):
		return &jsonrpc.Error{Code: codeUnavailable, Message: "request cancelled"}
	case errors.Is(err, mcpclient.ErrMalformedResult):
		// The server answered a result mcpd cannot read (gRPC DATA_LOSS):
		// the request ran, so a tool call is no "could not run" result;
		// the message says what was wrong.
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	return &unexpectedError{cause: err}
}

// unexpectedError is an error no case of wireError maps: a bug of mcpd's.
// As at the gRPC edge, the host gets "internal error", not its text, which
// may carry internals; internalErrors logs the cause.
type unexpectedError struct{ cause error }

var internalWireError = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}

// Error is what the host reads (the SDK answers with the outer error's
// text and the code of the *jsonrpc.Error it wraps).
func (e *unexpectedError) Error() string   { return internalWireError.Message }
func (e *unexpectedError) Unwrap() []error { return []error{internalWireError, e.cause} }

// notFoundError is an unknown tool, prompt, resource or server: the host
// is told of it with invalid params, as the SDK tells of an unknown tool
// (what MCP clients expect), and it stays ErrNotFound for the audit line,
// as the gRPC edge's NOT_FOUND.
type notFoundError struct{ wire *jsonrpc.Error }

func (e *notFoundError) Error() string   { return e.wire.Message }
func (e *notFoundError) Unwrap() []error { return []error{e.wire, mcpclient.ErrNotFound} }

// unknownItem is the answer to a request for a tool or prompt (kind) the
// endpoint does not list, in the words of the SDK's own answer.
func unknownItem(kind, name string) error {
	return notFound(fmt.Sprintf("unknown %s %q", kind, name))
}

// notFound is a notFoundError saying msg.
func notFound(msg string) error {
	return &notFoundError{wire: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}}
}

func invalidParams(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

// internalError is the answer to a request whose upstream outcome is not
// of the kind it asked for (which the binding of a requestState to its
// request rules out): an error, not a panic.
func internalError(method string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: method + ": internal error"}
}

// toolError is how a failed tool call reaches the host. An unknown tool or
// bad arguments are protocol errors, as the spec has them; a call that
// could not run or finish (the server unavailable, the deadline passed, the
// session lost mid-call) is a tool result with isError set, which the
// host's model can read and act on; one that may have run says so.
func toolError(err error) (*mcp.CallToolResult, error) {
	if couldNotRun(err) {
		text := err.Error()
		var interrupted *mcpclient.CallInterruptedError
		if errors.As(err, &interrupted) {
			// As the gRPC edge says it: the model must not take the call
			// for one that never happened.
			text += "; " + interrupted.MayHaveRun()
		}
		res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
		return res, nil
	}
	return nil, wireError(err)
}

// couldNotRun reports an error of mcpd's of a call that could not run or
// finish (UNAVAILABLE, RESOURCE_EXHAUSTED, the deadline), told by its
// type: a server's own error answer with the same JSON-RPC code (-32000
// is any server's generic error) stays the server's answer.
func couldNotRun(err error) bool {
	var rpc *mcpclient.RPCError
	var je *jsonrpc.Error
	if errors.As(err, &rpc) || errors.As(err, &je) {
		return false
	}
	return errors.Is(err, mcpclient.ErrUnavailable) || errors.Is(err, mcpclient.ErrResourceExhausted) || errors.Is(err, context.DeadlineExceeded)
}

// internalErrors turns a panic in a request's handler into an internal
// error for that request, logged as the gRPC listener's recovery does, and
// logs the cause of an unexpectedError, as the gRPC listener's logging
// interceptor logs that of an INTERNAL status.
func (g *Gateway) internalErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		defer func() {
			if p := recover(); p != nil {
				g.log.Error().Interface("panic", p).Str("method", method).Msg("recovered from panic in handler")
				res, err = nil, internalWireError
			}
			var unexpected *unexpectedError
			if errors.As(err, &unexpected) {
				g.log.Error().Str("method", method).Str("error", unexpected.cause.Error()).Msg("MCP endpoint: internal error")
			}
		}()
		return next(ctx, method, req)
	}
}
