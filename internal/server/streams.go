package server

import (
	"context"
	"errors"
	"io"
	"path"
	"strconv"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// streamedNotes bounds the progress and log messages waiting to be sent on
// one CallToolStream. Beyond it they are dropped: a slow reader must never
// block the upstream session, and the result is never dropped.
const streamedNotes = 256

// errShuttingDown ends long-lived streams, and refuses new calls, when the
// daemon stops; it is retryable.
var errShuttingDown = reasonStatus(codes.Unavailable, errors.New("mcpd is shutting down"), reasonShuttingDown)

func (h *hub) CallToolStream(req *mcpdv1.CallToolStreamRequest, stream grpc.ServerStreamingServer[mcpdv1.CallToolStreamResponse]) error {
	if req.GetName() == "" {
		return toStatus(invalidf("name is required"))
	}
	logging.AddFields(stream.Context(), logging.Fields{"tool", req.GetName()})
	timeout, err := durationField("timeout", req.GetTimeout())
	if err != nil {
		return toStatus(err)
	}
	args, err := structToMap("arguments", req.GetArguments())
	if err != nil {
		return toStatus(err)
	}
	meta, err := structToMap("meta", req.GetMeta())
	if err != nil {
		return toStatus(err)
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()

	notes := make(chan *mcpdv1.CallToolStreamResponse, streamedNotes)
	push := func(m *mcpdv1.CallToolStreamResponse) {
		select {
		case notes <- m:
		default:
		}
	}
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := h.mgr.CallTool(ctx, req.GetName(), args, mcpclient.CallOptions{
			Timeout: timeout,
			Meta:    meta,
			OnProgress: func(p *mcp.ProgressNotificationParams) {
				pp := &mcpdv1.Progress{Progress: p.Progress, Message: p.Message}
				if p.Total > 0 {
					total := p.Total
					pp.Total = &total
				}
				push(&mcpdv1.CallToolStreamResponse{Kind: &mcpdv1.CallToolStreamResponse_Progress{Progress: pp}})
			},
			OnLog: func(l *mcp.LoggingMessageParams) {
				m := &mcpdv1.CallToolStreamResponse{Kind: &mcpdv1.CallToolStreamResponse_Log{
					Log: logMessageToProto(string(l.Level), l.Logger, l.Data),
				}}
				if h.tooLargeToSend(m) {
					// Sent, it would end the stream and cancel the call:
					// dropped, as messages past the queue are.
					h.log.Warn().Str("tool", req.GetName()).Msg("call's log message too large to send; dropped")
					return
				}
				push(m)
			},
		})
		done <- outcome{res, err}
	}()

	for {
		select {
		case m := <-notes:
			if err := stream.Send(m); err != nil {
				cancel()
				<-done
				return err
			}
		case o := <-done:
			// Whatever arrived before the result goes out before it.
			for len(notes) > 0 {
				if err := stream.Send(<-notes); err != nil {
					return err
				}
			}
			if o.err != nil {
				return toStatus(o.err)
			}
			res, err := callToolResultToProto(o.res)
			if err != nil {
				return toStatus(err)
			}
			return stream.Send(&mcpdv1.CallToolStreamResponse{Kind: &mcpdv1.CallToolStreamResponse_Result{Result: res}})
		}
	}
}

var eventKindFromProto = map[mcpdv1.EventKind]events.Kind{
	mcpdv1.EventKind_EVENT_KIND_RESOURCE_UPDATED:  events.KindResourceUpdated,
	mcpdv1.EventKind_EVENT_KIND_TOOLS_CHANGED:     events.KindToolsChanged,
	mcpdv1.EventKind_EVENT_KIND_PROMPTS_CHANGED:   events.KindPromptsChanged,
	mcpdv1.EventKind_EVENT_KIND_RESOURCES_CHANGED: events.KindResourcesChanged,
	mcpdv1.EventKind_EVENT_KIND_SERVER_STATE:      events.KindServerState,
	mcpdv1.EventKind_EVENT_KIND_LOG:               events.KindLog,
	mcpdv1.EventKind_EVENT_KIND_POLL_RESULT:       events.KindPollResult,
}

// AfterSequenceHeader is the response header of Subscribe that says which
// sequence the stream's events follow: a client that has seen no event
// yet resumes from it.
const AfterSequenceHeader = "mcpd-after-sequence"

func (h *hub) Subscribe(req *mcpdv1.SubscribeRequest, stream grpc.ServerStreamingServer[mcpdv1.SubscribeResponse]) error {
	ctx := stream.Context()
	filter := events.Filter{Servers: req.GetServers()}
	for _, k := range req.GetKinds() {
		kind, ok := eventKindFromProto[k]
		if !ok {
			return toStatus(invalidf("kinds: %v is not an event kind", k))
		}
		filter.Kinds = append(filter.Kinds, kind)
	}
	for _, r := range req.GetResources() {
		if r.GetServer() == "" || r.GetUri() == "" {
			return toStatus(invalidf("resources: every entry needs server and uri"))
		}
		filter.Resources = append(filter.Resources, events.Resource{Server: r.GetServer(), URI: r.GetUri()})
	}
	for _, id := range req.GetPollIds() {
		if id == "" {
			return toStatus(invalidf("poll_ids: an id must not be empty"))
		}
		filter.Polls = append(filter.Polls, id)
	}
	fallback, err := durationField("fallback_poll_interval", req.GetFallbackPollInterval())
	if err != nil {
		return toStatus(err)
	}
	if req.GetFallbackPollInterval() != nil && fallback < mcpclient.MinPollInterval {
		return toStatus(invalidf("fallback_poll_interval must be at least %v", mcpclient.MinPollInterval))
	}
	var after *uint64
	if req.AfterSequence != nil {
		v := req.GetAfterSequence()
		after = &v
	}
	// A reload of the callers file that takes away what the stream asked
	// for (a server, a resource it follows, and with it the upstream
	// subscription or fallback poll it holds) ends the stream.
	ctx, stopRecheck := h.recheckOnReload(ctx, h.access.Reloaded(), mcpdv1.MCPHub_Subscribe_FullMethodName, req)
	defer stopRecheck()
	// Events up to here were published before the stream opened: one the
	// buffer evicted before the stream read it is no drop of the stream's
	// (see droppedSince).
	opened := h.events.LastSequence()
	// Read the bus before subscribing upstream, so that the first update
	// cannot slip past.
	sub := h.events.Subscribe(filter, after)
	defer sub.Close()
	// Where the stream starts, at once: a client that loses the stream
	// before its first event resumes from there (after_sequence) and
	// misses nothing, where "from now" would skip what came meanwhile.
	if err := stream.SendHeader(metadata.Pairs(AfterSequenceHeader, strconv.FormatUint(sub.After(), 10))); err != nil {
		return err
	}
	defer h.tel.SubscriberOpened()()
	for _, r := range filter.Resources {
		release, err := h.mgr.WatchResource(ctx, r.Server, r.URI, fallback)
		if err != nil {
			return toStatus(err)
		}
		defer release()
		// A stream that resumes gets what it missed from the buffer, but
		// updates of a resource mcpd did not follow meanwhile (its last
		// holder left, and its subscription lapsed) were never published:
		// it gets one update now, as the resource may have changed. A
		// hold that began with the bus at the stream's own last event may
		// have begun after it: nothing was published in between to say.
		// after 0 is no exception: a stream that saw no event resumes
		// with it (the clients do), and cannot be told from a first one,
		// which reads the resource anyway.
		if since, ok := h.mgr.ResourceHeldSince(r.Server, r.URI); ok && after != nil && since >= *after {
			h.events.Publish(events.Event{Kind: events.KindResourceUpdated, Server: r.Server, URI: r.URI})
		}
	}
	for {
		ev, err := sub.Next(ctx)
		switch {
		case errors.Is(err, events.ErrClosed):
			return errShuttingDown
		case errors.Is(context.Cause(ctx), access.ErrPermissionDenied):
			return toStatus(context.Cause(ctx))
		case err != nil:
			return toStatus(err)
		}
		if !h.eventAllowed(ctx, ev) {
			continue
		}
		msg := &mcpdv1.SubscribeResponse{Event: eventToProto(ev)}
		if h.tooLargeToSend(msg) {
			// Sent as it is, it would end the stream, and every resume
			// after it too: the stream misses this one event instead.
			h.log.Warn().Uint64("sequence", ev.Sequence).Str("server", ev.Server).Str("kind", ev.Kind.String()).Msg("event too large to send; sent as a gap")
			ev = events.Event{Sequence: ev.Sequence, Time: ev.Time, Kind: events.KindGap, GapFrom: ev.Sequence, GapTo: ev.Sequence}
			msg = &mcpdv1.SubscribeResponse{Event: eventToProto(ev)}
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
		if ev.Kind == events.KindGap {
			h.tel.EventsDropped(droppedSince(ev, opened))
		} else {
			h.tel.EventDelivered()
		}
	}
}

// droppedSince is how many events of gap a stream opened after sequence
// opened counts as dropped: those published since it opened, which the
// buffer evicted before the stream read them. The part of a gap from
// before (a resume point, or 0 for "everything buffered") went before
// the stream existed; counting it would let any caller inflate the
// metric by reconnecting. The count is of every kind in the gap's range:
// the bus remembers whether an evicted event could have passed the
// stream's filter, not how many did.
func droppedSince(gap events.Event, opened uint64) uint64 {
	from := max(gap.GapFrom, opened+1)
	if gap.GapTo < from {
		return 0
	}
	return gap.GapTo - from + 1
}

var requestKindFromProto = map[mcpdv1.ServerRequestKind]mcpclient.RequestKind{
	mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING:      mcpclient.KindSampling,
	mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_ELICITATION:   mcpclient.KindElicitation,
	mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_ROOTS:         mcpclient.KindRoots,
	mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_AUTHORIZATION: mcpclient.KindAuthorization,
	mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_APPROVAL:      mcpclient.KindApproval,
}

// requestKinds is a registration's kinds.
func requestKinds(reg *mcpdv1.ServerRequestRegistration) ([]mcpclient.RequestKind, error) {
	var kinds []mcpclient.RequestKind
	for _, k := range reg.GetKinds() {
		kind, ok := requestKindFromProto[k]
		if !ok {
			return nil, invalidf("register.kinds: %v is not a request kind", k)
		}
		kinds = append(kinds, kind)
	}
	return kinds, nil
}

func (h *hub) HandleServerRequests(stream grpc.BidiStreamingServer[mcpdv1.HandleServerRequestsRequest, mcpdv1.HandleServerRequestsResponse]) error {
	ctx := stream.Context()
	first, err := firstMessage(h.stopping, stream.Recv)
	if errors.Is(err, io.EOF) { // the client closed its side before registering
		return toStatus(invalidf("the first message must be register"))
	}
	if err != nil {
		return err
	}
	reg := first.GetRegister()
	if reg == nil {
		return toStatus(invalidf("the first message must be register"))
	}
	kinds, err := requestKinds(reg)
	if err != nil {
		return toStatus(err)
	}
	caller, _ := access.FromContext(ctx)
	agent := h.broker.Attach(caller.Name, reg.GetServers(), kinds)
	defer h.broker.Detach(agent)
	if err := stream.Send(&mcpdv1.HandleServerRequestsResponse{
		Message: &mcpdv1.HandleServerRequestsResponse_Registered{Registered: reg},
	}); err != nil {
		return err
	}

	// Replies are read on their own goroutine; it ends when the stream
	// does (Recv fails once the handler returns). A registration sent
	// again goes to the loop below, which confirms it on the stream.
	recvErr := make(chan error, 1)
	regs := make(chan *mcpdv1.ServerRequestRegistration)
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if again := msg.GetRegister(); again != nil {
				select {
				case regs <- again:
				case <-ctx.Done():
					return
				}
				continue
			}
			reply := msg.GetReply()
			if reply == nil {
				recvErr <- toStatus(invalidf("a message must be register or reply"))
				return
			}
			// A refused reply gets the server an error now (it must not
			// wait out the deadline for an answer that cannot come) and
			// the agent a reply_refused saying why (Broker.Refuse).
			var (
				refusal  string
				toServer *jsonrpc.Error
			)
			r, err := replyFromProto(reply)
			if err != nil {
				h.log.Warn().Err(err).Str("id", reply.GetId()).Msg("malformed server request reply; the server gets an error")
				refusal = status.Convert(err).Message()
				toServer = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the client's answer was malformed"}
			}
			if server, kind, ok := h.broker.Pending(agent, reply.GetId()); ok &&
				!h.allowed(ctx, access.Action{Verb: access.AnswerRequests, Server: server, RequestKind: kind.String()}) {
				// The callers file changed since the request was handed
				// over: an answer the caller may no longer give (an
				// approval among them) counts as a refusal.
				h.log.Warn().Str("server", server).Stringer("kind", kind).Msg("server request reply refused: the agent's caller may no longer answer it")
				refusal = "the caller may no longer answer " + kind.String() + " requests of server " + server
				toServer = mcpclient.NotPermittedReply().Error
			}
			if refusal != "" {
				err = h.broker.Refuse(agent, reply.GetId(), refusal, toServer)
			} else {
				err = h.broker.Answer(agent, reply.GetId(), r)
			}
			if err != nil {
				// A late or malformed reply must not end the stream: the
				// server already got its answer.
				h.log.Warn().Err(err).Str("id", reply.GetId()).Msg("server request reply ignored")
			}
		}
	}()

	sendRefusal := func(r mcpclient.Refusal) error {
		return stream.Send(&mcpdv1.HandleServerRequestsResponse{
			Message: &mcpdv1.HandleServerRequestsResponse_ReplyRefused{ReplyRefused: &mcpdv1.ServerRequestReplyRefused{Id: r.ID, Reason: r.Reason}},
		})
	}
	for {
		select {
		case req := <-agent.Requests():
			// A refusal waiting goes first: the agent learns that its
			// reply was refused before a request that may follow from it
			// (the server's retry).
			for queued := true; queued; {
				select {
				case r := <-agent.Refused():
					if err := sendRefusal(r); err != nil {
						return err
					}
				default:
					queued = false
				}
			}
			if !h.allowed(ctx, access.Action{Verb: access.AnswerRequests, Server: req.Server, RequestKind: req.Kind.String()}) {
				// The callers file changed since the agent registered: the
				// server gets an error now instead of an answer from an
				// agent that may no longer give one.
				h.log.Warn().Str("server", req.Server).Stringer("kind", req.Kind).Msg("server request not forwarded: the agent's caller may no longer answer it")
				if aerr := h.broker.Answer(agent, req.ID, mcpclient.NotPermittedReply()); aerr != nil {
					h.log.Warn().Err(aerr).Str("server", req.Server).Msg("server request not answered")
				}
				continue
			}
			msg, err := serverRequestToProto(req)
			if err == nil && h.tooLargeToSend(msg) {
				err = errTooLargeToSend
			}
			if err != nil {
				// The server gets an error now instead of waiting out the
				// deadline for an answer that cannot come.
				h.log.Warn().Err(err).Str("server", req.Server).Msg("server request not forwarded")
				r := mcpclient.Reply{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpd could not forward the request: " + err.Error()}}
				if aerr := h.broker.Answer(agent, req.ID, r); aerr != nil {
					h.log.Warn().Err(aerr).Str("server", req.Server).Msg("server request not answered")
				}
				continue
			}
			if !h.broker.Deliver(agent, req.ID) {
				continue // mcpd stopped waiting while it was queued
			}
			if err := stream.Send(msg); err != nil {
				return err
			}
		case w := <-agent.Withdrawn():
			if err := stream.Send(&mcpdv1.HandleServerRequestsResponse{
				Message: &mcpdv1.HandleServerRequestsResponse_Cancel{Cancel: &mcpdv1.ServerRequestCancel{Id: w.ID, Reason: w.Reason}},
			}); err != nil {
				return err
			}
		case r := <-agent.Refused():
			if err := sendRefusal(r); err != nil {
				return err
			}
		case again := <-regs:
			// The agent added handlers: it takes the new kinds from now on
			// without a new stream, so that the replies of requests it
			// holds still have a stream to go back on.
			kinds, err := requestKinds(again)
			if err != nil {
				return toStatus(err)
			}
			// The same permissions as the first registration, which the
			// guard checked before this handler ran.
			asked := describe(mcpdv1.MCPHub_HandleServerRequests_FullMethodName, &mcpdv1.HandleServerRequestsRequest{
				Message: &mcpdv1.HandleServerRequestsRequest_Register{Register: again},
			}, false)
			for _, act := range asked.actions {
				if err := h.access.Authorize(caller, act); err != nil {
					rec := asked.record
					rec.Method = path.Base(mcpdv1.MCPHub_HandleServerRequests_FullMethodName)
					h.guard.refused(caller, rec, err, time.Now())
					return toStatus(err)
				}
			}
			h.broker.Update(agent, again.GetServers(), kinds)
			if err := stream.Send(&mcpdv1.HandleServerRequestsResponse{
				Message: &mcpdv1.HandleServerRequestsResponse_Registered{Registered: again},
			}); err != nil {
				return err
			}
		case err := <-recvErr:
			if errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
				return nil
			}
			if _, ok := status.FromError(err); ok {
				return err
			}
			return nil // the agent closed its side
		case <-h.stopping.Done():
			return errShuttingDown
		case <-ctx.Done():
			return nil
		}
	}
}

