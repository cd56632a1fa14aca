package server

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// TestLongNamesRefused: a name longer than any server or tool name can be
// names nothing. It is refused as a bad request, quoting no more than
// its start, and the log and the audit trail do not copy it either,
// whatever the request: a megabyte name must not cost a megabyte of
// answer and of log per call.
func TestLongNamesRefused(t *testing.T) {
	var log, audit syncBuffer
	e := newEnv(t, &envOptions{server: Options{
		Logger: zerolog.New(&log),
		Audit:  access.NewAuditor(zerolog.New(&audit), nil),
	}})
	var calls atomic.Int64
	e.connect(t, "p", probeServer(nil, &calls))
	long := strings.Repeat("a", 1<<20)
	pollTool := func(ctx context.Context, server, tool string) error {
		_, err := e.client.StartPoll(ctx, &mcpdv1.StartPollRequest{Server: server, Interval: durationpb.New(time.Hour),
			Target: &mcpdv1.StartPollRequest_Tool{Tool: &mcpdv1.PollToolCall{Name: tool}}})
		return err
	}
	for name, call := range map[string]func(context.Context) error{
		"GetServer": func(ctx context.Context) error {
			_, err := e.client.GetServer(ctx, &mcpdv1.GetServerRequest{Name: long})
			return err
		},
		"DisconnectServer": func(ctx context.Context) error {
			_, err := e.client.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: long})
			return err
		},
		"RestartServer": func(ctx context.Context) error {
			_, err := e.client.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: long})
			return err
		},
		"SetServerEnabled": func(ctx context.Context) error {
			_, err := e.client.SetServerEnabled(ctx, &mcpdv1.SetServerEnabledRequest{Name: long, Enabled: true})
			return err
		},
		"ConnectServer": func(ctx context.Context) error {
			_, err := e.client.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{Name: long,
				Transport: &mcpdv1.ServerConfig_Http{Http: &mcpdv1.HttpConfig{Url: "http://in-memory/x"}}}})
			return err
		},
		"CallTool, bare name": func(ctx context.Context) error {
			_, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: long})
			return err
		},
		"CallTool, long server": func(ctx context.Context) error {
			_, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__" + long + "__probe"})
			return err
		},
		"CallTool, long tool": func(ctx context.Context) error {
			_, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__p__" + long})
			return err
		},
		"CallToolStream": func(ctx context.Context) error {
			stream, err := e.client.CallToolStream(ctx, &mcpdv1.CallToolStreamRequest{Name: "mcp__p__" + long})
			if err == nil {
				_, err = stream.Recv()
			}
			return err
		},
		"ReadResource": func(ctx context.Context) error {
			_, err := e.client.ReadResource(ctx, &mcpdv1.ReadResourceRequest{Server: long, Uri: "test://a"})
			return err
		},
		"GetPrompt": func(ctx context.Context) error {
			_, err := e.client.GetPrompt(ctx, &mcpdv1.GetPromptRequest{Server: long, Name: "p"})
			return err
		},
		"ReadResource, long uri": func(ctx context.Context) error {
			_, err := e.client.ReadResource(ctx, &mcpdv1.ReadResourceRequest{Server: "p", Uri: "test://" + long})
			return err
		},
		"GetPrompt, long name": func(ctx context.Context) error {
			_, err := e.client.GetPrompt(ctx, &mcpdv1.GetPromptRequest{Server: "p", Name: long})
			return err
		},
		"Complete, long prompt": func(ctx context.Context) error {
			_, err := e.client.Complete(ctx, &mcpdv1.CompleteRequest{Server: "p", Ref: &mcpdv1.CompleteRequest_Prompt{Prompt: long},
				Argument: &mcpdv1.CompleteArgument{Name: "a"}})
			return err
		},
		"Complete, long template": func(ctx context.Context) error {
			_, err := e.client.Complete(ctx, &mcpdv1.CompleteRequest{Server: "p", Ref: &mcpdv1.CompleteRequest_ResourceTemplate{ResourceTemplate: "test://" + long},
				Argument: &mcpdv1.CompleteArgument{Name: "a"}})
			return err
		},
		"Subscribe, long uri": func(ctx context.Context) error {
			stream, err := e.client.Subscribe(ctx, &mcpdv1.SubscribeRequest{Resources: []*mcpdv1.ResourceRef{{Server: "p", Uri: "test://" + long}}})
			if err == nil {
				_, err = stream.Recv()
			}
			return err
		},
		"StartPoll, long uri": func(ctx context.Context) error {
			_, err := e.client.StartPoll(ctx, &mcpdv1.StartPollRequest{Server: "p", Interval: durationpb.New(time.Hour),
				Target: &mcpdv1.StartPollRequest_ResourceUri{ResourceUri: "test://" + long}})
			return err
		},
		"ListTools": func(ctx context.Context) error {
			_, err := e.client.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: long})
			return err
		},
		"SetLogLevel": func(ctx context.Context) error {
			_, err := e.client.SetLogLevel(ctx, &mcpdv1.SetLogLevelRequest{Server: long, Level: mcpdv1.LogLevel_LOG_LEVEL_DEBUG})
			return err
		},
		"ForgetAuthorization": func(ctx context.Context) error {
			_, err := e.client.ForgetAuthorization(ctx, &mcpdv1.ForgetAuthorizationRequest{Server: long})
			return err
		},
		"StartPoll, long server": func(ctx context.Context) error { return pollTool(ctx, long, "probe") },
		"StartPoll, long tool":   func(ctx context.Context) error { return pollTool(ctx, "p", long) },
		"Subscribe": func(ctx context.Context) error {
			stream, err := e.client.Subscribe(ctx, &mcpdv1.SubscribeRequest{Servers: []string{"p", long}})
			if err == nil {
				_, err = stream.Recv()
			}
			return err
		},
		"SearchTools": func(ctx context.Context) error {
			_, err := e.client.SearchTools(ctx, &mcpdv1.SearchToolsRequest{Query: "probe", Servers: []string{long}})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			st := wantCode(t, call(testContext(t)), codes.InvalidArgument)
			if len(st.Message()) > 300 || !strings.Contains(st.Message(), "bytes long") {
				t.Errorf("message of %d bytes (%.100q...): want one that says how long the name is, quoting only its start", len(st.Message()), st.Message())
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the tool ran %d times, want 0", n)
	}
	for what, buf := range map[string]*syncBuffer{"log": &log, "audit trail": &audit} {
		for _, l := range buf.lines() {
			for k, v := range l {
				if s, ok := v.(string); ok && len(s) > 1000 {
					t.Errorf("%s line %v: field %s of %d bytes, want none that copies the name", what, l["message"], k, len(s))
				}
			}
		}
	}

	// Names at the bounds name nothing, and say so; a byte more is too
	// long.
	ctx := testContext(t)
	server := strings.Repeat("s", config.MaxNameLen)
	if _, err := e.client.GetServer(ctx, &mcpdv1.GetServerRequest{Name: server}); status.Code(err) != codes.NotFound {
		t.Errorf("GetServer of a %d-byte name: got %v, want NOT_FOUND", len(server), err)
	}
	if _, err := e.client.GetServer(ctx, &mcpdv1.GetServerRequest{Name: server + "s"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("GetServer of a %d-byte name: got %v, want INVALID_ARGUMENT", len(server)+1, err)
	}
	tool := mcpclient.QualifiedToolName(server, strings.Repeat("t", mcpclient.MaxToolNameLen))
	if _, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: tool}); status.Code(err) != codes.NotFound || len(tool) != mcpclient.MaxQualifiedToolNameLen {
		t.Errorf("CallTool of a %d-byte qualified name: got %v, want NOT_FOUND", len(tool), err)
	}
	if _, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: tool + "t"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("CallTool of a %d-byte qualified name: got %v, want INVALID_ARGUMENT", len(tool)+1, err)
	}
}

