package transport

import (
	"context"
	"sync/atomic"
)

// A request that never reached its server can be sent again on a new
// session without risk; one that may have reached it may have run. The
// transports that know when bytes leave (the stdio connection here, and
// mcpd's HTTP client) mark the request's SendRecord at that moment, so that
// a caller can tell the two apart after the session ended.

// SendRecord says whether any byte of one request may have reached its
// server, and whether the server refused the request itself unrun. Its
// methods are safe for concurrent use.
type SendRecord struct{ sent, refused atomic.Bool }

type sendRecordKey struct{}

// WithSendRecord returns a context whose request is recorded in the
// returned SendRecord by transports that track sends.
func WithSendRecord(ctx context.Context) (context.Context, *SendRecord) {
	r := &SendRecord{}
	return context.WithValue(ctx, sendRecordKey{}, r), r
}

// SendRecordFrom returns ctx's SendRecord, or nil.
func SendRecordFrom(ctx context.Context) *SendRecord {
	r, _ := ctx.Value(sendRecordKey{}).(*SendRecord)
	return r
}

// MarkSent records that bytes of ctx's request may have reached the
// server. Without a SendRecord in ctx it does nothing.
func MarkSent(ctx context.Context) {
	if r := SendRecordFrom(ctx); r != nil {
		r.MarkSent()
	}
}

// MarkSent records that bytes of the request may have reached the server.
func (r *SendRecord) MarkSent() { r.sent.Store(true) }

// Sent reports whether bytes of the request may have reached the server.
func (r *SendRecord) Sent() bool { return r.sent.Load() }

// MarkRefused records that the server answered this very request that it
// did not run it (it does not know its session, or it turned the request
// away).
func (r *SendRecord) MarkRefused() { r.refused.Store(true) }

// Refused reports whether the server refused the request unrun. A session
// that ends fails every request in flight on it, so only this request's
// own answer tells that it did not run.
func (r *SendRecord) Refused() bool { return r.refused.Load() }
