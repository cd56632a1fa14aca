package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every test context; it only guards against hangs.
const testTimeout = 10 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func ptr(n uint64) *uint64 { return &n }

// mustNext reads one event and fails the test on error.
func mustNext(ctx context.Context, t *testing.T, s *Subscription) Event {
	t.Helper()
	e, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: got error %v, want an event", err)
	}
	return e
}

// publishN publishes n tools_changed events for server "s".
func publishN(b *Bus, n int) {
	for range n {
		b.Publish(Event{Server: "s", Kind: KindToolsChanged})
	}
}

// ringSize returns the ring's length and capacity.
func ringSize(b *Bus) (length, capacity int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.ring), cap(b.ring)
}

// waitWaiting waits until some subscriber is blocked in Next.
func waitWaiting(ctx context.Context, t *testing.T, b *Bus) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		b.mu.Lock()
		w := b.waiting
		b.mu.Unlock()
		if w {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for a blocked Next: %v", ctx.Err())
		case <-tick.C:
		}
	}
}

func TestKindString(t *testing.T) {
	tests := []struct {
		kind Kind
		want string
	}{
		{KindResourceUpdated, "resource_updated"},
		{KindToolsChanged, "tools_changed"},
		{KindPromptsChanged, "prompts_changed"},
		{KindResourcesChanged, "resources_changed"},
		{KindServerState, "server_state"},
		{KindLog, "log"},
		{KindGap, "gap"},
		{Kind(0), "Kind(0)"},
		{Kind(99), "Kind(99)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.kind.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPublishFillsFields(t *testing.T) {
	ctx := testContext(t)
	b := NewBus(nil)
	defer b.Close()
	if got := b.LastSequence(); got != 0 {
		t.Fatalf("LastSequence of an empty bus: got %d, want 0", got)
	}
	sub := b.Subscribe(Filter{}, nil)
	defer sub.Close()

	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := Event{
		Time: at, Server: "srv", Kind: KindLog,
		Level: "warning", Logger: "db", Data: map[string]any{"n": 1.0},
	}
	if got := b.Publish(in); got != 1 {
		t.Fatalf("first Publish: got sequence %d, want 1", got)
	}
	before := time.Now()
	if got := b.Publish(Event{Server: "srv", Kind: KindServerState, State: "ready"}); got != 2 {
		t.Fatalf("second Publish: got sequence %d, want 2", got)
	}
	if got := b.LastSequence(); got != 2 {
		t.Fatalf("LastSequence: got %d, want 2", got)
	}

	want := in
	want.Sequence = 1
	if diff := cmp.Diff(want, mustNext(ctx, t, sub)); diff != "" {
		t.Errorf("event 1 (-want +got):\n%s", diff)
	}
	e := mustNext(ctx, t, sub)
	if e.Sequence != 2 || e.State != "ready" {
		t.Errorf("event 2: got sequence %d state %q, want 2 %q", e.Sequence, e.State, "ready")
	}
	if e.Time.Before(before) {
		t.Errorf("event 2: got time %v, want at least %v (stamped by Publish)", e.Time, before)
	}
}

func TestPublishRejects(t *testing.T) {
	tests := []struct {
		name string
		e    Event
	}{
		{"zero kind", Event{Server: "s"}},
		{"gap", Event{Kind: KindGap, GapFrom: 1, GapTo: 2}},
		{"unknown kind", Event{Kind: Kind(42)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBus(nil)
			defer b.Close()
			if got := b.Publish(tt.e); got != 0 {
				t.Errorf("Publish: got sequence %d, want 0", got)
			}
			if got := b.LastSequence(); got != 0 {
				t.Errorf("LastSequence: got %d, want 0", got)
			}
		})
	}
}

func TestSequencesGapFreeConcurrent(t *testing.T) {
	ctx := testContext(t)
	const publishers, each = 8, 1000
	b := NewBus(&Options{BufferSize: publishers * each})
	defer b.Close()
	sub := b.Subscribe(Filter{}, nil)
	defer sub.Close()

	got := make([][]uint64, publishers)
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range each {
				got[p] = append(got[p], b.Publish(Event{Server: fmt.Sprint(p), Kind: KindLog, Data: float64(i)}))
			}
		})
	}
	wg.Wait()

	const total = publishers * each
	seen := make([]bool, total+1)
	for p, seqs := range got {
		for i, s := range seqs {
			if s == 0 || s > total {
				t.Fatalf("publisher %d: got sequence %d, want 1..%d", p, s, total)
			}
			if seen[s] {
				t.Fatalf("publisher %d: got sequence %d twice", p, s)
			}
			seen[s] = true
			if i > 0 && s <= seqs[i-1] {
				t.Fatalf("publisher %d: got sequence %d after %d, want increasing", p, s, seqs[i-1])
			}
		}
	}
	if got := b.LastSequence(); got != total {
		t.Fatalf("LastSequence: got %d, want %d", got, total)
	}

	// The subscriber sees every sequence once, in order, with times that
	// never go back, and each publisher's events in its own order.
	var prev time.Time
	nextData := make(map[string]float64)
	for want := uint64(1); want <= total; want++ {
		e := mustNext(ctx, t, sub)
		if e.Sequence != want {
			t.Fatalf("got sequence %d, want %d", e.Sequence, want)
		}
		if e.Time.Before(prev) {
			t.Fatalf("sequence %d: got time %v before the previous %v", want, e.Time, prev)
		}
		prev = e.Time
		if d := e.Data.(float64); d != nextData[e.Server] {
			t.Fatalf("publisher %s: got event %v, want %v", e.Server, d, nextData[e.Server])
		}
		nextData[e.Server]++
	}
}

