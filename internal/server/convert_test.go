package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

func samplingReply(content ...*mcpdv1.Content) *mcpdv1.ServerRequestReply {
	return &mcpdv1.ServerRequestReply{Id: "r1", Result: &mcpdv1.ServerRequestReply_Sampling{Sampling: &mcpdv1.SamplingResult{
		Role: mcpdv1.Role_ROLE_ASSISTANT, Model: "m", StopReason: "endTurn", Content: content,
	}}}
}

// TestSamplingReplyKeepsAnnotationsAndMeta: the annotations and _meta an
// agent puts on its sampling answer reach the server.
func TestSamplingReplyKeepsAnnotationsAndMeta(t *testing.T) {
	meta, _ := structpb.NewStruct(map[string]any{"trace": "abc", "n": 2})
	priority := 0.25
	ann := &mcpdv1.Annotations{Audience: []mcpdv1.Role{mcpdv1.Role_ROLE_USER}, Priority: &priority, LastModified: "2025-01-12T15:00:58Z"}
	wantAnn := &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: 0.25, LastModified: "2025-01-12T15:00:58Z"}
	wantMeta := mcp.Meta{"trace": "abc", "n": 2.0}
	for _, tc := range []struct {
		name string
		in   *mcpdv1.Content
		want mcp.Content
	}{
		{"text", &mcpdv1.Content{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: "hi"}}, Annotations: ann, Meta: meta},
			&mcp.TextContent{Text: "hi", Annotations: wantAnn, Meta: wantMeta}},
		{"image", &mcpdv1.Content{Kind: &mcpdv1.Content_Image{Image: &mcpdv1.MediaContent{Data: []byte{1}, MimeType: "image/png"}}, Annotations: ann, Meta: meta},
			&mcp.ImageContent{Data: []byte{1}, MIMEType: "image/png", Annotations: wantAnn, Meta: wantMeta}},
		{"audio", &mcpdv1.Content{Kind: &mcpdv1.Content_Audio{Audio: &mcpdv1.MediaContent{Data: []byte{2}, MimeType: "audio/wav"}}, Annotations: ann, Meta: meta},
			&mcp.AudioContent{Data: []byte{2}, MIMEType: "audio/wav", Annotations: wantAnn, Meta: wantMeta}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := replyFromProto(samplingReply(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, r.Sampling.Content); diff != "" {
				t.Errorf("content (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSamplingReplyOfSeveralBlocksRefused: an MCP sampling result holds one
// block, so an answer of several is refused rather than cut to its first.
func TestSamplingReplyOfSeveralBlocksRefused(t *testing.T) {
	text := func(s string) *mcpdv1.Content {
		return &mcpdv1.Content{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: s}}}
	}
	r, err := replyFromProto(samplingReply(text("one"), text("two")))
	if err == nil {
		t.Fatalf("got reply %+v, want an error", r.Sampling)
	}
	if got := status.Code(toStatus(err)); got != codes.InvalidArgument {
		t.Errorf("got code %v, want InvalidArgument", got)
	}
}

// TestSamplingReplyReachesServerWhole: in both eras the server reads the
// annotations and _meta of the agent's sampling answer.
func TestSamplingReplyReachesServerWhole(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "sampler", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: era.versions})
			mcp.AddTool(srv, &mcp.Tool{Name: "sample"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				if len(req.Params.InputResponses) == 0 {
					return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
						"s": &mcp.CreateMessageParams{MaxTokens: 5, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "q"}}}},
					}, RequestState: "asked"}, nil, nil
				}
				var block mcp.Content
				switch r := req.Params.InputResponses["s"].(type) {
				case *mcp.CreateMessageResult:
					block = r.Content
				case *mcp.CreateMessageWithToolsResult:
					block = r.Content[0]
				}
				b, err := json.Marshal(block)
				if err != nil {
					return nil, nil, err
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
			})
			e := newEnv(t, nil)
			ctx := testContext(t)
			e.connect(t, "s", srv)
			meta, _ := structpb.NewStruct(map[string]any{"k": "v"})
			priority := 0.5
			attachAgent(t, ctx, e, nil, func(r *mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply {
				reply := samplingReply(&mcpdv1.Content{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: "a"}},
					Annotations: &mcpdv1.Annotations{Audience: []mcpdv1.Role{mcpdv1.Role_ROLE_ASSISTANT}, Priority: &priority}, Meta: meta})
				reply.Id = r.GetId()
				return reply
			})
			res, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__s__sample"})
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(res.GetContent()[0].GetText().GetText()), &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"type": "text", "text": "a", "_meta": map[string]any{"k": "v"},
				"annotations": map[string]any{"audience": []any{"assistant"}, "priority": 0.5}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the server read (-want +got):\n%s", diff)
			}
		})
	}
}

