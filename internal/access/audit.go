package access

import (
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/config"
)

// AuditLogger is the value of the "logger" field on every audit line, so
// that a log pipeline can route the audit trail on its own.
const AuditLogger = "audit"

// AuditOptions configure an Auditor.
type AuditOptions struct {
	// Arguments adds tool-call and prompt arguments to audit lines, with
	// the values of keys that look secret redacted. Default: arguments are
	// never logged.
	Arguments bool
}

// Auditor writes the audit trail: one line per tool call, resource read,
// prompt get, server change and refused request. A nil *Auditor writes
// nothing. It is safe for concurrent use.
type Auditor struct {
	log       zerolog.Logger
	arguments bool
}

// NewAuditor returns an Auditor that writes to log with the field
// logger=audit. Audit lines are written whatever the logger's level.
func NewAuditor(log zerolog.Logger, opts *AuditOptions) *Auditor {
	// The audit logger gets the lowest level: lines without a level pass
	// any level but Disabled, which must not mute the trail either (only
	// zerolog.SetGlobalLevel, which mcpd never calls, still would).
	a := &Auditor{log: log.Level(zerolog.TraceLevel).With().Str("logger", AuditLogger).Logger()}
	if opts != nil {
		a.arguments = opts.Arguments
	}
	return a
}

// Arguments reports whether audit lines carry arguments; an edge skips
// converting them otherwise.
func (a *Auditor) Arguments() bool { return a != nil && a.arguments }

// Record is one audited request, as an edge saw it.
type Record struct {
	// Caller is the caller's name; empty when authentication failed.
	Caller string
	// Method is what was asked, for example "CallTool".
	Method string
	// Server, Tool (qualified), URI and Prompt say what it was about; the
	// credentials a URI may carry are masked (config.RedactURI).
	Server, Tool, URI, Prompt string
	// Code is the outcome in the edge's terms, for example a gRPC code
	// as grpc-go names it ("OK", "PermissionDenied").
	Code string
	// IsError is the tool's is_error, for tool calls that returned a
	// result.
	IsError *bool
	// Denied is the missing permission of a refused request.
	Denied string
	// Duration is how long the request took.
	Duration time.Duration
	// Arguments are the request's arguments; logged only when the Auditor
	// was asked to, and then redacted.
	Arguments map[string]any
}

// Log writes one audit line.
func (a *Auditor) Log(r Record) {
	if a == nil {
		return
	}
	ev := a.log.Log()
	if r.Caller != "" { // none when authentication failed
		ev = ev.Str("caller", r.Caller)
	}
	ev = ev.Str("method", r.Method)
	for _, f := range [...]struct{ k, v string }{{"server", r.Server}, {"tool", r.Tool}, {"uri", config.RedactURI(r.URI)}, {"prompt", r.Prompt}, {"denied_permission", r.Denied}} {
		if f.v != "" {
			ev = ev.Str(f.k, f.v)
		}
	}
	ev = ev.Str("code", r.Code)
	if r.IsError != nil {
		ev = ev.Bool("is_error", *r.IsError)
	}
	ev = ev.Dur("duration", r.Duration)
	if a.arguments && r.Arguments != nil {
		ev = ev.Interface("arguments", Redact(r.Arguments))
	}
	ev.Msg("audit")
}

// secretWords are parts of argument names whose values are redacted.
var secretWords = []string{"token", "secret", "password", "passwd", "passphrase", "key", "auth", "credential", "cookie", "session", "private", "signature", "bearer"}

// Redacted replaces the value of an argument whose name looks secret.
const Redacted = "[REDACTED]"

// Redact returns a copy of args in which the value of every key that looks
// secret (it contains "token", "password", "key", "auth", ...), at any
// depth, is Redacted.
func Redact(args map[string]any) map[string]any {
	out := make(map[string]any, len(args))
	for k, v := range args {
		if looksSecret(k) {
			out[k] = Redacted
			continue
		}
		out[k] = redactValue(v)
	}
	return out
}

func redactValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return Redact(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = redactValue(e)
		}
		return out
	case map[string]string:
		out := make(map[string]any, len(v))
		for k, s := range v {
			out[k] = s
		}
		return Redact(out)
	}
	return v
}

// LooksSecret reports whether a field named key holds a value to redact:
// its name contains "token", "password", "key", "auth", ...
func LooksSecret(key string) bool { return looksSecret(key) }

func looksSecret(key string) bool {
	k := strings.ToLower(key)
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}