func TestFilterMatch(t *testing.T) {
	ru := func(server, uri string) Event { return Event{Server: server, Kind: KindResourceUpdated, URI: uri} }
	ev := func(server string, k Kind) Event { return Event{Server: server, Kind: k} }
	gap := Event{Kind: KindGap, GapFrom: 1, GapTo: 3}
	resA := Resource{Server: "a", URI: "file:///x"}

	tests := []struct {
		name   string
		filter Filter
		event  Event
		want   bool
	}{
		{"zero filter passes tools", Filter{}, ev("a", KindToolsChanged), true},
		{"zero filter passes resource update", Filter{}, ru("a", "file:///x"), true},
		{"zero filter passes log", Filter{}, ev("b", KindLog), true},

		{"server listed", Filter{Servers: []string{"a", "b"}}, ev("b", KindPromptsChanged), true},
		{"server not listed", Filter{Servers: []string{"a"}}, ev("b", KindPromptsChanged), false},
		{"server filter on resource update", Filter{Servers: []string{"a"}}, ru("b", "file:///x"), false},

		{"kind listed", Filter{Kinds: []Kind{KindServerState, KindLog}}, ev("a", KindLog), true},
		{"kind not listed", Filter{Kinds: []Kind{KindServerState}}, ev("a", KindLog), false},
		{"server and kind both pass", Filter{Servers: []string{"a"}, Kinds: []Kind{KindLog}}, ev("a", KindLog), true},
		{"server passes kind does not", Filter{Servers: []string{"a"}, Kinds: []Kind{KindLog}}, ev("a", KindToolsChanged), false},
		{"kind passes server does not", Filter{Servers: []string{"a"}, Kinds: []Kind{KindLog}}, ev("b", KindLog), false},

		{"resources: listed update", Filter{Resources: []Resource{resA}}, ru("a", "file:///x"), true},
		{"resources: other uri", Filter{Resources: []Resource{resA}}, ru("a", "file:///y"), false},
		{"resources: same uri other server", Filter{Resources: []Resource{resA}}, ru("b", "file:///x"), false},
		{"resources: other kinds still pass", Filter{Resources: []Resource{resA}}, ev("b", KindToolsChanged), true},
		{"resources with kind resource_updated: listed", Filter{Kinds: []Kind{KindResourceUpdated}, Resources: []Resource{resA}}, ru("a", "file:///x"), true},
		{"resources with kind resource_updated: unlisted", Filter{Kinds: []Kind{KindResourceUpdated}, Resources: []Resource{resA}}, ru("a", "file:///y"), false},
		{"resources with kind resource_updated: other kind", Filter{Kinds: []Kind{KindResourceUpdated}, Resources: []Resource{resA}}, ev("a", KindToolsChanged), false},
		{"resources without the kind: listed update passes", Filter{Kinds: []Kind{KindToolsChanged}, Resources: []Resource{resA}}, ru("a", "file:///x"), true},
		{"resources without the kind: unlisted update", Filter{Kinds: []Kind{KindToolsChanged}, Resources: []Resource{resA}}, ru("a", "file:///y"), false},
		{"resources without the kind: listed kind", Filter{Kinds: []Kind{KindToolsChanged}, Resources: []Resource{resA}}, ev("a", KindToolsChanged), true},
		{"resources without the kind: other kind", Filter{Kinds: []Kind{KindToolsChanged}, Resources: []Resource{resA}}, ev("a", KindLog), false},
		{"resources override servers", Filter{Servers: []string{"b"}, Resources: []Resource{resA}}, ru("a", "file:///x"), true},
		{"resources and servers: other server's tools", Filter{Servers: []string{"b"}, Resources: []Resource{resA}}, ev("a", KindToolsChanged), false},
		{"kind resource_updated without resources", Filter{Kinds: []Kind{KindResourceUpdated}}, ru("c", "mem://z"), true},

		{"gap passes servers", Filter{Servers: []string{"a"}}, gap, true},
		{"gap passes kinds", Filter{Kinds: []Kind{KindLog}}, gap, true},
		{"gap passes everything", Filter{Servers: []string{"a"}, Kinds: []Kind{KindLog}, Resources: []Resource{resA}}, gap, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMatcher(tt.filter)
			if got := m.match(&tt.event); got != tt.want {
				t.Errorf("match(%+v, %v): got %v, want %v", tt.filter, tt.event.Kind, got, tt.want)
			}
		})
	}
}

