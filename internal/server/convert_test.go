package server

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
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
