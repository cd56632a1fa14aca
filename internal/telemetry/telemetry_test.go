package telemetry

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestTracingConfig(t *testing.T) {
	for _, tc := range []struct {
		name         string
		env          map[string]string
		on           bool
		protocol     string
		errSubstring string
	}{
		{name: "nothing set", env: nil},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true, protocol: "http/protobuf"},
		{name: "traces endpoint over grpc", env: map[string]string{
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, protocol: "grpc"},
		{name: "traces protocol wins", env: map[string]string{
			"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, on: true, protocol: "http/protobuf"},
		{name: "exporter none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}},
		{name: "sdk disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "other exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, errSubstring: "zipkin"},
		// Enum values in any case, as OpenTelemetry's environment
		// variable spec asks.
		{name: "exporter in capitals", env: map[string]string{"OTEL_TRACES_EXPORTER": "OTLP", "OTEL_EXPORTER_OTLP_PROTOCOL": "GRPC"}, on: true, protocol: "grpc"},
		{name: "exporter None", env: map[string]string{"OTEL_TRACES_EXPORTER": "None", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}},
		{name: "protocol in capitals", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "HTTP/Protobuf"}, on: true, protocol: "http/protobuf"},
		{name: "json protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, errSubstring: "http/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			on, protocol, err := tracingConfig(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.errSubstring != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSubstring) {
					t.Fatalf("got error %v, want one naming %q", err, tc.errSubstring)
				}
				return
			}
			if err != nil || on != tc.on || protocol != tc.protocol {
				t.Fatalf("got %v, %q, %v; want %v, %q", on, protocol, err, tc.on, tc.protocol)
			}
		})
	}
}

