package mcpclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
)

// TestAgentServer serves a tool through an AgentLink, calls it, and ends
// the link with a call in flight: the call fails with ErrUnavailable at
// once and the server is STOPPED. TestMain checks that no goroutine of the
// in-process session outlives the Manager.
func TestAgentServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, rec := newTestManager(t)
	link, st, err := m.ServeTools(ctx, AgentDeclaration{
		Server: "app",
		Tools:  []*mcp.Tool{{Name: "echo", InputSchema: map[string]any{"type": "object"}}},
	}, false)
	if err != nil {
		t.Fatalf("ServeTools: %v", err)
	}
	if st.State != StateReady || st.ToolCount != 1 {
		t.Fatalf("status: got %v with %d tools, want ready with 1", st.State, st.ToolCount)
	}

	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	call := func() <-chan outcome {
		ch := make(chan outcome, 1)
		go func() {
			res, err := m.CallTool(ctx, "mcp__app__echo", map[string]any{"x": 1.0}, CallOptions{})
			ch <- outcome{res, err}
		}()
		return ch
	}

	ch := call()
	c := <-link.Outbound()
	if c.Tool != "echo" || c.Arguments["x"] != 1.0 || c.Deadline.IsZero() {
		t.Fatalf("call: got %+v, want echo with x=1 and a deadline", c)
	}
	if err := link.Answer(c.ID, AgentReply{Result: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}}); err != nil {
		t.Fatalf("Answer: %v", err)
	}
	if o := <-ch; o.err != nil || o.res.Content[0].(*mcp.TextContent).Text != "ok" {
		t.Fatalf("CallTool: got %v, %v; want ok", o.res, o.err)
	}

	ch = call()
	<-link.Outbound()
	link.Close()
	if o := <-ch; !errors.Is(o.err, ErrUnavailable) {
		t.Fatalf("CallTool after the link closed: got %v, want ErrUnavailable", o.err)
	}
	if err := m.WaitStarted(ctx); err != nil {
		t.Fatal(err)
	}
	// The call fails as the link closes; the run notices a moment later.
	eventually(ctx, t, "the server stopped after the link closed", func() bool {
		st, err = m.Get("app")
		return err == nil && st.State == StateStopped
	})
	if got := rec.get("app"); len(got) < 3 || got[len(got)-1] != StateStopped {
		t.Fatalf("states: got %v, want connecting, ready, stopped", got)
	}
}

// serveApp serves tools (an "echo" tool if none) as server "app" and
// returns the link, closed at the end of the test.
func serveApp(ctx context.Context, t *testing.T, m *Manager, tools ...*mcp.Tool) *AgentLink {
	t.Helper()
	if len(tools) == 0 {
		tools = []*mcp.Tool{{Name: "echo", InputSchema: map[string]any{"type": "object"}}}
	}
	link, st, err := m.ServeTools(ctx, AgentDeclaration{Server: "app", Tools: tools}, false)
	if err != nil {
		t.Fatalf("ServeTools: %v", err)
	}
	if st.State != StateReady {
		t.Fatalf("ServeTools: got %v, want ready", st.State)
	}
	t.Cleanup(link.Close)
	return link
}

// nextForAgent returns the next call or cancellation the agent of link
// receives.
func nextForAgent(t *testing.T, link *AgentLink) AgentCall {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case c := <-link.Outbound():
		return c
	case <-timer.C:
		t.Fatal("the agent received nothing within 10s")
		return AgentCall{}
	}
}

