package server

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/events"
)

// refusedURI is a resource the surface server refuses subscriptions to.
const refusedURI = "test://refused"

// surfaceServer is a go-sdk server with resources, prompts, completion,
// subscriptions, progress, logs and server-to-client requests.
type surfaceServer struct {
	srv          *mcp.Server
	subscribed   chan string // URIs the server saw subscribed
	unsubscribed chan string
}

func newSurfaceServer(t *testing.T, versions []string) *surfaceServer {
	t.Helper()
	s := &surfaceServer{subscribed: make(chan string, 16), unsubscribed: make(chan string, 16)}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "surface", Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: versions,
		PageSize:                  2,
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			if req.Params.URI == refusedURI {
				return mcp.ResourceNotFoundError(refusedURI)
			}
			s.subscribed <- req.Params.URI
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			s.unsubscribed <- req.Params.URI
			return nil
		},
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			var values []string
			if req.Params.Argument.Value == "many" {
				// Over the spec's 100: mcpd passes on the first 100.
				for i := range 150 {
					values = append(values, fmt.Sprintf("v%03d", i))
				}
				return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values}}, nil
			}
			for _, v := range []string{"alpha", "beta", "bravo"} {
				if strings.HasPrefix(v, req.Params.Argument.Value) {
					values = append(values, req.Params.Ref.Type+":"+v)
				}
			}
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
		},
	})
	for i := range 5 {
		uri := fmt.Sprintf("test://doc/%d", i)
		s.srv.AddResource(&mcp.Resource{URI: uri, Name: fmt.Sprintf("doc%d", i), MIMEType: "text/plain"},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: "text of " + uri}}}, nil
			})
	}
	s.srv.AddResource(&mcp.Resource{URI: "test://blob", Name: "blob", MIMEType: "application/octet-stream"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://blob", MIMEType: "application/octet-stream", Blob: []byte{0, 1, 2, 255}}}}, nil
		})
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://item/{id}", Name: "item"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "item"}}}, nil
		})
	s.srv.AddPrompt(&mcp.Prompt{Name: "greet", Description: "greets", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "a greeting", Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Hello, " + req.Params.Arguments["name"]}},
				{Role: "assistant", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://doc/0", Text: "doc"}}},
			}}, nil
		})
	s.srv.AddPrompt(&mcp.Prompt{Name: "other"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})

	type stepsIn struct {
		Label string `json:"label"`
		Steps int    `json:"steps"`
	}
	mcp.AddTool(s.srv, &mcp.Tool{Name: "steps"}, func(ctx context.Context, req *mcp.CallToolRequest, in stepsIn) (*mcp.CallToolResult, any, error) {
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "steps", Data: "starting " + in.Label})
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Logger: "steps", Data: "debug " + in.Label})
		for i := 1; i <= in.Steps; i++ {
			if token := req.Params.GetProgressToken(); token != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: float64(i), Total: float64(in.Steps), Message: in.Label,
				})
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Label + " done"}}}, nil, nil
	})
	// ask needs input from the client: on 2026-07-28 as an input-required
	// result, on legacy sessions as server-to-client requests (the SDK's
	// middleware turns one into the other).
	mcp.AddTool(s.srv, &mcp.Tool{Name: "ask"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if len(req.Params.InputResponses) == 0 {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
				"name": &mcp.ElicitParams{Message: "Your name?", RequestedSchema: map[string]any{
					"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}},
				}},
				"poem": &mcp.CreateMessageParams{MaxTokens: 50, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Write a poem"}}}},
			}, RequestState: "asked"}, nil, nil
		}
		var parts []string
		if r, ok := req.Params.InputResponses["name"].(*mcp.ElicitResult); ok {
			parts = append(parts, "elicit:"+r.Action+":"+fmt.Sprint(r.Content["name"]))
		}
		switch r := req.Params.InputResponses["poem"].(type) {
		case *mcp.CreateMessageResult:
			parts = append(parts, "sample:"+r.Content.(*mcp.TextContent).Text)
		case *mcp.CreateMessageWithToolsResult:
			parts = append(parts, "sample:"+r.Content[0].(*mcp.TextContent).Text)
		default:
			parts = append(parts, fmt.Sprintf("sample:none(%T)", r))
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(parts, " ")}}}, nil, nil
	})
	mcp.AddTool(s.srv, &mcp.Tool{Name: "roots"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if len(req.Params.InputResponses) == 0 {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}}}, nil, nil
		}
		r, ok := req.Params.InputResponses["roots"].(*mcp.ListRootsResult)
		if !ok {
			return nil, nil, fmt.Errorf("no roots in %v", req.Params.InputResponses)
		}
		var uris []string
		for _, r := range r.Roots {
			uris = append(uris, r.URI)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(uris, ",")}}}, nil, nil
	})
	return s
}

