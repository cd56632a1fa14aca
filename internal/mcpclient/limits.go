package mcpclient

import (
	"context"
	"iter"
	"maps"
	"slices"
	"sync/atomic"
	"time"
)

// inflight caps the calls in flight to one server. A call waits for a slot
// up to the queue timeout (or its own deadline, if sooner), then fails with
// ErrQueueTimeout (of kind ErrResourceExhausted): a flood of calls must
// not pile up without bound in front of one slow server. It counts the calls running and waiting, and
// the rejected ones, for the metrics.
type inflight struct {
	slots     chan struct{} // nil: no cap
	queueWait time.Duration

	running, waiting atomic.Int64
	rejected         atomic.Uint64
}

func newInflight(max int, queueWait time.Duration) *inflight {
	l := &inflight{queueWait: queueWait}
	if max > 0 {
		l.slots = make(chan struct{}, max)
	}
	return l
}

// acquire takes a slot; release gives it back.
func (l *inflight) acquire(ctx context.Context, server string) (release func(), err error) {
	if l.slots == nil {
		l.running.Add(1)
		return l.release, nil
	}
	select {
	case l.slots <- struct{}{}:
		l.running.Add(1)
		return l.release, nil
	default:
	}
	if l.queueWait < 0 {
		l.rejected.Add(1)
		return nil, errorf(ErrQueueTimeout, "server %q has %d calls in flight, and calls do not wait for a slot", server, cap(l.slots))
	}
	l.waiting.Add(1)
	defer l.waiting.Add(-1)
	t := time.NewTimer(l.queueWait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		l.running.Add(1)
		return l.release, nil
	case <-t.C:
		l.rejected.Add(1)
		return nil, errorf(ErrQueueTimeout, "server %q has %d calls in flight; none finished within %v", server, cap(l.slots), l.queueWait)
	case <-ctx.Done():
		// The cause tells a deadline, a cancellation and a stopped server
		// apart, and the edge maps each to its own code.
		return nil, errorf(ErrResourceExhausted, "server %q has %d calls in flight; none finished in time: %w", server, cap(l.slots), context.Cause(ctx))
	}
}

func (l *inflight) release() {
	l.running.Add(-1)
	if l.slots != nil {
		<-l.slots
	}
}

// MaxJSONDepth bounds how deeply a caller's JSON may nest, counting
// objects and arrays, the outermost one included. A server refuses a
// message nested deeper than its decoder goes, and many end the session
// over it: the call fails for the caller and, once mcpd restarts the
// server a few times, the server fails for everyone. Decoders stop early:
// Rust's serde_json (rmcp servers) at 128 levels for the whole message,
// the JSON-RPC envelope taking 3 of them; the Go SDK at 1000; Python's
// json near its recursion limit, 1000 frames. Tool arguments seldom nest
// ten levels.
const MaxJSONDepth = 100

// JSONTooDeep reports whether v, JSON as encoding/json decodes it into an
// any, nests objects and arrays deeper than MaxJSONDepth.
func JSONTooDeep(v any) bool { return jsonTooDeep(v, 1) }

func jsonTooDeep(v any, depth int) bool {
	var elems iter.Seq[any]
	switch x := v.(type) {
	case map[string]any:
		elems = maps.Values(x)
	case []any:
		elems = slices.Values(x)
	default:
		return false
	}
	if depth > MaxJSONDepth {
		return true
	}
	for e := range elems {
		if jsonTooDeep(e, depth+1) {
			return true
		}
	}
	return false
}
