package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RequestKind is a kind of request a server sends to its client.
type RequestKind int

// The request kinds an agent can answer.
const (
	KindSampling RequestKind = iota + 1
	KindElicitation
	KindRoots
	// KindAuthorization is a server's need for a person's consent. Only
	// agents that name it get it: an agent registered for all kinds was
	// written before it existed.
	KindAuthorization
	// KindApproval is mcpd's own question, not a server's: may a tool
	// call that an "ask" rule holds proceed? Only agents that name it get
	// it.
	KindApproval
)

// ServerRequest is a server's request, handed to an agent to answer.
type ServerRequest struct {
	// ID identifies the request in the agent's reply.
	ID     string
	Server string
	Kind   RequestKind
	// One of these is set, by Kind (KindRoots has no params).
	Sampling      *mcp.CreateMessageParams
	Elicitation   *mcp.ElicitParams
	Authorization *AuthorizationRequest
	Approval      *ApprovalRequest
	// Deadline is when mcpd stops waiting and answers the server itself.
	Deadline time.Time
	// InputKey is the server's own key for the request, when it came as
	// one of the input requests of a 2026-07-28 result; empty otherwise.
	// The MCP endpoint hands it on to the host under that key.
	InputKey string
}

// Reply is an agent's answer to a ServerRequest: one field is set.
type Reply struct {
	Sampling      *mcp.CreateMessageResult
	Elicitation   *mcp.ElicitResult
	Roots         []*mcp.Root
	Authorization *AuthorizationReply
	Approval      *ApprovalReply
	// Error refuses the request; the server receives it as a JSON-RPC
	// error.
	Error *jsonrpc.Error
}

