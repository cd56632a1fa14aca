package telemetry

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
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
	tel.ObserveServers(nil)
	tel.InitializeGRPC(nil)
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
