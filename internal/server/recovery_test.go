package server

import (
	"testing"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
)

// panickingWriter panics on every write, as a broken log sink might.
type panickingWriter struct{}

func (panickingWriter) Write([]byte) (int, error) { panic("the audit sink broke") }

// TestPanicInAnInterceptor: a panic in the interceptors around a handler
// (here in the audit, which the permission check writes) fails that call,
// unary or stream, with INTERNAL; the server goes on serving.
func TestPanicInAnInterceptor(t *testing.T) {
	audit := access.NewAuditor(zerolog.New(panickingWriter{}), nil)
	e := newEnv(t, &envOptions{server: Options{Audit: audit}})
	ctx := testContext(t)

	_, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__nobody__echo"})
	wantCode(t, err, codes.Internal)
	stream, err := e.client.CallToolStream(ctx, &mcpdv1.CallToolStreamRequest{Name: "mcp__nobody__echo"})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, err, codes.Internal)
	// Calls that write no audit line still work.
	if _, err := e.client.ListServers(ctx, &mcpdv1.ListServersRequest{}); err != nil {
		t.Errorf("ListServers after the panics: %v", err)
	}
}
