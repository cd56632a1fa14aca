package mcpclient

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
)

func TestCheckPollSpec(t *testing.T) {
	for _, tt := range []struct {
		name         string
		spec         PollSpec
		wantErr      bool
		wantTool     string
		wantInterval time.Duration
	}{
		{name: "resource, default interval", spec: PollSpec{Server: "s", URI: "x://y"}, wantInterval: DefaultPollInterval},
		{name: "tool, own name", spec: PollSpec{Server: "s", Tool: "echo", Interval: 2 * time.Second}, wantTool: "echo", wantInterval: 2 * time.Second},
		{name: "tool, qualified name", spec: PollSpec{Server: "s", Tool: "mcp__s__echo", Interval: time.Second}, wantTool: "echo", wantInterval: time.Second},
		{name: "tool of another server", spec: PollSpec{Server: "s", Tool: "mcp__t__echo"}, wantErr: true},
		{name: "below the floor", spec: PollSpec{Server: "s", URI: "x://y", Interval: 999 * time.Millisecond}, wantErr: true},
		{name: "no target", spec: PollSpec{Server: "s"}, wantErr: true},
		{name: "two targets", spec: PollSpec{Server: "s", URI: "x://y", Tool: "echo"}, wantErr: true},
		{name: "no server", spec: PollSpec{URI: "x://y"}, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			err := CheckPollSpec(&spec)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("got %v, want ErrInvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if spec.Tool != tt.wantTool || spec.Interval != tt.wantInterval {
				t.Errorf("got tool %q interval %v, want %q %v", spec.Tool, spec.Interval, tt.wantTool, tt.wantInterval)
			}
		})
	}
}

// TestPolls runs tool polls against a fake server: the baseline event,
// no event while the result stays the same, the limit, removal of the
// server, and Close stopping the rest (goleak checks the goroutines).
func TestPolls(t *testing.T) {
	ctx := testContext(t)
	bus := events.NewBus(nil)
	t.Cleanup(bus.Close)
	m := NewManager(&Options{ProbeTimeout: 20 * time.Second, StopGrace: 500 * time.Millisecond, Events: bus, MaxPolls: 2})
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(cctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if st, err := m.Connect(ctx, fakeServer("f", "serve"), false); err != nil || st.State != StateReady {
		t.Fatalf("connect: %v %v", st.State, err)
	}
	if _, err := m.StartPoll(PollSpec{Server: "nope", Tool: "echo"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("poll of an unknown server: got %v, want ErrNotFound", err)
	}
	zero := uint64(0)
	sub := bus.Subscribe(events.Filter{Kinds: []events.Kind{events.KindPollResult}}, &zero)
	defer sub.Close()

	p, err := m.StartPoll(PollSpec{Server: "f", Tool: "echo", Arguments: map[string]any{"message": "hi"}, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := sub.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev.PollID != p.ID || !ev.Baseline || ev.Tool != "mcp__f__echo" || ev.Error != "" || ev.Data == nil {
		t.Errorf("first event: got %+v, want the baseline of %s", ev, p.ID)
	}
	failing, err := m.StartPoll(PollSpec{Server: "f", Tool: "no_such_tool", Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err = sub.Next(ctx); err != nil || ev.PollID != failing.ID || ev.Error == "" {
		t.Errorf("failing poll: got %+v, %v, want its error", ev, err)
	}
	if _, err := m.StartPoll(PollSpec{Server: "f", URI: "x://y"}); !errors.Is(err, ErrResourceExhausted) {
		t.Errorf("a third poll with MaxPolls 2: got %v, want ErrResourceExhausted", err)
	}

	// Two more turns of the same result publish nothing.
	eventually(ctx, t, "three polls", func() bool {
		st, err := m.Poll(p.ID)
		return err == nil && st.Polls >= 3
	})
	if st, _ := m.Poll(p.ID); st.Changes != 1 {
		t.Errorf("poll of an unchanging result: got %d changes, want 1", st.Changes)
	}

	if err := m.Disconnect(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if got := m.Polls(); len(got) != 0 {
		t.Errorf("polls after the server was removed: got %v, want none", got)
	}
	if err := m.StopPoll(p.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("StopPoll after removal: got %v, want ErrNotFound", err)
	}
}

// TestStartPollRacesDisconnect: a poll started while its server is being
// removed is either refused or stopped with the server, never left
// running (and holding a --max-polls slot) for a server that is gone.
func TestStartPollRacesDisconnect(t *testing.T) {
	m := NewManager(&Options{MaxPolls: 1000})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	ctx := context.Background()
	for i := range 5000 {
		if err := m.AddStopped(config.Server{Name: "f"}, StateFailed, errors.New("x"), false); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = m.StartPoll(PollSpec{Server: "f", URI: "x://y", Interval: time.Hour}) })
		wg.Go(func() { _ = m.Disconnect(ctx, "f") })
		wg.Wait()
		if ps := m.Polls(); len(ps) > 0 {
			t.Fatalf("iteration %d: poll %s outlived the removal of its server", i, ps[0].ID)
		}
	}
}

// TestFallbackPollLimit: fallback polls started at once stay within
// MaxPolls.
func TestFallbackPollLimit(t *testing.T) {
	m := NewManager(&Options{MaxPolls: 1})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	if err := m.AddStopped(config.Server{Name: "f"}, StateFailed, errors.New("x"), false); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var releases []func()
	for i := range 64 {
		wg.Go(func() {
			if release, err := m.fallbackPoll("f", "x://"+strconv.Itoa(i), time.Hour); err == nil {
				mu.Lock()
				releases = append(releases, release)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, release := range releases {
		release()
	}
	if len(releases) != 1 {
		t.Errorf("MaxPolls 1, but %d fallback polls started", len(releases))
	}
}
