package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

func TestInFlightCap(t *testing.T) {
	e := newEnv(t, &envOptions{manager: mcpclient.Options{MaxInFlight: 1, QueueTimeout: 50 * time.Millisecond}})
	srv := mcp.NewServer(&mcp.Implementation{Name: "cap", Version: "1"}, nil)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	mcp.AddTool(srv, &mcp.Tool{Name: "hold"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{}, nil, nil
	})
	e.connect(t, "c", srv)
	ctx := testContext(t)

	first := make(chan error, 1)
	go func() {
		_, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__c__hold"})
		first <- err
	}()
	<-started
	_, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__c__hold"})
	// The reason tells the queue timeout, which passes as calls finish,
	// from a message over the size bound, which fails again.
	if info := errorInfo(wantCode(t, err, codes.ResourceExhausted)); info.GetReason() != "QUEUE_TIMEOUT" || info.GetDomain() != "mcpd.v1" {
		t.Errorf("a call that waited out the queue timeout: got ErrorInfo %v, want reason QUEUE_TIMEOUT, domain mcpd.v1", info)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the call holding the slot: %v", err)
	}
	// The slot is free again.
	if _, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__c__hold"}); err != nil {
		t.Fatalf("call after the slot freed: %v", err)
	}
}

func TestProgressExtendsDefaultTimeout(t *testing.T) {
	e := newEnv(t, &envOptions{manager: mcpclient.Options{CallTimeout: 400 * time.Millisecond, CallTimeoutMax: time.Minute}})
	srv := mcp.NewServer(&mcp.Implementation{Name: "p", Version: "1"}, nil)
	// busy takes 8 x 80ms = 640ms, longer than the 400ms default timeout,
	// and reports progress after each step (5 times as often as the
	// timeout) when it has a token.
	mcp.AddTool(srv, &mcp.Tool{Name: "busy"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		for i := range 8 {
			select {
			case <-time.After(80 * time.Millisecond):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			if token := req.Params.GetProgressToken(); token != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i + 1)})
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "silent"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	e.connect(t, "p", srv)
	ctx := testContext(t)

	res, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__p__busy"})
	if err != nil {
		t.Fatalf("a call that reports progress outlives the default timeout: %v", err)
	}
	if res.GetContent()[0].GetText().GetText() != "done" {
		t.Errorf("got %v", res)
	}
	// Without progress the default timeout holds; an explicit timeout is
	// never extended.
	_, err = e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__p__silent"})
	wantCode(t, err, codes.DeadlineExceeded)
	_, err = e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__p__busy", Timeout: durationpb.New(400 * time.Millisecond)})
	wantCode(t, err, codes.DeadlineExceeded)
}

// TestOversizedEventIsAGap: an event whose protobuf form is over the
// listener's send limit (a log of an array of numbers: about 11 bytes a
// number as a protobuf Value, 2 as JSON) reaches Subscribe streams as a gap of that
// one event, and the stream goes on; sent as it is, it ended every stream
// it passed, and every resume after it.
func TestOversizedEventIsAGap(t *testing.T) {
	e := newSendLimitedEnv(t)
	first := e.bus.Publish(events.Event{Server: "s", Kind: events.KindToolsChanged})
	numbers := oversizedNumbers()
	// The newest event stays in the buffer whatever its size.
	big := e.bus.Publish(events.Event{Server: "s", Kind: events.KindLog, Level: "info", Data: numbers})

	for round := range 2 { // a second resume after the same event meets it again
		ctx, cancel := context.WithCancel(testContext(t))
		stream, err := e.client.Subscribe(ctx, &mcpdv1.SubscribeRequest{AfterSequence: proto.Uint64(first)})
		if err != nil {
			t.Fatal(err)
		}
		m, err := stream.Recv()
		if gap := m.GetEvent().GetGap(); err != nil || gap.GetFirstSequence() != big || gap.GetLastSequence() != big {
			t.Fatalf("resume %d after %d: got %v, %v; want a gap of event %d alone", round, first, m, err, big)
		}
		if round == 1 {
			after := e.bus.Publish(events.Event{Server: "s", Kind: events.KindPromptsChanged})
			if m, err := stream.Recv(); err != nil || m.GetEvent().GetSequence() != after {
				t.Fatalf("after the gap: got %v, %v; want event %d", m, err, after)
			}
		}
		cancel()
	}
}

// TestOversizedCallLogIsDropped: a log message of a streamed call too
// large to send once in protobuf is dropped, as the stream drops messages
// past its queue, and the call's result still arrives; sent as it is, it
// ended the stream and cancelled the call.
func TestOversizedCallLogIsDropped(t *testing.T) {
	e := newSendLimitedEnv(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "loud", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "shout"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		numbers := oversizedNumbers()
		for _, data := range []any{"small", numbers, "after"} {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: data}); err != nil {
				return nil, nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	e.connect(t, "loud", srv)
	if _, err := e.client.SetLogLevel(testContext(t), &mcpdv1.SetLogLevelRequest{Server: "loud", Level: mcpdv1.LogLevel_LOG_LEVEL_INFO}); err != nil {
		t.Fatal(err)
	}
	stream, err := e.client.CallToolStream(testContext(t), &mcpdv1.CallToolStreamRequest{Name: "mcp__loud__shout"})
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("after logs %q: %v, want the result", logs, err)
		}
		if l := m.GetLog(); l != nil {
			logs = append(logs, l.GetData().GetStringValue())
			continue
		}
		if got := m.GetResult().GetContent(); len(got) != 1 || got[0].GetText().GetText() != "done" {
			t.Fatalf("result: got %v", m)
		}
		break
	}
	if !slices.Equal(logs, []string{"small", "after"}) {
		t.Errorf("logs: got %q, want the two that fit", logs)
	}
}