func TestSubscriptionFilters(t *testing.T) {
	ctx := testContext(t)
	b := NewBus(nil)
	defer b.Close()
	f := Filter{
		Servers:   []string{"a"},
		Kinds:     []Kind{KindServerState},
		Resources: []Resource{{Server: "b", URI: "mem://r"}},
	}
	sub := b.Subscribe(f, nil)
	defer sub.Close()
	// The subscription keeps its own copy of the filter.
	f.Servers[0] = "b"

	var want []uint64
	// More filtered-out events than one scan batch, to cover rescans.
	for i := range 3 * scanBatch {
		b.Publish(Event{Server: "a", Kind: KindLog})
		b.Publish(Event{Server: "b", Kind: KindServerState, State: "ready"})
		b.Publish(Event{Server: "b", Kind: KindResourceUpdated, URI: "mem://other"})
		if i%50 == 0 {
			want = append(want, b.Publish(Event{Server: "a", Kind: KindServerState, State: "ready"}))
			want = append(want, b.Publish(Event{Server: "b", Kind: KindResourceUpdated, URI: "mem://r"}))
		}
	}
	for range 2 * scanBatch {
		b.Publish(Event{Server: "c", Kind: KindToolsChanged})
	}
	want = append(want, b.Publish(Event{Server: "a", Kind: KindServerState, State: "stopped"}))

	var got []uint64
	for range want {
		got = append(got, mustNext(ctx, t, sub).Sequence)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sequences (-want +got):\n%s", diff)
	}
}

func TestResumeAfterLastSeen(t *testing.T) {
	ctx := testContext(t)
	b := NewBus(nil)
	defer b.Close()

	first := b.Subscribe(Filter{}, nil)
	publishN(b, 10)
	var last uint64
	for range 5 {
		last = mustNext(ctx, t, first).Sequence
	}
	first.Close()
	if _, err := first.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: got %v, want ErrClosed", err)
	}
	publishN(b, 5) // missed while disconnected

	resumed := b.Subscribe(Filter{}, &last)
	defer resumed.Close()
	marker := b.Publish(Event{Server: "s", Kind: KindPromptsChanged})
	for want := last + 1; want <= marker; want++ {
		e := mustNext(ctx, t, resumed)
		if e.Sequence != want || e.Kind == KindGap {
			t.Fatalf("got %v event %d, want event %d", e.Kind, e.Sequence, want)
		}
	}
}

func TestSubscribeStart(t *testing.T) {
	// BufferSize 8: 19 events are published before Subscribe and event 20
	// after it, so when the subscriber reads, 13..20 are buffered and
	// 1..12 were evicted.
	const last = 20
	tests := []struct {
		name    string
		after   *uint64
		wantGap *Event // the first event, if a gap
		wantSeq uint64 // the first non-gap sequence
	}{
		{"nil is from now", nil, nil, 20},
		{"zero with eviction", ptr(0), &Event{Sequence: 12, Kind: KindGap, GapFrom: 1, GapTo: 12}, 13},
		{"evicted resume point", ptr(3), &Event{Sequence: 12, Kind: KindGap, GapFrom: 4, GapTo: 12}, 13},
		{"evicted by a later publish", ptr(11), &Event{Sequence: 12, Kind: KindGap, GapFrom: 12, GapTo: 12}, 13},
		{"just before the oldest", ptr(12), nil, 13},
		{"inside the buffer", ptr(17), nil, 18},
		{"last published", ptr(19), nil, 20},
		// A number the bus never gave out: whoever holds it saw none of
		// its events.
		{"beyond last: another daemon's", ptr(20), &Event{Sequence: 12, Kind: KindGap, GapFrom: 0, GapTo: 12}, 13},
		{"far beyond last", ptr(1 << 60), &Event{Sequence: 12, Kind: KindGap, GapFrom: 0, GapTo: 12}, 13},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			b := NewBus(&Options{BufferSize: 8})
			defer b.Close()
			publishN(b, last-1)
			sub := b.Subscribe(Filter{Servers: []string{"s"}}, tt.after)
			defer sub.Close()
			b.Publish(Event{Server: "s", Kind: KindToolsChanged})

			if tt.wantGap != nil {
				e := mustNext(ctx, t, sub)
				if diff := cmp.Diff(*tt.wantGap, e, cmp.FilterPath(func(p cmp.Path) bool {
					return p.Last().String() == ".Time"
				}, cmp.Ignore())); diff != "" {
					t.Fatalf("first event (-want +got):\n%s", diff)
				}
				if e.Time.IsZero() {
					t.Errorf("gap event: got zero time, want the delivery time")
				}
			}
			for want := tt.wantSeq; want <= last; want++ {
				if e := mustNext(ctx, t, sub); e.Sequence != want || e.Kind != KindToolsChanged {
					t.Fatalf("got %v event %d, want tools_changed event %d", e.Kind, e.Sequence, want)
				}
			}
		})
	}
}

