package mcpclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	st, err = m.Get("app")
	if err != nil || st.State != StateStopped {
		t.Fatalf("after the link closed: got %v, %v; want stopped", st.State, err)
	}
	if got := rec.get("app"); len(got) < 3 || got[len(got)-1] != StateStopped {
		t.Fatalf("states: got %v, want connecting, ready, stopped", got)
	}
}
