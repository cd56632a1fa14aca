package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server-to-client requests (sampling, elicitation, roots) reach the same
// three answers in both eras, onCreateMessage, onElicit and onListRoots:
// on legacy sessions as requests (through the SDK's handlers, and
// rootsMiddleware for roots/list), and for 2026-07-28 input-required
// results through inputMiddleware. Each goes to an attached agent through
// the Broker; without one, mcpd answers as the spec prescribes. Each
// answer counts once in mcpd_server_requests_total, where it is made.

// codeUserRejected is the error code the spec's examples use when the
// user or client declines a sampling request.
const codeUserRejected = -1

func (u *upstream) onCreateMessage(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	res, err := u.createMessage(ctx, req.Params)
	u.countRequest(KindSampling, res, err)
	return res, err
}

func (u *upstream) createMessage(ctx context.Context, params *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	// Bound to the run: stopping the server must not wait for an agent.
	ctx, unbind := u.bindRun(ctx)
	defer unbind()
	r, err := u.opts.Requests.ask(ctx, &ServerRequest{Server: u.cfg.Name, Kind: KindSampling, Sampling: params, InputKey: inputKeyOf(ctx)})
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
	res, err := u.elicit(ctx, req.Params)
	u.countRequest(KindElicitation, res, err)
	return res, err
}

func (u *upstream) elicit(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	ctx, unbind := u.bindRun(ctx)
	defer unbind()
	r, err := u.opts.Requests.ask(ctx, &ServerRequest{Server: u.cfg.Name, Kind: KindElicitation, Elicitation: params, InputKey: inputKeyOf(ctx)})
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

// rootsMiddleware answers a legacy session's roots/list with onListRoots.
func (u *upstream) rootsMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "roots/list" {
			return next(ctx, method, req)
		}
		res, err := u.onListRoots(ctx)
		if err != nil {
			return nil, err
		}
		return res, nil
	}
}

func (u *upstream) onListRoots(ctx context.Context) (*mcp.ListRootsResult, error) {
	res, err := u.listRoots(ctx)
	u.countRequest(KindRoots, res, err)
	return res, err
}

// listRoots asks an agent registered for roots, and otherwise (none, or
// it did not answer) answers with the roots set with SetRoots.
func (u *upstream) listRoots(ctx context.Context) (*mcp.ListRootsResult, error) {
	if u.opts.Requests != nil && u.opts.Requests.wants(u.cfg.Name, KindRoots) {
		ctx, unbind := u.bindRun(ctx)
		defer unbind()
		r, err := u.opts.Requests.ask(ctx, &ServerRequest{Server: u.cfg.Name, Kind: KindRoots, InputKey: inputKeyOf(ctx)})
		switch {
		case err != nil:
			// Unanswered: the roots of SetRoots answer instead.
		case r.Error != nil:
			return nil, r.Error
		default:
			return &mcp.ListRootsResult{Roots: r.Roots}, nil
		}
	}
	// In URI order, as the SDK lists the roots it holds.
	roots := slices.Clone(u.wants.rootsFor(u.cfg.Name))
	slices.SortFunc(roots, func(a, b *mcp.Root) int { return strings.Compare(a.URI, b.URI) })
	if roots == nil {
		roots = []*mcp.Root{} // a list, never null
	}
	return &mcp.ListRootsResult{Roots: roots}, nil
}

// inputKeyContext keys the server's own key of the input request being
// answered (see ServerRequest.InputKey).
type inputKeyContext struct{}

func inputKeyOf(ctx context.Context) string {
	key, _ := ctx.Value(inputKeyContext{}).(string)
	return key
}

// countRequest counts one answered server request in the metrics.
func (u *upstream) countRequest(kind RequestKind, res mcp.Result, err error) {
	if err != nil {
		res = nil
	}
	u.opts.Telemetry.ServerRequest(u.cfg.Name, kind.String(), res, err)
}

// Limits of inputMiddleware, the SDK's own: a request answered with input
// requests this many times fails, and so does one answered this many
// times with none at all (a server shedding load asks for a retry so).
const (
	maxInputRounds    = 10
	maxLoadShedRounds = 3
)

