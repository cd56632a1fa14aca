package events

import (
	"context"
	"sync"
	"time"
)

// DefaultBufferSize is the number of events a Bus keeps when
// Options.BufferSize is not set.
const DefaultBufferSize = 4096

// DefaultBufferBytes is about how many bytes of events a Bus keeps when
// Options.BufferBytes is not set.
const DefaultBufferBytes = 16 << 20

// scanBatch bounds how many filtered-out events Next inspects per hold of
// the bus lock, so a narrow filter over a full ring never holds up Publish
// for long.
const scanBatch = 64

// Options configures a Bus. The zero value and nil use the defaults.
type Options struct {
	// BufferSize is how many of the most recent events the bus keeps for
	// slow and resuming subscribers; DefaultBufferSize when <= 0.
	BufferSize int
	// BufferBytes bounds the buffered events' size (see Event.Size):
	// Publish evicts the oldest events while the buffer holds more, though
	// it always keeps the newest one. DefaultBufferBytes when <= 0.
	BufferBytes int64
	// FirstSequence is the sequence of the first event; 1 when 0. A daemon
	// sets it from the time it started (BootSequence), so that it never
	// gives out a number an earlier run of it gave out: a client resuming
	// with such a number gets a gap, not other events under old numbers.
	FirstSequence uint64
}

// BootSequence is a FirstSequence for a bus that starts now: the Unix time
// in microseconds, plus one. It grows with every restart as long as the
// clock does not go back, and stays below 2^53 (exact in JavaScript
// numbers) for two more centuries.
func BootSequence() uint64 {
	return uint64(time.Now().UnixMicro()) + 1
}

// Bus is the per-daemon event bus. Publish, LastSequence, Subscribe and
// Close may be called from any goroutine, concurrently.
type Bus struct {
	size     int   // ring capacity, fixed
	maxBytes int64 // budget of the buffered events' sizes, fixed

	mu sync.Mutex
	// ring holds the events last-len(ring)+1 .. last; the event with
	// sequence s is at ring[(s-start)%size]. It grows up to size and is then
	// overwritten in place, so the bus never holds more than size events.
	//
	// Events older than first were evicted: their slots are zeroed, so
	// that their data can be collected. first is last+1 when nothing is
	// buffered.
	ring  []slot
	start uint64 // sequence of the bus's first event (Options.FirstSequence)
	first uint64
	last  uint64 // sequence of the last published event; start-1 before the first
	bytes int64  // the sum of the buffered events' sizes
	// wake is closed (and replaced) by Publish to wake every waiting
	// subscriber at once; waiting says whether anyone took it since, so an
	// unwatched Publish allocates nothing.
	wake    chan struct{}
	waiting bool
	closed  bool
	// published, if set, is told the kind of every event Publish stores.
	published func(Kind)
	// dropped is what the bus remembers of the events it evicted.
	dropped droppedSummary
}

// NewBus returns an empty bus. opts may be nil.
func NewBus(opts *Options) *Bus {
	size, maxBytes := DefaultBufferSize, int64(DefaultBufferBytes)
	if opts != nil && opts.BufferSize > 0 {
		size = opts.BufferSize
	}
	if opts != nil && opts.BufferBytes > 0 {
		maxBytes = opts.BufferBytes
	}
	first := uint64(1)
	if opts != nil && opts.FirstSequence > 0 {
		first = opts.FirstSequence
	}
	return &Bus{
		size: size, maxBytes: maxBytes, start: first, first: first, last: first - 1, wake: make(chan struct{}),
		// Nothing is known of the events before this bus: those of an
		// earlier run of the daemon.
		dropped: droppedSummary{floor: first - 1},
	}
}

// Publish appends e to the bus and returns its sequence. It sets
// e.Sequence, and e.Time when zero. Publish never blocks on subscribers:
// it takes the bus lock, writes one ring slot and wakes waiting readers
// with one broadcast, so it is safe in SDK notification handlers.
//
// Publish returns 0 and drops e when the bus is closed, or when e.Kind is
// KindGap or not a valid Kind (gap events are made by the bus only).
func (b *Bus) Publish(e Event) uint64 {
	if e.Kind < KindResourceUpdated || e.Kind >= KindGap {
		return 0
	}
	size := e.Size() // outside the lock: it walks Data
	b.mu.Lock()
	seq, published := b.publishLocked(e, size)
	b.mu.Unlock()
	if seq != 0 && published != nil {
		published(e.Kind)
	}
	return seq
}

// OnPublish has published told the kind of every event Publish stores from
// now on, in place of any earlier func: the one place where every
// publisher's events are counted. published runs after the event is
// stored, outside the bus lock, on the publisher's goroutine; it must be
// quick and must not block.
func (b *Bus) OnPublish(published func(Kind)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.published = published
}