// TestLongNamesRefusedOverHTTP: the HTTP listener runs the same check.
func TestLongNamesRefusedOverHTTP(t *testing.T) {
	e := newHTTPEnv(t)
	code, out := e.post(t, "GetServer", `{"name": "`+strings.Repeat("a", 1<<20)+`"}`)
	if msg, _ := out["message"].(string); code != http.StatusBadRequest || out["code"] != "invalid_argument" || len(msg) > 300 {
		t.Errorf("got %d %s %.200q, want 400 invalid_argument with a short message", code, out["code"], msg)
	}
}

// TestLongUpstreamToolNamesIgnored: a server's tool whose name is longer
// than MCP allows (128 bytes) is listed, up to 1024 bytes; one longer is
// left out of its tools: no request could name it.
func TestLongUpstreamToolNamesIgnored(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			srv := mcp.NewServer(&mcp.Implementation{Name: "long", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: era.versions})
			handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			}
			for _, name := range []string{strings.Repeat("x", 129), strings.Repeat("y", 1024), strings.Repeat("z", 1025)} {
				srv.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, handler)
			}
			e.connect(t, "l", srv)
			resp, err := e.client.ListTools(testContext(t), &mcpdv1.ListToolsRequest{Server: "l"})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range resp.GetTools() {
				names = append(names, tool.GetToolName())
			}
			if len(names) != 2 || names[0] != strings.Repeat("x", 129) || names[1] != strings.Repeat("y", 1024) {
				t.Errorf("got tools %.40q, want those of 129 and 1024 bytes", names)
			}
		})
	}
}