func TestSubscribeEmptyBus(t *testing.T) {
	tests := []struct {
		name  string
		after *uint64
		gap   bool // a gap first: after is no number of this bus
	}{
		{"nil", nil, false},
		{"zero", ptr(0), false},
		{"beyond", ptr(7), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			b := NewBus(&Options{BufferSize: 4})
			defer b.Close()
			sub := b.Subscribe(Filter{}, tt.after)
			defer sub.Close()
			b.Publish(Event{Server: "s", Kind: KindToolsChanged})
			if tt.gap {
				if e := mustNext(ctx, t, sub); e.Kind != KindGap || e.Sequence != 0 || e.GapFrom != 0 || e.GapTo != 0 {
					t.Fatalf("got %+v, want a gap 0..0 (nothing of this bus missed, resumed from 0)", e)
				}
			}
			if e := mustNext(ctx, t, sub); e.Sequence != 1 || e.Kind != KindToolsChanged {
				t.Fatalf("got %v event %d, want tools_changed event 1", e.Kind, e.Sequence)
			}
		})
	}
}

// TestStalledSubscriber checks that a subscriber that never reads holds up
// neither Publish nor a subscriber that keeps up, that the ring stays
// bounded, and that the stalled one then gets a gap and the buffered tail.
func TestStalledSubscriber(t *testing.T) {
	const size, total = 256, 10_000
	// lag bounds how far the publisher runs ahead of the active reader, so
	// the reader keeps up with a small ring; the stalled subscriber gets
	// no such courtesy.
	const lag = size / 2
	ctx := testContext(t)
	b := NewBus(&Options{BufferSize: size})
	defer b.Close()

	stalled := b.Subscribe(Filter{}, nil)
	defer stalled.Close()
	active := b.Subscribe(Filter{}, nil)
	defer active.Close()

	credit := make(chan struct{}, lag)
	type result struct {
		seqs []uint64
		err  error
	}
	readDone := make(chan result, 1)
	go func() {
		var r result
		for range total {
			e, err := active.Next(ctx)
			if err != nil {
				r.err = err
				break
			}
			r.seqs = append(r.seqs, e.Sequence)
			<-credit
		}
		readDone <- r
	}()

	maxLen, maxCap := 0, 0
	for i := range total {
		select {
		case credit <- struct{}{}:
		case <-ctx.Done():
			t.Fatalf("publishing event %d: %v", i+1, ctx.Err())
		}
		b.Publish(Event{Server: "s", Kind: KindResourceUpdated, URI: "mem://r"})
		if i%97 == 0 {
			l, c := ringSize(b)
			maxLen, maxCap = max(maxLen, l), max(maxCap, c)
		}
	}
	if got := b.LastSequence(); got != total {
		t.Fatalf("LastSequence: got %d, want %d", got, total)
	}
	l, c := ringSize(b)
	maxLen, maxCap = max(maxLen, l), max(maxCap, c)
	if maxLen > size || maxCap > size {
		t.Errorf("ring: got up to length %d capacity %d, want at most %d", maxLen, maxCap, size)
	}
	if l != size {
		t.Errorf("ring length: got %d, want %d", l, size)
	}

	r := <-readDone
	if r.err != nil {
		t.Fatalf("active reader: got error %v after %d events", r.err, len(r.seqs))
	}
	for i, s := range r.seqs {
		if s != uint64(i+1) {
			t.Fatalf("active reader event %d: got sequence %d, want %d", i, s, i+1)
		}
	}

	gap := mustNext(ctx, t, stalled)
	if gap.Kind != KindGap || gap.GapFrom != 1 || gap.GapTo != total-size {
		t.Fatalf("stalled reader: got %v %d..%d, want gap 1..%d", gap.Kind, gap.GapFrom, gap.GapTo, total-size)
	}
	for want := uint64(total - size + 1); want <= total; want++ {
		if e := mustNext(ctx, t, stalled); e.Sequence != want || e.Kind != KindResourceUpdated {
			t.Fatalf("stalled reader: got %v event %d, want resource_updated event %d", e.Kind, e.Sequence, want)
		}
	}
}

// TestOthersGetEverything publishes as fast as possible, with a stalled
// subscriber, while another reads concurrently; with a ring larger than
// the burst, the reader gets every event in order.
func TestOthersGetEverything(t *testing.T) {
	const total = 10_000
	ctx := testContext(t)
	b := NewBus(&Options{BufferSize: 16384})
	defer b.Close()
	stalled := b.Subscribe(Filter{}, nil)
	defer stalled.Close()
	active := b.Subscribe(Filter{}, nil)
	defer active.Close()

	readDone := make(chan error, 1)
	go func() {
		for want := uint64(1); want <= total; want++ {
			e, err := active.Next(ctx)
			if err != nil {
				readDone <- err
				return
			}
			if e.Sequence != want || e.Kind == KindGap {
				readDone <- fmt.Errorf("got %v event %d, want event %d", e.Kind, e.Sequence, want)
				return
			}
		}
		readDone <- nil
	}()
	publishN(b, total) // returns although one subscriber never reads
	if err := <-readDone; err != nil {
		t.Fatalf("active reader: %v", err)
	}
}