// TestIconsReachAgent: the icons of the server, its tools, resources,
// templates, prompts and resource links (2025-11-25 and later), and the
// server's description and website, reach the agent in both eras.
func TestIconsReachAgent(t *testing.T) {
	icons := []mcp.Icon{
		{Source: "https://example.com/a.png", MIMEType: "image/png", Sizes: []string{"48x48", "96x96"}, Theme: "light"},
		{Source: "data:image/svg+xml;base64,PHN2Zy8+", Sizes: []string{"any"}},
	}
	want := []*mcpdv1.Icon{
		{Src: "https://example.com/a.png", MimeType: "image/png", Sizes: []string{"48x48", "96x96"}, Theme: "light"},
		{Src: "data:image/svg+xml;base64,PHN2Zy8+", Sizes: []string{"any"}},
	}
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "iconic", Version: "1", Description: "has icons",
				WebsiteURL: "https://example.com", Icons: icons}, &mcp.ServerOptions{SupportedProtocolVersions: era.versions})
			mcp.AddTool(srv, &mcp.Tool{Name: "link", Icons: icons}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ResourceLink{URI: "test://r", Name: "r", Icons: icons}}}, nil, nil
			})
			srv.AddResource(&mcp.Resource{URI: "test://r", Name: "r", Icons: icons}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://r", Text: "r"}}}, nil
			})
			srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://t/{x}", Name: "t", Icons: icons}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{}, nil
			})
			srv.AddPrompt(&mcp.Prompt{Name: "p", Icons: icons}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{}, nil
			})
			e := newEnv(t, nil)
			ctx := testContext(t)
			e.connect(t, "s", srv)
			check := func(what string, got []*mcpdv1.Icon) {
				t.Helper()
				if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
					t.Errorf("%s icons (-want +got):\n%s", what, diff)
				}
			}
			gs, err := e.client.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "s"})
			if err != nil {
				t.Fatal(err)
			}
			info := gs.GetServer().GetServerInfo()
			check("server", info.GetIcons())
			if info.GetDescription() != "has icons" || info.GetWebsiteUrl() != "https://example.com" {
				t.Errorf("server info: got %v, want its description and website", info)
			}
			tools, err := e.client.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "s"})
			if err != nil {
				t.Fatal(err)
			}
			check("tool", tools.GetTools()[0].GetIcons())
			res, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__s__link"})
			if err != nil {
				t.Fatal(err)
			}
			check("resource link", res.GetContent()[0].GetResourceLink().GetIcons())
			resources, err := e.client.ListResources(ctx, &mcpdv1.ListResourcesRequest{Server: "s"})
			if err != nil {
				t.Fatal(err)
			}
			check("resource", resources.GetResources()[0].GetIcons())
			templates, err := e.client.ListResourceTemplates(ctx, &mcpdv1.ListResourceTemplatesRequest{Server: "s"})
			if err != nil {
				t.Fatal(err)
			}
			check("template", templates.GetResourceTemplates()[0].GetIcons())
			prompts, err := e.client.ListPrompts(ctx, &mcpdv1.ListPromptsRequest{Server: "s"})
			if err != nil {
				t.Fatal(err)
			}
			check("prompt", prompts.GetPrompts()[0].GetIcons())
		})
	}
}

// TestAgentResourceLinkKeepsIcons: an agent-defined tool's resource link
// keeps its icons on the way to MCP.
func TestAgentResourceLinkKeepsIcons(t *testing.T) {
	c, err := toolContentFromProto(&mcpdv1.Content{Kind: &mcpdv1.Content_ResourceLink{ResourceLink: &mcpdv1.ResourceLink{
		Uri: "test://r", Name: "r", Icons: []*mcpdv1.Icon{{Src: "https://example.com/i.png", MimeType: "image/png", Sizes: []string{"16x16"}, Theme: "dark"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []mcp.Icon{{Source: "https://example.com/i.png", MIMEType: "image/png", Sizes: []string{"16x16"}, Theme: "dark"}}
	if diff := cmp.Diff(want, c.(*mcp.ResourceLink).Icons); diff != "" {
		t.Errorf("icons (-want +got):\n%s", diff)
	}
}

// TestElicitationRequestKeepsParams: an elicitation request reaches the
// agent with its full params, _meta included, as a sampling request does.
func TestElicitationRequestKeepsParams(t *testing.T) {
	resp, err := serverRequestToProto(&mcpclient.ServerRequest{ID: "e1", Server: "s", Kind: mcpclient.KindElicitation,
		Elicitation: &mcp.ElicitParams{Message: "name?", Meta: mcp.Meta{"trace": "t-7"},
			RequestedSchema: map[string]any{"type": "object"}}})
	if err != nil {
		t.Fatal(err)
	}
	params := resp.GetRequest().GetElicitation().GetParams().AsMap()
	if meta, _ := params["_meta"].(map[string]any); meta["trace"] != "t-7" || params["message"] != "name?" {
		t.Errorf("elicitation params: got %v, want the request's, _meta included", params)
	}
}

// TestRootsReplyChecked: an agent's answer to a server's roots request
// holds file:// URIs, as SetRoots does; one that does not is malformed,
// and the server gets an error instead of a path that is no URI.
func TestRootsReplyChecked(t *testing.T) {
	reply := func(uris ...string) *mcpdv1.ServerRequestReply {
		var roots []*mcpdv1.Root
		for _, u := range uris {
			roots = append(roots, &mcpdv1.Root{Uri: u})
		}
		return &mcpdv1.ServerRequestReply{Id: "r", Result: &mcpdv1.ServerRequestReply_Roots{Roots: &mcpdv1.RootsResult{Roots: roots}}}
	}
	if r, err := replyFromProto(reply("file:///srv/app")); err != nil || len(r.Roots) != 1 {
		t.Errorf("a file:// root: got %v, %v", r.Roots, err)
	}
	if _, err := replyFromProto(reply("file:///srv/app", "/srv/app")); err == nil || !strings.Contains(err.Error(), "roots[1]") {
		t.Errorf("a bare path: got %v, want an error naming roots[1]", err)
	}
}
