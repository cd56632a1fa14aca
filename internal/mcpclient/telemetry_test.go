package mcpclient

import (
	"slices"
	"testing"
	"time"

	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/telemetry"
)

// TestStateNamesCoverEveryState: mcpd_server_state has a series for every
// state a server can be in; a server in a state without one would read 0
// in all of them.
func TestStateNamesCoverEveryState(t *testing.T) {
	for s := StateConnecting; s <= StateDisabled; s++ {
		if !slices.Contains(stateNames, s.String()) {
			t.Errorf("state %q has no mcpd_server_state series (have %v)", s, stateNames)
		}
	}
	if !slices.Contains(stateNames, "authorization_required") {
		t.Errorf("no series for a server waiting for authorization (have %v)", stateNames)
	}
	if slices.Contains(stateNames, "unknown") {
		t.Errorf("stateNames %v: a series for no state", stateNames)
	}
}

// TestEventsCountedOnce: every event on the bus counts once in
// mcpd_events_published_total, whoever published it: the servers' state
// changes and a poll's results alike.
func TestEventsCountedOnce(t *testing.T) {
	ctx := testContext(t)
	tel, err := telemetry.New(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, bus := busManager(t, &Options{ProbeTimeout: 20 * time.Second, StopGrace: 500 * time.Millisecond, Telemetry: tel})
	if st, err := m.Connect(ctx, fakeServer("f", "serve"), false); err != nil || st.State != StateReady {
		t.Fatalf("connect: %v %v", st.State, err)
	}
	sub := bus.Subscribe(events.Filter{Kinds: []events.Kind{events.KindPollResult}}, nil)
	defer sub.Close()
	if _, err := m.StartPoll(PollSpec{Server: "f", Tool: "echo", Arguments: map[string]any{"message": "hi"}, Interval: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Next(ctx); err != nil {
		t.Fatal(err)
	}
	// The count follows the event a moment later, on the publisher's
	// goroutine.
	eventually(ctx, t, "the poll's baseline to be counted", func() bool {
		return metricValue(t, tel, "mcpd_events_published_total", map[string]string{"kind": "poll_result"}) == 1
	})
	if err := m.Disconnect(ctx, "f"); err != nil { // a last state event
		t.Fatal(err)
	}
	eventually(ctx, t, "every event to be counted", func() bool {
		total := 0.0
		for k := events.KindResourceUpdated; k < events.KindGap; k++ {
			total += max(0, metricValue(t, tel, "mcpd_events_published_total", map[string]string{"kind": k.String()}))
		}
		if last := float64(bus.LastSequence()); total > last {
			t.Fatalf("mcpd_events_published_total adds up to %v, more than the %v events published", total, last)
		}
		return total == float64(bus.LastSequence())
	})
}
