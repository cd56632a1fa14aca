package mcpclient

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server-to-client requests (sampling, elicitation, roots) reach these
// handlers in both eras: as requests on legacy sessions, and through the
// SDK's multi-round-trip middleware for 2026-07-28 input-required results.
// Each goes to an attached agent through the Broker; without one, mcpd
// answers as the spec prescribes.

// codeUserRejected is the error code the spec's examples use when the
// user or client declines a sampling request.
const codeUserRejected = -1

func (u *upstream) onCreateMessage(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	// Bound to the run: stopping the server must not wait for an agent.
	ctx, unbind := u.bindRun(ctx)
	defer unbind()
	r, err := u.opts.Requests.ask(ctx, &ServerRequest{Server: u.cfg.Name, Kind: KindSampling, Sampling: req.Params})
	switch {
	case errors.Is(err, errNoAgent):
		return nil, &jsonrpc.Error{Code: codeUserRejected, Message: "sampling declined: no agent is attached to answer it"}
	case err != nil:
		return nil, &jsonrpc.Error{Code: codeUserRejected, Message: "sampling declined: the agent did not answer in time"}
	case r.Error != nil:
		return nil, r.Error
	}
	return r.Sampling, nil
}

func (u *upstream) onElicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	ctx, unbind := u.bindRun(ctx)
	defer unbind()
	r, err := u.opts.Requests.ask(ctx, &ServerRequest{Server: u.cfg.Name, Kind: KindElicitation, Elicitation: req.Params})
	switch {
	case errors.Is(err, errNoAgent):
		return &mcp.ElicitResult{Action: "decline"}, nil
	case err != nil:
		// Nobody chose: the spec's "cancel" is a dismissal without a choice.
		return &mcp.ElicitResult{Action: "cancel"}, nil
	case r.Error != nil:
		return nil, r.Error
	}
	return r.Elicitation, nil
}

// rootsMiddleware forwards roots/list to an agent that registered for it;
// otherwise the SDK answers from the roots set with SetRoots.
func (u *upstream) rootsMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "roots/list" || u.opts.Requests == nil || !u.opts.Requests.wants(u.cfg.Name, KindRoots) {
			return next(ctx, method, req)
		}
		ctx, unbind := u.bindRun(ctx)
		defer unbind()
		r, err := u.opts.Requests.ask(ctx, &ServerRequest{Server: u.cfg.Name, Kind: KindRoots})
		switch {
		case err != nil:
			return next(ctx, method, req)
		case r.Error != nil:
			return nil, r.Error
		}
		return &mcp.ListRootsResult{Roots: r.Roots}, nil
	}
}