func TestResourcesPromptsCompletion(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := testContext(t)
			e.connect(t, "s", newSurfaceServer(t, era.versions).srv)
			e.connect(t, "fx", newFixtureServer(t, era.versions, 0)) // no resources or prompts

			var uris []string
			token := ""
			for {
				resp, err := e.client.ListResources(ctx, &mcpdv1.ListResourcesRequest{PageSize: 4, PageToken: token})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range resp.GetResources() {
					uris = append(uris, r.GetServer()+" "+r.GetUri())
				}
				if token = resp.GetNextPageToken(); token == "" {
					break
				}
			}
			want := []string{"s test://blob", "s test://doc/0", "s test://doc/1", "s test://doc/2", "s test://doc/3", "s test://doc/4"}
			if !slices.Equal(uris, want) {
				t.Errorf("resources: got %v, want %v", uris, want)
			}

			tpl, err := e.client.ListResourceTemplates(ctx, &mcpdv1.ListResourceTemplatesRequest{Server: "s"})
			if err != nil || len(tpl.GetResourceTemplates()) != 1 || tpl.GetResourceTemplates()[0].GetUriTemplate() != "test://item/{id}" {
				t.Errorf("templates: got %v %v", tpl, err)
			}

			rr, err := e.client.ReadResource(ctx, &mcpdv1.ReadResourceRequest{Server: "s", Uri: "test://doc/3"})
			if err != nil || rr.GetContents()[0].GetText() != "text of test://doc/3" {
				t.Errorf("read text: got %v %v", rr, err)
			}
			rr, err = e.client.ReadResource(ctx, &mcpdv1.ReadResourceRequest{Server: "s", Uri: "test://blob"})
			if err != nil || string(rr.GetContents()[0].GetBlob()) != "\x00\x01\x02\xff" {
				t.Errorf("read blob: got %v %v", rr, err)
			}
			_, err = e.client.ReadResource(ctx, &mcpdv1.ReadResourceRequest{Server: "s", Uri: "test://missing"})
			if c := status.Code(err); c != codes.NotFound && c != codes.InvalidArgument {
				t.Errorf("read missing: got %v, want NOT_FOUND or INVALID_ARGUMENT", err)
			}
			_, err = e.client.ReadResource(ctx, &mcpdv1.ReadResourceRequest{Server: "nope", Uri: "test://doc/0"})
			wantCode(t, err, codes.NotFound)

			prompts, err := e.client.ListPrompts(ctx, &mcpdv1.ListPromptsRequest{})
			if err != nil || len(prompts.GetPrompts()) != 2 || prompts.GetPrompts()[0].GetName() != "greet" || !prompts.GetPrompts()[0].GetArguments()[0].GetRequired() {
				t.Errorf("prompts: got %v %v", prompts, err)
			}
			gp, err := e.client.GetPrompt(ctx, &mcpdv1.GetPromptRequest{Server: "s", Name: "greet", Arguments: map[string]string{"name": "Ada"}})
			if err != nil {
				t.Fatal(err)
			}
			if gp.GetDescription() != "a greeting" || len(gp.GetMessages()) != 2 ||
				gp.GetMessages()[0].GetContent().GetText().GetText() != "Hello, Ada" ||
				gp.GetMessages()[1].GetRole() != mcpdv1.Role_ROLE_ASSISTANT ||
				gp.GetMessages()[1].GetContent().GetResource().GetUri() != "test://doc/0" {
				t.Errorf("prompt: got %v", gp)
			}

			c, err := e.client.Complete(ctx, &mcpdv1.CompleteRequest{Server: "s", Ref: &mcpdv1.CompleteRequest_Prompt{Prompt: "greet"},
				Argument: &mcpdv1.CompleteArgument{Name: "name", Value: "b"}})
			if err != nil || !slices.Equal(c.GetValues(), []string{"ref/prompt:beta", "ref/prompt:bravo"}) || c.GetTotal() != 2 {
				t.Errorf("complete prompt: got %v %v", c, err)
			}
			c, err = e.client.Complete(ctx, &mcpdv1.CompleteRequest{Server: "s", Ref: &mcpdv1.CompleteRequest_ResourceTemplate{ResourceTemplate: "test://item/{id}"},
				Argument: &mcpdv1.CompleteArgument{Name: "id", Value: "a"}})
			if err != nil || !slices.Equal(c.GetValues(), []string{"ref/resource:alpha"}) {
				t.Errorf("complete template: got %v %v", c, err)
			}
			c, err = e.client.Complete(ctx, &mcpdv1.CompleteRequest{Server: "s", Ref: &mcpdv1.CompleteRequest_Prompt{Prompt: "greet"},
				Argument: &mcpdv1.CompleteArgument{Name: "name", Value: "many"}})
			if err != nil || len(c.GetValues()) != 100 || c.GetValues()[99] != "v099" || !c.GetHasMore() || c.GetTotal() != 150 {
				t.Errorf("complete with 150 values: got %d values, has_more %v, total %d, %v; want the first 100, has_more, total 150",
					len(c.GetValues()), c.GetHasMore(), c.GetTotal(), err)
			}
			_, err = e.client.Complete(ctx, &mcpdv1.CompleteRequest{Server: "s", Argument: &mcpdv1.CompleteArgument{Name: "id"}})
			wantCode(t, err, codes.InvalidArgument)
		})
	}
}

