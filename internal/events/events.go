// Package events is mcpd's per-daemon event bus, the source of the gRPC
// Subscribe stream.
//
// Upstream notifications (resource updated, list changes, server state,
// logs) are published to a Bus, which numbers them with a gap-free,
// per-daemon sequence (the first event is 1) and keeps the last
// Options.BufferSize of them, and no more than about Options.BufferBytes of
// them, in a ring. Subscribers are cursors into that
// ring: each remembers only the next sequence it wants, and Publish wakes
// them all with one broadcast. Publish therefore never blocks and does no
// per-subscriber work, and memory is bounded by BufferSize and BufferBytes
// whatever the number or speed of subscribers. A subscriber that falls so far behind that the
// events it wants were evicted receives one KindGap event naming the
// missed range, then continues with the oldest buffered event.
//
// A daemon numbers its events from its start time (Options.FirstSequence,
// BootSequence), so a resume point of an earlier run is below every
// number of this one: the subscriber gets a gap first. So does a resume
// point beyond the last published sequence, which this bus never gave out.
package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrClosed is returned by Subscription.Next once the subscription or its
// bus is closed.
var ErrClosed = errors.New("events: closed")

// Kind says what an Event reports. The zero Kind is invalid.
type Kind int

// Event kinds. KindGap is made by the bus for a subscriber that missed
// events; it is never published.
const (
	KindResourceUpdated  Kind = iota + 1 // a subscribed resource changed: URI
	KindToolsChanged                     // the server's tool list changed
	KindPromptsChanged                   // the server's prompt list changed
	KindResourcesChanged                 // the server's resource list changed
	KindServerState                      // the upstream connection changed state: State, Error
	KindLog                              // the server sent a log message: Level, Logger, Data
	KindPollResult                       // a poll's result changed: PollID, Baseline, URI or Tool, Data or Error
	KindGap                              // the subscriber missed events GapFrom..GapTo
)

