package server

import (
	"context"
	"math"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// page cuts one page out of a list sorted by key(i).
func page[T any](items []T, token string, size int32, key func(T) string) (out []T, next string, err error) {
	start, n, err := pageBounds(token, size, len(items), func(i int) string { return key(items[i]) })
	if err != nil {
		return nil, "", err
	}
	end := min(start+n, len(items))
	if end < len(items) {
		next = pageToken(key(items[end-1]))
	}
	return items[start:end], next, nil
}

// serverKey orders items by server, then a per-server key; NUL cannot occur
// in either.
func serverKey(server, key string) string { return server + "\x00" + key }

func (h *hub) ListResources(ctx context.Context, req *mcpdv1.ListResourcesRequest) (*mcpdv1.ListResourcesResponse, error) {
	all, err := h.mgr.ListResources(ctx, req.GetServer(), h.visible(ctx))
	if err != nil {
		return nil, toStatus(err)
	}
	all = slices.DeleteFunc(all, func(r mcpclient.Resource) bool {
		return !h.allowed(ctx, access.Action{Verb: access.ReadResource, Server: r.Server, URI: r.Resource.URI})
	})
	items, next, err := page(all, req.GetPageToken(), req.GetPageSize(), func(r mcpclient.Resource) string {
		return serverKey(r.Server, r.Resource.URI)
	})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &mcpdv1.ListResourcesResponse{NextPageToken: next}
	for _, r := range items {
		out.Resources = append(out.Resources, resourceToProto(r))
	}
	return out, nil
}

func (h *hub) ListResourceTemplates(ctx context.Context, req *mcpdv1.ListResourceTemplatesRequest) (*mcpdv1.ListResourceTemplatesResponse, error) {
	all, err := h.mgr.ListResourceTemplates(ctx, req.GetServer(), h.visible(ctx))
	if err != nil {
		return nil, toStatus(err)
	}
	all = slices.DeleteFunc(all, func(t mcpclient.ResourceTemplate) bool {
		return !h.allowed(ctx, access.Action{Verb: access.ReadResource, Server: t.Server, URI: t.Template.URITemplate})
	})
	items, next, err := page(all, req.GetPageToken(), req.GetPageSize(), func(t mcpclient.ResourceTemplate) string {
		return serverKey(t.Server, t.Template.URITemplate)
	})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &mcpdv1.ListResourceTemplatesResponse{NextPageToken: next}
	for _, t := range items {
		out.ResourceTemplates = append(out.ResourceTemplates, resourceTemplateToProto(t))
	}
	return out, nil
}

func (h *hub) ReadResource(ctx context.Context, req *mcpdv1.ReadResourceRequest) (*mcpdv1.ReadResourceResponse, error) {
	if req.GetServer() == "" || req.GetUri() == "" {
		return nil, toStatus(invalidf("server and uri are required"))
	}
	res, err := h.mgr.ReadResource(ctx, req.GetServer(), req.GetUri())
	if err != nil {
		return nil, toStatus(err)
	}
	out := &mcpdv1.ReadResourceResponse{}
	for _, c := range res.Contents {
		pc, err := resourceContentsToProto(c)
		if err != nil {
			return nil, toStatus(err)
		}
		out.Contents = append(out.Contents, pc)
	}
	if out.Meta, err = metaStruct(res.Meta); err != nil {
		return nil, toStatus(err)
	}
	return out, nil
}

func (h *hub) ListPrompts(ctx context.Context, req *mcpdv1.ListPromptsRequest) (*mcpdv1.ListPromptsResponse, error) {
	all, err := h.mgr.ListPrompts(ctx, req.GetServer(), h.visible(ctx))
	if err != nil {
		return nil, toStatus(err)
	}
	all = slices.DeleteFunc(all, func(p mcpclient.Prompt) bool {
		return !h.allowed(ctx, access.Action{Verb: access.GetPrompt, Server: p.Server, Prompt: p.Prompt.Name})
	})
	items, next, err := page(all, req.GetPageToken(), req.GetPageSize(), func(p mcpclient.Prompt) string {
		return serverKey(p.Server, p.Prompt.Name)
	})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &mcpdv1.ListPromptsResponse{NextPageToken: next}
	for _, p := range items {
		out.Prompts = append(out.Prompts, promptToProto(p))
	}
	return out, nil
}

func (h *hub) GetPrompt(ctx context.Context, req *mcpdv1.GetPromptRequest) (*mcpdv1.GetPromptResponse, error) {
	if req.GetServer() == "" || req.GetName() == "" {
		return nil, toStatus(invalidf("server and name are required"))
	}
	res, err := h.mgr.GetPrompt(ctx, req.GetServer(), req.GetName(), req.GetArguments())
	if err != nil {
		return nil, toStatus(err)
	}
	out := &mcpdv1.GetPromptResponse{Description: res.Description}
	for _, m := range res.Messages {
		c, err := contentToProto(m.Content)
		if err != nil {
			return nil, toStatus(err)
		}
		out.Messages = append(out.Messages, &mcpdv1.PromptMessage{Role: roleToProto[m.Role], Content: c})
	}
	if out.Meta, err = metaStruct(res.Meta); err != nil {
		return nil, toStatus(err)
	}
	return out, nil
}

func (h *hub) Complete(ctx context.Context, req *mcpdv1.CompleteRequest) (*mcpdv1.CompleteResponse, error) {
	params := &mcp.CompleteParams{
		Argument: mcp.CompleteParamsArgument{Name: req.GetArgument().GetName(), Value: req.GetArgument().GetValue()},
	}
	switch ref := req.GetRef().(type) {
	case *mcpdv1.CompleteRequest_Prompt:
		params.Ref = &mcp.CompleteReference{Type: "ref/prompt", Name: ref.Prompt}
	case *mcpdv1.CompleteRequest_ResourceTemplate:
		params.Ref = &mcp.CompleteReference{Type: "ref/resource", URI: ref.ResourceTemplate}
	}
	switch {
	case req.GetServer() == "":
		return nil, toStatus(invalidf("server is required"))
	case params.Ref == nil:
		return nil, toStatus(invalidf("one of prompt or resource_template is required"))
	case params.Argument.Name == "":
		return nil, toStatus(invalidf("argument.name is required"))
	}
	if len(req.GetContext()) > 0 {
		params.Context = &mcp.CompleteContext{Arguments: req.GetContext()}
	}
	res, err := h.mgr.Complete(ctx, req.GetServer(), params)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &mcpdv1.CompleteResponse{Values: res.Completion.Values, HasMore: res.Completion.HasMore}
	if res.Completion.Total > 0 {
		total := int32(min(res.Completion.Total, math.MaxInt32)) // a server may count past the proto's int32
		out.Total = &total
	}
	return out, nil
}

func (h *hub) SetLogLevel(ctx context.Context, req *mcpdv1.SetLogLevelRequest) (*mcpdv1.SetLogLevelResponse, error) {
	if req.GetServer() == "" {
		return nil, toStatus(invalidf("server is required"))
	}
	level, ok := logLevelFromProto[req.GetLevel()]
	if !ok && req.GetLevel() == mcpdv1.LogLevel_LOG_LEVEL_UNSPECIFIED {
		return nil, toStatus(invalidf("level is required"))
	}
	if !ok {
		return nil, toStatus(invalidf("level %d is not a LogLevel this mcpd knows", req.GetLevel()))
	}
	if err := h.mgr.SetLogLevel(ctx, req.GetServer(), level); err != nil {
		return nil, toStatus(err)
	}
	return &mcpdv1.SetLogLevelResponse{}, nil
}

func (h *hub) SetRoots(_ context.Context, req *mcpdv1.SetRootsRequest) (*mcpdv1.SetRootsResponse, error) {
	roots := make([]*mcp.Root, 0, len(req.GetRoots()))
	for _, r := range req.GetRoots() {
		roots = append(roots, &mcp.Root{URI: r.GetUri(), Name: r.GetName()})
	}
	if err := h.mgr.SetRoots(req.GetServer(), roots); err != nil {
		return nil, toStatus(err)
	}
	return &mcpdv1.SetRootsResponse{}, nil
}