// NotPermittedReply is the answer to a server's request that the caller
// of the agent (or host) it went to may not answer, or no longer may: the
// callers file changed since. Every wire refuses with it.
func NotPermittedReply() Reply {
	return Reply{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the client may not answer this request"}}
}

// BrokerOptions configure a Broker.
type BrokerOptions struct {
	// Timeout bounds how long a server's request waits for an agent's
	// reply; default 60s.
	Timeout time.Duration
	// QueueSize bounds the requests waiting to be read by one agent;
	// default 64. A full agent is skipped as if absent.
	QueueSize int
}

// Broker hands server requests to attached agents and their replies back.
// With no agent for a request, the caller answers it itself as the spec
// says (decline, or an error). Its methods are safe for concurrent use.
type Broker struct {
	timeout   time.Duration
	queueSize int

	mu      sync.Mutex
	agents  []*Agent // newest last; the newest matching agent is asked
	pending map[string]*pendingRequest
	nextID  uint64
}

type pendingRequest struct {
	agent  *Agent
	server string
	kind   RequestKind
	reply  chan Reply // capacity 1
	// delivered says the agent's edge sent the request on (Deliver): only
	// then is the agent told when mcpd stops waiting for it.
	delivered bool // under Broker.mu
}

// Withdrawal tells an agent that mcpd no longer waits for the reply to a
// request it delivered.
type Withdrawal struct {
	// ID is the request's.
	ID string
	// Reason says why, for the agent's log.
	Reason string
}

// Refusal tells an agent that mcpd refused its reply to a request it was
// handed and answered the server with an error instead.
type Refusal struct {
	// ID is the request's.
	ID string
	// Reason says what was wrong with the reply, without quoting it.
	Reason string
}

// NewBroker returns a Broker with no agents.
func NewBroker(opts *BrokerOptions) *Broker {
	b := &Broker{timeout: 60 * time.Second, queueSize: 64, pending: make(map[string]*pendingRequest)}
	if opts != nil && opts.Timeout > 0 {
		b.timeout = opts.Timeout
	}
	if opts != nil && opts.QueueSize > 0 {
		b.queueSize = opts.QueueSize
	}
	return b
}

// Agent is one attached answerer of server requests.
type Agent struct {
	owner    string        // the caller it answers for (OnBehalfOf)
	callOnly bool          // AttachToCall
	servers  []string      // empty: all; under Broker.mu
	kinds    []RequestKind // empty: all; under Broker.mu
	requests chan *ServerRequest
	// withdrawn holds the requests the agent was sent that mcpd stopped
	// waiting for.
	withdrawn chan Withdrawal
	// refused holds the refusals of the agent's replies.
	refused chan Refusal
	gone    chan struct{}
	once    sync.Once
}

// Requests delivers the requests the agent must answer.
func (a *Agent) Requests() <-chan *ServerRequest { return a.requests }

// Withdrawn delivers the delivered requests (see Broker.Deliver) whose
// replies mcpd no longer waits for: the server cancelled the request, the
// call it belongs to ended, or its deadline passed. Each comes after the
// request's own delivery; a reply to it is dropped.
func (a *Agent) Withdrawn() <-chan Withdrawal { return a.withdrawn }

// Refused delivers the agent's replies that mcpd refused (see Refuse, and
// Answer for a reply that does not answer its request). Each comes before
// the server gets its error, so before any request that follows from it.
// Best effort: a refusal that finds the channel full is dropped.
func (a *Agent) Refused() <-chan Refusal { return a.refused }

func (a *Agent) wants(server string, kind RequestKind) bool {
	return (len(a.servers) == 0 || slices.Contains(a.servers, server)) &&
		((len(a.kinds) == 0 && kind != KindAuthorization && kind != KindApproval) || slices.Contains(a.kinds, kind))
}

// Attach registers an agent of owner (a caller's name) for the given
// servers and kinds (empty means all). Detach it when its stream ends.
func (b *Broker) Attach(owner string, servers []string, kinds []RequestKind) *Agent {
	return b.attach(&Agent{owner: owner, servers: slices.Clone(servers), kinds: slices.Clone(kinds)})
}

// AttachToCall registers an agent for the requests of one call, which the
// call pins to it with WithAnswerer: it takes no request that belongs to
// another call, only those and the ones that belong to no call (a legacy
// server's, which go to the newest agent).
func (b *Broker) AttachToCall(owner string, servers []string, kinds []RequestKind) *Agent {
	return b.attach(&Agent{owner: owner, callOnly: true, servers: slices.Clone(servers), kinds: slices.Clone(kinds)})
}

func (b *Broker) attach(a *Agent) *Agent {
	a.requests = make(chan *ServerRequest, b.queueSize)
	a.withdrawn = make(chan Withdrawal, b.queueSize)
	a.refused = make(chan Refusal, b.queueSize)
	a.gone = make(chan struct{})
	b.mu.Lock()
	b.agents = append(b.agents, a)
	b.mu.Unlock()
	return a
}

// Update replaces what an attached agent answers (a registration sent
// again on its stream); requests it holds stay its own.
func (b *Broker) Update(a *Agent, servers []string, kinds []RequestKind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a.servers, a.kinds = slices.Clone(servers), slices.Clone(kinds)
}

// Detach removes an agent. Requests it had not answered are answered by
// their callers as if no agent had been attached. Detach is idempotent.
func (b *Broker) Detach(a *Agent) {
	a.once.Do(func() {
		b.mu.Lock()
		b.agents = slices.DeleteFunc(b.agents, func(x *Agent) bool { return x == a })
		b.mu.Unlock()
		close(a.gone)
	})
}

// Answer delivers an agent's reply. It fails for an id the agent was not
// asked, or already answered, or whose deadline passed. A reply that does
// not answer the request (another kind) is refused as Refuse does, and
// Answer returns why.
func (b *Broker) Answer(a *Agent, id string, r Reply) error {
	p, err := b.take(a, id)
	if err != nil {
		return err
	}
	if err := r.check(p.kind); err != nil {
		refuse(p, Refusal{ID: id, Reason: err.Error()}, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the client's answer was malformed"})
		return err
	}
	p.reply <- r
	return nil
}

// Refuse answers request id, which a was handed, with toServer in place
// of the agent's reply, and tells the agent why (reason, which must not
// quote the reply). It fails as Answer does for an id not pending for a.
func (b *Broker) Refuse(a *Agent, id, reason string, toServer *jsonrpc.Error) error {
	p, err := b.take(a, id)
	if err != nil {
		return err
	}
	refuse(p, Refusal{ID: id, Reason: reason}, toServer)
	return nil
}

// take removes request id, pending for a, to answer it.
func (b *Broker) take(a *Agent, id string) (*pendingRequest, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pending[id]
	if p == nil || p.agent != a {
		return nil, errorf(ErrNotFound, "no pending request %q for this stream (unknown, answered or expired)", id)
	}
	delete(b.pending, id)
	return p, nil
}

// refuse tells the agent first and the server second, so that the agent
// learns of the refusal before any request the server's error leads to.
// The notice is best effort, like a withdrawal: a full queue must not hold
// up the server's answer.
func refuse(p *pendingRequest, r Refusal, toServer *jsonrpc.Error) {
	select {
	case p.agent.refused <- r:
	default:
	}
	p.reply <- Reply{Error: toServer}
}

// Deliver marks request id, taken from a's Requests, as sent on to the
// agent, so that a withdrawal of it reaches the agent too. It reports
// false when mcpd no longer waits for the reply: the request is over, and
// is best not sent at all.
func (b *Broker) Deliver(a *Agent, id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pending[id]
	if p == nil || p.agent != a {
		return false
	}
	p.delivered = true
	return true
}

// Pending returns the server and kind of the request id that agent a was
// handed and has not answered yet; ok is false for any other id. An edge
// checks with it, when the agent answers, that its caller may still
// answer such a request.
func (b *Broker) Pending(a *Agent, id string) (server string, kind RequestKind, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pending[id]
	if p == nil || p.agent != a {
		return "", 0, false
	}
	return p.server, p.kind, true
}

// check says whether a reply answers a request of kind.
func (r Reply) check(kind RequestKind) error {
	switch {
	case r.Error != nil:
		return nil
	case kind == KindSampling && r.Sampling != nil,
		kind == KindElicitation && r.Elicitation != nil,
		kind == KindRoots && r.Roots != nil,
		kind == KindAuthorization && r.Authorization != nil,
		kind == KindApproval && r.Approval != nil:
		return nil
	}
	return errorf(ErrInvalidArgument, "the reply does not answer a %s request", kind)
}

func (k RequestKind) String() string {
	switch k {
	case KindSampling:
		return "sampling"
	case KindElicitation:
		return "elicitation"
	case KindRoots:
		return "roots"
	case KindAuthorization:
		return "authorization"
	case KindApproval:
		return "approval"
	}
	return "RequestKind(" + strconv.Itoa(int(k)) + ")"
}

// errNoAgent means no attached agent takes the request.
var errNoAgent = fmt.Errorf("no agent is attached for this request")

// Context keys of WithAnswerer, OnBehalfOf and callBound.
type (
	callAnswererKey struct{}
	onBehalfOfKey   struct{}
	callBoundKey    struct{}
)

// callBound marks ctx as an upstream request's: a server's request that
// arrives with it belongs to that request (see WithAnswerer).
func callBound(ctx context.Context) context.Context {
	return context.WithValue(ctx, callBoundKey{}, true)
}

// callAnswerer is the answerer a call's context names; agent may be nil.
type callAnswerer struct{ agent *Agent }

// WithAnswerer returns ctx for an upstream call whose own sampling,
// elicitation and roots requests go to a alone, or, when a is nil, to
// nobody (they are answered as with no agent). A server's request belongs
// to a call when it arrives with the call's context: a 2026-07-28 server's
// input requests do, through inputMiddleware (requests.go). A
// request on a legacy session carries nothing that ties it to a call and
// still goes to the newest matching agent. Approval and authorization
// requests are mcpd's own and are not routed by the call.
func WithAnswerer(ctx context.Context, a *Agent) context.Context {
	return context.WithValue(ctx, callAnswererKey{}, callAnswerer{a})
}

// OnBehalfOf returns ctx for upstream calls made for owner (a caller's
// name): the sampling, elicitation and roots requests that belong to such
// a call (see WithAnswerer) go to the newest of owner's agents that takes
// them, and only when owner has none to the newest of any.
func OnBehalfOf(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, onBehalfOfKey{}, owner)
}

// ask hands a request to the newest matching agent with room in its queue
// (routed by the call's context: WithAnswerer, OnBehalfOf) and waits for
// the reply, the deadline, or ctx. An agent that detaches before replying
// hands the request on to the next that takes it. It returns errNoAgent
// when no agent takes the request.
func (b *Broker) ask(ctx context.Context, req *ServerRequest) (Reply, error) {
	var (
		only                     callAnswerer
		owner                    string
		isPinned, isOwned, bound bool
	)
	switch req.Kind {
	case KindSampling, KindElicitation, KindRoots:
		only, isPinned = ctx.Value(callAnswererKey{}).(callAnswerer)
		owner, isOwned = ctx.Value(onBehalfOfKey{}).(string)
		bound = ctx.Value(callBoundKey{}) != nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	req.Deadline, _ = ctx.Deadline()
	p := &pendingRequest{server: req.Server, kind: req.Kind, reply: make(chan Reply, 1)}

	// offer hands req to the newest agent that matches and has room.
	offer := func(match func(*Agent) bool) {
		for i := len(b.agents) - 1; i >= 0 && p.agent == nil; i-- {
			a := b.agents[i]
			if !a.wants(req.Server, req.Kind) || !match(a) {
				continue
			}
			select {
			case a.requests <- req:
				p.agent = a
			default: // full: a stalled agent must not stall the server
			}
		}
	}
	// A call's request goes to no other call's agent.
	anyAgent := func(a *Agent) bool { return !bound || !a.callOnly }
	// place hands req to an agent, under b.mu, and reports whether one
	// took it.
	place := func() bool {
		p.agent, p.delivered = nil, false
		switch {
		case isPinned:
			offer(func(a *Agent) bool { return a == only.agent })
		case isOwned:
			offer(func(a *Agent) bool { return a.owner == owner && anyAgent(a) })
			offer(anyAgent)
		default:
			offer(anyAgent)
		}
		if p.agent == nil {
			delete(b.pending, req.ID)
			return false
		}
		b.pending[req.ID] = p
		return true
	}

	b.mu.Lock()
	b.nextID++
	req.ID = strconv.FormatUint(b.nextID, 10)
	placed := place()
	b.mu.Unlock()
	if !placed {
		return Reply{}, errNoAgent
	}
	gone := p.agent.gone
	for {
		select {
		case r := <-p.reply:
			return r, nil
		case <-gone:
			// The agent left without answering (its stream dropped): the
			// request goes to the next agent that takes it, as if the
			// first had never been there; with none, it has no agent.
			b.mu.Lock()
			answering := b.pending[req.ID] != p // it took the request to answer just before it left
			if !answering {
				placed = place()
			}
			b.mu.Unlock()
			switch {
			case answering:
				gone = nil // its reply is on the way
			case !placed:
				return Reply{}, errNoAgent
			default:
				gone = p.agent.gone
			}
		case <-ctx.Done():
			b.withdraw(req.ID, p, ctx.Err())
			return Reply{}, ctx.Err()
		}
	}
}

// Why mcpd withdraws a request from an agent.
const (
	reasonRequestDeadline  = "the request's deadline passed"
	reasonRequestCancelled = "the request was cancelled (by the server, or with the call it belongs to)"
)

// withdraw forgets the unanswered request id; when it was delivered and
// mcpd gave up on it (why is ctx's error), its agent is told. Best effort,
// like MCP's notifications/cancelled: a full queue must not hold up the
// server's answer.
func (b *Broker) withdraw(id string, p *pendingRequest, why error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending[id] != p {
		return // answered meanwhile
	}
	delete(b.pending, id)
	if why == nil || !p.delivered {
		return
	}
	w := Withdrawal{ID: id, Reason: reasonRequestCancelled}
	if errors.Is(why, context.DeadlineExceeded) {
		w.Reason = reasonRequestDeadline
	}
	select {
	case p.agent.withdrawn <- w:
	default:
	}
}

// wants reports whether some attached agent takes requests of kind from
// server.
func (b *Broker) wants(server string, kind RequestKind) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range b.agents {
		if a.wants(server, kind) {
			return true
		}
	}
	return false
}

// ApprovalRequest asks an agent whether a tool call may proceed.
type ApprovalRequest struct {
	// Tool is the qualified tool name.
	Tool string
	// Arguments are the call's arguments.
	Arguments map[string]any
	// Annotations are the tool's annotations, nil when it has none.
	Annotations *mcp.ToolAnnotations
	// Rule is the rule that asked, for example "ask mcp__*__delete_*".
	Rule string
	// Caller names who made the call.
	Caller string
	// PollInterval is set when the approval is for a poll of the tool:
	// approved, it is called with Arguments every PollInterval until the
	// poll stops, without asking again.
	PollInterval time.Duration
}

// ApprovalReply is an agent's answer to an ApprovalRequest.
type ApprovalReply struct {
	Approved bool
	// Reason explains a denial.
	Reason string
}

// Sentinel outcomes of Approve, besides the agent's own answer.
var (
	// ErrNoApprover means no attached agent takes approval requests for
	// the server (or every one that did left before answering).
	ErrNoApprover = errors.New("no agent is attached for approval requests")
	// ErrApprovalTimeout means the agent did not answer within the
	// server-request timeout.
	ErrApprovalTimeout = errors.New("the approval request timed out")
)

// Approve asks the newest agent registered for approval requests of server
// and waits for its answer. It fails with ErrNoApprover, ErrApprovalTimeout,
// or ctx's error when the caller gives up first; an agent's error reply
// counts as a denial.
func (b *Broker) Approve(ctx context.Context, server string, req *ApprovalRequest) (ApprovalReply, error) {
	r, err := b.ask(ctx, &ServerRequest{Server: server, Kind: KindApproval, Approval: req})
	switch {
	case errors.Is(err, errNoAgent):
		return ApprovalReply{}, ErrNoApprover
	case err != nil && ctx.Err() == nil:
		return ApprovalReply{}, ErrApprovalTimeout
	case err != nil:
		return ApprovalReply{}, ctx.Err()
	case r.Error != nil:
		return ApprovalReply{Reason: r.Error.Message}, nil
	}
	return *r.Approval, nil
}