func TestRingGrowthBounded(t *testing.T) {
	for _, size := range []int{1, 3, 16, 100, 4096} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			ctx := testContext(t)
			b := NewBus(&Options{BufferSize: size})
			defer b.Close()
			for i := 1; i <= 2*size+5; i++ {
				b.Publish(Event{Server: "s", Kind: KindToolsChanged})
				l, c := ringSize(b)
				if want := min(i, size); l != want || c > size {
					t.Fatalf("after %d events: got length %d capacity %d, want length %d capacity at most %d", i, l, c, want, size)
				}
			}
			// Everything buffered is still readable, in order.
			sub := b.Subscribe(Filter{}, ptr(uint64(size+5)))
			defer sub.Close()
			for want := uint64(size + 6); want <= uint64(2*size+5); want++ {
				if e := mustNext(ctx, t, sub); e.Sequence != want {
					t.Fatalf("got event %d, want %d", e.Sequence, want)
				}
			}
		})
	}
}

// bufferedBytes returns the byte count the bus keeps and the sum of the
// sizes of the events it holds, which must agree.
func bufferedBytes(t *testing.T, b *Bus) int64 {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var sum int64
	for seq := b.first; seq <= b.last; seq++ {
		sl := b.ring[b.index(seq)]
		if sl.ev.Sequence != seq {
			t.Fatalf("slot of event %d holds event %d", seq, sl.ev.Sequence)
		}
		sum += sl.size
	}
	for _, sl := range b.ring {
		if sl.ev.Sequence != 0 && sl.ev.Sequence < b.first && sl.ev.Data != nil {
			t.Fatalf("evicted event %d still holds its data", sl.ev.Sequence)
		}
	}
	if sum != b.bytes {
		t.Fatalf("buffered events' sizes sum to %d, the bus counts %d", sum, b.bytes)
	}
	return sum
}

// TestBufferBytes fills a bus whose byte budget holds fewer events than
// its count allows: the oldest are evicted by size, a reader that fell
// behind gets a gap for them, and an event larger than the whole budget
// is still kept, alone.
func TestBufferBytes(t *testing.T) {
	ctx := testContext(t)
	logEvent := func(n int) Event {
		return Event{Server: "s", Kind: KindLog, Level: "info", Data: map[string]any{"text": strings.Repeat("x", n), "n": 1.0}}
	}
	one := logEvent(1000)
	perEvent := one.Size()
	if perEvent < 1000 || perEvent > 1400 {
		t.Fatalf("Size of an event with 1000 bytes of data: got %d, want about 1000 plus a little", perEvent)
	}
	const budgetEvents = 10
	b := NewBus(&Options{BufferSize: 100, BufferBytes: budgetEvents * perEvent})
	defer b.Close()
	behind := b.Subscribe(Filter{}, nil)
	defer behind.Close()

	for range 50 {
		b.Publish(logEvent(1000))
		if got := bufferedBytes(t, b); got > budgetEvents*perEvent {
			t.Fatalf("buffered %d bytes, budget %d", got, budgetEvents*perEvent)
		}
	}
	gap := mustNext(ctx, t, behind)
	if gap.Kind != KindGap || gap.GapFrom != 1 || gap.GapTo != 50-budgetEvents {
		t.Fatalf("reader behind: got %v %d..%d, want gap 1..%d", gap.Kind, gap.GapFrom, gap.GapTo, 50-budgetEvents)
	}
	for want := uint64(50 - budgetEvents + 1); want <= 50; want++ {
		if e := mustNext(ctx, t, behind); e.Sequence != want || e.Kind != KindLog {
			t.Fatalf("reader behind: got %v event %d, want log event %d", e.Kind, e.Sequence, want)
		}
	}

	// One event over the whole budget evicts everything else but stays.
	huge := logEvent(100 * 1000)
	seq := b.Publish(huge)
	if got, want := bufferedBytes(t, b), huge.Size(); got != want {
		t.Fatalf("after a huge event: buffered %d bytes, want its size %d", got, want)
	}
	if e := mustNext(ctx, t, behind); e.Sequence != seq {
		t.Fatalf("reader: got event %d, want the huge event %d", e.Sequence, seq)
	}
	// The next small one evicts it.
	b.Publish(logEvent(1000))
	if got := bufferedBytes(t, b); got != perEvent {
		t.Fatalf("after a small event: buffered %d bytes, want %d", got, perEvent)
	}

	// Count still bounds small events, and eviction by count keeps the
	// byte count right.
	for range 300 {
		b.Publish(Event{Server: "s", Kind: KindToolsChanged})
	}
	bufferedBytes(t, b)
	if l, _ := ringSize(b); l != 100 {
		t.Errorf("ring length: got %d, want 100", l)
	}
}

func TestEventSize(t *testing.T) {
	small := (&Event{Kind: KindToolsChanged}).Size()
	for _, tc := range []struct {
		data any
		min  int64 // at least this much more than an event without data
	}{
		{strings.Repeat("a", 5000), 5000},
		{[]any{strings.Repeat("a", 3000), strings.Repeat("b", 3000)}, 6000},
		{map[string]any{strings.Repeat("k", 2000): map[string]any{"v": strings.Repeat("v", 2000)}}, 4000},
		{[]byte(strings.Repeat("r", 7000)), 7000},
	} {
		e := Event{Kind: KindLog, Data: tc.data}
		if got := e.Size() - small; got < tc.min || got > tc.min+200 {
			t.Errorf("Size with data %T: got %d more than without, want about %d", tc.data, got, tc.min)
		}
	}
}

