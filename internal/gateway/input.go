package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// A 2026-07-28 host cannot be sent requests on a call's stream: a server
// that needs sampling, elicitation or roots answers with an input-required
// result, and the host calls again with the responses and the result's
// requestState. The endpoint relays that for the upstream calls it makes:
// while a host's call, prompt or read runs, the host is the broker's
// answerer for the server; a request the server makes (whichever era the
// server speaks) suspends the host's request, which ends with an
// input-required result naming it; the host's retry, carrying the
// requestState, answers it, and the same upstream request goes on. The
// requestState is a random token of a suspended request held here, never
// upstream state, so a tampered one names nothing and is refused.

// inputSettle is how long a suspended request waits, after the server's
// first request, for others the server sends at the same time, so that the
// host answers them in one round rather than one round each. It only
// groups requests; none is lost either way.
const inputSettle = 20 * time.Millisecond

// suspendedTimeout bounds how long a suspended request waits for the
// host's retry; then its server's requests are declined (as with no
// answerer) and its outcome is dropped.
const suspendedTimeout = 2 * time.Minute

// suspended is an upstream request that runs while its host supplies the
// server's requests.
type suspended struct {
	// of names the request it suspends (inputKey): only a retry of that
	// request, by the same caller, resumes it.
	of string
	// may reports whether the host's caller may answer a request, by the
	// callers file in force: a reload may take a kind away meanwhile.
	may    func(*mcpclient.ServerRequest) bool
	agent  *mcpclient.Agent
	detach func()         // detaches the agent and cancels the upstream request
	done   chan outcomeOf // cap 1: the upstream request's outcome
	// asked are the requests handed to the host and not yet answered, by
	// the key the host answers under.
	asked map[string]*mcpclient.ServerRequest
	// ahead are the answers the host sent with its first request, before
	// anything was asked, by the server's key; they answer the server's
	// requests of those keys until the host is first asked.
	ahead  mcp.InputResponseMap
	expiry *time.Timer
	// relay is where the upstream request reports its progress and log
	// messages (nil: it reports none): each round's host request attaches
	// to it while it waits.
	relay *noteRelay
}

// take hands req to the host, unless the host answered it ahead: then it
// answers req with that answer.
func (s *suspended) take(broker *mcpclient.Broker, req *mcpclient.ServerRequest) {
	if !s.may(req) {
		_ = broker.Answer(s.agent, req.ID, refusedReply)
		return
	}
	if resp, ok := s.ahead[req.InputKey]; ok && req.InputKey != "" {
		delete(s.ahead, req.InputKey)
		_ = broker.Answer(s.agent, req.ID, replyFrom(req.Kind, resp))
		return
	}
	s.ask(req)
}

// ask hands req to the host under the server's own key for it, so that
// the host sees the input requests the server made; under mcpd's id when
// the request has no such key (mcpd's own, or a legacy session's) or the
// key is taken.
func (s *suspended) ask(req *mcpclient.ServerRequest) {
	key := req.InputKey
	if _, taken := s.asked[key]; key == "" || taken {
		key = req.ID
	}
	s.asked[key] = req
}

type outcomeOf struct {
	res mcp.Result
	err error
}

// inputKey names a host's request for its suspended upstream request: the
// method, what it targets as the host named it, and the caller.
func inputKey(method, target string, caller access.Caller) string {
	return method + "\x00" + target + "\x00" + caller.Name
}

