package server

import (
	"context"
	"errors"
	"strconv"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// errorDomain names mcpd in google.rpc.ErrorInfo details.
const errorDomain = "mcpd.v1"

// ErrorInfo reasons mcpd sends.
const (
	// reasonUpstreamError marks a JSON-RPC error answered by a server; the
	// metadata carries "server" and "jsonrpc_code".
	reasonUpstreamError = "UPSTREAM_JSONRPC_ERROR"
	// reasonAuthorizationRequired marks a call to a server that needs
	// OAuth authorization.
	reasonAuthorizationRequired = "AUTHORIZATION_REQUIRED"
	// reasonCallMayHaveRun marks a tool call whose session ended after the
	// server may have started it; the metadata carries "server", "tool"
	// and "retried".
	reasonCallMayHaveRun = "CALL_MAY_HAVE_RUN"
	// reasonServerDisabled marks a request to a disabled server.
	reasonServerDisabled = "SERVER_DISABLED"
	// reasonQueueTimeout marks a tool call that waited the queue timeout
	// for one of its server's in-flight slots: unlike the other causes of
	// RESOURCE_EXHAUSTED, it passes as the calls in flight finish.
	reasonQueueTimeout = "QUEUE_TIMEOUT"
	// reasonServerUnavailable marks a request its server cannot take now
	// (not READY, its session ended, an HTTP exchange with it refused or
	// failed), and reasonShuttingDown one mcpd refused or ended while
	// stopping. With CALL_MAY_HAVE_RUN, every UNAVAILABLE mcpd sends has a
	// reason, so a client tells them from a connection to mcpd that broke,
	// which has none (and during a tool call may have run it).
	reasonServerUnavailable = "SERVER_UNAVAILABLE"
	reasonShuttingDown      = "SHUTTING_DOWN"
)

// toStatus is the one place where errors become gRPC statuses. Handlers
// return its result and nothing else, so no error reaches a client as
// UNKNOWN by accident.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err // already a status, e.g. from an interceptor
	}
	var (
		rpcErr      *mcpclient.RPCError
		interrupted *mcpclient.CallInterruptedError
		badJSON     *jsonError
	)
	switch {
	case errors.As(err, &rpcErr):
		return upstreamStatus(rpcErr)
	case errors.As(err, &badJSON):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, mcpclient.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, mcpclient.ErrAlreadyExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, mcpclient.ErrInvalidArgument):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, &interrupted):
		return interruptedStatus(interrupted)
	case errors.Is(err, mcpclient.ErrShuttingDown):
		return reasonStatus(codes.Unavailable, err, reasonShuttingDown)
	case errors.Is(err, mcpclient.ErrUnavailable):
		return reasonStatus(codes.Unavailable, err, reasonServerUnavailable)
	case errors.Is(err, mcpclient.ErrPermissionDenied), errors.Is(err, access.ErrPermissionDenied):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, access.ErrUnauthenticated):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, mcpclient.ErrQueueTimeout):
		return reasonStatus(codes.ResourceExhausted, err, reasonQueueTimeout)
	case errors.Is(err, mcpclient.ErrResourceExhausted):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, mcpclient.ErrAuthorizationRequired):
		return preconditionStatus(err, reasonAuthorizationRequired)
	case errors.Is(err, mcpclient.ErrDisabled):
		return preconditionStatus(err, reasonServerDisabled)
	case errors.Is(err, mcpclient.ErrFailedPrecondition):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, mcpclient.ErrAborted):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, mcpclient.ErrUnimplemented):
		return status.Error(codes.Unimplemented, err.Error())
	case errors.Is(err, mcpclient.ErrMalformedResult):
		// The server's answer is lost: the request ran, so it is not
		// UNAVAILABLE (which clients retry); nor INTERNAL, which is
		// mcpd's own bug.
		return status.Error(codes.DataLoss, err.Error())
	}
	// Anything else is a bug in mcpd; the message is kept out of the status
	// (it may carry internals) and logged by the logging interceptor.
	return internalError{cause: err}
}

