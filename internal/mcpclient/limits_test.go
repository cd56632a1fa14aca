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

// TestJSONTooDeep: MaxJSONDepth levels of objects or arrays pass, one
// more does not; scalars do not count.
func TestJSONTooDeep(t *testing.T) {
	nest := func(levels int, wrap func(any) any) any {
		var v any = 1.5
		for range levels {
			v = wrap(v)
		}
		return v
	}
	inObject := func(v any) any { return map[string]any{"k": v} }
	inArray := func(v any) any { return []any{"s", v} }
	for _, c := range []struct {
		name string
		v    any
		want bool
	}{
		{"objects at the bound", nest(MaxJSONDepth, inObject), false},
		{"objects over it", nest(MaxJSONDepth+1, inObject), true},
		{"arrays over it", nest(MaxJSONDepth+1, inArray), true},
		{"mixed at the bound", nest(MaxJSONDepth/2, func(v any) any { return inArray(inObject(v)) }), false},
		{"a scalar", "deep", false},
	} {
		if got := JSONTooDeep(c.v); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
