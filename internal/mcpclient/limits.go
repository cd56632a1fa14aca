package mcpclient

import (
	"context"
	"sync/atomic"
	"time"
)

// inflight caps the calls in flight to one server. A call waits for a slot
// up to the queue timeout (or its own deadline, if sooner), then fails with
// ErrQueueTimeout (of kind ErrResourceExhausted): a flood of calls must not pile up without bound in
// front of one slow server. It counts the calls running and waiting, and
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
