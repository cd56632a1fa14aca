package mcpclient

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Sentinel errors of the upstream layer. Callers test them with errors.Is;
// the gRPC edge maps each to one status code.
var (
	// ErrNotFound means an unknown server or tool.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists means a server of that name is already connected.
	ErrAlreadyExists = errors.New("already exists")
	// ErrInvalidArgument means a request the caller must change.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrUnavailable means the server cannot take the request now (starting,
	// reconnecting, failed, or its connection closed); retrying may succeed.
	ErrUnavailable = errors.New("unavailable")
	// ErrShuttingDown means mcpd is stopping and takes no new work; a
	// client may try again once it (or another mcpd) is back. It is of
	// kind ErrUnavailable too.
	ErrShuttingDown = fmt.Errorf("shutting down: %w", ErrUnavailable)
	// ErrPermissionDenied means a policy (a tool filter) refuses the request.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrResourceExhausted means a limit was reached: the calls in flight
	// to one server (ErrQueueTimeout), the size of a message, the polls
	// mcpd runs, the MCP endpoint's sessions. Only ErrQueueTimeout passes
	// without anyone acting; a message over the bound fails the same way
	// again.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrQueueTimeout means a tool call waited the queue timeout for one
	// of its server's in-flight slots and none came free; retrying later
	// may succeed, as the calls in flight finish. It is of kind
	// ErrResourceExhausted too.
	ErrQueueTimeout = fmt.Errorf("queue timeout: %w", ErrResourceExhausted)
	// ErrAuthorizationRequired means a server needs authorization that
	// has not been given: a person's consent, or a grant that was refused.
	ErrAuthorizationRequired = errors.New("authorization required")
	// ErrFailedPrecondition means mcpd's own state keeps the request from
	// succeeding (its OAuth state directory cannot be written); retrying
	// helps only once an operator has fixed it.
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrDisabled means the server is disabled: calls fail until it is
	// enabled again, so retrying alone does not help.
	ErrDisabled = errors.New("server disabled")
	// ErrAborted means mcpd ended a long-lived request because another
	// took its place (a ServeTools stream replaced by another) or its
	// server was removed.
	ErrAborted = errors.New("aborted")
	// ErrMalformedResult means the server answered a request with a result
	// that breaks the protocol, so that mcpd cannot read it (image data
	// that is not base64, a number out of range). The session goes on. The
	// request reached the server, which may have acted on it (a tool ran):
	// retrying runs it again, and most likely fails the same way.
	ErrMalformedResult = errors.New("malformed result")
	// ErrUnimplemented means a feature mcpd does not support yet.
	ErrUnimplemented = errors.New("not implemented")
)

// RPCError is a JSON-RPC error answered by an upstream server.
type RPCError struct {
	// Server names the server that answered.
	Server string
	// Code is the JSON-RPC error code, for example -32602.
	Code int64
	// Message is the server's error message.
	Message string
	// Data is the error's data as the server sent it (JSON), if any: the
	// MCP endpoint passes it on to hosts, for which some codes define it.
	Data json.RawMessage
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("server %q answered error %d: %s", e.Server, e.Code, e.Message)
}

// CallInterruptedError reports a tool call whose session ended (the
// connection closed or was lost, or the server was stopped or restarted)
// after the request may have reached the server: the tool may have run.
// mcpd sends such a call again, once, only when the server marks the tool
// read-only or idempotent (Repeatable). It is of kind ErrUnavailable.
type CallInterruptedError struct {
	// Server and Tool name the call, Tool by the server's own name.
	Server, Tool string
	// Repeatable says the server marks the tool readOnlyHint or
	// idempotentHint.
	Repeatable bool
	// Retried says the call was sent a second time and that attempt did
	// not finish either.
	Retried bool
	// Err is how the last attempt ended, or why mcpd could not send the
	// call again.
	Err error
}

func (e *CallInterruptedError) Error() string { return e.Err.Error() }

// MayHaveRun says, in words a caller (or a model) reads, that the call may
// have run, and whether it was sent again: every edge says it so.
func (e *CallInterruptedError) MayHaveRun() string {
	msg := "the call may have run: "
	switch {
	case e.Retried:
		return msg + "it was sent twice (the tool is marked read-only or idempotent), and neither attempt finished"
	case e.Repeatable:
		return msg + "it was not sent again"
	}
	return msg + "it was not sent again, for the server does not mark the tool readOnlyHint or idempotentHint"
}
func (e *CallInterruptedError) Unwrap() error { return e.Err }

// kindError attaches a sentinel kind to a descriptive message, so that
// errors.Is finds the kind (and any kind the kind wraps, as ErrQueueTimeout
// wraps ErrResourceExhausted) while Error shows only the message. With a
// nil kind it only rewords its cause, whose kind errors.Is still finds.
type kindError struct {
	kind  error
	msg   string
	cause error
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return errors.Is(e.kind, target) }
func (e *kindError) Unwrap() error        { return e.cause }

// errorf returns an error of the given kind with a formatted message; a %w
// verb in format wraps its operand as usual.
func errorf(kind error, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &kindError{kind: kind, msg: err.Error(), cause: errors.Unwrap(err)}
}

// Deny returns an ErrPermissionDenied error with a formatted message, for
// policies that live outside this package.
func Deny(format string, args ...any) error {
	return errorf(ErrPermissionDenied, format, args...)
}

// resultProblem says what is wrong with a server's result that the SDK
// could not decode, when err is such a decoding error: in a few words,
// with the JSON path of the value (cut short) but neither the value nor
// Go's types. It reports false for any other error.
func resultProblem(err error) (string, bool) {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
		base64Err base64.CorruptInputError
	)
	switch {
	case errors.As(err, &typeErr):
		what := "a value of the wrong type"
		if typeErr.Type != nil {
			what = "a value that is not " + jsonKind(typeErr.Type)
		}
		if typeErr.Field != "" {
			what += " at " + shortQuote(typeErr.Field, maxPathBytes)
		}
		return what, true
	case errors.As(err, &base64Err):
		return "data that is not base64", true
	case errors.As(err, &syntaxErr):
		return "JSON that does not parse", true
	}
	return "", false
}

// maxPathBytes bounds the JSON path a message shows: its keys are the
// server's, and a result may nest deep.
const maxPathBytes = 64

// jsonKind names, in JSON's words, what a value decoded into t must be.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a number in range"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "base64 data"
		}
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "of the expected type"
}

// shortQuote quotes s, cut to at most n bytes (on a rune boundary) with
// "..." after it when it was longer.
func shortQuote(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	cut := strings.ToValidUTF8(s[:n], "")
	return strconv.Quote(cut) + "..."
}