// withInput runs do, the upstream request of a 2026-07-28 host's call,
// prompt or read, relaying the server's requests as input-required
// results. key names the host's request (inputKey); state and responses
// are the host's retry, if it is one. relay is where do reports its
// progress and log messages, and sink this host request's queue for them
// (both nil for a request that reports none): the messages of the
// upstream request, resumed or not, go to the host request that waits for
// it. It returns the outcome, or the input requests and the state to
// return.
func (g *Gateway) withInput(ctx context.Context, caps *mcp.ClientCapabilities, caller access.Caller, server, key, state string,
	responses mcp.InputResponseMap, do func(context.Context) (mcp.Result, error),
	relay *noteRelay, sink *noteSink) (mcp.Result, mcp.InputRequestMap, string, error) {
	var s *suspended
	if state != "" {
		g.mu.Lock()
		s = g.suspended[state]
		other := s != nil && s.of != key
		if !other {
			delete(g.suspended, state)
		}
		g.mu.Unlock()
		if other {
			// Another request, or another caller, presenting it: refused, and
			// the suspended request still waits for its own retry.
			return nil, nil, "", invalidParams("requestState belongs to another request")
		}
		if s == nil {
			return nil, nil, "", invalidParams("requestState names no request waiting for input (unknown, used or expired)")
		}
		s.expiry.Stop()
		// Attached before the answers let the upstream request go on.
		detach := s.relay.attach(sink)
		defer detach()
		for key, resp := range responses {
			if req, ok := s.asked[key]; ok {
				reply := replyFrom(req.Kind, resp)
				if !s.may(req) {
					reply = refusedReply
				}
				_ = g.mgr.Requests().Answer(s.agent, req.ID, reply)
				delete(s.asked, key)
			}
		}
	} else {
		broker := g.mgr.Requests()
		kinds := g.answerable(caps, caller, server)
		if broker == nil || len(kinds) == 0 {
			detach := relay.attach(sink)
			defer detach()
			res, err := do(mcpclient.WithAnswerer(ctx, nil))
			return res, nil, "", err
		}
		agent := broker.AttachToCall(caller.Name, []string{server}, kinds)
		// The upstream request outlives this HTTP request when it needs
		// input; its own deadline (the Manager's) still bounds it, and it
		// is cancelled when the host goes away or does not come back.
		upCtx, cancelUp := context.WithCancel(context.WithoutCancel(ctx))
		// Answers sent ahead, with no requestState, are used for the
		// server's requests of their keys: a server that knows the
		// answers it needs completes in one round.
		may := func(req *mcpclient.ServerRequest) bool { return g.mayAnswer(caller, req) }
		s = &suspended{of: key, may: may, agent: agent, done: make(chan outcomeOf, 1), asked: map[string]*mcpclient.ServerRequest{}, ahead: responses, relay: relay}
		s.detach = sync.OnceFunc(func() {
			broker.Detach(agent)
			cancelUp()
		})
		detach := relay.attach(sink)
		defer detach()
		go func() {
			res, err := do(mcpclient.WithAnswerer(upCtx, agent))
			s.done <- outcomeOf{res, err}
		}()
	}
	return g.awaitInput(ctx, s)
}

