package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Protocol eras the in-process tests run in. A go-sdk server restricted to
// initialize-based revisions rejects server/discover, so mcpd falls back.
var eras = []struct {
	name     string
	versions []string // the server's SupportedProtocolVersions; nil = all
	want     string   // the protocol version mcpd should negotiate
}{
	{name: "stateless", versions: nil, want: "2026-07-28"},
	{name: "legacy", versions: []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}, want: "2025-11-25"},
}

// inMemoryServers lets tests register go-sdk servers under URLs; mcpd
// reaches them through a Dialer that returns in-memory transports.
type inMemoryServers struct {
	mu       sync.Mutex
	servers  map[string]*mcp.Server
	sessions []*mcp.ServerSession
}

func (s *inMemoryServers) add(url string, srv *mcp.Server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servers[url] = srv
}

func (s *inMemoryServers) dial(ctx context.Context, cfg config.Server) (mcp.Transport, error) {
	s.mu.Lock()
	srv := s.servers[cfg.URL]
	s.mu.Unlock()
	if srv == nil {
		return nil, fmt.Errorf("no in-memory server at %s", cfg.URL)
	}
	clientT, serverT := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, serverT, nil)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.sessions = append(s.sessions, ss)
	s.mu.Unlock()
	return clientT, nil
}

func (s *inMemoryServers) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.sessions {
		_ = ss.Close()
		_ = ss.Wait()
	}
}

// env is one mcpd gRPC edge over bufconn with its in-memory upstreams.
type env struct {
	srv      *Server
	client   mcpdv1.MCPHubClient
	conn     *grpc.ClientConn
	upstream *inMemoryServers
	mgr      *mcpclient.Manager
	bus      *events.Bus
}

type envOptions struct {
	server         Options
	manager        mcpclient.Options
	dialOpts       []grpc.DialOption
	eventBuffer    int
	requestTimeout time.Duration
}

func newEnv(t testing.TB, o *envOptions) *env {
	t.Helper()
	if o == nil {
		o = &envOptions{}
	}
	up := &inMemoryServers{servers: make(map[string]*mcp.Server)}
	h := NewHealth()
	mopts := o.manager
	mopts.Dialer = up.dial
	mopts.OnStateChange = h.ServerStateChanged
	mopts.OnRemoved = h.ServerRemoved
	if mopts.ProbeTimeout == 0 {
		mopts.ProbeTimeout = 5 * time.Second
	}
	bus := events.NewBus(&events.Options{BufferSize: o.eventBuffer})
	broker := mcpclient.NewBroker(&mcpclient.BrokerOptions{Timeout: o.requestTimeout})
	mopts.Events, mopts.Requests = bus, broker
	mgr := mcpclient.NewManager(&mopts)
	sopts := o.server
	srv := New(mgr, h, &sopts)
	lis := bufconn.Listen(1 << 20)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	dialOpts := append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, o.dialOpts...)
	conn, err := grpc.NewClient("passthrough:///bufnet", dialOpts...)
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-served
		if err := mgr.Close(ctx); err != nil {
			t.Errorf("manager close: %v", err)
		}
		up.close()
	})
	return &env{srv: srv, client: mcpdv1.NewMCPHubClient(conn), conn: conn, upstream: up, mgr: mgr, bus: bus}
}

// connect registers srv under name and connects it through MCPHub.
func (e *env) connect(t *testing.T, name string, srv *mcp.Server, mutate ...func(*mcpdv1.ServerConfig)) *mcpdv1.Server {
	t.Helper()
	url := "http://in-memory/" + name
	e.upstream.add(url, srv)
	cfg := &mcpdv1.ServerConfig{
		Name:      name,
		Transport: &mcpdv1.ServerConfig_Http{Http: &mcpdv1.HttpConfig{Url: url}},
	}
	for _, m := range mutate {
		m(cfg)
	}
	ctx := testContext(t)
	resp, err := e.client.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: cfg})
	if err != nil {
		t.Fatalf("ConnectServer(%s): %v", name, err)
	}
	return resp.GetServer()
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newFixtureServer builds a go-sdk server for one era with the tools the
// tests call and a page size small enough to force upstream paging.
func newFixtureServer(t *testing.T, versions []string, extraTools int) *mcp.Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "fixture", Version: "1.2.3"}, &mcp.ServerOptions{
		SupportedProtocolVersions: versions,
		PageSize:                  2,
		Instructions:              "fixture instructions",
	})
	// echo validates by hand and answers bad arguments with JSON-RPC
	// -32602, as many servers do (go-sdk's typed tools report them as
	// is_error results instead).
	srv.AddTool(&mcp.Tool{Name: "echo", Description: "echoes", InputSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"message": map[string]any{"type": "string"}},
		"required":   []string{"message"},
	}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Message any `json:"message"`
		}
		_ = json.Unmarshal(req.Params.Arguments, &in)
		msg, ok := in.Message.(string)
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "message must be a string"}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
	})
	type sumOut struct {
		Sum float64 `json:"sum"`
	}
	type sumIn struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "sum", Description: "adds"}, func(_ context.Context, _ *mcp.CallToolRequest, in sumIn) (*mcp.CallToolResult, sumOut, error) {
		return nil, sumOut{Sum: in.A + in.B}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "fails as a tool"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, fmt.Errorf("the tool failed on purpose")
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "media", Description: "returns every content kind"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		size := int64(3)
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.ImageContent{Data: []byte{1, 2, 3}, MIMEType: "image/png", Annotations: &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: 0.5}},
			&mcp.AudioContent{Data: []byte{4, 5}, MIMEType: "audio/wav"},
			&mcp.ResourceLink{URI: "test://a", Name: "a", MIMEType: "text/plain", Size: &size},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://b", MIMEType: "application/octet-stream", Blob: []byte{9, 9}}},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://c", MIMEType: "text/plain", Text: "see"}},
		}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "wait", Description: "waits until cancelled"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	for i := range extraTools {
		name := fmt.Sprintf("extra_%02d", i)
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: strings.ToUpper(name)}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil, nil
		})
	}
	return srv
}
