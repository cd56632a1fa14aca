package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestServerRequestWithdrawn: when mcpd stops waiting for the reply to a
// request it handed an agent (the call the request belongs to is
// cancelled, or the deadline passes), the agent is told on its stream with
// a cancel naming the request, so that it can stop the model call or close
// the form; a reply after it is dropped, and the stream goes on.
func TestServerRequestWithdrawn(t *testing.T) {
	t.Parallel()
	config := writeConfig(t, fmt.Sprintf(`{"mcpServers": {"pair": {"command": %q, "env": {%q: %q}}, "demo": {"command": %q, "args": ["demo-server"]}}}`,
		testBinary(t), fakeServerEnv, fakeAskPair, mcpdBinary(t)))

	t.Run("the call is cancelled", func(t *testing.T) {
		t.Parallel()
		// Its own: a parallel subtest may wait for its turn long after
		// the test began.
		ctx := testContext(t)
		d := startDaemon(ctx, t, daemonOptions{config: config, args: []string{"--ask-tool", "mcp__demo__echo"}})
		d.waitServer(ctx, t, "pair", mcpdv1.ServerState_SERVER_STATE_READY)
		d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
		agent := registerAgent(ctx, t, d, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_APPROVAL)
		for _, c := range []struct {
			kind, tool string
			args       map[string]any
		}{
			{"sampling", "mcp__pair__ask", map[string]any{"group": "g", "count": 1, "tag": "t"}},
			{"approval", "mcp__demo__echo", map[string]any{"message": "hi"}},
		} {
			callCtx, cancel := context.WithCancel(ctx)
			callDone := make(chan error, 1)
			go func() {
				_, err := d.call(callCtx, t, c.tool, c.args, 0)
				callDone <- err
			}()
			m, err := agent.Recv()
			if err != nil || m.GetRequest() == nil {
				t.Fatalf("%s: the agent's request: got %v, %v", c.kind, m, err)
			}
			id := m.GetRequest().GetId()
			cancel()
			wantCode(t, <-callDone, codes.Canceled)
			m, err = agent.Recv()
			if err != nil || m.GetCancel().GetId() != id || m.GetCancel().GetReason() == "" {
				t.Fatalf("%s: after the call was cancelled: got %v, %v, want a cancel of request %q with a reason", c.kind, m, err, id)
			}
			// A reply after the cancel is dropped; the stream goes on.
			if err := agent.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: &mcpdv1.ServerRequestReply{
				Id: id, Result: &mcpdv1.ServerRequestReply_Error{Error: &mcpdv1.ReplyError{Message: "too late"}},
			}}}); err != nil {
				t.Fatal(err)
			}
		}
		// The stream still answers: this time the agent approves.
		callDone := make(chan error, 1)
		go func() {
			_, err := d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "again"}, 0)
			callDone <- err
		}()
		m, err := agent.Recv()
		if err != nil || m.GetRequest().GetApproval() == nil {
			t.Fatalf("the next request: got %v, %v", m, err)
		}
		if err := agent.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: &mcpdv1.ServerRequestReply{
			Id: m.GetRequest().GetId(), Result: &mcpdv1.ServerRequestReply_Approval{Approval: &mcpdv1.ApprovalResult{Approved: true}},
		}}}); err != nil {
			t.Fatal(err)
		}
		if err := <-callDone; err != nil {
			t.Fatalf("the approved call: %v", err)
		}
	})

	// A legacy session's sampling request names no call; the server
	// withdraws it with notifications/cancelled when its tool call is
	// cancelled, and mcpd passes that on.
	t.Run("the server cancels", func(t *testing.T) {
		t.Parallel()
		// Its own: a parallel subtest may wait for its turn long after
		// the test began.
		ctx := testContext(t)
		legacy := writeConfig(t, fmt.Sprintf(`{"mcpServers": {"pair": {"command": %q, "env": {%q: %q}, "protocolVersion": "2025-11-25"}}}`,
			testBinary(t), fakeServerEnv, fakeAskPair))
		d := startDaemon(ctx, t, daemonOptions{config: legacy})
		if st := d.waitServer(ctx, t, "pair", mcpdv1.ServerState_SERVER_STATE_READY); st.GetProtocolVersion() != "2025-11-25" {
			t.Fatalf("pair speaks %q, want 2025-11-25", st.GetProtocolVersion())
		}
		agent := registerAgent(ctx, t, d, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING)
		callCtx, cancel := context.WithCancel(ctx)
		callDone := make(chan error, 1)
		go func() {
			_, err := d.call(callCtx, t, "mcp__pair__ask", map[string]any{"group": "g", "count": 1, "tag": "t"}, 0)
			callDone <- err
		}()
		m, err := agent.Recv()
		if err != nil || m.GetRequest().GetSampling() == nil {
			t.Fatalf("the agent's request: got %v, %v", m, err)
		}
		cancel()
		wantCode(t, <-callDone, codes.Canceled)
		m2, err := agent.Recv()
		if err != nil || m2.GetCancel().GetId() != m.GetRequest().GetId() {
			t.Fatalf("after the server cancelled: got %v, %v, want a cancel of request %q", m2, err, m.GetRequest().GetId())
		}
	})

	t.Run("the deadline passes", func(t *testing.T) {
		t.Parallel()
		// Its own: a parallel subtest may wait for its turn long after
		// the test began.
		ctx := testContext(t)
		d := startDaemon(ctx, t, daemonOptions{config: config, args: []string{"--server-request-timeout", "1s"}})
		d.waitServer(ctx, t, "pair", mcpdv1.ServerState_SERVER_STATE_READY)
		agent := registerAgent(ctx, t, d, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING)
		callDone := make(chan error, 1)
		go func() {
			_, err := d.call(ctx, t, "mcp__pair__ask", map[string]any{"group": "g", "count": 1, "tag": "t"}, 0)
			callDone <- err
		}()
		m, err := agent.Recv()
		if err != nil || m.GetRequest().GetSampling() == nil {
			t.Fatalf("the agent's request: got %v, %v", m, err)
		}
		m2, err := agent.Recv()
		if err != nil || m2.GetCancel().GetId() != m.GetRequest().GetId() || !strings.Contains(m2.GetCancel().GetReason(), "deadline") {
			t.Fatalf("after the deadline: got %v, %v, want a cancel of request %q saying the deadline passed", m2, err, m.GetRequest().GetId())
		}
		<-callDone
	})
}