// recvStream reads a CallToolStream to its end.
func recvStream(t *testing.T, s interface {
	Recv() (*mcpdv1.CallToolStreamResponse, error)
}) (progress []*mcpdv1.Progress, logs []*mcpdv1.LogMessage, result *mcpdv1.CallToolResponse) {
	t.Helper()
	for {
		m, err := s.Recv()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Errorf("stream: %v", err)
			return
		}
		switch k := m.GetKind().(type) {
		case *mcpdv1.CallToolStreamResponse_Progress:
			progress = append(progress, k.Progress)
		case *mcpdv1.CallToolStreamResponse_Log:
			logs = append(logs, k.Log)
		case *mcpdv1.CallToolStreamResponse_Result:
			if result != nil {
				t.Errorf("a second result: %v", k.Result)
			}
			result = k.Result
		}
	}
}

func TestCallToolStreamRoutesProgress(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := testContext(t)
			e.connect(t, "s", newSurfaceServer(t, era.versions).srv)
			if _, err := e.client.SetLogLevel(ctx, &mcpdv1.SetLogLevelRequest{Server: "s", Level: mcpdv1.LogLevel_LOG_LEVEL_INFO}); err != nil {
				t.Fatal(err)
			}

			// Two calls on one session at once: each stream must see only
			// its own progress.
			var wg sync.WaitGroup
			for _, tc := range []struct {
				label string
				steps int
			}{{"A", 7}, {"B", 4}} {
				wg.Go(func() {
					stream, err := e.client.CallToolStream(ctx, &mcpdv1.CallToolStreamRequest{
						Name: "mcp__s__steps", Arguments: args(t, map[string]any{"label": tc.label, "steps": tc.steps}),
					})
					if err != nil {
						t.Error(err)
						return
					}
					progress, logs, result := recvStream(t, stream)
					if result.GetContent()[0].GetText().GetText() != tc.label+" done" {
						t.Errorf("%s: result %v", tc.label, result)
					}
					if len(progress) != tc.steps {
						t.Errorf("%s: got %d progress messages, want %d", tc.label, len(progress), tc.steps)
					}
					for i, p := range progress {
						if p.GetMessage() != tc.label || p.GetProgress() != float64(i+1) || p.GetTotal() != float64(tc.steps) {
							t.Errorf("%s: progress %d is %v", tc.label, i, p)
						}
					}
					var mine bool
					for _, l := range logs {
						if l.GetData().GetStringValue() == "starting "+tc.label && l.GetLevel() == mcpdv1.LogLevel_LOG_LEVEL_INFO && l.GetLogger() == "steps" {
							mine = true
						}
						if strings.HasPrefix(l.GetData().GetStringValue(), "debug") {
							t.Errorf("%s: got a debug log below the level set: %v", tc.label, l)
						}
					}
					if !mine {
						t.Errorf("%s: logs %v lack the call's own info message", tc.label, logs)
					}
				})
			}
			wg.Wait()

			_, err := e.client.SetLogLevel(ctx, &mcpdv1.SetLogLevelRequest{Server: "s"})
			wantCode(t, err, codes.InvalidArgument)
			_, err = e.client.SetLogLevel(ctx, &mcpdv1.SetLogLevelRequest{Server: "nope", Level: mcpdv1.LogLevel_LOG_LEVEL_INFO})
			wantCode(t, err, codes.NotFound)
		})
	}
}

