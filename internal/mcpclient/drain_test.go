package mcpclient

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
)

// TestReplaceLetsCallsFinish replaces a server while a call runs on it:
// the call ends with its result, the new server starts only once the old
// one has stopped, a call made meanwhile waits for the new server, and
// the old server's STOPPED comes before the new one's CONNECTING. With a
// drain bound that passes first, the call is cut off as before.
func TestReplaceLetsCallsFinish(t *testing.T) {
	for _, tt := range []struct {
		name  string
		bound time.Duration
	}{{"finishes", time.Minute}, {"cut off at the bound", time.Nanosecond}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			rec := &stateRecorder{states: make(map[string][]State)}
			m := closingManager(t, &Options{ProbeTimeout: 20 * time.Second, StopGrace: 500 * time.Millisecond, DrainTimeout: tt.bound, OnStateChange: rec.record})
			old, err := m.Connect(ctx, fakeServer("f", "serve"), false)
			if err != nil {
				t.Fatal(err)
			}
			marker, running := awaitingCall(ctx, t, m)

			next := fakeServer("f", "serve")
			next.Env["REPLACED"] = "1"
			replaced := make(chan error, 1)
			go func() { replaced <- m.Start(next, true) }()
			eventually(ctx, t, "the new server registered", func() bool {
				st, _ := m.Get("f")
				return st.Config.Env["REPLACED"] == "1"
			})
			later := goCall(ctx, m, "mcp__f__echo", map[string]any{"message": "later"}, CallOptions{})
			if tt.bound == time.Minute {
				if st, _ := m.Get("f"); st.State != StateConnecting || st.Pid != 0 {
					t.Errorf("while the old server runs a call: new server %v with pid %d, want connecting, not started", st.State, st.Pid)
				}
			}
			if err := os.Remove(marker); err != nil {
				t.Fatal(err)
			}
			r := <-running
			var interrupted *CallInterruptedError
			switch {
			case tt.bound == time.Minute && r.err != nil:
				t.Errorf("call running at the replace: %v, want its result", r.err)
			case tt.bound == time.Minute:
				if got := r.res.Content[0].(*mcp.TextContent).Text; got != "released" {
					t.Errorf("call running at the replace: got %q, want released", got)
				}
			case !errors.As(r.err, &interrupted):
				t.Errorf("call running past the bound: got %v, want a CallInterruptedError", r.err)
			}
			if err := <-replaced; err != nil {
				t.Fatal(err)
			}
			if r := <-later; r.err != nil || r.res.Content[0].(*mcp.TextContent).Text != "later" {
				t.Errorf("call made during the replace: got %v %v, want its result", r.res, r.err)
			}
			st, _ := m.Get("f")
			if st.State != StateReady || st.Pid == 0 || st.Pid == old.Pid {
				t.Errorf("after the replace: %v, pid %d (old %d), want ready with a new process", st.State, st.Pid, old.Pid)
			}
			states := rec.get("f")
			if i := slices.Index(states, StateStopped); i < 0 || !slices.Equal(states[i:], []State{StateStopped, StateConnecting, StateReady}) {
				t.Errorf("states %v, want the old server's stopped, then the new one's connecting and ready", states)
			}
		})
	}
}

// TestServeToolsReplaceLetsCallsFinish: an agent that takes over the name
// of a stdio server (ServeTools with replace) replaces it as Start does:
// the call running on the old server ends with its result.
func TestServeToolsReplaceLetsCallsFinish(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	m := closingManager(t, &Options{ProbeTimeout: 20 * time.Second, StopGrace: 500 * time.Millisecond, DrainTimeout: time.Minute})
	if _, err := m.Connect(ctx, fakeServer("f", "serve"), false); err != nil {
		t.Fatal(err)
	}
	marker, running := awaitingCall(ctx, t, m)

	type served struct {
		link *AgentLink
		err  error
	}
	taken := make(chan served, 1)
	go func() {
		decl := AgentDeclaration{Server: "f", Tools: []*mcp.Tool{{Name: "echo", InputSchema: map[string]any{"type": "object"}}}}
		link, _, err := m.ServeTools(ctx, decl, true)
		taken <- served{link, err}
	}()
	eventually(ctx, t, "the agent's server registered", func() bool {
		st, _ := m.Get("f")
		return st.Config.Kind == config.TransportAgent
	})
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if r := <-running; r.err != nil {
		t.Errorf("call running when the agent took over: %v, want its result", r.err)
	} else if got := r.res.Content[0].(*mcp.TextContent).Text; got != "released" {
		t.Errorf("call running when the agent took over: got %q, want released", got)
	}
	s := <-taken
	if s.err != nil {
		t.Fatalf("ServeTools with replace: %v", s.err)
	}
	s.link.Close()
}

// awaitingCall starts a call of the fake server f's await tool and
// returns once it runs: it ends when the test removes marker.
func awaitingCall(ctx context.Context, t *testing.T, m *Manager) (marker string, running <-chan heldCall) {
	t.Helper()
	marker = filepath.Join(t.TempDir(), "await")
	running = goCall(ctx, m, "mcp__f__await", map[string]any{"marker": marker}, CallOptions{})
	eventually(ctx, t, "the call running", func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
	return marker, running
}
