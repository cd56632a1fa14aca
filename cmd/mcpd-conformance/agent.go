package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// Fixed answers to server requests: the driver plays a user who accepts
// every elicitation and a model that always says the same thing.
const (
	samplingText  = "mcpd-conformance sampling reply"
	samplingModel = "mcpd-conformance"
)

// agent answers the sampling and elicitation requests of one server over
// HandleServerRequests, the way an agent runtime attached to mcpd would.
// Roots are left to mcpd, which answers them from SetRoots. close stops it
// and waits for its goroutine.
type agent struct {
	stream mcpdv1.MCPHub_HandleServerRequestsClient
	elicit map[string]any // content of every accepted elicitation
	log    io.Writer
	cancel context.CancelFunc
	done   chan struct{}

	// sendMu serialises Send and CloseSend, which gRPC forbids running
	// concurrently.
	sendMu sync.Mutex
	// closed is set, under sendMu, when close closed the agent's side: a
	// reply that comes after (a consent still returning when the scenario
	// has seen its outcome) has nowhere to go, and is no failure.
	closed bool

	mu  sync.Mutex
	err error // the first failure to answer, if any
}

// agentCloseTimeout bounds how long close waits for mcpd to end the
// stream after the agent closed its side; then the stream is cancelled.
const agentCloseTimeout = 2 * time.Second

// startAgent registers for server's requests and returns once mcpd has
// confirmed the registration, so that requests sent while the server
// connects are answered too.
func startAgent(ctx context.Context, hub mcpdv1.MCPHubClient, server string, elicit map[string]any, log io.Writer) (*agent, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := hub.HandleServerRequests(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("HandleServerRequests: %w", err)
	}
	reg := &mcpdv1.ServerRequestRegistration{
		Servers: []string{server},
		Kinds: []mcpdv1.ServerRequestKind{
			mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING,
			mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_ELICITATION,
			mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_AUTHORIZATION,
		},
	}
	if err := stream.Send(&mcpdv1.HandleServerRequestsRequest{
		Message: &mcpdv1.HandleServerRequestsRequest_Register{Register: reg},
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("HandleServerRequests: register: %w", err)
	}
	first, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("HandleServerRequests: wait for registration: %w", err)
	}
	if first.GetRegistered() == nil {
		cancel()
		return nil, fmt.Errorf("HandleServerRequests: first message is %T, want registered", first.GetMessage())
	}
	a := &agent{stream: stream, elicit: elicit, log: log, cancel: cancel, done: make(chan struct{})}
	go a.serve(ctx)
	return a, nil
}

func (a *agent) serve(ctx context.Context) {
	defer close(a.done)
	for {
		msg, err := a.stream.Recv()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, io.EOF) && status.Code(err) != codes.Canceled {
				a.fail(fmt.Errorf("HandleServerRequests: receive: %w", err))
			}
			return
		}
		if c := msg.GetCancel(); c != nil {
			// mcpd stopped waiting: a request completed another way (a
			// consent finished through CompleteAuthorization) or ended.
			fmt.Fprintf(a.log, "HandleServerRequests: request %s withdrawn: %s\n", c.GetId(), c.GetReason())
			continue
		}
		req := msg.GetRequest()
		if req == nil {
			a.fail(fmt.Errorf("HandleServerRequests: got %T, want a request", msg.GetMessage()))
			continue
		}
		reply, err := a.answer(ctx, req)
		if err != nil {
			a.fail(err)
			reply = &mcpdv1.ServerRequestReply{Id: req.GetId(), Result: &mcpdv1.ServerRequestReply_Error{
				Error: &mcpdv1.ReplyError{Message: err.Error()},
			}}
		}
		fmt.Fprintf(a.log, "mcpd-conformance: answering %s request %s\n", requestKind(req), req.GetId())
		if sent, err := a.send(reply); err != nil || !sent {
			if err != nil && ctx.Err() == nil {
				a.fail(fmt.Errorf("HandleServerRequests: reply: %w", err))
			}
			return
		}
	}
}

// send sends a reply, unless close closed the agent's side already (sent
// is then false).
func (a *agent) send(reply *mcpdv1.ServerRequestReply) (sent bool, err error) {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	if a.closed {
		return false, nil
	}
	return true, a.stream.Send(&mcpdv1.HandleServerRequestsRequest{
		Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: reply},
	})
}

// answer builds the fixed reply to req.
func (a *agent) answer(ctx context.Context, req *mcpdv1.ServerRequest) (*mcpdv1.ServerRequestReply, error) {
	reply := &mcpdv1.ServerRequestReply{Id: req.GetId()}
	switch {
	case req.GetAuthorization() != nil:
		if err := consent(ctx, req.GetAuthorization().GetAuthorizationUrl(), a.log); err != nil {
			return nil, err
		}
		reply.Result = &mcpdv1.ServerRequestReply_Authorization{Authorization: &mcpdv1.AuthorizationResult{}}
	case req.GetSampling() != nil:
		reply.Result = &mcpdv1.ServerRequestReply_Sampling{Sampling: &mcpdv1.SamplingResult{
			Role:       mcpdv1.Role_ROLE_ASSISTANT,
			Content:    []*mcpdv1.Content{{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: samplingText}}}},
			Model:      samplingModel,
			StopReason: "endTurn",
		}}
	case req.GetElicitation() != nil:
		res := &mcpdv1.ElicitationResult{Action: mcpdv1.ElicitationAction_ELICITATION_ACTION_ACCEPT}
		// A URL elicitation is accepted without content; a form gets the
		// scenario's content (an empty form lets mcpd apply defaults).
		if req.GetElicitation().GetMode() != "url" {
			content, err := structpb.NewStruct(a.elicit)
			if err != nil {
				return nil, fmt.Errorf("elicitation content: %w", err)
			}
			res.Content = content
		}
		reply.Result = &mcpdv1.ServerRequestReply_Elicitation{Elicitation: res}
	default:
		return nil, fmt.Errorf("server request %s: unexpected kind %s", req.GetId(), requestKind(req))
	}
	return reply, nil
}

func requestKind(req *mcpdv1.ServerRequest) string {
	switch req.GetKind().(type) {
	case *mcpdv1.ServerRequest_Sampling:
		return "sampling"
	case *mcpdv1.ServerRequest_Elicitation:
		return "elicitation"
	case *mcpdv1.ServerRequest_Roots:
		return "roots"
	case *mcpdv1.ServerRequest_Authorization:
		return "authorization"
	}
	return "unknown"
}

func (a *agent) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = err
	}
}

// close closes the agent's side of the stream, waits (up to
// agentCloseTimeout) for mcpd to end it and for the agent's goroutine, and
// returns the first failure to answer a request. Ending the stream this way
// rather than cancelling it lets mcpd detach the agent before it is told to
// shut down. close is idempotent.
func (a *agent) close() error {
	a.sendMu.Lock()
	a.closed = true
	_ = a.stream.CloseSend()
	a.sendMu.Unlock()
	timer := time.NewTimer(agentCloseTimeout)
	defer timer.Stop()
	select {
	case <-a.done:
	case <-timer.C:
	}
	a.cancel()
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}