func TestBuildInfo(t *testing.T) {
	tel, err := New(t.Context(), &Options{Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP mcpd_build_info Always 1; the labels say which mcpd is running.
# TYPE mcpd_build_info gauge
`
	_, goVersion, revision := buildInfo("")
	body := want + `mcpd_build_info{goversion="` + goVersion + `",revision="` + revision + `",version="1.2.3"} 1
`
	if err := testutil.GatherAndCompare(tel.registry, strings.NewReader(body), "mcpd_build_info"); err != nil {
		t.Error(err)
	}
	if v, _, _ := buildInfo(""); v == "" {
		t.Error("buildInfo without a version: empty")
	}
}

// TestNil checks that a nil *Telemetry records nothing and fails nothing.
func TestNil(t *testing.T) {
	var tel *Telemetry
	tel.ToolCall("s", "t", "ok")
	tel.EventPublished("log")
	tel.EventDelivered()
	tel.EventsDropped(3)
	tel.SubscriberOpened()()
	if f := tel.StderrLines("s"); f != nil {
		t.Error("StderrLines on nil: want nil")
	}
	if f := tel.StderrLinesDropped("s"); f != nil {
		t.Error("StderrLinesDropped on nil: want nil")
	}
	tel.ObserveServers(nil)
	tel.InitializeGRPC(nil)
	tel.ForgetServer("s")
	tel.ServerRequest("s", "roots", nil, nil)
	_ = tel.ServerMiddleware("tcp")
	if tel.Tracing() || tel.GRPCStatsHandler() != nil {
		t.Error("nil Telemetry traces")
	}
	if err := tel.Shutdown(t.Context()); err != nil {
		t.Error(err)
	}
}

// TestSendingMiddleware runs a go-sdk client against an in-memory server
// through the middleware with tracing on: the call's span is a client
// span with the MCP attributes, the server sees its trace context in
// _meta (the caller's map does not get it), and the duration
// histogram counts the call.
func TestSendingMiddleware(t *testing.T) {
	ctx := t.Context()
	tel, err := New(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tel.provider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tel.tracer = tel.provider.Tracer(instrumentationName)
	defer tel.Shutdown(context.Background())

	var gotMeta string
	srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "peek"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		gotMeta, _ = req.Params.Meta["traceparent"].(string)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
	up := Upstream{Server: "mem", Transport: func() string { return "stdio" }}
	client.AddSendingMiddleware(tel.SendingMiddleware(up))
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	callerMeta := mcp.Meta{"mine": "kept"}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "peek", Meta: callerMeta}); err != nil {
		t.Fatal(err)
	}
	if _, ok := callerMeta["traceparent"]; ok || callerMeta["mine"] != "kept" {
		t.Errorf("the middleware changed the caller's _meta: %v", callerMeta)
	}
	var span sdktrace.ReadOnlySpan
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() == "tools/call peek" {
			span = s
		}
	}
	if span == nil {
		t.Fatalf("no span tools/call peek among %d", len(exp.GetSpans()))
	}
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if gotMeta != want {
		t.Errorf("_meta.traceparent at the server: got %q, want %q", gotMeta, want)
	}
	attrs := map[string]string{}
	for _, kv := range span.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	for k, v := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "peek", "mcpd.server.name": "mem", "network.transport": "pipe", "mcpd.outcome": "ok"} {
		if attrs[k] != v {
			t.Errorf("span attribute %s: got %q, want %q", k, attrs[k], v)
		}
	}
	n := testutil.CollectAndCount(tel.m.operationDuration, "mcp_client_operation_duration_seconds")
	if n == 0 {
		t.Error("mcp_client_operation_duration_seconds: no series")
	}
	if got := testutil.ToFloat64(tel.m.toolCalls.WithLabelValues("mem", "peek", "ok")); got != 0 {
		t.Errorf("the middleware counted a tool call itself (that is mcpclient's): %v", got)
	}
}

// tracedTelemetry is a Telemetry with tracing on, exporting to exp.
func tracedTelemetry(t *testing.T) (*Telemetry, *tracetest.InMemoryExporter) {
	t.Helper()
	tel, err := New(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tel.provider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tel.tracer = tel.provider.Tracer(instrumentationName)
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel, exp
}

// metaServer connects a client through the sending middleware of tel to
// an in-memory server whose tool "peek" reports the _meta it got.
func metaServer(t *testing.T, tel *Telemetry) (*mcp.ClientSession, func() mcp.Meta) {
	t.Helper()
	ctx := t.Context()
	var (
		mu  sync.Mutex
		got mcp.Meta
	)
	srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "peek"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		mu.Lock()
		got = req.Params.Meta
		mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
	client.AddSendingMiddleware(tel.SendingMiddleware(Upstream{Server: "mem"}))
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, func() mcp.Meta {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// hostMeta is a caller's _meta with trace context of its own.
func hostMeta() mcp.Meta {
	return mcp.Meta{
		"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"tracestate":  "host=1",
		"baggage":     "user=ada",
		"mine":        "kept",
	}
}

// TestTraceContextInMeta: with tracing on, the span's trace context
// replaces the caller's trace fields in _meta, all of them (a tracestate or
// baggage belongs to the traceparent it came with); with tracing off, or
// no Telemetry, the trace fields are dropped. Other fields pass.
func TestTraceContextInMeta(t *testing.T) {
	on, exp := tracedTelemetry(t)
	off, err := New(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		tel  *Telemetry
	}{{"on", on}, {"off", off}, {"nil", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			cs, got := metaServer(t, tc.tel)
			if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "peek", Meta: hostMeta()}); err != nil {
				t.Fatal(err)
			}
			meta := got()
			if meta["mine"] != "kept" {
				t.Errorf("_meta.mine: got %v, want it passed on", meta["mine"])
			}
			for _, k := range []string{"tracestate", "baggage"} {
				if v, ok := meta[k]; ok {
					t.Errorf("_meta.%s: got %q, want none (the caller's belongs to its own traceparent)", k, v)
				}
			}
			want := ""
			if tc.tel.Tracing() {
				spans := exp.GetSpans()
				sc := spans[len(spans)-1].SpanContext
				want = "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
			}
			if tp, _ := meta["traceparent"].(string); tp != want {
				t.Errorf("_meta.traceparent: got %q, want %q", tp, want)
			}
		})
	}
}

// TestServerMiddleware: a request served through the middleware is a
// server span child of the trace context in its _meta, named after the
// method and the tool, and a span started under it is its child.
func TestServerMiddleware(t *testing.T) {
	tel, exp := tracedTelemetry(t)
	ctx := t.Context()
	srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	var inner trace.SpanContext
	mcp.AddTool(srv, &mcp.Tool{Name: "mcp__up__echo"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		_, span := tel.tracer.Start(ctx, "upstream")
		inner = span.SpanContext()
		span.End()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	srv.AddReceivingMiddleware(tel.ServerMiddleware("tcp"))
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__up__echo", Meta: hostMeta()}); err != nil {
		t.Fatal(err)
	}
	var served sdktrace.ReadOnlySpan
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() == "tools/call mcp__up__echo" {
			served = s
		}
	}
	if served == nil {
		t.Fatalf("no span tools/call mcp__up__echo among %d", len(exp.GetSpans()))
	}
	if served.SpanKind() != trace.SpanKindServer {
		t.Errorf("kind: got %v, want server", served.SpanKind())
	}
	if got := served.Parent().TraceID().String() + "-" + served.Parent().SpanID().String(); got != "0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331" {
		t.Errorf("parent: got %s, want the host's span", got)
	}
	if !served.Parent().IsRemote() || served.Parent().TraceState().Get("host") != "1" {
		t.Errorf("parent %v: want the host's remote span with its tracestate", served.Parent())
	}
	if inner.TraceID() != served.SpanContext().TraceID() {
		t.Errorf("a span under the handler is in trace %s, want the host's", inner.TraceID())
	}
}

// TestForgetServer: a removed server's series go, from every metric that
// names servers; other servers' stay.
func TestForgetServer(t *testing.T) {
	tel, err := New(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"gone", "kept"} {
		tel.ToolCall(s, "echo", "ok")
		tel.ToolCallResent(s, "echo", "not_sent")
		tel.ServerRequest(s, "roots", &mcp.ListRootsResult{}, nil)
		tel.StderrLines(s)()
		tel.StderrLinesDropped(s)()
		tel.observeOperation(operation{server: s, method: "tools/call"}, "", time.Millisecond)
	}
	tel.ForgetServer("gone")
	families, err := tel.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() != "server" {
					continue
				}
				if lp.GetValue() == "gone" {
					t.Errorf("%s: a series of the removed server remains", f.GetName())
				}
				kept[f.GetName()] = true
			}
		}
	}
	if len(kept) != 6 {
		t.Errorf("metrics with the other server's series: got %v, want 6", kept)
	}
}

// TestServerMiddlewarePanic: a handler that panics still ends its span;
// the panic goes on to whoever recovers it.
func TestServerMiddlewarePanic(t *testing.T) {
	tel, exp := tracedTelemetry(t)
	handler := tel.ServerMiddleware("tcp")(func(context.Context, string, mcp.Request) (mcp.Result, error) { panic("boom") })
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not go on")
			}
		}()
		_, _ = handler(t.Context(), "tools/call", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "x"}})
	}()
	if n := len(exp.GetSpans()); n != 1 {
		t.Errorf("ended spans: got %d, want the request's", n)
	}
}

// TestResourceURIRedacted: a resource URI's query values and user info
// stay out of spans; a plain URI is kept as it is.
func TestResourceURIRedacted(t *testing.T) {
	for uri, want := range map[string]string{
		"demo://clock":                     "demo://clock",
		"https://h.example/doc?token=s3cr": "https://h.example/doc?token=xxxxx",
		"https://me:pw@h.example/doc":      "https://xxxxx@h.example/doc",
	} {
		var got string
		for _, a := range (operation{method: "resources/read", uri: uri}).attributes() {
			if a.Key == "mcp.resource.uri" {
				got = a.Value.AsString()
			}
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", uri, got, want)
		}
	}
}
