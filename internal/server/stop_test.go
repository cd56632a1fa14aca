package server

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// TestDisconnectDoesNotWaitForAgent disconnects a server while its
// elicitation waits for an agent that never answers: the disconnect does
// not wait for the (very long) server-request timeout.
func TestDisconnectDoesNotWaitForAgent(t *testing.T) {
	e := newEnv(t, &envOptions{requestTimeout: time.Hour})
	e.connect(t, "s", newSurfaceServer(t, nil).srv)
	ctx := testContext(t)
	actx, cancelAgent := context.WithCancel(ctx)
	defer cancelAgent()
	seen := attachAgent(t, actx, e, nil, func(*mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply { return nil })

	callErr := make(chan error, 1)
	go func() {
		_, err := e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__s__ask"})
		callErr <- err
	}()
	waitFor(t, func() bool { return len(seen()) > 0 })
	// With the bug, this waits an hour; the test's context ends first.
	if _, err := e.client.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: "s"}); err != nil {
		t.Fatalf("DisconnectServer: %v", err)
	}
	if err := <-callErr; err == nil {
		t.Error("the call whose server was disconnected succeeded")
	}
}

// TestHungSetupStillSettles connects a server that answers the handshake
// but never tools/list: ConnectServer still returns once the connect
// timeout has passed, and the server serves what it can.
func TestHungSetupStillSettles(t *testing.T) {
	e := newEnv(t, nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "hangs", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "t"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return next(ctx, method, req)
		}
	})
	got := e.connect(t, "h", srv, func(c *mcpdv1.ServerConfig) { c.ConnectTimeout = durationpb.New(300 * time.Millisecond) })
	if got.GetState() != mcpdv1.ServerState_SERVER_STATE_READY || got.GetToolCount() != 0 {
		t.Errorf("got %v with %d tools, want READY without the tools it could not list", got.GetState(), got.GetToolCount())
	}
}

// TestShutdownEndsStreamsWaitingForTheirFirstMessage stops the daemon
// while a HandleServerRequests and a ServeTools stream are open but have
// sent nothing yet: both end at once with "mcpd is shutting down", as
// registered ones do, instead of holding the graceful stop open until its
// deadline.
func TestShutdownEndsStreamsWaitingForTheirFirstMessage(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testContext(t)
	requests, err := e.client.HandleServerRequests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := e.client.ServeTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A call after them on the same connection: once it is answered, mcpd
	// has both streams.
	if _, err := e.client.ListServers(ctx, &mcpdv1.ListServersRequest{}); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		e.srv.Shutdown(ctx) // with the bug, it returns only when ctx ends
	}()
	recvs := map[string]func() error{
		"HandleServerRequests": func() error { _, err := requests.Recv(); return err },
		"ServeTools":           func() error { _, err := tools.Recv(); return err },
	}
	for name, recv := range recvs {
		err := recv()
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "mcpd is shutting down") {
			t.Errorf("%s at shutdown: got %v, want UNAVAILABLE: mcpd is shutting down", name, err)
		}
		// The reason tells it from a connection to mcpd that broke.
		if info := errorInfo(status.Convert(err)); info.GetReason() != reasonShuttingDown {
			t.Errorf("%s at shutdown: ErrorInfo %v, want reason %s", name, info, reasonShuttingDown)
		}
	}
	<-stopped
}

// TestShutdownClosesSilentConnections: a connection on which the client
// sent nothing (no HTTP/2 preface) would hold the gRPC server's stop for
// its whole handshake timeout (two minutes, beyond the test); once
// Shutdown's ctx ends, Shutdown closes it and returns.
func TestShutdownClosesSilentConnections(t *testing.T) {
	ctx := testContext(t)
	mgr := mcpclient.NewManager(nil)
	defer func() { _ = mgr.Close(ctx) }()
	srv := New(mgr, NewHealth(), nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	var dialer net.Dialer
	c, err := dialer.DialContext(ctx, "tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A client that speaks: once it is answered, the silent one was
	// accepted before it.
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := mcpdv1.NewMCPHubClient(conn).ListServers(ctx, &mcpdv1.ListServersRequest{}); err != nil {
		t.Fatal(err)
	}
	shutCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		srv.Shutdown(shutCtx)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("Shutdown: still waiting for the silent connection when the test's deadline came")
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