// nextEvent reads one event or fails.
func nextEvent(t *testing.T, s interface {
	Recv() (*mcpdv1.SubscribeResponse, error)
}) *mcpdv1.Event {
	t.Helper()
	m, err := s.Recv()
	if err != nil {
		t.Fatalf("subscribe stream: %v", err)
	}
	return m.GetEvent()
}

func TestSubscribeResourceUpdatesAndListChanges(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := testContext(t)
			surf := newSurfaceServer(t, era.versions)
			e.connect(t, "s", surf.srv)

			// Two streams share one upstream subscription.
			sctx, cancel := context.WithCancel(ctx)
			sub1, err := e.client.Subscribe(sctx, &mcpdv1.SubscribeRequest{
				Resources: []*mcpdv1.ResourceRef{{Server: "s", Uri: "test://doc/1"}},
				Kinds:     []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_RESOURCE_UPDATED, mcpdv1.EventKind_EVENT_KIND_TOOLS_CHANGED},
			})
			if err != nil {
				t.Fatal(err)
			}
			sub2, err := e.client.Subscribe(sctx, &mcpdv1.SubscribeRequest{Resources: []*mcpdv1.ResourceRef{{Server: "s", Uri: "test://doc/1"}}})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case uri := <-surf.subscribed:
				if uri != "test://doc/1" {
					t.Fatalf("upstream subscribed %q", uri)
				}
			case <-ctx.Done():
				t.Fatal("mcpd never subscribed upstream")
			}
			// The second stream's subscription reached the daemon too: wait
			// until both hold an interest before the update is sent.
			waitFor(t, func() bool { return interest(e, "s", "test://doc/1") == 2 })

			// On a 2026-07-28 session the server acknowledges the
			// subscription a moment before its listen stream takes
			// notifications, so the update is announced until it arrives.
			announce, stopAnnouncing := context.WithCancel(ctx)
			announced := make(chan struct{})
			go func() {
				defer close(announced)
				for announce.Err() == nil {
					_ = surf.srv.ResourceUpdated(announce, &mcp.ResourceUpdatedNotificationParams{URI: "test://doc/1"})
					select {
					case <-announce.Done():
					case <-time.After(20 * time.Millisecond):
					}
				}
			}()
			for i, s := range []interface {
				Recv() (*mcpdv1.SubscribeResponse, error)
			}{sub1, sub2} {
				ev := nextEvent(t, s)
				if ev.GetServer() != "s" || ev.GetResourceUpdated().GetUri() != "test://doc/1" || ev.GetSequence() == 0 {
					t.Errorf("stream %d: got %v, want resource_updated of test://doc/1", i+1, ev)
				}
			}
			stopAnnouncing()
			<-announced
			select {
			case uri := <-surf.subscribed:
				t.Errorf("a second upstream subscription for %q", uri)
			default:
			}

			// A tool list change refreshes ListTools before the event.
			surf.srv.AddTool(&mcp.Tool{Name: "late", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
			ev := nextEvent(t, sub1)
			for ev.GetResourceUpdated() != nil { // repeated announcements
				ev = nextEvent(t, sub1)
			}
			if ev.GetToolsChanged() == nil {
				t.Fatalf("got %v, want tools_changed", ev)
			}
			tools, err := e.client.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "s"})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(tools.GetTools(), func(t *mcpdv1.Tool) bool { return t.GetToolName() == "late" }) {
				t.Errorf("ListTools after tools_changed lacks the new tool")
			}

			cancel()
			waitFor(t, func() bool { return interest(e, "s", "test://doc/1") == 0 })
			if era.name == "legacy" {
				select {
				case uri := <-surf.unsubscribed:
					if uri != "test://doc/1" {
						t.Errorf("unsubscribed %q", uri)
					}
				case <-ctx.Done():
					t.Error("mcpd never unsubscribed upstream after the last stream left")
				}
			}
		})
	}
}

