package telemetry

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	otelcodes "go.opentelemetry.io/otel/codes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// TestServerSpanURIRedacted: the span of resources/read on the MCP
// endpoint masks the user info of the server's URI inside mcpd://.
func TestServerSpanURIRedacted(t *testing.T) {
	tel, exp := tracedTelemetry(t)
	h := tel.ServerMiddleware("tcp")(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	req := &mcp.ReadResourceRequest{Params: &mcp.ReadResourceParams{URI: "mcpd://db/postgres://alice:s3cret@db.internal/app"}}
	if _, err := h(t.Context(), "resources/read", req); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("spans: got %d, want 1", len(spans))
	}
	for _, a := range spans[0].Attributes {
		if a.Key == "mcp.resource.uri" && a.Value.AsString() != "mcpd://db/postgres://xxxxx@db.internal/app" {
			t.Errorf("mcp.resource.uri: got %q, want the user info masked", a.Value.AsString())
		}
	}
}

// TestGRPCSpanStatusCodeOnly: the span of an RPC that failed with a code
// otelgrpc marks as an error has status ERROR and the code, but not the
// status message, which may quote a server's error text.
func TestGRPCSpanStatusCodeOnly(t *testing.T) {
	tel, exp := tracedTelemetry(t)
	// Stop waits for the handlers, and so for the span, which ends after
	// the client has its answer.
	gs := grpc.NewServer(grpc.StatsHandler(tel.GRPCStatsHandler()), grpc.WaitForHandlers(true))
	const text = `server "s" answered error 1234: bad credentials for user alice, key sk-live-SECRET`
	gs.RegisterService(&grpc.ServiceDesc{
		ServiceName: "mcpd.v1.MCPHub",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "CallTool", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(emptypb.Empty)); err != nil {
				return nil, err
			}
			return nil, status.Error(codes.Unknown, text)
		}}},
	}, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	err = cc.Invoke(t.Context(), "/mcpd.v1.MCPHub/CallTool", &emptypb.Empty{}, &emptypb.Empty{})
	if status.Code(err) != codes.Unknown || status.Convert(err).Message() != text {
		t.Fatalf("call: got %v, want UNKNOWN with the message (the caller still gets it)", err)
	}
	gs.Stop()
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("spans: got %d, want 1", len(spans))
	}
	s := spans[0]
	if s.Status.Code != otelcodes.Error || strings.Contains(s.Status.Description, "SECRET") {
		t.Errorf("span status: got %v %q, want Error without the message", s.Status.Code, s.Status.Description)
	}
	for _, a := range s.Attributes {
		if strings.Contains(a.Value.Emit(), "SECRET") {
			t.Errorf("span attribute %s carries the message: %q", a.Key, a.Value.Emit())
		}
		if a.Key == "rpc.response.status_code" && a.Value.AsString() != "UNKNOWN" {
			t.Errorf("rpc.response.status_code: got %q, want UNKNOWN", a.Value.AsString())
		}
	}
	for _, ev := range s.Events {
		for _, a := range ev.Attributes {
			if strings.Contains(a.Value.Emit(), "SECRET") {
				t.Errorf("span event %s carries the message in %s", ev.Name, a.Key)
			}
		}
	}
}

// TestHTTPTransportNilBase: with tracing on, a nil base is
// http.DefaultTransport, as for an http.Client, and the request carries
// the trace context.
func TestHTTPTransportNilBase(t *testing.T) {
	tel, _ := tracedTelemetry(t)
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
	}))
	defer srv.Close()
	ctx, span := tel.tracer.Start(t.Context(), "request")
	defer span.End()
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tel.HTTPTransport(nil).RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	_ = res.Body.Close()
	if tp := <-got; !strings.Contains(tp, span.SpanContext().TraceID().String()) {
		t.Errorf("traceparent at the server: got %q, want the span's trace", tp)
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

// TestNetworkTransport: network.transport says how mcpd reaches the
// server (pipe for stdio, tcp for HTTP and SSE), is left out for an
// agent's tools (its stream may come over TCP, a Unix socket or the HTTP
// wire), and on the MCP endpoint's spans is how hosts reach it.
func TestNetworkTransport(t *testing.T) {
	req := &mcp.ClientRequest[*mcp.CallToolParams]{Params: &mcp.CallToolParams{Name: "echo"}}
	for transport, want := range map[string]string{"stdio": "pipe", "http": "tcp", "sse": "tcp", "agent": ""} {
		op := describe(Upstream{Server: "s", Transport: func() string { return transport }}, "tools/call", req)
		if got, ok := networkAttr(op); got != want || ok != (want != "") {
			t.Errorf("%s server: network.transport %q (set: %v), want %q", transport, got, ok, want)
		}
	}
	for _, network := range []string{"tcp", "unix"} {
		tel, exp := tracedTelemetry(t)
		h := tel.ServerMiddleware(network)(func(context.Context, string, mcp.Request) (mcp.Result, error) {
			return &mcp.CallToolResult{}, nil
		})
		if _, err := h(t.Context(), "tools/call", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "mcp__s__echo"}}); err != nil {
			t.Fatal(err)
		}
		spans := exp.GetSpans()
		if len(spans) != 1 {
			t.Fatalf("spans: got %d, want 1", len(spans))
		}
		got := ""
		for _, a := range spans[0].Attributes {
			if a.Key == "network.transport" {
				got = a.Value.AsString()
			}
		}
		if got != network {
			t.Errorf("endpoint on %s: network.transport %q", network, got)
		}
	}
}

// networkAttr is op's network.transport attribute, and whether it has one.
func networkAttr(op operation) (string, bool) {
	for _, a := range op.attributes() {
		if a.Key == "network.transport" {
			return a.Value.AsString(), true
		}
	}
	return "", false
}