// String returns the kind's snake_case name, as in the gRPC API.
func (k Kind) String() string {
	switch k {
	case KindResourceUpdated:
		return "resource_updated"
	case KindToolsChanged:
		return "tools_changed"
	case KindPromptsChanged:
		return "prompts_changed"
	case KindResourcesChanged:
		return "resources_changed"
	case KindServerState:
		return "server_state"
	case KindLog:
		return "log"
	case KindPollResult:
		return "poll_result"
	case KindGap:
		return "gap"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// Event is one notification on the bus. Which fields are set depends on
// Kind. Events are values; subscribers share Data, which must be treated
// as read-only.
type Event struct {
	// Sequence is assigned by Publish: per daemon, gap-free, starting at
	// Options.FirstSequence.
	// A KindGap event carries GapTo, so a client that resumes from the last
	// Sequence it saw does not ask for the missed range again.
	Sequence uint64
	// Time is when the event happened; Publish sets it when zero. A KindGap
	// event carries the time it was delivered.
	Time time.Time
	// Server is the configured name of the server the event comes from;
	// empty for KindGap.
	Server string
	Kind   Kind

	// URI is the updated resource (KindResourceUpdated), or the polled
	// one (KindPollResult).
	URI string
	// Tool is the qualified name of the polled tool (KindPollResult).
	Tool string
	// PollID names the poll (KindPollResult), and Baseline says the
	// result is the poll's first.
	PollID   string
	Baseline bool

	// State is the new connection state (KindServerState): "connecting",
	// "ready", "reconnecting", "failed" or "stopped".
	State string
	// Error is the last connection error, if any (KindServerState), or
	// why the poll failed (KindPollResult).
	Error string

	// Level is the MCP logging level, "debug" to "emergency" (KindLog).
	Level string
	// Logger is the optional logger name the server gave (KindLog).
	Logger string
	// Data is the decoded JSON value the server sent (KindLog):
	// map[string]any, []any, string, float64, bool or nil; or the
	// poll's result as MCP JSON, a json.RawMessage (KindPollResult).
	Data any

	// GapFrom and GapTo are the first and last sequence the subscriber
	// missed, inclusive (KindGap).
	GapFrom, GapTo uint64
}

// eventOverhead is about what an Event costs beyond its strings and Data.
const eventOverhead = 160

// Size is about how many bytes e holds: its strings and Data, counted as
// the JSON they came from would be, plus the Event itself. It is what the
// bus's byte budget counts.
func (e *Event) Size() int64 {
	return eventOverhead + int64(len(e.Server)+len(e.URI)+len(e.Tool)+len(e.PollID)+len(e.State)+len(e.Error)+len(e.Level)+len(e.Logger)) + dataSize(e.Data)
}

// dataSize is about the size of a decoded JSON value.
func dataSize(v any) int64 {
	switch v := v.(type) {
	case string:
		return 16 + int64(len(v))
	case map[string]any:
		n := int64(48)
		for k, e := range v {
			n += 16 + int64(len(k)) + dataSize(e)
		}
		return n
	case []any:
		n := int64(24)
		for _, e := range v {
			n += dataSize(e)
		}
		return n
	case []byte:
		return 24 + int64(len(v))
	case json.RawMessage: // a named type: the []byte case does not match it
		return 24 + int64(len(v))
	default: // numbers, booleans, null
		return 16
	}
}

// Resource names one resource of one server.
type Resource struct {
	Server, URI string
}

// Filter selects the events a subscription receives. The zero Filter
// passes everything.
//
// Servers and Kinds narrow: when set, an event passes only if its server
// is in Servers and its kind is in Kinds. Polls, when set, restrict
// KindPollResult events to the listed poll ids, explicitly like Resources.
// Resources, when set, restrict
// KindResourceUpdated events to the listed (server, URI) pairs, and they
// are explicit: an update of a listed resource passes even when Servers or
// Kinds would not let it through, so {Kinds: [KindToolsChanged],
// Resources: [r]} yields tool list changes and updates of r.
//
// KindGap events pass every filter. A subscriber gets one only when an
// event it missed could have passed its filter (see droppedSummary); the
// gap names every sequence it missed, of any kind.
type Filter struct {
	Servers   []string
	Kinds     []Kind
	Resources []Resource
	Polls     []string
}

// matcher is a Filter compiled into sets, so matching is cheap and the
// caller's slices may change after Subscribe.
type matcher struct {
	servers   map[string]struct{}
	kinds     map[Kind]struct{}
	resources map[Resource]struct{}
	polls     map[string]struct{}
}

func newMatcher(f Filter) matcher {
	var m matcher
	if len(f.Servers) > 0 {
		m.servers = make(map[string]struct{}, len(f.Servers))
		for _, s := range f.Servers {
			m.servers[s] = struct{}{}
		}
	}
	if len(f.Kinds) > 0 {
		m.kinds = make(map[Kind]struct{}, len(f.Kinds))
		for _, k := range f.Kinds {
			m.kinds[k] = struct{}{}
		}
	}
	if len(f.Resources) > 0 {
		m.resources = make(map[Resource]struct{}, len(f.Resources))
		for _, r := range f.Resources {
			m.resources[r] = struct{}{}
		}
	}
	if len(f.Polls) > 0 {
		m.polls = make(map[string]struct{}, len(f.Polls))
		for _, p := range f.Polls {
			m.polls[p] = struct{}{}
		}
	}
	return m
}

func (m *matcher) match(e *Event) bool {
	if e.Kind == KindGap {
		return true
	}
	if e.Kind == KindResourceUpdated && m.resources != nil {
		_, ok := m.resources[Resource{Server: e.Server, URI: e.URI}]
		return ok
	}
	if e.Kind == KindPollResult && m.polls != nil {
		_, ok := m.polls[e.PollID]
		return ok
	}
	if m.servers != nil {
		if _, ok := m.servers[e.Server]; !ok {
			return false
		}
	}
	if m.kinds != nil {
		if _, ok := m.kinds[e.Kind]; !ok {
			return false
		}
	}
	return true
}