// TestPromptAndResourceListChanges: a server that adds a prompt or a
// resource says so with list_changed, and a Subscribe stream gets
// prompts_changed and resources_changed, and the listing shows the new one.
func TestPromptAndResourceListChanges(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := testContext(t)
			surf := newSurfaceServer(t, era.versions)
			e.connect(t, "s", surf.srv)
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			sub, err := e.client.Subscribe(sctx, &mcpdv1.SubscribeRequest{
				Servers: []string{"s"},
				Kinds:   []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_PROMPTS_CHANGED, mcpdv1.EventKind_EVENT_KIND_RESOURCES_CHANGED},
			})
			if err != nil {
				t.Fatal(err)
			}
			events := make(chan *mcpdv1.Event, 64)
			go func() {
				defer close(events)
				for {
					m, err := sub.Recv()
					if err != nil {
						return
					}
					select {
					case events <- m.GetEvent():
					case <-sctx.Done():
						return
					}
				}
			}()
			// A 2026-07-28 session takes notifications only once its
			// listen stream is up, so the change is repeated (a new item
			// each time) until the wanted event arrives; earlier repeats
			// may still be queued.
			change := func(add func(i int), want func(*mcpdv1.Event) bool) {
				t.Helper()
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for i := 0; ; i++ {
					add(i)
				wait:
					for {
						select {
						case ev, ok := <-events:
							if !ok {
								t.Fatal("subscribe stream ended")
							}
							if ev.GetServer() != "s" {
								t.Fatalf("event of another server: %v", ev)
							}
							if want(ev) {
								return
							}
						case <-ctx.Done():
							t.Fatal("no list change event")
						case <-tick.C:
							break wait
						}
					}
				}
			}

			change(func(i int) {
				surf.srv.AddPrompt(&mcp.Prompt{Name: fmt.Sprintf("late%d", i)}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return &mcp.GetPromptResult{}, nil
				})
			}, func(ev *mcpdv1.Event) bool { return ev.GetPromptsChanged() != nil })
			prompts, err := e.client.ListPrompts(ctx, &mcpdv1.ListPromptsRequest{Server: "s"})
			if err != nil || !slices.ContainsFunc(prompts.GetPrompts(), func(p *mcpdv1.Prompt) bool { return p.GetName() == "late0" }) {
				t.Errorf("ListPrompts after prompts_changed: got %v, %v; want late0 among them", prompts.GetPrompts(), err)
			}

			change(func(i int) {
				uri := fmt.Sprintf("test://late/%d", i)
				surf.srv.AddResource(&mcp.Resource{URI: uri, Name: "late"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
					return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "late"}}}, nil
				})
			}, func(ev *mcpdv1.Event) bool { return ev.GetResourcesChanged() != nil })
		})
	}
}

// TestSubscribeRefused: a legacy server's refusal of a subscription ends
// the stream with the server's error, mapped as every upstream error is.
// A 2026-07-28 server's refusal is not seen (the Go SDK opens
// subscriptions/listen without waiting for its answer): the stream stays
// open, holding its interest, as documented.
func TestSubscribeRefused(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := testContext(t)
			e.connect(t, "s", newSurfaceServer(t, era.versions).srv)
			stream, err := e.client.Subscribe(ctx, &mcpdv1.SubscribeRequest{Resources: []*mcpdv1.ResourceRef{{Server: "s", Uri: refusedURI}}})
			if err != nil {
				t.Fatal(err)
			}
			if era.name == "legacy" {
				_, err := stream.Recv()
				wantCode(t, err, codes.InvalidArgument) // go-sdk refuses with -32602
				if n := interest(e, "s", refusedURI); n != 0 {
					t.Errorf("interest after the refusal: %d, want 0", n)
				}
				return
			}
			waitFor(t, func() bool { return interest(e, "s", refusedURI) == 1 })
		})
	}
}

// interest reports how many streams hold a resource subscription.
func interest(e *env, server, uri string) int {
	return e.mgr.ResourceInterest(server, uri)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// agent attaches to HandleServerRequests and answers with answer.
func attachAgent(t *testing.T, ctx context.Context, e *env, kinds []mcpdv1.ServerRequestKind,
	answer func(*mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply) (seen func() []*mcpdv1.ServerRequest) {
	t.Helper()
	stream, err := e.client.HandleServerRequests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Register{
		Register: &mcpdv1.ServerRequestRegistration{Kinds: kinds},
	}}); err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetRegistered() == nil {
		t.Fatalf("registration: got %v %v", first, err)
	}
	var (
		mu   sync.Mutex
		reqs []*mcpdv1.ServerRequest
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			mu.Lock()
			reqs = append(reqs, m.GetRequest())
			mu.Unlock()
			if reply := answer(m.GetRequest()); reply != nil {
				_ = stream.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: reply}})
			}
		}
	}()
	t.Cleanup(func() {
		_ = stream.CloseSend()
		<-done
	})
	return func() []*mcpdv1.ServerRequest {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(reqs)
	}
}

