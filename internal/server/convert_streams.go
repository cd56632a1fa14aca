package server

import (
	"fmt"
	"math"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// stateFromName maps a state as events carry it (State.String()) to the
// API's enum, through the one state table.
func stateFromName(name string) mcpdv1.ServerState {
	for st, ps := range stateToProto {
		if st.String() == name {
			return ps
		}
	}
	return mcpdv1.ServerState_SERVER_STATE_UNSPECIFIED
}

func eventToProto(e events.Event) *mcpdv1.Event {
	out := &mcpdv1.Event{Sequence: e.Sequence, Time: timestamppb.New(e.Time), Server: e.Server}
	switch e.Kind {
	case events.KindResourceUpdated:
		out.Kind = &mcpdv1.Event_ResourceUpdated{ResourceUpdated: &mcpdv1.ResourceUpdated{Uri: e.URI}}
	case events.KindToolsChanged:
		out.Kind = &mcpdv1.Event_ToolsChanged{ToolsChanged: &mcpdv1.ListChanged{}}
	case events.KindPromptsChanged:
		out.Kind = &mcpdv1.Event_PromptsChanged{PromptsChanged: &mcpdv1.ListChanged{}}
	case events.KindResourcesChanged:
		out.Kind = &mcpdv1.Event_ResourcesChanged{ResourcesChanged: &mcpdv1.ListChanged{}}
	case events.KindServerState:
		out.Kind = &mcpdv1.Event_ServerState{ServerState: &mcpdv1.ServerStateChanged{State: stateFromName(e.State), Error: e.Error}}
	case events.KindLog:
		out.Kind = &mcpdv1.Event_Log{Log: logMessageToProto(e.Level, e.Logger, e.Data)}
	case events.KindPollResult:
		out.Kind = &mcpdv1.Event_PollResult{PollResult: pollResultToProto(e)}
	case events.KindGap:
		out.Kind = &mcpdv1.Event_Gap{Gap: &mcpdv1.Gap{FirstSequence: e.GapFrom, LastSequence: e.GapTo}}
	}
	return out
}

func serverRequestToProto(req *mcpclient.ServerRequest) (*mcpdv1.HandleServerRequestsResponse, error) {
	out := &mcpdv1.ServerRequest{Id: req.ID, Server: req.Server, Deadline: timestamp(req.Deadline)}
	switch req.Kind {
	case mcpclient.KindSampling:
		p := req.Sampling
		s := &mcpdv1.SamplingRequest{SystemPrompt: p.SystemPrompt, MaxTokens: int32(min(max(p.MaxTokens, 0), math.MaxInt32))}
		for _, m := range p.Messages {
			c, err := contentToProto(m.Content)
			if err != nil {
				return nil, err
			}
			msg := &mcpdv1.SamplingMessage{Role: roleToProto[m.Role]}
			if c != nil {
				msg.Content = []*mcpdv1.Content{c}
			}
			s.Messages = append(s.Messages, msg)
		}
		var err error
		if s.Params, err = jsonStruct(p); err != nil {
			return nil, fmt.Errorf("sampling params: %w", err)
		}
		out.Kind = &mcpdv1.ServerRequest_Sampling{Sampling: s}
	case mcpclient.KindElicitation:
		p := req.Elicitation
		e := &mcpdv1.ElicitationRequest{Mode: p.Mode, Message: p.Message, Url: p.URL, ElicitationId: p.ElicitationID}
		if e.Mode == "" {
			e.Mode = "form" // the only mode before 2025-11-25
		}
		var err error
		if e.RequestedSchema, err = jsonStruct(p.RequestedSchema); err != nil {
			return nil, fmt.Errorf("elicitation schema: %w", err)
		}
		if e.Params, err = jsonStruct(p); err != nil {
			return nil, fmt.Errorf("elicitation params: %w", err)
		}
		out.Kind = &mcpdv1.ServerRequest_Elicitation{Elicitation: e}
	case mcpclient.KindRoots:
		out.Kind = &mcpdv1.ServerRequest_Roots{Roots: &mcpdv1.RootsRequest{}}
	case mcpclient.KindAuthorization:
		out.Kind = &mcpdv1.ServerRequest_Authorization{Authorization: &mcpdv1.AuthorizationRequest{
			AuthorizationUrl: req.Authorization.URL,
			ExpireTime:       timestamp(req.Authorization.Expires),
		}}
	case mcpclient.KindApproval:
		p := req.Approval
		a := &mcpdv1.ApprovalRequest{Tool: p.Tool, Rule: p.Rule, Caller: p.Caller}
		if p.PollInterval > 0 {
			a.PollInterval = durationpb.New(p.PollInterval)
		}
		var err error
		if a.Arguments, err = jsonStruct(p.Arguments); err != nil {
			return nil, fmt.Errorf("approval arguments: %w", err)
		}
		if p.Annotations != nil {
			if a.Annotations, err = jsonStruct(p.Annotations); err != nil {
				return nil, fmt.Errorf("approval annotations: %w", err)
			}
		}
		out.Kind = &mcpdv1.ServerRequest_Approval{Approval: a}
	}
	return &mcpdv1.HandleServerRequestsResponse{Message: &mcpdv1.HandleServerRequestsResponse_Request{Request: out}}, nil
}

var (
	roleFromProto = map[mcpdv1.Role]mcp.Role{
		mcpdv1.Role_ROLE_USER:      "user",
		mcpdv1.Role_ROLE_ASSISTANT: "assistant",
	}
	actionFromProto = map[mcpdv1.ElicitationAction]string{
		mcpdv1.ElicitationAction_ELICITATION_ACTION_ACCEPT:  "accept",
		mcpdv1.ElicitationAction_ELICITATION_ACTION_DECLINE: "decline",
		mcpdv1.ElicitationAction_ELICITATION_ACTION_CANCEL:  "cancel",
	}
)

func replyFromProto(r *mcpdv1.ServerRequestReply) (mcpclient.Reply, error) {
	switch res := r.GetResult().(type) {
	case *mcpdv1.ServerRequestReply_Sampling:
		s := res.Sampling
		switch n := len(s.GetContent()); {
		case n == 0:
			return mcpclient.Reply{}, invalidf("sampling reply %q has no content", r.GetId())
		case n > 1:
			// An MCP sampling result holds one block: the others would be
			// lost without a word.
			return mcpclient.Reply{}, invalidf("sampling reply %q has %d content blocks; a sampling result holds one", r.GetId(), n)
		}
		c, err := contentFromProto(s.GetContent()[0])
		if err != nil {
			return mcpclient.Reply{}, err
		}
		role := roleFromProto[s.GetRole()]
		if role == "" {
			role = "assistant"
		}
		return mcpclient.Reply{Sampling: &mcp.CreateMessageResult{
			Role: role, Content: c, Model: s.GetModel(), StopReason: s.GetStopReason(),
		}}, nil
	case *mcpdv1.ServerRequestReply_Elicitation:
		action, ok := actionFromProto[res.Elicitation.GetAction()]
		if !ok {
			return mcpclient.Reply{}, invalidf("elicitation reply %q has no action", r.GetId())
		}
		out := &mcp.ElicitResult{Action: action}
		if action == "accept" {
			content, err := structToMap("elicitation.content", res.Elicitation.GetContent())
			if err != nil {
				return mcpclient.Reply{}, err
			}
			out.Content = content
		}
		return mcpclient.Reply{Elicitation: out}, nil
	case *mcpdv1.ServerRequestReply_Roots:
		roots := make([]*mcp.Root, 0, len(res.Roots.GetRoots()))
		for i, root := range res.Roots.GetRoots() {
			// As SetRoots refuses them: a server must get file:// URIs.
			// The message names the root, not its uri: it goes back to
			// the agent, which is never shown its reply's content.
			if mcpclient.CheckRootURI(root.GetUri()) != nil {
				return mcpclient.Reply{}, invalidf("roots[%d] is not a file:// URI with a path (MCP's roots are)", i)
			}
			roots = append(roots, &mcp.Root{URI: root.GetUri(), Name: root.GetName()})
		}
		return mcpclient.Reply{Roots: roots}, nil
	case *mcpdv1.ServerRequestReply_Authorization:
		return mcpclient.Reply{Authorization: &mcpclient.AuthorizationReply{RedirectURL: res.Authorization.GetRedirectUrl()}}, nil
	case *mcpdv1.ServerRequestReply_Approval:
		return mcpclient.Reply{Approval: &mcpclient.ApprovalReply{Approved: res.Approval.GetApproved(), Reason: res.Approval.GetReason()}}, nil
	case *mcpdv1.ServerRequestReply_Error:
		code := int64(res.Error.GetCode())
		if code == 0 {
			code = jsonrpc.CodeInternalError
		}
		return mcpclient.Reply{Error: &jsonrpc.Error{Code: code, Message: res.Error.GetMessage()}}, nil
	}
	return mcpclient.Reply{}, invalidf("reply %q has no result", r.GetId())
}

// contentFromProto converts the content kinds a sampling answer can hold,
// with their annotations and _meta.
func contentFromProto(c *mcpdv1.Content) (mcp.Content, error) {
	switch c.GetKind().(type) {
	case *mcpdv1.Content_Text, *mcpdv1.Content_Image, *mcpdv1.Content_Audio:
		return toolContentFromProto(c)
	}
	return nil, invalidf("sampling content must be text, image or audio")
}