// TestOversizedServerRequestIsRefused: a server request too large to send
// to the agent once in protobuf (sampling metadata of an array of numbers)
// fails at the server, and the agent's stream stays open for the next
// one; sent as it is, it ended the agent's stream.
func TestOversizedServerRequestIsRefused(t *testing.T) {
	e := newSendLimitedEnv(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		numbers := oversizedNumbers()
		var outcome []string
		for _, metadata := range []any{map[string]any{"n": numbers}, nil} {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5, Metadata: metadata,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
			if err != nil {
				outcome = append(outcome, "error")
				continue
			}
			outcome = append(outcome, res.Content.(*mcp.TextContent).Text)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(outcome, ",")}}}, nil, nil
	})
	// Server requests outside input rounds: the initialize era.
	e.connect(t, "asker", srv, func(c *mcpdv1.ServerConfig) { c.ProtocolVersion = "2025-11-25" })
	ctx := testContext(t)
	attachAgent(t, ctx, e, []mcpdv1.ServerRequestKind{mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING}, func(r *mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply {
		return &mcpdv1.ServerRequestReply{Id: r.GetId(), Result: &mcpdv1.ServerRequestReply_Sampling{Sampling: &mcpdv1.SamplingResult{
			Role: mcpdv1.Role_ROLE_ASSISTANT, Model: "m", Content: []*mcpdv1.Content{{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: "answered"}}}}}}}
	})
	res, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__asker__ask"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetContent()[0].GetText().GetText(); got != "error,answered" {
		t.Errorf("the server saw %q, want the oversized request refused and the next one answered", got)
	}
}

// sendLimit is the send limit of newSendLimitedEnv, and oversized the
// length of a number array whose protobuf form is over it (about 11 bytes
// a number as a Value, 2 as JSON): small enough that the race detector
// and a busy machine handle it in time.
const (
	sendLimit = 1 << 20
	oversized = 200_000
)

// newSendLimitedEnv is an env whose gRPC listener sends messages of at
// most sendLimit (as --max-message-bytes does) to a client that would
// take larger ones.
func newSendLimitedEnv(t *testing.T) *env {
	t.Helper()
	const limit = sendLimit
	return newEnv(t, &envOptions{
		server:   Options{MaxSendBytes: limit, GRPCOptions: []grpc.ServerOption{grpc.MaxSendMsgSize(limit)}},
		dialOpts: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 * limit))},
	})
}

// oversizedNumbers is an array of numbers whose protobuf form is over
// sendLimit, though its JSON is not.
func oversizedNumbers() []any {
	numbers := make([]any, oversized)
	for i := range numbers {
		numbers[i] = float64(0)
	}
	return numbers
}
