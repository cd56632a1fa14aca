package server

import (
	"context"
	"errors"
	"io"
	"strconv"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// ServeTools serves an agent's own tools: the first message declares them,
// then calls go out and results, errors and progress come back, by id. The
// stream's end turns the server STOPPED.
func (h *hub) ServeTools(stream grpc.BidiStreamingServer[mcpdv1.ServeToolsRequest, mcpdv1.ServeToolsResponse]) error {
	ctx := stream.Context()
	// Taken before the guard checks the declaration (in the first Recv):
	// a reload from then on, even one while the server is being set up,
	// is seen below.
	reloaded := h.access.Reloaded()
	first, err := firstMessage(h.stopping, stream.Recv)
	if errors.Is(err, io.EOF) {
		return toStatus(invalidf("the first message must be declare"))
	}
	if err != nil {
		return err
	}
	decl := first.GetDeclare()
	if decl == nil {
		return toStatus(invalidf("the first message must be declare"))
	}
	logging.AddFields(ctx, logging.Fields{"server", decl.GetServer()})
	d, err := declarationFromProto(decl)
	if err != nil {
		return toStatus(err)
	}
	link, st, err := h.reg.ServeTools(ctx, d, decl.GetReplace())
	if err != nil {
		return toStatus(err)
	}
	defer link.Close()
	if err := stream.Send(&mcpdv1.ServeToolsResponse{Message: &mcpdv1.ServeToolsResponse_Serving{Serving: serverToProto(st)}}); err != nil {
		return err
	}

	// Results and progress are read on their own goroutine; it ends when
	// the stream does (Recv fails once the handler returns).
	recvErr := make(chan error, 1)
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if err := h.agentMessage(link, msg); err != nil {
				recvErr <- toStatus(err)
				return
			}
		}
	}()

	// The declaration's permission is checked again at every reload of the
	// callers file: a caller that lost it stops serving.
	permitted, stopRecheck := h.recheckOnReload(ctx, reloaded, mcpdv1.MCPHub_ServeTools_FullMethodName, first)
	defer stopRecheck()
	for {
		select {
		case <-permitted.Done():
			if err := context.Cause(permitted); errors.Is(err, access.ErrPermissionDenied) {
				return toStatus(err)
			}
			return nil // the stream ended
		case call := <-link.Outbound():
			msg, err := agentCallToProto(call)
			if err == nil && h.tooLargeToSend(msg) {
				err = errTooLargeToSend
			}
			if err != nil {
				// The caller gets an error now instead of waiting out its
				// deadline for an answer that cannot come.
				h.log.Warn().Err(err).Str("server", decl.GetServer()).Msg("tool call not forwarded")
				if aerr := link.Answer(call.ID, mcpclient.AgentReply{Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "mcpd could not forward the call's arguments: " + err.Error()}}); aerr != nil {
					h.log.Debug().Err(aerr).Msg("tool call not answered")
				}
				continue
			}
			if err := stream.Send(msg); err != nil {
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
		case <-link.Done():
			return toStatus(link.Err())
		case <-h.stopping.Done():
			return errShuttingDown
		}
	}
}