// publishLocked is Publish under b.mu; it returns e's sequence (0 when the
// bus is closed) and the OnPublish func.
func (b *Bus) publishLocked(e Event, size int64) (uint64, func(Kind)) {
	if b.closed {
		return 0, nil
	}
	b.last++
	e.Sequence = b.last
	if e.Time.IsZero() {
		// Stamped under the lock so that stamped times never decrease
		// along the sequence.
		e.Time = time.Now()
	}
	b.storeLocked(slot{e, size})
	if b.waiting {
		close(b.wake)
		b.wake = make(chan struct{})
		b.waiting = false
	}
	return e.Sequence, b.published
}

// storeLocked writes e, whose sequence is b.last, into the ring, then
// evicts the oldest events while the buffer is over its byte budget.
func (b *Bus) storeLocked(e slot) {
	b.putLocked(e)
	b.bytes += e.size
	for b.bytes > b.maxBytes && b.first < b.last {
		b.evictOldestLocked()
	}
}

// putLocked puts e, whose sequence is b.last, in its ring slot.
func (b *Bus) putLocked(e slot) {
	if len(b.ring) < b.size {
		// Still filling: the slot for e is the next append. Grow by
		// doubling but never past size, so memory stays bounded and an
		// idle daemon does not pay for the whole ring up front.
		if len(b.ring) == cap(b.ring) {
			n := min(max(2*cap(b.ring), 16), b.size)
			grown := make([]slot, len(b.ring), n)
			copy(grown, b.ring)
			b.ring = grown
		}
		b.ring = append(b.ring, e)
		return
	}
	if b.first+uint64(b.size) == e.ev.Sequence {
		b.evictOldestLocked() // e takes its slot
	}
	b.ring[b.index(e.ev.Sequence)] = e
}

// evictOldestLocked drops the oldest buffered event.
func (b *Bus) evictOldestLocked() {
	old := &b.ring[b.index(b.first)]
	b.bytes -= old.size
	b.dropped.record(&old.ev)
	*old = slot{}
	b.first++
}

// Bounds of a droppedSummary.
const (
	maxDroppedKeys     = 1024
	maxDroppedKeyBytes = 256 << 10
)

// droppedSummary keeps, of the events the ring evicted, just enough to
// tell whether a subscriber that missed them could have wanted any: the
// last evicted sequence per kind and server, and per resource URI or poll
// id for the kinds a filter names one by one. A subscriber that resumes
// from before the oldest buffered event, or falls that far behind, then
// gets a gap only when an evicted event could have passed its filter, not
// whenever unrelated events filled the buffer.
//
// It is bounded: past maxDroppedKeys keys or maxDroppedKeyBytes of their
// strings it forgets them all and raises floor to the newest evicted
// sequence. Anything up to floor is unknown, so a subscriber that wants
// it gets a gap, as if every event had matched.
type droppedSummary struct {
	floor uint64
	last  map[droppedKey]uint64
	bytes int
}

// droppedKey is what a Filter looks at in an event.
type droppedKey struct {
	kind   Kind
	server string
	id     string // the URI of a resource update, the id of a poll result
}

func (d *droppedSummary) record(e *Event) {
	k := droppedKey{kind: e.Kind, server: e.Server}
	switch e.Kind {
	case KindResourceUpdated:
		k.id = e.URI
	case KindPollResult:
		k.id = e.PollID
	}
	if _, known := d.last[k]; !known {
		d.bytes += len(k.server) + len(k.id)
		if len(d.last) >= maxDroppedKeys || d.bytes > maxDroppedKeyBytes {
			d.floor = e.Sequence
			clear(d.last)
			d.bytes = 0
			return
		}
		if d.last == nil {
			d.last = make(map[droppedKey]uint64)
		}
	}
	d.last[k] = e.Sequence
}

// couldMatch reports whether an evicted event with a sequence of from or
// more could have passed m.
func (d *droppedSummary) couldMatch(m *matcher, from uint64) bool {
	if from <= d.floor {
		return true
	}
	for k, seq := range d.last {
		if seq < from {
			continue
		}
		e := Event{Kind: k.kind, Server: k.server}
		if k.kind == KindPollResult {
			e.PollID = k.id
		} else {
			e.URI = k.id
		}
		if m.match(&e) {
			return true
		}
	}
	return false
}

// slot is a buffered event and its Size.
type slot struct {
	ev   Event
	size int64
}

func (b *Bus) index(seq uint64) int {
	return int((seq - b.start) % uint64(b.size))
}

// oldestLocked returns the sequence of the oldest buffered event, or
// b.last+1 when nothing is buffered.
func (b *Bus) oldestLocked() uint64 {
	return b.first
}