// preconditionStatus is FAILED_PRECONDITION with an ErrorInfo reason: the
// server cannot take requests until someone acts, and retrying alone does
// not help. AUTHORIZATION_REQUIRED: a person authorizes the server (see
// Server.authorization_url). SERVER_DISABLED: someone enables it
// (SetServerEnabled).
func preconditionStatus(err error, reason string) error {
	return reasonStatus(codes.FailedPrecondition, err, reason)
}

// reasonStatus is the status of code with err's message and an ErrorInfo
// of mcpd's domain with reason and no metadata. RESOURCE_EXHAUSTED with
// QUEUE_TIMEOUT: the call waited --queue-timeout for one of the server's
// --max-inflight-calls slots, and trying it again later may succeed; a
// RESOURCE_EXHAUSTED without a reason (a message over --max-message-bytes)
// fails the same way again.
func reasonStatus(code codes.Code, err error, reason string) error {
	st := status.New(code, err.Error())
	withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: errorDomain})
	if derr != nil {
		return st.Err()
	}
	return withInfo.Err()
}

// interruptedStatus is UNAVAILABLE saying that the call may have run, with
// ErrorInfo reason CALL_MAY_HAVE_RUN: the agent decides whether to call
// again.
func interruptedStatus(e *mcpclient.CallInterruptedError) error {
	st := status.New(codes.Unavailable, e.Error()+"; "+e.MayHaveRun())
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason: reasonCallMayHaveRun,
		Domain: errorDomain,
		Metadata: map[string]string{
			"server":  e.Server,
			"tool":    e.Tool,
			"retried": strconv.FormatBool(e.Retried),
		},
	})
	if err != nil {
		return st.Err()
	}
	return withInfo.Err()
}

// internalError reaches the client as INTERNAL "internal error" while its
// Error, which the logging interceptor logs, keeps the cause.
type internalError struct{ cause error }

func (e internalError) Error() string { return "internal error: " + e.cause.Error() }

func (e internalError) GRPCStatus() *status.Status {
	return status.New(codes.Internal, "internal error")
}

// maxErrorDataBytes bounds the JSON-RPC error data an ErrorInfo carries:
// it travels in a header (grpc-status-details-bin), and clients refuse
// large ones (grpc-go and grpcio by default at 16 KiB of headers).
const maxErrorDataBytes = 4 << 10

// upstreamStatus maps a server's JSON-RPC error to the closest code and
// attaches the server name, the JSON-RPC code and, when it is small, the
// error's data as ErrorInfo. The data is what the caller acts on for some
// errors: -32042 (URL elicitation required) holds the URL to open.
func upstreamStatus(e *mcpclient.RPCError) error {
	st := status.New(jsonRPCCode(e.Code), e.Error())
	metadata := map[string]string{
		"server":       e.Server,
		"jsonrpc_code": strconv.FormatInt(e.Code, 10),
	}
	// A proto string must be UTF-8, or the whole ErrorInfo is lost.
	if len(e.Data) > 0 && len(e.Data) <= maxErrorDataBytes && utf8.Valid(e.Data) {
		metadata["jsonrpc_data"] = string(e.Data)
	}
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   reasonUpstreamError,
		Domain:   errorDomain,
		Metadata: metadata,
	})
	if err != nil {
		return st.Err()
	}
	return withInfo.Err()
}

// jsonRPCCode maps JSON-RPC and MCP error codes. A code with no closer
// match is UNKNOWN, which gRPC reserves for errors from another error
// space: that is what a server-defined code is.
func jsonRPCCode(code int64) codes.Code {
	switch code {
	case -32602, -32600: // invalid params, invalid request
		return codes.InvalidArgument
	case -32601: // method not found
		return codes.Unimplemented
	case -32002: // resource not found (before 2025-11-25)
		return codes.NotFound
	case -32700, -32603: // parse error, internal error
		return codes.Internal
	case -32021, -32022, -32042: // missing client capabilities, unsupported protocol version, URL elicitation required
		return codes.FailedPrecondition
	case -1: // request declined: mcpd's answer to sampling when no agent answers it
		return codes.FailedPrecondition
	}
	return codes.Unknown
}

// invalidf returns an INVALID_ARGUMENT error for a bad request field.
func invalidf(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}
