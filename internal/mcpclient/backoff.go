package mcpclient

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff spaces reconnect attempts: exponential from base up to max, each
// wait jittered by ±20% so that servers restarted together do not retry in
// lockstep.
type backoff struct {
	base, max, next time.Duration
}

func newBackoff(base, max time.Duration) *backoff {
	return &backoff{base: base, max: max, next: base}
}

func (b *backoff) reset() { b.next = b.base }

// wait sleeps for the next interval; it returns false if ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	d := time.Duration(float64(b.next) * (0.8 + 0.4*rand.Float64()))
	b.next = min(2*b.next, b.max)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// withCallDeadline bounds a call by timeout. When extendUpTo is longer,
// extend (called on progress) restarts the timeout, but never past
// extendUpTo from the start. Expiry cancels ctx with cause
// context.DeadlineExceeded.
func withCallDeadline(parent context.Context, timeout, extendUpTo time.Duration) (ctx context.Context, cancel, extend func()) {
	if extendUpTo <= timeout {
		ctx, cancel := context.WithTimeout(parent, timeout)
		return ctx, cancel, func() {}
	}
	hard, cancelHard := context.WithTimeout(parent, extendUpTo)
	ctx, cancelCause := context.WithCancelCause(hard)
	timer := time.AfterFunc(timeout, func() { cancelCause(context.DeadlineExceeded) })
	return ctx, func() {
			timer.Stop()
			cancelCause(context.Canceled)
			cancelHard()
		}, func() {
			timer.Reset(timeout)
		}
}
