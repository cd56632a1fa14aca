package mcpclient

import (
	"context"
	"time"
)

// inflight caps the calls in flight to one server. A call waits for a slot
// up to the queue timeout (or its own deadline, if sooner), then fails with
// ErrResourceExhausted: a flood of calls must not pile up without bound in
// front of one slow server.
type inflight struct {
	slots     chan struct{} // nil: no cap
	queueWait time.Duration
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
		return func() {}, nil
	}
	select {
	case l.slots <- struct{}{}:
		return l.release, nil
	default:
	}
	t := time.NewTimer(l.queueWait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return l.release, nil
	case <-t.C:
		return nil, errorf(ErrResourceExhausted, "server %q has %d calls in flight; none finished within %v", server, cap(l.slots), l.queueWait)
	case <-ctx.Done():
		// The cause tells a deadline, a cancellation and a stopped server
		// apart, and the edge maps each to its own code.
		return nil, errorf(ErrResourceExhausted, "server %q has %d calls in flight; none finished in time: %w", server, cap(l.slots), context.Cause(ctx))
	}
}

func (l *inflight) release() { <-l.slots }