func TestDefaultBufferSize(t *testing.T) {
	for _, opts := range []*Options{nil, {}, {BufferSize: -1}} {
		b := NewBus(opts)
		if b.size != DefaultBufferSize {
			t.Errorf("NewBus(%+v): got size %d, want %d", opts, b.size, DefaultBufferSize)
		}
		b.Close()
	}
}

func TestUnblockNext(t *testing.T) {
	tests := []struct {
		name    string
		unblock func(b *Bus, s *Subscription, cancel context.CancelFunc)
		want    error
	}{
		{"bus close", func(b *Bus, _ *Subscription, _ context.CancelFunc) { b.Close() }, ErrClosed},
		{"subscription close", func(_ *Bus, s *Subscription, _ context.CancelFunc) { s.Close() }, ErrClosed},
		{"context cancel", func(_ *Bus, _ *Subscription, cancel context.CancelFunc) { cancel() }, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			b := NewBus(nil)
			defer b.Close()
			// Events the filter drops must not wake the reader for good.
			sub := b.Subscribe(Filter{Servers: []string{"nobody"}}, nil)
			defer sub.Close()
			nextCtx, cancel := context.WithCancel(ctx)
			defer cancel()

			done := make(chan error, 1)
			go func() {
				_, err := sub.Next(nextCtx)
				done <- err
			}()
			waitWaiting(ctx, t, b)
			publishN(b, 3)
			waitWaiting(ctx, t, b) // back to sleep after the dropped events
			tt.unblock(b, sub, cancel)

			select {
			case err := <-done:
				if !errors.Is(err, tt.want) {
					t.Fatalf("Next: got %v, want %v", err, tt.want)
				}
			case <-ctx.Done():
				t.Fatalf("Next still blocked: %v", ctx.Err())
			}
			// Closing twice, in any order, is fine.
			sub.Close()
			b.Close()
			sub.Close()
		})
	}
}

func TestClosedBus(t *testing.T) {
	ctx := testContext(t)
	b := NewBus(nil)
	publishN(b, 3)
	sub := b.Subscribe(Filter{}, ptr(0))
	defer sub.Close()
	b.Close()
	b.Close()

	if _, err := sub.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Next on a closed bus: got %v, want ErrClosed", err)
	}
	if got := b.Publish(Event{Server: "s", Kind: KindToolsChanged}); got != 0 {
		t.Errorf("Publish after Close: got sequence %d, want 0", got)
	}
	if got := b.LastSequence(); got != 3 {
		t.Errorf("LastSequence after Close: got %d, want 3", got)
	}
	late := b.Subscribe(Filter{}, nil)
	defer late.Close()
	if _, err := late.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Next of a subscription made after Close: got %v, want ErrClosed", err)
	}
}

func TestNextCancelledContext(t *testing.T) {
	b := NewBus(nil)
	defer b.Close()
	publishN(b, 1)
	sub := b.Subscribe(Filter{}, ptr(0))
	defer sub.Close()
	ctx, cancel := context.WithCancel(testContext(t))
	cancel()
	if _, err := sub.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context: got %v, want context.Canceled", err)
	}
	// The event is not lost.
	if e := mustNext(testContext(t), t, sub); e.Sequence != 1 {
		t.Fatalf("got event %d, want 1", e.Sequence)
	}
}

// BenchmarkPublish measures Publish with idle subscribers (subscribed, not
// reading); the cost should not depend on how many there are.
func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{0, 10, 100} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			bus := NewBus(nil)
			defer bus.Close()
			for range n {
				s := bus.Subscribe(Filter{}, nil)
				defer s.Close()
			}
			e := Event{Server: "srv", Kind: KindResourceUpdated, URI: "file:///a"}
			b.ReportAllocs()
			for b.Loop() {
				bus.Publish(e)
			}
		})
	}
}

// TestFilterPolls: poll ids narrow poll results, explicitly like
// resources, and leave other events to the other filters.
func TestFilterPolls(t *testing.T) {
	m := newMatcher(Filter{Kinds: []Kind{KindServerState}, Polls: []string{"poll-1"}})
	for _, tt := range []struct {
		ev   Event
		want bool
	}{
		{Event{Kind: KindPollResult, Server: "a", PollID: "poll-1"}, true},
		{Event{Kind: KindPollResult, Server: "a", PollID: "poll-2"}, false},
		{Event{Kind: KindServerState, Server: "a"}, true},
		{Event{Kind: KindLog, Server: "a"}, false},
	} {
		if got := m.match(&tt.ev); got != tt.want {
			t.Errorf("match %+v: got %v, want %v", tt.ev, got, tt.want)
		}
	}
	all := newMatcher(Filter{})
	if !all.match(&Event{Kind: KindPollResult, PollID: "poll-9"}) {
		t.Error("the zero filter must pass poll results")
	}
}

// TestSizeCountsRawJSON: a poll's result travels as json.RawMessage, and
// the byte budget must see its size.
func TestSizeCountsRawJSON(t *testing.T) {
	ev := Event{Kind: KindPollResult, Data: json.RawMessage(make([]byte, 10000))}
	if got := ev.Size(); got < 10000 {
		t.Errorf("Size of an event with 10000 bytes of JSON: got %d", got)
	}
}