// firstMessage is a bidirectional stream's first message (recv is its
// Recv), or errShuttingDown when the daemon stops first: a client that
// opened the stream and sent nothing yet must not hold the graceful stop
// open until its deadline. The message is read on a goroutine of its own,
// which ends with the stream once the handler has returned.
func firstMessage[T any](stopping context.Context, recv func() (*T, error)) (*T, error) {
	type received struct {
		msg *T
		err error
	}
	got := make(chan received, 1)
	go func() {
		msg, err := recv()
		got <- received{msg, err}
	}()
	select {
	case r := <-got:
		return r.msg, r.err
	case <-stopping.Done():
		return nil, errShuttingDown
	}
}

// tooLargeToSend reports whether m is over the listener's send limit
// (Options.MaxSendBytes): gRPC would end the stream rather than send it.
// A server's message under --max-message-bytes as JSON can be over it as
// protobuf (a number array grows about fivefold as Values).
func (h *hub) tooLargeToSend(m proto.Message) bool {
	return h.maxSend > 0 && proto.Size(m) > h.maxSend
}

// errTooLargeToSend is why a message over the send limit was not
// forwarded on an agent's stream, which stays open.
var errTooLargeToSend = errors.New("too large to send once in protobuf (--max-message-bytes)")

// recheckOnReload returns a context that ends, with the denial as its
// cause (access.ErrPermissionDenied), when the callers file in force takes
// from the caller a permission the long-lived request msg of method was
// granted with: checked at once (a reload may have come since the guard's
// check) and at every reload after reloaded, the Authorizer's Reloaded
// taken before the request was read. The refusal is audited. A removed
// caller is the guard's to end (guard.stream). Without a callers file
// nothing is watched. stop ends the watch.
func (h *hub) recheckOnReload(ctx context.Context, reloaded <-chan struct{}, method string, msg any) (_ context.Context, stop func()) {
	if reloaded == nil {
		return ctx, func() {}
	}
	caller, _ := access.FromContext(ctx)
	declared := describe(method, msg, false)
	ctx, end := context.WithCancelCause(ctx)
	go func() {
		for {
			for _, act := range declared.actions {
				err := h.access.Authorize(caller, act)
				if errors.Is(err, access.ErrPermissionDenied) {
					rec := declared.record
					rec.Method = path.Base(method)
					h.guard.refused(caller, rec, err, time.Now())
					end(err)
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-reloaded:
			}
			reloaded = h.access.Reloaded()
		}
	}()
	return ctx, func() { end(nil) }
}
