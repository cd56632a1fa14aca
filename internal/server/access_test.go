package server

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
)

// TestDescribe checks the table from requests to actions: what each RPC
// needs, and that a request the table does not know needs manage.
func TestDescribe(t *testing.T) {
	args, _ := structpb.NewStruct(map[string]any{"q": "x"})
	for _, tc := range []struct {
		name    string
		msg     any
		want    []access.Action
		audited bool
	}{
		{"list servers", &mcpdv1.ListServersRequest{}, nil, false},
		{"list tools of all servers", &mcpdv1.ListToolsRequest{}, nil, false},
		{"list tools of one server", &mcpdv1.ListToolsRequest{Server: "gh"}, []access.Action{{Verb: access.ViewServer, Server: "gh"}}, false},
		{"get server", &mcpdv1.GetServerRequest{Name: "gh"}, []access.Action{{Verb: access.ViewServer, Server: "gh"}}, false},
		{"call tool", &mcpdv1.CallToolRequest{Name: "mcp__gh__get_issue", Arguments: args},
			[]access.Action{{Verb: access.CallTool, Server: "gh", Tool: "mcp__gh__get_issue"}}, true},
		{"call tool stream", &mcpdv1.CallToolStreamRequest{Name: "mcp__gh__get_issue"},
			[]access.Action{{Verb: access.CallTool, Server: "gh", Tool: "mcp__gh__get_issue"}}, true},
		{"read resource", &mcpdv1.ReadResourceRequest{Server: "fs", Uri: "file:///a"},
			[]access.Action{{Verb: access.ReadResource, Server: "fs", URI: "file:///a"}}, true},
		{"get prompt", &mcpdv1.GetPromptRequest{Server: "p", Name: "greet"},
			[]access.Action{{Verb: access.GetPrompt, Server: "p", Prompt: "greet"}}, true},
		{"complete prompt", &mcpdv1.CompleteRequest{Server: "p", Ref: &mcpdv1.CompleteRequest_Prompt{Prompt: "greet"}},
			[]access.Action{{Verb: access.GetPrompt, Server: "p", Prompt: "greet"}}, false},
		{"subscribe", &mcpdv1.SubscribeRequest{Servers: []string{"a"}, Resources: []*mcpdv1.ResourceRef{{Server: "b", Uri: "u"}}},
			[]access.Action{{Verb: access.ViewServer, Server: "a"}, {Verb: access.ReadResource, Server: "b", URI: "u"}}, false},
		{"register for every server", &mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Register{
			Register: &mcpdv1.ServerRequestRegistration{Kinds: []mcpdv1.ServerRequestKind{mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING}},
		}}, []access.Action{{Verb: access.AnswerRequests, Server: access.AllServers, RequestKind: "sampling"}}, false},
		{"reply", &mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{}}, nil, false},
		{"connect", &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{Name: "n"}}, []access.Action{{Verb: access.ManageServers, Server: "n"}}, true},
		{"disconnect", &mcpdv1.DisconnectServerRequest{Name: "n"}, []access.Action{{Verb: access.ManageServers, Server: "n"}}, true},
		{"restart", &mcpdv1.RestartServerRequest{Name: "n"}, []access.Action{{Verb: access.ManageServers, Server: "n"}}, true},
		{"set log level", &mcpdv1.SetLogLevelRequest{Server: "n"}, []access.Action{{Verb: access.ManageServers, Server: "n"}}, true},
		{"set roots everywhere", &mcpdv1.SetRootsRequest{}, []access.Action{{Verb: access.ManageServers, Server: access.AllServers}}, true},
		{"a request the table does not know", &mcpdv1.Server{}, []access.Action{{Verb: access.ManageServers}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := describe("M", tc.msg, false)
			if diff := cmp.Diff(tc.want, got.actions); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if got.audited != tc.audited {
				t.Errorf("audited: got %v, want %v", got.audited, tc.audited)
			}
			if got.record.Arguments != nil {
				t.Errorf("arguments recorded without being asked: %v", got.record.Arguments)
			}
		})
	}
	if got := describe("CallTool", &mcpdv1.CallToolRequest{Name: "mcp__a__b", Arguments: args}, true); got.record.Arguments["q"] != "x" {
		t.Errorf("arguments when asked: got %v, want q=x", got.record.Arguments)
	}
}
