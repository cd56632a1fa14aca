package mcpclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestBrokerApprove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := NewBroker(&BrokerOptions{Timeout: 20 * time.Second})

	// An agent registered for every kind predates approvals: it gets none.
	all := b.Attach("", nil, nil)
	defer b.Detach(all)
	if _, err := b.Approve(ctx, "demo", &ApprovalRequest{Tool: "mcp__demo__echo"}); !errors.Is(err, ErrNoApprover) {
		t.Fatalf("with only an all-kinds agent: got %v, want ErrNoApprover", err)
	}

	agent := b.Attach("", []string{"demo"}, []RequestKind{KindApproval})
	defer b.Detach(agent)
	if _, err := b.Approve(ctx, "other", &ApprovalRequest{Tool: "mcp__other__echo"}); !errors.Is(err, ErrNoApprover) {
		t.Fatalf("another server: got %v, want ErrNoApprover", err)
	}

	answers := []Reply{
		{Approval: &ApprovalReply{Approved: true}},
		{Approval: &ApprovalReply{Reason: "no"}},
		{Error: &jsonrpc.Error{Message: "refused"}},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, r := range answers {
			req := <-agent.Requests()
			if req.Kind != KindApproval || req.Approval.Tool != "mcp__demo__echo" {
				t.Errorf("request: got %v %+v, want an approval of mcp__demo__echo", req.Kind, req.Approval)
			}
			if err := b.Answer(agent, req.ID, r); err != nil {
				t.Errorf("Answer: %v", err)
			}
		}
	}()
	for i, want := range []ApprovalReply{{Approved: true}, {Reason: "no"}, {Reason: "refused"}} {
		got, err := b.Approve(ctx, "demo", &ApprovalRequest{Tool: "mcp__demo__echo"})
		if err != nil || got != want {
			t.Errorf("answer %d: got %+v, %v; want %+v", i, got, err, want)
		}
	}
	<-done

	// An agent that never answers.
	short := NewBroker(&BrokerOptions{Timeout: 100 * time.Millisecond})
	silent := short.Attach("", nil, []RequestKind{KindApproval})
	defer short.Detach(silent)
	if _, err := short.Approve(ctx, "demo", &ApprovalRequest{Tool: "mcp__demo__echo"}); !errors.Is(err, ErrApprovalTimeout) {
		t.Errorf("unanswered: got %v, want ErrApprovalTimeout", err)
	}
	gone, stop := context.WithCancel(ctx)
	stop()
	if _, err := b.Approve(gone, "demo", &ApprovalRequest{Tool: "mcp__demo__echo"}); !errors.Is(err, context.Canceled) {
		t.Errorf("caller gone: got %v, want context.Canceled", err)
	}
}

