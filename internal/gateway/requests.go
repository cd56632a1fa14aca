package gateway

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// codeDeclined is the error a server receives when the host refused or
// failed its sampling request (the code the spec's examples use).
const codeDeclined = -1

// answerServerRequests attaches the session of an initialize-era host
// whose tool call, prompt or read runs to the Manager's broker as the
// answerer of the server's sampling, elicitation and roots requests, for
// the kinds the host declared and the caller may answer, until stop. The
// returned context is the one to make the upstream request with: a request
// the server makes as part of it goes to this host alone (or, when the
// host answers nothing, to nobody), not to another host's concurrent call.
// A request that carries nothing to tie it to the call (a legacy server's)
// goes to the newest attached answerer, so it reaches this host, on the
// request's stream, while this host's call is the latest. (A 2026-07-28
// host takes no requests: input.go relays them as input-required results.)
func (g *Gateway) answerServerRequests(ctx context.Context, ss *mcp.ServerSession, caller access.Caller, server string) (context.Context, func()) {
	broker := g.mgr.Requests()
	if broker == nil || ss == nil || server == "" {
		return mcpclient.WithAnswerer(ctx, nil), func() {}
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.ProtocolVersion >= "2026-07-28" {
		return mcpclient.WithAnswerer(ctx, nil), func() {}
	}
	kinds := g.answerable(ip.Capabilities, caller, server)
	if len(kinds) == 0 {
		return mcpclient.WithAnswerer(ctx, nil), func() {}
	}
	agent := broker.AttachToCall(caller.Name, []string{server}, kinds)
	askCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-askCtx.Done():
				return
			case req := <-agent.Requests():
				wg.Go(func() {
					// The callers file in force decides, for each request
					// and for its answer, as on a HandleServerRequests
					// stream: a reload may have taken the kind away since
					// the call began.
					reply := refusedReply
					if g.mayAnswer(caller, req) {
						if reply = askHost(askCtx, ss, req); !g.mayAnswer(caller, req) {
							reply = refusedReply
						}
					}
					_ = broker.Answer(agent, req.ID, reply)
				})
			}
		}
	})
	return mcpclient.WithAnswerer(ctx, agent), func() {
		broker.Detach(agent)
		cancel()
		wg.Wait()
	}
}

// refusedReply answers a server's request that the host's caller may no
// longer answer (the callers file changed since its call began), as the
// gRPC edge answers one for an agent's stream.
var refusedReply = mcpclient.NotPermittedReply()

// mayAnswer reports whether caller may answer req, by the callers file in
// force.
func (g *Gateway) mayAnswer(caller access.Caller, req *mcpclient.ServerRequest) bool {
	return g.allowed(caller, access.Action{Verb: access.AnswerRequests, Server: req.Server, RequestKind: req.Kind.String()})
}

// askHost sends one server request to the host and returns its answer.
func askHost(ctx context.Context, ss *mcp.ServerSession, req *mcpclient.ServerRequest) mcpclient.Reply {
	ctx, cancel := context.WithDeadline(ctx, req.Deadline)
	defer cancel()
	refuse := func(err error) mcpclient.Reply {
		if je, ok := err.(*jsonrpc.Error); ok {
			return mcpclient.Reply{Error: je}
		}
		return mcpclient.Reply{Error: &jsonrpc.Error{Code: codeDeclined, Message: "the MCP host did not answer the request"}}
	}
	switch req.Kind {
	case mcpclient.KindSampling:
		res, err := ss.CreateMessage(ctx, req.Sampling)
		if err != nil {
			return refuse(err)
		}
		return mcpclient.Reply{Sampling: res}
	case mcpclient.KindElicitation:
		res, err := ss.Elicit(ctx, req.Elicitation)
		if err != nil {
			return mcpclient.Reply{Elicitation: &mcp.ElicitResult{Action: "cancel"}}
		}
		return mcpclient.Reply{Elicitation: res}
	case mcpclient.KindRoots:
		res, err := ss.ListRoots(ctx, &mcp.ListRootsParams{})
		if err != nil {
			return refuse(err)
		}
		roots := res.Roots
		if roots == nil {
			roots = []*mcp.Root{}
		}
		return mcpclient.Reply{Roots: roots}
	}
	return mcpclient.Reply{Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "mcpd does not forward this request"}}
}
