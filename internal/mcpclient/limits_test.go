package mcpclient

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestInflightQueueTimeout: a call that waits out the queue timeout fails
// with ErrQueueTimeout, which is ErrResourceExhausted too; one whose own
// context ends first fails with that context's cause, not ErrQueueTimeout.
func TestInflightQueueTimeout(t *testing.T) {
	l := newInflight(1, time.Millisecond)
	ctx := testContext(t)
	release, err := l.acquire(ctx, "s")
	if err != nil {
		t.Fatalf("the first call: %v", err)
	}
	defer release()

	_, err = l.acquire(ctx, "s")
	if !errors.Is(err, ErrQueueTimeout) || !errors.Is(err, ErrResourceExhausted) {
		t.Errorf("a call that waited out the queue timeout: got %v, want ErrQueueTimeout and ErrResourceExhausted", err)
	}

	// A queue timeout far beyond the test's: only the context can end the
	// wait.
	l = newInflight(1, time.Hour)
	release, err = l.acquire(ctx, "s")
	if err != nil {
		t.Fatalf("the first call: %v", err)
	}
	defer release()
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.acquire(done, "s")
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrQueueTimeout) {
		t.Errorf("a call cancelled while it waited: got %v, want context.Canceled, not ErrQueueTimeout", err)
	}
}