// TestOnPublish: the OnPublish func hears of every event the bus stores,
// once, by kind, and of nothing it refuses; a later func replaces it.
func TestOnPublish(t *testing.T) {
	b := NewBus(nil)
	var mu sync.Mutex
	seen := map[Kind]int{}
	b.OnPublish(func(k Kind) {
		mu.Lock()
		defer mu.Unlock()
		seen[k]++
	})
	for _, k := range []Kind{KindServerState, KindPollResult, KindResourceUpdated, KindPollResult, KindGap, 0} {
		b.Publish(Event{Server: "s", Kind: k})
	}
	mu.Lock()
	want := map[Kind]int{KindServerState: 1, KindPollResult: 2, KindResourceUpdated: 1}
	if !maps.Equal(seen, want) {
		t.Errorf("told %v, want %v", seen, want)
	}
	mu.Unlock()

	other := 0
	b.OnPublish(func(Kind) { other++ })
	b.Publish(Event{Server: "s", Kind: KindLog})
	b.Close()
	b.Publish(Event{Server: "s", Kind: KindLog})
	if other != 1 || seen[KindLog] != 0 {
		t.Errorf("after the func was replaced and the bus closed: new func told %d times, old %d; want 1 and 0", other, seen[KindLog])
	}
}

// TestFirstSequence: a bus that starts at a later number treats 0 as
// "everything buffered", a smaller number (an earlier run's) as missed
// events, and a number it never reached as "from now".
func TestFirstSequence(t *testing.T) {
	ctx := context.Background()
	b := NewBus(&Options{FirstSequence: 1000})
	if got := b.LastSequence(); got != 999 {
		t.Fatalf("LastSequence before any event: got %d, want 999", got)
	}
	for range 3 {
		b.Publish(Event{Kind: KindLog})
	}
	first := func(after *uint64) Event {
		t.Helper()
		sub := b.Subscribe(Filter{}, after)
		defer sub.Close()
		if after != nil && *after > b.LastSequence() {
			b.Publish(Event{Kind: KindLog})
		}
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	if ev := first(ptr(0)); ev.Kind != KindLog || ev.Sequence != 1000 {
		t.Errorf("after 0: got %+v, want event 1000", ev)
	}
	if ev := first(ptr(5)); ev.Kind != KindGap || ev.GapFrom != 6 || ev.GapTo != 999 {
		t.Errorf("after 5, an earlier run's number: got %+v, want a gap 6..999", ev)
	}
	if ev := first(ptr(1001)); ev.Kind != KindLog || ev.Sequence != 1002 {
		t.Errorf("after 1001: got %+v, want event 1002", ev)
	}
	if ev := first(ptr(5000)); ev.Kind != KindGap || ev.GapFrom != 999 || ev.GapTo != 999 || ev.Sequence != 999 {
		t.Errorf("after 5000, never given out: got %+v, want a gap 999..999, before the first event", ev)
	}
}

// TestFirstSequenceWraps: the ring wraps and evicts the same way from any
// first sequence.
func TestFirstSequenceWraps(t *testing.T) {
	b := NewBus(&Options{FirstSequence: 1_700_000_000_000_001, BufferSize: 4})
	for range 10 {
		b.Publish(Event{Kind: KindLog})
	}
	sub := b.Subscribe(Filter{}, ptr(0))
	defer sub.Close()
	var got []uint64
	for range 5 {
		ev, err := sub.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Sequence)
		if ev.Kind == KindGap && (ev.GapFrom != 1_700_000_000_000_001 || ev.GapTo != 1_700_000_000_000_006) {
			t.Errorf("gap: got %d..%d, want the six evicted events", ev.GapFrom, ev.GapTo)
		}
	}
	want := []uint64{1_700_000_000_000_006, 1_700_000_000_000_007, 1_700_000_000_000_008, 1_700_000_000_000_009, 1_700_000_000_000_010}
	if !slices.Equal(got, want) {
		t.Errorf("sequences: got %v, want %v", got, want)
	}
}