// FirstSequence returns the sequence of the bus's first event: a gap
// from below it names events of an earlier run, not ones this bus dropped.
func (b *Bus) FirstSequence() uint64 { return b.start }

// LastSequence returns the sequence of the last published event, one
// less than the first sequence if none.
func (b *Bus) LastSequence() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// Close closes the bus: every pending and later Next returns ErrClosed
// and later Publish calls are no-ops. The buffered events are released.
// Close is idempotent.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	b.ring = nil
	close(b.wake)
}

// Subscribe returns a subscription that reads the events passing f, in
// sequence order.
//
// after is the resume point. nil means only events published after
// Subscribe returns. &n means every buffered event with a sequence
// greater than n, then live ones; n = 0 means everything still buffered.
// If some events after n were already evicted, the first event read is a
// KindGap for n+1 .. oldest buffered - 1 (also for n = 0). An n below the
// first sequence (but 0) is from before this bus, from an earlier run of
// the daemon: the subscription reads a KindGap first, then everything
// buffered. So does an n greater than LastSequence, a number this bus
// never gave out (one of another daemon's, or of an earlier run before the
// clock went back): whoever holds it has seen no event of this bus. Its
// gap runs from the sequence before the first (FirstSequence - 1, a
// number of no run of this bus) to the last evicted one.
//
// Subscribe registers nothing with the bus: a subscription is only a
// cursor, so an abandoned one costs the bus nothing. Close it anyway to
// unblock its reader.
func (b *Bus) Subscribe(f Filter, after *uint64) *Subscription {
	b.mu.Lock()
	next := b.last + 1
	switch {
	case after == nil:
	case *after == 0:
		next = b.start
	case *after > b.last:
		// Next finds it below the oldest event and below what the
		// dropped summary knows (its floor starts at b.start-1): a gap.
		next = b.start - 1
	default:
		next = *after + 1
	}
	b.mu.Unlock()
	return &Subscription{
		bus:  b,
		m:    newMatcher(f),
		next: next,
		done: make(chan struct{}),
	}
}

// Subscription is a filtered, ordered reader of a Bus. Next must be called
// from one goroutine at a time; Close may be called from any goroutine,
// concurrently and more than once.
type Subscription struct {
	bus       *Bus
	m         matcher
	next      uint64 // the next sequence this reader wants; owned by Next
	done      chan struct{}
	closeOnce sync.Once
}

// After is the sequence the subscription's events follow: it delivers the
// events after it (or a gap for those no longer buffered). A reader that
// loses the subscription before its first event resumes from here, not
// from a later "now". Call it before Next.
func (s *Subscription) After() uint64 { return max(s.next, 1) - 1 }

// Next returns the next event that passes the subscription's filter,
// blocking until one is published. When the events the subscription wants
// next were evicted from the ring because it fell behind, Next returns
// one KindGap event for the missed range and then continues with the
// oldest buffered event. Next returns ctx.Err() when ctx ends, and
// ErrClosed once the subscription or the bus is closed.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	b := s.bus
	for {
		if err := ctx.Err(); err != nil {
			return Event{}, err
		}
		select {
		case <-s.done:
			return Event{}, ErrClosed
		default:
		}

		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return Event{}, ErrClosed
		}
		if oldest := b.oldestLocked(); s.next < oldest && !b.dropped.couldMatch(&s.m, s.next) {
			// Nothing evicted could have passed the filter: a narrow
			// subscriber that resumes after unrelated events filled
			// the buffer misses nothing it wanted.
			s.next = oldest
		}
		if oldest := b.oldestLocked(); s.next < oldest {
			gap := Event{
				Sequence: oldest - 1,
				Time:     time.Now(),
				Kind:     KindGap,
				GapFrom:  s.next,
				GapTo:    oldest - 1,
			}
			s.next = oldest
			b.mu.Unlock()
			return gap, nil
		}
		for n := 0; s.next <= b.last && n < scanBatch; n++ {
			e := &b.ring[b.index(s.next)].ev
			s.next++
			if s.m.match(e) {
				ev := *e
				b.mu.Unlock()
				return ev, nil
			}
		}
		if s.next <= b.last {
			// More to scan: let publishers in between batches.
			b.mu.Unlock()
			continue
		}
		wake := b.wake
		b.waiting = true
		b.mu.Unlock()

		select {
		case <-wake:
		case <-s.done:
			return Event{}, ErrClosed
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// Close ends the subscription and unblocks a pending Next, which returns
// ErrClosed. Close is idempotent.
func (s *Subscription) Close() {
	s.closeOnce.Do(func() { close(s.done) })
}