// TestServerRequestHandedOn: an agent whose stream drops while it holds a
// request (here a sampling request of a call) does not take the request
// with it: the next agent registered for it gets it, and its answer
// reaches the server.
func TestServerRequestHandedOn(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	config := writeConfig(t, fmt.Sprintf(`{"mcpServers": {"pair": {"command": %q, "env": {%q: %q}}}}`, testBinary(t), fakeServerEnv, fakeAskPair))
	d := startDaemon(ctx, t, daemonOptions{config: config})
	d.waitServer(ctx, t, "pair", mcpdv1.ServerState_SERVER_STATE_READY)
	sampling := mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING
	older := registerAgent(ctx, t, d, sampling)
	newerCtx, dropNewer := context.WithCancel(ctx)
	newer := registerAgent(newerCtx, t, d, sampling)

	type result struct {
		res *mcpdv1.CallToolResponse
		err error
	}
	callDone := make(chan result, 1)
	go func() {
		res, err := d.call(ctx, t, "mcp__pair__ask", map[string]any{"group": "g", "count": 1, "tag": "t"}, 0)
		callDone <- result{res, err}
	}()
	m, err := newer.Recv() // the newest agent is asked first
	if err != nil || m.GetRequest().GetSampling() == nil {
		t.Fatalf("the newer agent's request: got %v, %v", m, err)
	}
	dropNewer()
	m, err = older.Recv()
	if err != nil || m.GetRequest().GetSampling() == nil {
		t.Fatalf("after the newer agent's stream dropped: the older agent got %v, %v; want the sampling request", m, err)
	}
	if err := older.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: &mcpdv1.ServerRequestReply{
		Id: m.GetRequest().GetId(), Result: &mcpdv1.ServerRequestReply_Sampling{Sampling: &mcpdv1.SamplingResult{
			Role: mcpdv1.Role_ROLE_ASSISTANT, Model: "handed-on", StopReason: "endTurn",
			Content: []*mcpdv1.Content{{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: "answered by the older agent"}}}},
		}},
	}}}); err != nil {
		t.Fatal(err)
	}
	r := <-callDone
	if r.err != nil {
		t.Fatalf("the call whose request was handed on: %v", r.err)
	}
	if got, want := text(r.res), "t answered by answered by the older agent"; got != want {
		t.Errorf("the call whose request was handed on: got %q, want %q", got, want)
	}
}
