package main

import (
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestServerRequestReplyRefused: a reply that does not answer the request
// it names gets the server a JSON-RPC error at once, and the agent a
// reply_refused naming the request and what was wrong, without quoting
// the reply; the stream goes on, and its next answer reaches the server.
func TestServerRequestReplyRefused(t *testing.T) {
	t.Parallel()
	everything := everythingBinary(t)
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	agent := registerAgent(ctx, t, d, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING)
	// The server offers its sampling tool only to a client that can
	// sample: connect it once the agent is there.
	d.connect(ctx, t, "everything", everything, []string{"stdio"}, nil)

	const quoted = "words-the-notice-must-not-quote"
	text := func(s string) *mcpdv1.Content {
		return &mcpdv1.Content{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: s}}}
	}
	sample := func(content ...*mcpdv1.Content) *mcpdv1.ServerRequestReply {
		return &mcpdv1.ServerRequestReply{Result: &mcpdv1.ServerRequestReply_Sampling{Sampling: &mcpdv1.SamplingResult{
			Role: mcpdv1.Role_ROLE_ASSISTANT, Model: "refused-e2e", Content: content,
		}}}
	}
	// call calls the sampling tool; its outcome comes on the channel.
	call := func() <-chan *mcpdv1.CallToolResponse {
		called := make(chan *mcpdv1.CallToolResponse, 1)
		go func() {
			resp, _ := d.call(ctx, t, "mcp__everything__trigger-sampling-request", map[string]any{"prompt": "Say hi", "maxTokens": 20}, 0)
			called <- resp
		}()
		return called
	}
	nextRequest := func(t *testing.T) *mcpdv1.ServerRequest {
		t.Helper()
		m, err := agent.Recv()
		if err != nil || m.GetRequest().GetSampling() == nil {
			t.Fatalf("the agent's next message: got %v, %v, want a sampling request", m, err)
		}
		return m.GetRequest()
	}
	reply := func(t *testing.T, r *mcpdv1.ServerRequestReply) {
		t.Helper()
		if err := agent.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: r}}); err != nil {
			t.Fatal(err)
		}
	}

	called := call()
	req := nextRequest(t)
	for _, c := range []struct {
		name       string
		reply      *mcpdv1.ServerRequestReply
		wantReason string
	}{
		{"an elicitation reply", &mcpdv1.ServerRequestReply{Result: &mcpdv1.ServerRequestReply_Elicitation{Elicitation: &mcpdv1.ElicitationResult{
			Action: mcpdv1.ElicitationAction_ELICITATION_ACTION_DECLINE,
		}}}, "does not answer a sampling request"},
		{"two content blocks", sample(text(quoted), text(quoted)), "2 content blocks"},
		{"no content", sample(), "no content"},
		{"a resource link", sample(&mcpdv1.Content{Kind: &mcpdv1.Content_ResourceLink{ResourceLink: &mcpdv1.ResourceLink{Uri: "file:///" + quoted, Name: quoted}}}), "text, image or audio"},
		{"no result", &mcpdv1.ServerRequestReply{}, "no result"},
	} {
		c.reply.Id = req.GetId()
		reply(t, c.reply)
		if resp := <-called; strings.Contains(resp.String(), "refused-e2e") {
			t.Errorf("%s: the call's result: got %v, want no sampling result in it", c.name, resp)
		}
		// The notice comes before any later request.
		called = call()
		m, err := agent.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got := m.GetReplyRefused()
		if got.GetId() != req.GetId() || !strings.Contains(got.GetReason(), c.wantReason) {
			t.Fatalf("%s: after the reply: got %v, want reply_refused of request %q saying %q", c.name, m, req.GetId(), c.wantReason)
		}
		if strings.Contains(got.GetReason(), quoted) {
			t.Errorf("%s: reason %q quotes the reply", c.name, got.GetReason())
		}
		req = nextRequest(t)
	}

	// The stream still answers, and a late reply (to a request already
	// answered) gets no notice: the next message is the next request.
	reply(t, &mcpdv1.ServerRequestReply{Id: req.GetId(), Result: sample(text("a fine answer")).GetResult()})
	if resp := <-called; !strings.Contains(resp.String(), "a fine answer") {
		t.Fatalf("the answered call: got %v, want the agent's answer in it", resp)
	}
	reply(t, &mcpdv1.ServerRequestReply{Id: req.GetId()})
	called = call()
	if next := nextRequest(t); next.GetId() == req.GetId() {
		t.Fatalf("the next request has the id %q of the last one", next.GetId())
	} else {
		reply(t, &mcpdv1.ServerRequestReply{Id: next.GetId(), Result: sample(text("another answer")).GetResult()})
	}
	if resp := <-called; !strings.Contains(resp.String(), "another answer") {
		t.Fatalf("the last call: got %v, want the agent's answer in it", resp)
	}
}

// TestServerRequestReplyRefusedByAccess: a reply the agent's caller may no
// longer give (the callers file changed while the request was with the
// agent) gets the server an error, and the agent a reply_refused saying
// so.
func TestServerRequestReplyRefusedByAccess(t *testing.T) {
	t.Parallel()
	everything := everythingBinary(t)
	ctx := testContext(t)
	const token = "refused-agent-token-5"
	callers := func(requests ...string) string {
		return mustJSON(t, map[string]any{"callers": []any{map[string]any{"name": "agent", "token_sha256": sha256Hex(token), "permissions": map[string]any{
			"servers": []string{"*"}, "tools": []string{"*"}, "manage": true, "server_requests": requests,
		}}}})
	}
	path := writeCallers(t, callers("sampling"))
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--callers", path}})
	as := bearer(ctx, token)
	agent := registerAgent(as, t, d, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING)
	d.connect(as, t, "everything", everything, []string{"stdio"}, nil)
	called := make(chan error, 1)
	go func() {
		_, err := d.call(as, t, "mcp__everything__trigger-sampling-request", map[string]any{"prompt": "Say hi", "maxTokens": 20}, 0)
		called <- err
	}()
	m, err := agent.Recv()
	if err != nil || m.GetRequest().GetSampling() == nil {
		t.Fatalf("the agent's request: got %v, %v, want a sampling request", m, err)
	}
	id := m.GetRequest().GetId()

	replaceFile(t, path, callers())
	d.send(t, syscall.SIGHUP)
	poll(ctx, t, "the caller may no longer register for sampling", func() (bool, error) {
		s, err := d.hub.HandleServerRequests(as)
		if err != nil {
			return false, err
		}
		defer s.CloseSend()
		if err := s.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Register{
			Register: &mcpdv1.ServerRequestRegistration{Kinds: []mcpdv1.ServerRequestKind{mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING}},
		}}); err != nil {
			return false, err
		}
		_, err = s.Recv()
		return status.Code(err) == codes.PermissionDenied, nil
	})

	if err := agent.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: &mcpdv1.ServerRequestReply{
		Id: id, Result: &mcpdv1.ServerRequestReply_Sampling{Sampling: &mcpdv1.SamplingResult{
			Role: mcpdv1.Role_ROLE_ASSISTANT, Content: []*mcpdv1.Content{{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: "an answer"}}}},
		}},
	}}}); err != nil {
		t.Fatal(err)
	}
	m, err = agent.Recv()
	if err != nil || m.GetReplyRefused().GetId() != id || !strings.Contains(m.GetReplyRefused().GetReason(), "may no longer answer sampling requests") {
		t.Fatalf("after the reply: got %v, %v, want reply_refused of request %q saying the caller may no longer answer", m, err, id)
	}
	<-called
}