func TestServerRequestsAnsweredByAgent(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := testContext(t)
			e.connect(t, "s", newSurfaceServer(t, era.versions).srv)
			actx, cancelAgent := context.WithCancel(ctx)
			defer cancelAgent()
			seen := attachAgent(t, actx, e, nil, func(r *mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply {
				switch {
				case r.GetElicitation() != nil:
					content, _ := structpb.NewStruct(map[string]any{"name": "Ada"})
					return &mcpdv1.ServerRequestReply{Id: r.GetId(), Result: &mcpdv1.ServerRequestReply_Elicitation{
						Elicitation: &mcpdv1.ElicitationResult{Action: mcpdv1.ElicitationAction_ELICITATION_ACTION_ACCEPT, Content: content}}}
				case r.GetSampling() != nil:
					return &mcpdv1.ServerRequestReply{Id: r.GetId(), Result: &mcpdv1.ServerRequestReply_Sampling{Sampling: &mcpdv1.SamplingResult{
						Role: mcpdv1.Role_ROLE_ASSISTANT, Model: "test-model",
						Content: []*mcpdv1.Content{{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: "roses"}}}}}}}
				}
				return nil
			})
			res, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__s__ask"})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.GetContent()[0].GetText().GetText(); got != "elicit:accept:Ada sample:roses" {
				t.Errorf("tool saw %q, want the agent's answers", got)
			}
			reqs := seen()
			if len(reqs) != 2 {
				t.Fatalf("agent saw %d requests, want 2", len(reqs))
			}
			for _, r := range reqs {
				if r.GetServer() != "s" || r.GetId() == "" || r.GetDeadline() == nil {
					t.Errorf("request lacks server, id or deadline: %v", r)
				}
				if s := r.GetSampling(); s != nil && (s.GetMaxTokens() != 50 || s.GetMessages()[0].GetContent()[0].GetText().GetText() != "Write a poem") {
					t.Errorf("sampling request: %v", s)
				}
				if el := r.GetElicitation(); el != nil && (el.GetMessage() != "Your name?" || el.GetMode() != "form" || el.GetRequestedSchema() == nil) {
					t.Errorf("elicitation request: %v", el)
				}
			}
		})
	}
}

func TestServerRequestsWithoutAgent(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, &envOptions{requestTimeout: 200 * time.Millisecond})
			ctx := testContext(t)
			e.connect(t, "s", newSurfaceServer(t, era.versions).srv)

			// No agent: sampling is refused with -1 (the elicitation asked
			// alongside is declined), which fails the call as
			// FAILED_PRECONDITION: attaching an agent would fix it.
			_, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__s__ask"})
			wantDeclined(t, err, "no agent is attached")

			// An agent that never answers: the deadline ends the wait, and
			// the call fails the same way instead of hanging.
			actx, cancelAgent := context.WithCancel(ctx)
			defer cancelAgent()
			seen := attachAgent(t, actx, e, nil, func(*mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply { return nil })
			_, err = e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__s__ask"})
			wantDeclined(t, err, "the agent did not answer in time")
			if len(seen()) == 0 {
				t.Error("the registered agent never saw a request")
			}
		})
	}
}

// TestServerRequestsRegisterAgain adds a kind on an open stream: mcpd
// confirms the second registration and routes the new kind to the agent,
// without a new stream.
func TestServerRequestsRegisterAgain(t *testing.T) {
	e := newEnv(t, &envOptions{requestTimeout: 5 * time.Second})
	ctx := testContext(t)
	e.connect(t, "s", newSurfaceServer(t, eras[0].versions).srv)
	stream, err := e.client.HandleServerRequests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	register := func(kinds ...mcpdv1.ServerRequestKind) {
		t.Helper()
		if err := stream.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Register{
			Register: &mcpdv1.ServerRequestRegistration{Kinds: kinds},
		}}); err != nil {
			t.Fatal(err)
		}
		m, err := stream.Recv()
		if err != nil || !slices.Equal(m.GetRegistered().GetKinds(), kinds) {
			t.Fatalf("registration of %v: got %v %v", kinds, m, err)
		}
	}
	register(mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_ELICITATION)
	register(mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_ELICITATION, mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			r := m.GetRequest()
			reply := &mcpdv1.ServerRequestReply{Id: r.GetId()}
			if r.GetSampling() != nil {
				reply.Result = &mcpdv1.ServerRequestReply_Sampling{Sampling: &mcpdv1.SamplingResult{Role: mcpdv1.Role_ROLE_ASSISTANT, Model: "m",
					Content: []*mcpdv1.Content{{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: "again"}}}}}}
			} else {
				reply.Result = &mcpdv1.ServerRequestReply_Elicitation{Elicitation: &mcpdv1.ElicitationResult{Action: mcpdv1.ElicitationAction_ELICITATION_ACTION_DECLINE}}
			}
			_ = stream.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: reply}})
		}
	}()
	res, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__s__ask"})
	if err != nil {
		t.Fatalf("CallTool: %v (the sampling request needs the second registration)", err)
	}
	if got := res.GetContent()[0].GetText().GetText(); !strings.Contains(got, "sample:again") {
		t.Errorf("tool saw %q, want the agent's sampling answer", got)
	}
	_ = stream.CloseSend()
	<-done
}