// inputMiddleware is the innermost sending middleware. It answers the
// input requests of a 2026-07-28 server's input-required result (SEP-2322)
// and sends the request again with the answers and the server's
// requestState, until the server answers it. It stands in for the SDK's
// multi-round-trip middleware (turned off in clientOptions), which calls
// the client's handlers directly: roots would skip the agent, and no
// request would count the way a legacy session's does.
func (u *upstream) inputMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" && method != "prompts/get" && method != "resources/read" {
			return next(ctx, method, req)
		}
		shed := 0
		for round := 1; ; round++ {
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			inputs, state, ok := inputRequestsOf(res)
			if !ok {
				return res, nil
			}
			if len(inputs) == 0 {
				shed++
			}
			switch {
			case shed >= maxLoadShedRounds:
				return nil, fmt.Errorf("multi-round-trip: the server shed the request %d times", shed)
			case round >= maxInputRounds:
				return nil, fmt.Errorf("multi-round-trip: the server still asks for input after %d rounds", round)
			}
			cs, ok := req.GetSession().(*mcp.ClientSession)
			if !ok {
				return res, nil
			}
			answers, err := u.answerInputs(ctx, cs, inputs)
			if err != nil {
				return nil, err
			}
			if req, err = withInputResponses(req, cs, answers, state); err != nil {
				return nil, err
			}
		}
	}
}

// inputRequestsOf returns the input requests of an input-required result;
// ok is false for a result that asks for none.
func inputRequestsOf(res mcp.Result) (_ mcp.InputRequestMap, state string, ok bool) {
	var inputs mcp.InputRequestMap
	switch r := res.(type) {
	case *mcp.CallToolResult:
		if r != nil {
			inputs, state = r.InputRequests, r.RequestState
		}
	case *mcp.GetPromptResult:
		if r != nil {
			inputs, state = r.InputRequests, r.RequestState
		}
	case *mcp.ReadResourceResult:
		if r != nil {
			inputs, state = r.InputRequests, r.RequestState
		}
	}
	return inputs, state, inputs != nil
}

// answerInputs answers every input request at once, as a server may ask
// for several things that only together let it go on. The first failure
// ends the others and the request.
func (u *upstream) answerInputs(ctx context.Context, cs *mcp.ClientSession, inputs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	answers := make(mcp.InputResponseMap, len(inputs))
	for id, in := range inputs {
		wg.Go(func() {
			answer, err := u.answerInput(context.WithValue(ctx, inputKeyContext{}, id), cs, in)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("multi-round-trip: input request %q: %w", id, err)
					cancel()
				}
				return
			}
			answers[id] = answer
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return answers, nil
}

// answerInput answers one input request as the same request on a legacy
// session is answered.
func (u *upstream) answerInput(ctx context.Context, cs *mcp.ClientSession, in mcp.InputRequest) (mcp.InputResponse, error) {
	switch p := in.(type) {
	case *mcp.ElicitParams:
		if u.opts.Requests == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "client does not support elicitation"}
		}
		schema, err := checkElicitation(p)
		if err != nil {
			return nil, err
		}
		res, err := u.onElicit(ctx, &mcp.ElicitRequest{Session: cs, Params: p})
		if err != nil {
			return nil, err
		}
		return res, checkElicitationResult(schema, res)
	case *mcp.CreateMessageWithToolsParams:
		base, err := samplingParams(p)
		if err != nil {
			return nil, err
		}
		return u.answerInput(ctx, cs, base)
	case *mcp.CreateMessageParams:
		if u.opts.Requests == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "client does not support CreateMessage"}
		}
		res, err := u.onCreateMessage(ctx, &mcp.CreateMessageRequest{Session: cs, Params: p})
		if err != nil {
			return nil, err
		}
		// The form a 2026-07-28 server reads (content as a list).
		var content []mcp.Content
		if res.Content != nil {
			content = []mcp.Content{res.Content}
		}
		return &mcp.CreateMessageWithToolsResult{Meta: res.Meta, Content: content,
			Model: res.Model, Role: res.Role, StopReason: res.StopReason}, nil
	case *mcp.ListRootsParams:
		return u.onListRoots(ctx)
	}
	return nil, fmt.Errorf("multi-round-trip: unknown input request %T", in)
}