// TestBrokerRoutesByCall: a call that names its answerer has its server's
// requests answered by that agent alone, even when a newer one takes them;
// a call made on behalf of a caller prefers that caller's agents; an agent
// attached for one call gets no other call's requests; approvals are not
// routed by the call.
func TestBrokerRoutesByCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := NewBroker(&BrokerOptions{Timeout: 20 * time.Second})
	older := b.Attach("alice", []string{"demo"}, []RequestKind{KindSampling})
	defer b.Detach(older)
	newer := b.Attach("bob", []string{"demo"}, []RequestKind{KindSampling, KindElicitation, KindApproval})
	defer b.Detach(newer)

	// answer replies to one request of a with the agent's name (when the
	// routing is wrong, the test ends without one).
	answer := func(a *Agent, name string) {
		select {
		case req := <-a.Requests():
			_ = b.Answer(a, req.ID, Reply{Error: &jsonrpc.Error{Message: name}})
		case <-ctx.Done():
		}
	}
	ask := func(ctx context.Context, kind RequestKind) (string, error) {
		r, err := b.ask(ctx, &ServerRequest{Server: "demo", Kind: kind})
		if err != nil {
			return "", err
		}
		return r.Error.Message, nil
	}

	go answer(newer, "newer")
	if got, err := ask(ctx, KindSampling); got != "newer" || err != nil {
		t.Errorf("unpinned: got %q, %v; want the newest agent", got, err)
	}
	go answer(older, "older")
	if got, err := ask(WithAnswerer(ctx, older), KindSampling); got != "older" || err != nil {
		t.Errorf("pinned to the older agent: got %q, %v", got, err)
	}
	go answer(older, "older")
	if got, err := ask(OnBehalfOf(ctx, "alice"), KindSampling); got != "older" || err != nil {
		t.Errorf("on behalf of alice: got %q, %v; want alice's agent", got, err)
	}
	// alice has no agent for elicitation, carol none at all: the newest
	// agent is asked.
	go answer(newer, "newer")
	if got, err := ask(OnBehalfOf(ctx, "alice"), KindElicitation); got != "newer" || err != nil {
		t.Errorf("on behalf of alice, kind she does not take: got %q, %v; want the newest agent", got, err)
	}
	go answer(newer, "newer")
	if got, err := ask(OnBehalfOf(ctx, "carol"), KindSampling); got != "newer" || err != nil {
		t.Errorf("on behalf of carol: got %q, %v; want the newest agent", got, err)
	}
	// Pinning wins over the owner.
	go answer(older, "older")
	if got, err := ask(WithAnswerer(OnBehalfOf(ctx, "bob"), older), KindSampling); got != "older" || err != nil {
		t.Errorf("pinned and on behalf of bob: got %q, %v; want the pinned agent", got, err)
	}
	// The pinned agent does not take elicitation: nobody else is asked.
	if got, err := ask(WithAnswerer(ctx, older), KindElicitation); !errors.Is(err, errNoAgent) {
		t.Errorf("pinned, kind not taken: got %q, %v; want errNoAgent", got, err)
	}
	if got, err := ask(WithAnswerer(ctx, nil), KindSampling); !errors.Is(err, errNoAgent) {
		t.Errorf("pinned to nobody: got %q, %v; want errNoAgent", got, err)
	}
	// Approvals are mcpd's questions, not the call's server's.
	go answer(newer, "newer")
	if got, err := ask(OnBehalfOf(WithAnswerer(ctx, older), "alice"), KindApproval); got != "newer" || err != nil {
		t.Errorf("approval in a pinned call: got %q, %v; want the approver", got, err)
	}
	// A call's own agent, the newest: it takes the requests pinned to it
	// and those of no call, never another call's.
	call := b.AttachToCall("alice", []string{"demo"}, []RequestKind{KindSampling})
	defer b.Detach(call)
	go answer(call, "call")
	if got, err := ask(WithAnswerer(callBound(ctx), call), KindSampling); got != "call" || err != nil {
		t.Errorf("pinned to the call's agent: got %q, %v", got, err)
	}
	go answer(call, "call")
	if got, err := ask(ctx, KindSampling); got != "call" || err != nil {
		t.Errorf("a request of no call: got %q, %v; want the newest agent, the call's", got, err)
	}
	go answer(older, "older")
	if got, err := ask(OnBehalfOf(callBound(ctx), "alice"), KindSampling); got != "older" || err != nil {
		t.Errorf("another call on behalf of alice: got %q, %v; want alice's agent, not her call's", got, err)
	}
	go answer(newer, "newer")
	if got, err := ask(callBound(ctx), KindSampling); got != "newer" || err != nil {
		t.Errorf("another call: got %q, %v; want the newest agent but the call's", got, err)
	}

	b.Detach(older)
	if got, err := ask(WithAnswerer(ctx, older), KindSampling); !errors.Is(err, errNoAgent) {
		t.Errorf("pinned agent detached: got %q, %v; want errNoAgent", got, err)
	}
}

// TestBrokerPassesOnWhatALeavingAgentHeld: an agent that detaches with a
// request unanswered (its stream dropped) hands it on to the next agent
// that takes such requests, which answers it; with none left, the request
// is answered as with no agent.
func TestBrokerPassesOnWhatALeavingAgentHeld(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := NewBroker(&BrokerOptions{Timeout: 20 * time.Second})
	older := b.Attach("", nil, []RequestKind{KindApproval})
	defer b.Detach(older)
	newer := b.Attach("", nil, []RequestKind{KindApproval})

	type outcome struct {
		reply ApprovalReply
		err   error
	}
	asked := make(chan outcome, 1)
	go func() {
		r, err := b.Approve(ctx, "demo", &ApprovalRequest{Tool: "mcp__demo__echo"})
		asked <- outcome{r, err}
	}()
	req := <-newer.Requests() // the newest agent is asked first
	b.Detach(newer)
	select {
	case again := <-older.Requests():
		if again.ID != req.ID || again.Approval.Tool != "mcp__demo__echo" {
			t.Errorf("handed on: got %s %+v, want request %s", again.ID, again.Approval, req.ID)
		}
		if err := b.Answer(older, again.ID, Reply{Approval: &ApprovalReply{Approved: true}}); err != nil {
			t.Fatalf("Answer: %v", err)
		}
	case o := <-asked:
		t.Fatalf("the request ended with its agent (%+v, %v) while another agent takes approvals", o.reply, o.err)
	}
	if o := <-asked; o.err != nil || !o.reply.Approved {
		t.Errorf("answered by the next agent: got %+v, %v; want approved", o.reply, o.err)
	}

	// The last agent leaves too: no agent, as if none had been there.
	go func() {
		r, err := b.Approve(ctx, "demo", &ApprovalRequest{Tool: "mcp__demo__echo"})
		asked <- outcome{r, err}
	}()
	<-older.Requests()
	b.Detach(older)
	if o := <-asked; !errors.Is(o.err, ErrNoApprover) {
		t.Errorf("its agent left, none other: got %+v, %v; want ErrNoApprover", o.reply, o.err)
	}
}