// awaitInput waits for the suspended request's outcome, or for requests of
// its server to hand the host.
func (g *Gateway) awaitInput(ctx context.Context, s *suspended) (mcp.Result, mcp.InputRequestMap, string, error) {
	broker := g.mgr.Requests()
	for len(s.asked) == 0 {
		select {
		case o := <-s.done:
			s.detach()
			return o.res, nil, "", o.err
		case req := <-s.agent.Requests():
			s.take(broker, req)
		case <-ctx.Done():
			// The host went away, or cancelled: so does the upstream
			// request.
			s.detach()
			return nil, nil, "", ctx.Err()
		}
	}
	settle := time.NewTimer(inputSettle)
	defer settle.Stop()
	for more := true; more; {
		select {
		case req := <-s.agent.Requests():
			s.take(broker, req)
		case <-settle.C:
			more = false
		}
	}
	s.ahead = nil // the host has been asked: it answers from now on
	inputs := make(mcp.InputRequestMap, len(s.asked))
	for id, req := range s.asked {
		inputs[id] = inputRequest(req)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	g.mu.Lock()
	if g.suspended == nil {
		g.suspended = make(map[string]*suspended)
	}
	// The timer exists before the entry does: releaseSuspended stops the
	// timer of every entry it finds.
	s.expiry = time.AfterFunc(suspendedTimeout, func() {
		g.mu.Lock()
		_, waiting := g.suspended[token]
		delete(g.suspended, token)
		g.mu.Unlock()
		if waiting {
			s.detach()
		}
	})
	g.suspended[token] = s
	g.mu.Unlock()
	return nil, inputs, token, nil
}

// answerable is the request kinds a host declared and its caller may
// answer for server.
func (g *Gateway) answerable(caps *mcp.ClientCapabilities, caller access.Caller, server string) []mcpclient.RequestKind {
	if caps == nil || server == "" {
		return nil
	}
	var kinds []mcpclient.RequestKind
	want := func(kind mcpclient.RequestKind, declared bool) {
		if declared && g.allowed(caller, access.Action{Verb: access.AnswerRequests, Server: server, RequestKind: kind.String()}) {
			kinds = append(kinds, kind)
		}
	}
	want(mcpclient.KindSampling, caps.Sampling != nil)
	want(mcpclient.KindElicitation, caps.Elicitation != nil)
	want(mcpclient.KindRoots, caps.RootsV2 != nil)
	return kinds
}

// inputRequest is a server's request as an input request.
func inputRequest(req *mcpclient.ServerRequest) mcp.InputRequest {
	switch req.Kind {
	case mcpclient.KindSampling:
		return req.Sampling
	case mcpclient.KindElicitation:
		return req.Elicitation
	}
	return &mcp.ListRootsParams{}
}

// replyFrom turns a host's input response into the broker's reply.
func replyFrom(kind mcpclient.RequestKind, resp mcp.InputResponse) mcpclient.Reply {
	switch r := resp.(type) {
	case *mcp.CreateMessageWithToolsResult:
		if kind == mcpclient.KindSampling && len(r.Content) <= 1 {
			out := &mcp.CreateMessageResult{Meta: r.Meta, Model: r.Model, Role: r.Role, StopReason: r.StopReason}
			if len(r.Content) == 1 {
				out.Content = r.Content[0]
			}
			return mcpclient.Reply{Sampling: out}
		}
	case *mcp.CreateMessageResult:
		if kind == mcpclient.KindSampling {
			return mcpclient.Reply{Sampling: r}
		}
	case *mcp.ElicitResult:
		if kind == mcpclient.KindElicitation {
			return mcpclient.Reply{Elicitation: r}
		}
	case *mcp.ListRootsResult:
		if kind == mcpclient.KindRoots {
			roots := r.Roots
			if roots == nil {
				roots = []*mcp.Root{}
			}
			return mcpclient.Reply{Roots: roots}
		}
	}
	return mcpclient.Reply{Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the host's input response does not answer the request"}}
}

// hostRequest is what maybeWithInput needs of a host's request.
type hostRequest interface {
	mcp.Request
	ProtocolVersion() string
	ClientCapabilities() *mcp.ClientCapabilities
}

// maybeWithInput runs do through withInput for a 2026-07-28 host, and
// plainly for the others (their server requests reach them on the
// session: answerServerRequests).
func (g *Gateway) maybeWithInput(ctx context.Context, req hostRequest, server, key, state string, responses mcp.InputResponseMap,
	do func(context.Context) (mcp.Result, error)) (mcp.Result, mcp.InputRequestMap, string, error) {
	if !statelessHost(req.ProtocolVersion()) {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
			var stop func()
			ctx, stop = g.answerServerRequests(ctx, ss, g.callerOf(req), server)
			defer stop()
		}
		res, err := do(ctx)
		return res, nil, "", err
	}
	return g.withInput(ctx, req.ClientCapabilities(), g.callerOf(req), server, key, state, responses, do, nil, nil)
}

// statelessHost reports whether a request comes from a 2026-07-28 host.
func statelessHost(version string) bool { return version >= statelessVersion }

// releaseSuspended declines every request still waiting for input; for
// Close.
func (g *Gateway) releaseSuspended() {
	g.mu.Lock()
	all := g.suspended
	g.suspended = nil
	g.mu.Unlock()
	for _, s := range all {
		s.expiry.Stop()
		s.detach()
	}
}