// TestGapOnlyForWantedEvents: a subscriber whose filter nothing evicted
// would have passed resumes, or falls behind, without a gap; one that
// missed an event it wanted, or whose resume point is older than what the
// bus remembers, gets one.
func TestGapOnlyForWantedEvents(t *testing.T) {
	ctx := testContext(t)
	quiet := Resource{Server: "files", URI: "file:///quiet"}
	// Only updates of quiet: a stream's servers and kinds, when empty,
	// let everything else through.
	narrow := Filter{Kinds: []Kind{KindResourceUpdated}, Resources: []Resource{quiet}}
	// first is the first event a subscriber with f resuming after after
	// reads, once an update of quiet and a log of "third" are published.
	first := func(t *testing.T, b *Bus, f Filter, after uint64) Event {
		t.Helper()
		sub := b.Subscribe(f, &after)
		defer sub.Close()
		b.Publish(Event{Server: quiet.Server, Kind: KindResourceUpdated, URI: quiet.URI})
		b.Publish(Event{Server: "third", Kind: KindLog})
		return mustNext(testContext(t), t, sub)
	}
	isUpdate := func(e Event) bool { return e.Kind == KindResourceUpdated && e.URI == quiet.URI }

	t.Run("unrelated events evicted", func(t *testing.T) {
		b := NewBus(&Options{BufferSize: 8})
		b.Publish(Event{Server: "other", Kind: KindLog})
		resumeAt := b.LastSequence()
		for i := range 50 {
			b.Publish(Event{Server: "other", Kind: KindLog})
			b.Publish(Event{Server: quiet.Server, Kind: KindResourceUpdated, URI: fmt.Sprint("file:///other/", i)})
			b.Publish(Event{Server: "other", Kind: KindPollResult, PollID: "p"})
		}
		if e := first(t, b, narrow, resumeAt); !isUpdate(e) {
			t.Errorf("narrow subscriber: got %+v, want the update of %s and no gap", e, quiet.URI)
		}
		if e := first(t, b, Filter{Servers: []string{"third"}, Kinds: []Kind{KindLog}}, 0); e.Kind == KindGap {
			t.Errorf("subscriber of another server's logs, from 0: got %+v, want no gap", e)
		}
		if e := first(t, b, Filter{Polls: []string{"p"}}, resumeAt); e.Kind != KindGap {
			t.Errorf("subscriber of the evicted poll: got %+v, want a gap", e)
		}
		if e := first(t, b, Filter{Servers: []string{"other"}}, resumeAt); e.Kind != KindGap {
			t.Errorf("subscriber of the evicted logs' server: got %+v, want a gap", e)
		}
		if e := first(t, b, Filter{}, resumeAt); e.Kind != KindGap {
			t.Errorf("unfiltered subscriber: got %+v, want a gap", e)
		}
	})
	t.Run("a wanted event evicted", func(t *testing.T) {
		b := NewBus(&Options{BufferSize: 8})
		b.Publish(Event{Server: "other", Kind: KindLog})
		resumeAt := b.LastSequence()
		b.Publish(Event{Server: quiet.Server, Kind: KindResourceUpdated, URI: quiet.URI})
		for range 20 {
			b.Publish(Event{Server: "other", Kind: KindLog})
		}
		if e := first(t, b, narrow, resumeAt); e.Kind != KindGap || e.GapFrom != resumeAt+1 {
			t.Errorf("got %+v, want a gap from %d", e, resumeAt+1)
		}
		// Resuming after the evicted update, it missed nothing it wanted.
		if e := first(t, b, narrow, resumeAt+1); !isUpdate(e) {
			t.Errorf("after the evicted update: got %+v, want the next update and no gap", e)
		}
	})
	t.Run("a live subscriber falls behind", func(t *testing.T) {
		b := NewBus(&Options{BufferSize: 8})
		sub := b.Subscribe(narrow, nil)
		defer sub.Close()
		for range 50 {
			b.Publish(Event{Server: "other", Kind: KindLog})
		}
		b.Publish(Event{Server: quiet.Server, Kind: KindResourceUpdated, URI: quiet.URI})
		if e := mustNext(ctx, t, sub); !isUpdate(e) {
			t.Errorf("got %+v, want the update and no gap", e)
		}
	})
	t.Run("an earlier run's resume point", func(t *testing.T) {
		b := NewBus(&Options{BufferSize: 8, FirstSequence: 100})
		if e := first(t, b, narrow, 5); e.Kind != KindGap || e.GapFrom != 6 || e.GapTo != 99 {
			t.Errorf("got %+v, want a gap 6..99", e)
		}
	})
	t.Run("more keys than the bus remembers", func(t *testing.T) {
		b := NewBus(&Options{BufferSize: 8})
		b.Publish(Event{Server: "other", Kind: KindLog})
		resumeAt := b.LastSequence()
		for i := range maxDroppedKeys + 20 {
			b.Publish(Event{Server: "other", Kind: KindResourceUpdated, URI: fmt.Sprint("file:///", i)})
		}
		if e := first(t, b, narrow, resumeAt); e.Kind != KindGap {
			t.Errorf("from before the forgotten keys: got %+v, want a gap", e)
		}
		if e := first(t, b, narrow, b.LastSequence()-4); !isUpdate(e) {
			t.Errorf("from after them: got %+v, want the update and no gap", e)
		}
	})
	t.Run("longer keys than the bus remembers", func(t *testing.T) {
		b := NewBus(&Options{BufferSize: 2})
		b.Publish(Event{Server: "other", Kind: KindLog})
		resumeAt := b.LastSequence()
		long := strings.Repeat("x", maxDroppedKeyBytes/4)
		for i := range 8 {
			b.Publish(Event{Server: "other", Kind: KindResourceUpdated, URI: fmt.Sprint(long, i)})
		}
		if e := first(t, b, narrow, resumeAt); e.Kind != KindGap {
			t.Errorf("got %+v, want a gap", e)
		}
		if len(b.dropped.last) > 4 || b.dropped.bytes > maxDroppedKeyBytes {
			t.Errorf("summary holds %d keys of %d bytes, want at most 4 and %d", len(b.dropped.last), b.dropped.bytes, maxDroppedKeyBytes)
		}
	})
}