// TestAgentServerDisabledStaysDisabled serves a disabled agent server: it
// stays DISABLED (only SetEnabled enables a server) and keeps the link,
// which serves its tools once the server is enabled.
func TestAgentServerDisabledStaysDisabled(t *testing.T) {
	tests := []struct {
		name    string
		disable func(ctx context.Context, t *testing.T, m *Manager)
	}{
		{"config entry", func(_ context.Context, t *testing.T, m *Manager) {
			cfg := config.Server{Name: "app", Kind: config.TransportAgent}
			if err := m.AddStopped(cfg, StateDisabled, nil, false); err != nil {
				t.Fatalf("AddStopped: %v", err)
			}
		}},
		{"disabled after its stream ended", func(ctx context.Context, t *testing.T, m *Manager) {
			link := serveApp(ctx, t, m)
			if err := m.SetEnabled("app", false); err != nil {
				t.Fatalf("SetEnabled(false): %v", err)
			}
			link.Close()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			m, _ := newTestManager(t)
			tt.disable(ctx, t, m)

			link, st, err := m.ServeTools(ctx, AgentDeclaration{
				Server: "app",
				Tools:  []*mcp.Tool{{Name: "echo", InputSchema: map[string]any{"type": "object"}}},
			}, false)
			if err != nil {
				t.Fatalf("ServeTools: %v", err)
			}
			defer link.Close()
			if st.State != StateDisabled {
				t.Fatalf("ServeTools: got %v, want disabled", st.State)
			}
			if st, err := m.Get("app"); err != nil || st.State != StateDisabled {
				t.Fatalf("after ServeTools: got %v, %v; want disabled", st.State, err)
			}
			if _, err := m.CallTool(ctx, "mcp__app__echo", nil, CallOptions{}); !errors.Is(err, ErrDisabled) {
				t.Fatalf("CallTool while disabled: got %v, want ErrDisabled", err)
			}

			if err := m.SetEnabled("app", true); err != nil {
				t.Fatalf("SetEnabled(true): %v", err)
			}
			if st, err := m.Await(ctx, "app"); err != nil || st.State != StateReady {
				t.Fatalf("after SetEnabled(true): got %v, %v; want ready", st.State, err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := m.CallTool(ctx, "mcp__app__echo", nil, CallOptions{})
				done <- err
			}()
			c := nextForAgent(t, link)
			if err := link.Answer(c.ID, AgentReply{Result: &mcp.CallToolResult{}}); err != nil {
				t.Fatalf("Answer: %v", err)
			}
			if err := <-done; err != nil {
				t.Fatalf("CallTool once enabled: got %v, want a result", err)
			}
		})
	}
}

// TestAgentCallCancelledOnRestart restarts an agent server while the agent
// runs a call: the agent is told to stop it before the call, idempotent,
// is sent again, so that it does not run twice at once.
func TestAgentCallCancelledOnRestart(t *testing.T) {
	ctx := testContext(t)
	m, _ := newTestManager(t)
	link := serveApp(ctx, t, m, &mcp.Tool{
		Name:        "idem",
		InputSchema: map[string]any{"type": "object"},
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true},
	})
	done := make(chan error, 1)
	go func() {
		_, err := m.CallTool(ctx, "mcp__app__idem", nil, CallOptions{})
		done <- err
	}()
	first := nextForAgent(t, link)

	if _, err := m.Restart(ctx, "app"); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if c := nextForAgent(t, link); !c.Cancel || c.ID != first.ID || c.Reason != reasonRunEnded {
		t.Fatalf("after the restart: got %+v, want the cancellation of call %s because %q", c, first.ID, reasonRunEnded)
	}
	again := nextForAgent(t, link)
	if again.Cancel || again.Tool != "idem" {
		t.Fatalf("after the cancellation: got %+v, want idem sent again", again)
	}
	if err := link.Answer(again.ID, AgentReply{Result: &mcp.CallToolResult{}}); err != nil {
		t.Fatalf("Answer: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("CallTool: got %v, want the second attempt's result", err)
	}
}

// TestAgentCallCancelReason has a caller give up on a call the agent runs:
// the cancellation the agent receives says why.
func TestAgentCallCancelReason(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // of the call; zero: the caller cancels
		want    string
	}{
		{"caller cancels", 0, reasonCallerCancelled},
		{"deadline passes", 200 * time.Millisecond, reasonDeadlinePassed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			m, _ := newTestManager(t)
			link := serveApp(ctx, t, m)
			callCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := m.CallTool(callCtx, "mcp__app__echo", nil, CallOptions{Timeout: tt.timeout})
				done <- err
			}()
			call := nextForAgent(t, link)
			if tt.timeout == 0 {
				cancel()
			}
			if err := <-done; err == nil {
				t.Fatal("CallTool: got a result, want an error")
			}
			if c := nextForAgent(t, link); !c.Cancel || c.ID != call.ID || c.Reason != tt.want {
				t.Fatalf("got %+v, want the cancellation of call %s because %q", c, call.ID, tt.want)
			}
		})
	}
}