// TestHandleServerRequestsProtocol checks the stream's first message: a
// client that closes its side, or replies, before registering gets
// INVALID_ARGUMENT, never UNKNOWN.
func TestHandleServerRequestsProtocol(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testContext(t)
	for _, c := range []struct {
		name  string
		first *mcpdv1.HandleServerRequestsRequest // nil: close without sending
	}{
		{"closed before register", nil},
		{"reply before register", &mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: &mcpdv1.ServerRequestReply{Id: "1"}}}},
	} {
		stream, err := e.client.HandleServerRequests(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.first != nil {
			if err := stream.Send(c.first); err != nil {
				t.Fatalf("%s: Send: %v", c.name, err)
			}
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatalf("%s: CloseSend: %v", c.name, err)
		}
		_, err = stream.Recv()
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "first message must be register") {
			t.Errorf("%s: got %v, want INVALID_ARGUMENT: the first message must be register", c.name, err)
		}
	}
}

// wantDeclined checks that err is the FAILED_PRECONDITION of a declined
// sampling request (JSON-RPC -1), for the reason given.
func wantDeclined(t *testing.T, err error, reason string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "sampling declined: "+reason) {
		t.Fatalf("got %v, want FAILED_PRECONDITION: sampling declined: %s", err, reason)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetMetadata()["jsonrpc_code"] == "-1" {
			return
		}
	}
	t.Errorf("status %v carries no ErrorInfo with jsonrpc_code -1", st.Details())
}

func TestSetRoots(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := testContext(t)
			e.connect(t, "s", newSurfaceServer(t, era.versions).srv)
			if _, err := e.client.SetRoots(ctx, &mcpdv1.SetRootsRequest{Roots: []*mcpdv1.Root{{Uri: "file:///a"}, {Uri: "file:///b", Name: "b"}}}); err != nil {
				t.Fatal(err)
			}
			res, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__s__roots"})
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(res.GetContent()[0].GetText().GetText(), ",")
			slices.Sort(got)
			if !slices.Equal(got, []string{"file:///a", "file:///b"}) {
				t.Errorf("server saw roots %v", got)
			}
			_, err = e.client.SetRoots(ctx, &mcpdv1.SetRootsRequest{Server: "nope"})
			wantCode(t, err, codes.NotFound)
			_, err = e.client.SetRoots(ctx, &mcpdv1.SetRootsRequest{Roots: []*mcpdv1.Root{{Name: "no uri"}}})
			wantCode(t, err, codes.InvalidArgument)
		})
	}
}

func TestSubscribeResumeAndGap(t *testing.T) {
	e := newEnv(t, &envOptions{eventBuffer: 8})
	ctx := testContext(t)
	publish := func(n int) (last uint64) {
		for range n {
			last = e.bus.Publish(events.Event{Server: "x", Kind: events.KindToolsChanged})
		}
		return last
	}
	subscribe := func(after *uint64) (mcpdv1.MCPHub_SubscribeClient, context.CancelFunc) {
		sctx, cancel := context.WithCancel(ctx)
		s, err := e.client.Subscribe(sctx, &mcpdv1.SubscribeRequest{AfterSequence: after})
		if err != nil {
			t.Fatal(err)
		}
		return s, cancel
	}
	seen := publish(3)
	publish(5) // missed while disconnected, still buffered
	s, cancel := subscribe(&seen)
	for want := seen + 1; want <= seen+5; want++ {
		if ev := nextEvent(t, s); ev.GetSequence() != want || ev.GetToolsChanged() == nil {
			t.Fatalf("resume: got %v, want sequence %d", ev, want)
		}
	}
	cancel()

	last := publish(20) // more than the buffer holds
	s, cancel = subscribe(&seen)
	defer cancel()
	gap := nextEvent(t, s).GetGap()
	if gap == nil || gap.GetFirstSequence() != seen+1 || gap.GetLastSequence() != last-8 {
		t.Fatalf("got %v, want a gap %d..%d", gap, seen+1, last-8)
	}
	if ev := nextEvent(t, s); ev.GetSequence() != last-7 {
		t.Errorf("after the gap: got %d, want the oldest buffered %d", ev.GetSequence(), last-7)
	}
}