// agentMessage hands one message from the agent to the link. A late
// answer (the caller gave up) is logged, not an error: the stream goes on.
func (h *hub) agentMessage(link *mcpclient.AgentLink, msg *mcpdv1.ServeToolsRequest) error {
	switch m := msg.GetMessage().(type) {
	case *mcpdv1.ServeToolsRequest_Result:
		r, err := agentReplyFromProto(m.Result)
		if err != nil {
			// The caller must not wait out its deadline for an answer
			// that cannot come: it gets an error now.
			h.log.Warn().Err(err).Str("id", m.Result.GetId()).Msg("malformed tool result; the caller gets an error")
			r = mcpclient.AgentReply{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the agent's result was malformed"}}
		}
		if err := link.Answer(m.Result.GetId(), r); err != nil {
			h.log.Debug().Err(err).Msg("tool result ignored")
		}
	case *mcpdv1.ServeToolsRequest_Progress:
		p := m.Progress.GetProgress()
		pp := &mcp.ProgressNotificationParams{Progress: p.GetProgress(), Total: p.GetTotal(), Message: p.GetMessage()}
		if err := link.Progress(m.Progress.GetId(), pp); err != nil {
			h.log.Debug().Err(err).Msg("tool progress ignored")
		}
	case *mcpdv1.ServeToolsRequest_Declare:
		return invalidf("declare comes once, as the first message")
	default:
		return invalidf("a message must hold result or progress")
	}
	return nil
}

func declarationFromProto(d *mcpdv1.ToolServerDeclaration) (mcpclient.AgentDeclaration, error) {
	out := mcpclient.AgentDeclaration{Server: d.GetServer(), Instructions: d.GetInstructions()}
	if info := d.GetServerInfo(); info != nil {
		out.ServerInfo = &mcp.Implementation{Name: info.GetName(), Version: info.GetVersion(), Title: info.GetTitle(),
			Description: info.GetDescription(), WebsiteURL: info.GetWebsiteUrl(), Icons: iconsFromProto(info.GetIcons())}
	}
	for i, t := range d.GetTools() {
		tool := &mcp.Tool{
			Name:        t.GetName(),
			Title:       t.GetTitle(),
			Description: t.GetDescription(),
			InputSchema: map[string]any{"type": "object"},
		}
		// They go to every caller's tool list as they are.
		field := func(name string) string { return "tools[" + strconv.Itoa(i) + "]." + name }
		var err error
		if s := t.GetInputSchema(); s != nil {
			if tool.InputSchema, err = structToMap(field("input_schema"), s); err != nil {
				return out, err
			}
		}
		if s := t.GetOutputSchema(); s != nil {
			if tool.OutputSchema, err = structToMap(field("output_schema"), s); err != nil {
				return out, err
			}
		}
		if m := t.GetMeta(); m != nil {
			if tool.Meta, err = structToMap(field("meta"), m); err != nil {
				return out, err
			}
		}
		if a := t.GetAnnotations(); a != nil {
			tool.Annotations = &mcp.ToolAnnotations{
				Title:           a.GetTitle(),
				ReadOnlyHint:    a.GetReadOnlyHint(),
				IdempotentHint:  a.GetIdempotentHint(),
				DestructiveHint: a.DestructiveHint,
				OpenWorldHint:   a.OpenWorldHint,
			}
		}
		out.Tools = append(out.Tools, tool)
	}
	return out, nil
}

func agentCallToProto(c mcpclient.AgentCall) (*mcpdv1.ServeToolsResponse, error) {
	if c.Cancel {
		return &mcpdv1.ServeToolsResponse{Message: &mcpdv1.ServeToolsResponse_Cancel{Cancel: &mcpdv1.ToolCallCancel{Id: c.ID, Reason: c.Reason}}}, nil
	}
	call := &mcpdv1.ToolCall{Id: c.ID, Tool: c.Tool}
	var err error
	if call.Arguments, err = structpb.NewStruct(orEmpty(c.Arguments)); err != nil {
		return nil, err
	}
	if len(c.Meta) > 0 {
		if call.Meta, err = structpb.NewStruct(c.Meta); err != nil {
			return nil, err
		}
	}
	if !c.Deadline.IsZero() {
		call.Deadline = timestamppb.New(c.Deadline)
	}
	return &mcpdv1.ServeToolsResponse{Message: &mcpdv1.ServeToolsResponse_Call{Call: call}}, nil
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func agentReplyFromProto(r *mcpdv1.ToolCallResult) (mcpclient.AgentReply, error) {
	switch o := r.GetOutcome().(type) {
	case *mcpdv1.ToolCallResult_Error:
		code := int64(o.Error.GetCode())
		if code == 0 {
			code = jsonrpc.CodeInternalError
		}
		return mcpclient.AgentReply{Error: &jsonrpc.Error{Code: code, Message: o.Error.GetMessage()}}, nil
	case *mcpdv1.ToolCallResult_Result:
		res := &mcp.CallToolResult{IsError: o.Result.GetIsError(), Content: []mcp.Content{}}
		for i, c := range o.Result.GetContent() {
			block, err := toolContentFromProto(c)
			if err != nil {
				return mcpclient.AgentReply{}, invalidf("content[%d]: %v", i, err)
			}
			res.Content = append(res.Content, block)
		}
		var err error
		if sc := o.Result.GetStructuredContent(); sc != nil {
			if res.StructuredContent, err = valueToAny("structured_content", sc); err != nil {
				return mcpclient.AgentReply{}, err
			}
		}
		if m := o.Result.GetMeta(); m != nil {
			if res.Meta, err = structToMap("meta", m); err != nil {
				return mcpclient.AgentReply{}, err
			}
		}
		return mcpclient.AgentReply{Result: res}, nil
	}
	return mcpclient.AgentReply{}, invalidf("result %q has neither result nor error", r.GetId())
}

// toolContentFromProto converts every content kind a tool result can hold.
func toolContentFromProto(c *mcpdv1.Content) (mcp.Content, error) {
	var (
		meta mcp.Meta
		ann  = annotationsFromProto(c.GetAnnotations())
		err  error
	)
	if m := c.GetMeta(); m != nil {
		if meta, err = structToMap("meta", m); err != nil {
			return nil, err
		}
	}
	switch k := c.GetKind().(type) {
	case *mcpdv1.Content_Text:
		return &mcp.TextContent{Text: k.Text.GetText(), Meta: meta, Annotations: ann}, nil
	case *mcpdv1.Content_Image:
		return &mcp.ImageContent{Data: k.Image.GetData(), MIMEType: k.Image.GetMimeType(), Meta: meta, Annotations: ann}, nil
	case *mcpdv1.Content_Audio:
		return &mcp.AudioContent{Data: k.Audio.GetData(), MIMEType: k.Audio.GetMimeType(), Meta: meta, Annotations: ann}, nil
	case *mcpdv1.Content_ResourceLink:
		l := k.ResourceLink
		return &mcp.ResourceLink{
			URI: l.GetUri(), Name: l.GetName(), Title: l.GetTitle(), Description: l.GetDescription(),
			MIMEType: l.GetMimeType(), Size: l.Size, Meta: meta, Annotations: ann, Icons: iconsFromProto(l.GetIcons()),
		}, nil
	case *mcpdv1.Content_Resource:
		r := k.Resource
		rc := &mcp.ResourceContents{URI: r.GetUri(), MIMEType: r.GetMimeType()}
		switch d := r.GetData().(type) {
		case *mcpdv1.ResourceContents_Blob:
			rc.Blob = d.Blob
		case *mcpdv1.ResourceContents_Text:
			rc.Text = d.Text
		}
		if m := r.GetMeta(); m != nil {
			if rc.Meta, err = structToMap("resource.meta", m); err != nil {
				return nil, err
			}
		}
		return &mcp.EmbeddedResource{Resource: rc, Meta: meta, Annotations: ann}, nil
	}
	return nil, errors.New("content has no kind")
}

func annotationsFromProto(a *mcpdv1.Annotations) *mcp.Annotations {
	if a == nil {
		return nil
	}
	out := &mcp.Annotations{LastModified: a.GetLastModified(), Priority: a.GetPriority()}
	for _, r := range a.GetAudience() {
		if role, ok := roleFromProto[r]; ok {
			out.Audience = append(out.Audience, role)
		}
	}
	return out
}

func iconsFromProto(icons []*mcpdv1.Icon) []mcp.Icon {
	var out []mcp.Icon
	for _, i := range icons {
		out = append(out, mcp.Icon{Source: i.GetSrc(), MIMEType: i.GetMimeType(), Sizes: i.GetSizes(), Theme: mcp.IconTheme(i.GetTheme())})
	}
	return out
}