// checkElicitation refuses an elicitation whose mode and fields disagree,
// as the SDK does for a legacy session's (Client.elicit), and returns its
// form's schema, resolved, if it has one. Unlike the SDK, it takes any
// schema JSON Schema can resolve rather than only flat objects of
// primitives: the answer is checked against it all the same.
func checkElicitation(p *mcp.ElicitParams) (*jsonschema.Resolved, error) {
	invalid := func(format string, args ...any) error {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
	}
	switch p.Mode {
	case "", "form":
		if p.URL != "" {
			return nil, invalid("URL must not be set for form elicitation")
		}
	case "url":
		if p.RequestedSchema != nil {
			return nil, invalid("requestedSchema must not be set for URL elicitation")
		}
		if p.URL == "" {
			return nil, invalid("URL must be set for URL elicitation")
		}
		return nil, nil
	default:
		return nil, invalid("unsupported elicitation mode: %q", p.Mode)
	}
	if p.RequestedSchema == nil {
		return nil, nil
	}
	data, err := json.Marshal(p.RequestedSchema)
	if err != nil {
		return nil, invalid("requested schema: %v", err)
	}
	var schema jsonschema.Schema
	if err := json.Unmarshal(data, &schema); err != nil {
		return nil, invalid("requested schema: %v", err)
	}
	if schema.Type != "" && schema.Type != "object" {
		return nil, invalid("elicit schema must be of type 'object', got %q", schema.Type)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return nil, invalid("failed to resolve requested schema: %v", err)
	}
	return resolved, nil
}

// checkElicitationResult refuses an accepted answer that does not fit the
// form's schema, and fills in the schema's defaults, as the SDK does for a
// legacy session's.
func checkElicitationResult(schema *jsonschema.Resolved, res *mcp.ElicitResult) error {
	if schema == nil || res == nil || res.Action != "accept" || res.Content == nil {
		return nil
	}
	if err := schema.Validate(res.Content); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("elicitation result content does not match requested schema: %v", err)}
	}
	if err := schema.ApplyDefaults(&res.Content); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("failed to apply schema defaults to elicitation result: %v", err)}
	}
	return nil
}

// samplingParams turns a sampling input request into the parameters an
// agent answers, which hold one content block per message.
func samplingParams(p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageParams, error) {
	msgs := make([]*mcp.SamplingMessage, 0, len(p.Messages))
	for _, m := range p.Messages {
		if len(m.Content) > 1 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("sampling message has %d content blocks; mcpd relays one per message", len(m.Content))}
		}
		var content mcp.Content
		if len(m.Content) == 1 {
			content = m.Content[0]
		}
		msgs = append(msgs, &mcp.SamplingMessage{Role: m.Role, Content: content})
	}
	return &mcp.CreateMessageParams{Meta: p.Meta, IncludeContext: p.IncludeContext, MaxTokens: p.MaxTokens,
		Messages: msgs, Metadata: p.Metadata, ModelPreferences: p.ModelPreferences, StopSequences: p.StopSequences,
		SystemPrompt: p.SystemPrompt, Temperature: p.Temperature}, nil
}

// withInputResponses is req again, with the answers and the server's
// state, on a copy of its params: the caller's stay as they were.
func withInputResponses(req mcp.Request, cs *mcp.ClientSession, answers mcp.InputResponseMap, state string) (mcp.Request, error) {
	switch p := req.GetParams().(type) {
	case *mcp.CallToolParams:
		cp := *p
		cp.InputResponses, cp.RequestState = answers, state
		return &mcp.ClientRequest[*mcp.CallToolParams]{Session: cs, Params: &cp}, nil
	case *mcp.CallToolParamsRaw:
		cp := *p
		cp.InputResponses, cp.RequestState = answers, state
		return &mcp.ClientRequest[*mcp.CallToolParamsRaw]{Session: cs, Params: &cp}, nil
	case *mcp.GetPromptParams:
		cp := *p
		cp.InputResponses, cp.RequestState = answers, state
		return &mcp.ClientRequest[*mcp.GetPromptParams]{Session: cs, Params: &cp}, nil
	case *mcp.ReadResourceParams:
		cp := *p
		cp.InputResponses, cp.RequestState = answers, state
		return &mcp.ClientRequest[*mcp.ReadResourceParams]{Session: cs, Params: &cp}, nil
	}
	return nil, fmt.Errorf("multi-round-trip: cannot send %T again", req.GetParams())
}
