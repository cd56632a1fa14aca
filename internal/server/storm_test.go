package server

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestCallToolStreamCancelReachesUpstream cancels a streamed call: the
// server's handler sees its context end.
func TestCallToolStreamCancelReachesUpstream(t *testing.T) {
	e := newEnv(t, nil)
	started, cancelled := connectBlocking(t, e)
	ctx := testContext(t)
	sctx, cancel := context.WithCancel(ctx)
	stream, err := e.client.CallToolStream(sctx, &mcpdv1.CallToolStreamRequest{Name: "mcp__c__block"})
	if err != nil {
		t.Fatal(err)
	}
	await(ctx, t, started, "the tool never started")
	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		t.Errorf("stream after cancel: got %v, want CANCELED", err)
	}
	await(ctx, t, cancelled, "cancelling the stream did not cancel the upstream request")
}

// TestCallsAcrossRestartsLeakNothing runs 1,000 concurrent calls while the
// server is restarted twice: each ends with a result or UNAVAILABLE with a
// reason, none hangs, and goleak (TestMain) finds nothing left behind.
func TestCallsAcrossRestartsLeakNothing(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.connect(t, "fx", newFixtureServer(t, era.versions, 0))
			ctx := testContext(t)
			var (
				wg   sync.WaitGroup
				mu   sync.Mutex
				ok   int
				fail int
			)
			start := make(chan struct{})
			for range 1000 {
				wg.Go(func() {
					<-start
					res, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__fx__echo", Arguments: args(t, map[string]any{"message": "m"})})
					mu.Lock()
					defer mu.Unlock()
					switch st, _ := status.FromError(err); {
					case err == nil && res.GetContent()[0].GetText().GetText() == "m":
						ok++
					case st.Code() == codes.Unavailable && st.Message() != "":
						fail++
					default:
						t.Errorf("got %v %v, want a result or UNAVAILABLE with a reason", res, err)
					}
				})
			}
			close(start)
			for range 2 {
				if _, err := e.client.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "fx"}); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			t.Logf("%d results, %d UNAVAILABLE", ok, fail)
			if ok == 0 {
				t.Error("no call succeeded")
			}
		})
	}
}