func TestStalledSubscriberDoesNotBlockOthers(t *testing.T) {
	const total = 10000
	e := newEnv(t, &envOptions{eventBuffer: 256})
	ctx := testContext(t)

	// Resuming from the current sequence makes both streams see every
	// event from here on, however late their handlers start.
	after := e.bus.LastSequence()
	stalledCtx, cancelStalled := context.WithCancel(ctx)
	defer cancelStalled()
	stalled, err := e.client.Subscribe(stalledCtx, &mcpdv1.SubscribeRequest{AfterSequence: &after})
	if err != nil {
		t.Fatal(err)
	}
	active, err := e.client.Subscribe(ctx, &mcpdv1.SubscribeRequest{AfterSequence: &after})
	if err != nil {
		t.Fatal(err)
	}
	first := e.bus.Publish(events.Event{Server: "x", Kind: events.KindPromptsChanged})
	for _, s := range []mcpdv1.MCPHub_SubscribeClient{stalled, active} {
		if ev := nextEvent(t, s); ev.GetSequence() != first {
			t.Fatalf("got %v, want sequence %d", ev, first)
		}
	}

	// The active reader keeps up; the publisher waits for it, never for
	// the stalled one (whose handler is blocked on flow control).
	got := make(chan uint64, total)
	go func() {
		defer close(got)
		for range total {
			m, err := active.Recv()
			if err != nil {
				return
			}
			got <- m.GetEvent().GetSequence()
		}
	}()
	want := first
	for range total {
		want++
		if seq := e.bus.Publish(events.Event{Server: "x", Kind: events.KindResourcesChanged}); seq != want {
			t.Fatalf("published sequence %d, want %d", seq, want)
		}
		if got := <-got; got != want {
			t.Fatalf("active subscriber got %d, want %d", got, want)
		}
	}

	// The stalled stream now reads: whatever was in flight, then a gap,
	// then the buffered tail; it never sees more than the buffer plus
	// what gRPC had in flight, and the sequence stays consistent.
	prev := first
	sawGap := false
	for prev < want {
		ev := nextEvent(t, stalled)
		if g := ev.GetGap(); g != nil {
			if g.GetFirstSequence() != prev+1 {
				t.Fatalf("gap starts at %d, want %d", g.GetFirstSequence(), prev+1)
			}
			sawGap = true
			prev = g.GetLastSequence()
			continue
		}
		if ev.GetSequence() != prev+1 {
			t.Fatalf("stalled stream: got %d after %d", ev.GetSequence(), prev)
		}
		prev = ev.GetSequence()
	}
	if !sawGap {
		t.Error("the stalled subscriber got no gap event")
	}
}

// TestListErrorKeepsServerCode lists one server whose list method fails: the
// server's JSON-RPC error maps like any other (INVALID_ARGUMENT with the
// ErrorInfo), not to a retryable UNAVAILABLE.
func TestListErrorKeepsServerCode(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testContext(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "broken-lists", Version: "1.0.0"}, nil)
	srv.AddPrompt(&mcp.Prompt{Name: "p"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	srv.AddResource(&mcp.Resource{URI: "demo://r", Name: "r"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasSuffix(method, "/list") && method != "tools/list" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad cursor"}
			}
			return next(ctx, method, req)
		}
	})
	e.connect(t, "b", srv)
	for name, list := range map[string]func() error{
		"ListPrompts": func() error {
			_, err := e.client.ListPrompts(ctx, &mcpdv1.ListPromptsRequest{Server: "b"})
			return err
		},
		"ListResources": func() error {
			_, err := e.client.ListResources(ctx, &mcpdv1.ListResourcesRequest{Server: "b"})
			return err
		},
		"ListResourceTemplates": func() error {
			_, err := e.client.ListResourceTemplates(ctx, &mcpdv1.ListResourceTemplatesRequest{Server: "b"})
			return err
		},
	} {
		st := status.Convert(list())
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "bad cursor") {
			t.Errorf("%s: got %v, want INVALID_ARGUMENT with the server's message", name, st)
		}
	}
}
