package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

func (h *hub) StartPoll(ctx context.Context, req *mcpdv1.StartPollRequest) (*mcpdv1.StartPollResponse, error) {
	spec, err := pollSpecFromProto(req)
	if err != nil {
		return nil, toStatus(err)
	}
	caller, _ := access.FromContext(ctx)
	act := pollAction(spec)
	approved := approvedFromContext(ctx)
	spec.Permit = func() error { return h.pollPermit(caller, act, approved) }
	st, err := h.mgr.StartPoll(spec)
	if err != nil {
		return nil, toStatus(err)
	}
	return &mcpdv1.StartPollResponse{Poll: pollToProto(st)}, nil
}

func (h *hub) StopPoll(_ context.Context, req *mcpdv1.StopPollRequest) (*mcpdv1.StopPollResponse, error) {
	if req.GetId() == "" {
		return nil, toStatus(invalidf("id is required"))
	}
	if err := h.mgr.StopPoll(req.GetId()); err != nil {
		return nil, toStatus(err)
	}
	return &mcpdv1.StopPollResponse{}, nil
}

func (h *hub) ListPolls(ctx context.Context, _ *mcpdv1.ListPollsRequest) (*mcpdv1.ListPollsResponse, error) {
	out := &mcpdv1.ListPollsResponse{Polls: []*mcpdv1.Poll{}}
	caller, _ := access.FromContext(ctx)
	for _, st := range h.mgr.Polls() {
		// By the caller's own permissions: a poll a rule now pauses is
		// still there to see, and to stop.
		if h.access.Permits(caller, pollAction(st.Spec)) != nil {
			continue
		}
		out.Polls = append(out.Polls, pollToProto(st))
	}
	return out, nil
}

// pollPermit is what each request of a poll needs: the permission of the
// caller that started it, as the callers file has it now, and no rule that
// denies it. An ask rule was settled when the poll started, if an agent
// approved it then; one that came later holds the poll up, as it would
// hold up the call.
func (h *hub) pollPermit(caller access.Caller, act access.Action, approved bool) error {
	err := h.access.Authorize(caller, act)
	if need := (*access.ApprovalRequiredError)(nil); errors.As(err, &need) {
		if approved {
			return nil
		}
		return need.Denied("it was not approved when the poll started: stop the poll and start it again to ask")
	}
	return err
}

// pollAction is the permission a poll needs: that of reading its resource
// or calling its tool.
func pollAction(spec mcpclient.PollSpec) access.Action {
	if spec.URI != "" {
		return access.Action{Verb: access.ReadResource, Server: spec.Server, URI: spec.URI}
	}
	return access.Action{Verb: access.CallTool, Server: spec.Server, Tool: spec.QualifiedTool()}
}

// startPollAction is pollAction for a StartPoll request.
func startPollAction(req *mcpdv1.StartPollRequest) access.Action {
	spec, err := pollSpecFromProto(req)
	if err != nil {
		// Refused as INVALID_ARGUMENT by the handler; the server alone
		// decides who may get that far.
		return access.Action{Verb: access.ViewServer, Server: req.GetServer()}
	}
	return pollAction(spec)
}

func pollSpecFromProto(req *mcpdv1.StartPollRequest) (mcpclient.PollSpec, error) {
	interval, err := durationField("interval", req.GetInterval())
	if err != nil {
		return mcpclient.PollSpec{}, err
	}
	if req.GetInterval() != nil && interval == 0 {
		return mcpclient.PollSpec{}, invalidf("interval must be at least %v", mcpclient.MinPollInterval)
	}
	spec := mcpclient.PollSpec{Server: req.GetServer(), Interval: interval}
	switch t := req.GetTarget().(type) {
	case *mcpdv1.StartPollRequest_ResourceUri:
		spec.URI = t.ResourceUri
	case *mcpdv1.StartPollRequest_Tool:
		spec.Tool = t.Tool.GetName()
		if spec.Arguments, err = structToMap("tool.arguments", t.Tool.GetArguments()); err != nil {
			return spec, err
		}
	}
	if spec.Server == "" {
		return spec, invalidf("server is required")
	}
	if spec.URI == "" && spec.Tool == "" {
		return spec, invalidf("a poll needs a resource_uri or a tool name")
	}
	// The Manager's checks too, so that a poll it would refuse (too often,
	// another server's tool) is refused before anyone is asked to approve it.
	return spec, mcpclient.CheckPollSpec(&spec)
}

func pollToProto(st mcpclient.PollStatus) *mcpdv1.Poll {
	out := &mcpdv1.Poll{
		Id:        st.ID,
		Server:    st.Spec.Server,
		Interval:  durationpb.New(st.Spec.Interval),
		Paused:    st.Paused,
		Polls:     st.Polls,
		Changes:   st.Changes,
		LastError: st.LastError,
	}
	if !st.LastPoll.IsZero() {
		out.LastPollTime = timestamppb.New(st.LastPoll)
	}
	if st.Spec.URI != "" {
		out.Target = &mcpdv1.Poll_ResourceUri{ResourceUri: st.Spec.URI}
	} else {
		args, _ := structpb.NewStruct(st.Spec.Arguments) // they came from a Struct
		out.Target = &mcpdv1.Poll_Tool{Tool: &mcpdv1.PollToolCall{Name: st.Spec.Tool, Arguments: args}}
	}
	return out
}

// pollResultToProto converts a KindPollResult event; its Data is the
// result as MCP JSON.
func pollResultToProto(e events.Event) *mcpdv1.PollResult {
	out := &mcpdv1.PollResult{PollId: e.PollID, Baseline: e.Baseline, ResourceUri: e.URI, Tool: e.Tool, Error: e.Error}
	raw, _ := e.Data.(json.RawMessage)
	if e.Error != "" || raw == nil {
		return out
	}
	if err := pollPayloadToProto(out, raw); err != nil {
		// The result came from mcpd's own encoding; failing to read it
		// back is a bug, reported as the event's error, not a lost event.
		out.Error = fmt.Sprintf("mcpd could not convert the result: %v", err)
	}
	return out
}

func pollPayloadToProto(out *mcpdv1.PollResult, raw json.RawMessage) error {
	if out.Tool != "" {
		var res mcp.CallToolResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return err
		}
		pr, err := callToolResultToProto(&res)
		if err != nil {
			return err
		}
		out.ToolResult = pr
		return nil
	}
	var res mcp.ReadResourceResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return err
	}
	for _, c := range res.Contents {
		pc, err := resourceContentsToProto(c)
		if err != nil {
			return err
		}
		out.Contents = append(out.Contents, pc)
	}
	return nil
}
