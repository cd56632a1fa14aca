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
// broker asks the newest attached answerer, so a request the server makes
// meanwhile reaches this host, on the request's stream. (A 2026-07-28 host
// takes no requests: input.go relays them as input-required results.)
func (g *Gateway) answerServerRequests(ctx context.Context, ss *mcp.ServerSession, caller access.Caller, server string) (stop func()) {
	broker := g.mgr.Requests()
	if broker == nil || ss == nil || server == "" {
		return func() {}
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.ProtocolVersion >= "2026-07-28" {
		return func() {}
	}
	var kinds []mcpclient.RequestKind
	want := func(kind mcpclient.RequestKind, declared bool) {
		if declared && g.allowed(caller, access.Action{Verb: access.AnswerRequests, Server: server, RequestKind: kind.String()}) {
			kinds = append(kinds, kind)
		}
	}
	caps := ip.Capabilities
	want(mcpclient.KindSampling, caps.Sampling != nil)
	want(mcpclient.KindElicitation, caps.Elicitation != nil)
	want(mcpclient.KindRoots, caps.RootsV2 != nil)
	if len(kinds) == 0 {
		return func() {}
	}
	agent := broker.Attach([]string{server}, kinds)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case req := <-agent.Requests():
				wg.Go(func() { _ = broker.Answer(agent, req.ID, askHost(ctx, ss, req)) })
			}
		}
	})
	return func() {
		broker.Detach(agent)
		cancel()
		wg.Wait()
	}
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
