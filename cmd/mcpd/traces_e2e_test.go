package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	collectortracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// otlpReceiver keeps the spans exported to it over OTLP, gRPC or HTTP:
// the real collector protocol, served on loopback by the test.
type otlpReceiver struct {
	collectortracepb.UnimplementedTraceServiceServer
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string // service.name of each resource
}

func (r *otlpReceiver) Export(_ context.Context, req *collectortracepb.ExportTraceServiceRequest) (*collectortracepb.ExportTraceServiceResponse, error) {
	r.add(req)
	return &collectortracepb.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) add(req *collectortracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		r.services = append(r.services, attr(rs.GetResource().GetAttributes(), "service.name"))
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
}

// ServeHTTP is OTLP/HTTP with protobuf bodies, at /v1/traces.
func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil || req.URL.Path != "/v1/traces" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var export collectortracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &export); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&export)
	out, _ := proto.Marshal(&collectortracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *otlpReceiver) snapshot() ([]*tracepb.Span, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...), append([]string(nil), r.services...)
}

// startOTLPReceiver serves a receiver over protocol ("grpc" or
// "http/protobuf") on loopback and returns its endpoint URL.
func startOTLPReceiver(t *testing.T, protocol string) (*otlpReceiver, string) {
	t.Helper()
	r := &otlpReceiver{}
	if protocol == "http/protobuf" {
		srv := httptest.NewServer(r)
		t.Cleanup(srv.Close)
		return r, srv.URL
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collectortracepb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return r, "http://" + lis.Addr().String()
}

// traceSeen is what the HTTP server's tool saw of a call's trace context:
// the traceparent header, and the traceparent and tracestate in _meta.
type traceSeen struct {
	header, meta, metaState string
}

// startTracedHTTPServer serves a go-sdk Streamable HTTP server on loopback
// whose tool "whoami" records the traceparent header of its HTTP request
// and the traceparent in its _meta.
func startTracedHTTPServer(t *testing.T) (url string, seen func() []traceSeen) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []traceSeen
	)
	srv := mcp.NewServer(&mcp.Implementation{Name: "traced", Version: "0.0.1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "reports nothing; records the trace context it got"},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			s := traceSeen{}
			if req.Extra != nil {
				s.header = req.Extra.Header.Get("traceparent")
			}
			s.meta, _ = req.Params.Meta["traceparent"].(string)
			s.metaState, _ = req.Params.Meta["tracestate"].(string)
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "seen"}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL, func() []traceSeen {
		mu.Lock()
		defer mu.Unlock()
		return append([]traceSeen(nil), got...)
	}
}

// TestTraces runs mcpd with the OTLP exporter pointed at a receiver in the
// test, over each OTLP protocol, calls a tool of an HTTP server and one of
// the stdio demo server with a traceparent in the gRPC metadata, and
// checks the chain: the agent's span, mcpd's span of the RPC, mcpd's
// client span of the upstream request, and the trace context the HTTP
// server received in its header and _meta.
func TestTraces(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{"grpc", "http/protobuf"} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			testTraces(t, protocol)
		})
	}
}

func testTraces(t *testing.T, protocol string) {
	ctx := testContext(t)
	receiver, endpoint := startOTLPReceiver(t, protocol)
	httpURL, seen := startTracedHTTPServer(t)
	cfg := map[string]any{"mcpServers": map[string]any{
		"remote": map[string]any{"type": "http", "url": httpURL},
		"demo":   map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}},
	}}
	httpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{
		config: writeConfig(t, mustJSON(t, cfg)),
		args:   []string{"--http-listen", httpAddr},
		env: []string{
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint,
			"OTEL_EXPORTER_OTLP_PROTOCOL=" + protocol,
		},
	})
	d.waitServer(ctx, t, "remote", mcpdv1.ServerState_SERVER_STATE_READY)

	// The agent's span: a trace and span id of its own.
	const (
		traceID      = "0af7651916cd43dd8448eb211c80319c"
		agentSpan    = "b7ad6b7169203331"
		demoTraceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
		demoAgentSpn = "00f067aa0ba902b7"
	)
	callCtx := metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+traceID+"-"+agentSpan+"-01")
	if _, err := d.hub.CallTool(callCtx, &mcpdv1.CallToolRequest{Name: "mcp__remote__whoami"}); err != nil {
		t.Fatalf("CallTool remote: %v", err)
	}
	demoCtx := metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+demoTraceID+"-"+demoAgentSpn+"-01")
	d.mustCall(demoCtx, t, "mcp__demo__echo", map[string]any{"message": "traced"})
	// The HTTP listener: a Connect call with the traceparent header.
	const (
		httpTraceID   = "5bf92f3577b34da6a3ce929d0e0e4737"
		httpAgentSpan = "10f067aa0ba902b8"
	)
	api := newHTTPAPI(t, httpAddr)
	httpReq := connect.NewRequest(&mcpdv1.CallToolRequest{Name: "mcp__demo__echo", Arguments: mustStruct(t, map[string]any{"message": "traced"})})
	httpReq.Header().Set("traceparent", "00-"+httpTraceID+"-"+httpAgentSpan+"-01")
	if _, err := rpc[mcpdv1.CallToolRequest, mcpdv1.CallToolResponse](api.http1, api.base, "CallTool").CallUnary(ctx, httpReq); err != nil {
		t.Fatalf("CallTool over HTTP: %v", err)
	}
	// Stopping mcpd flushes the spans it still holds.
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("mcpd exit code %d, want 0", code)
	}
	spans, services := receiver.snapshot()
	if len(spans) == 0 {
		t.Fatal("the receiver got no spans")
	}
	for _, s := range services {
		if s != "mcpd" {
			t.Errorf("service.name: got %q, want mcpd", s)
		}
	}

	// Remote: agent -> CallTool span -> tools/call span -> HTTP server.
	rpc := findSpan(t, spans, traceID, "mcpd.v1.MCPHub/CallTool", tracepb.Span_SPAN_KIND_SERVER)
	if got := hex.EncodeToString(rpc.GetParentSpanId()); got != agentSpan {
		t.Errorf("CallTool span's parent: got %s, want the agent's span %s", got, agentSpan)
	}
	upstream := findSpan(t, spans, traceID, "tools/call whoami", tracepb.Span_SPAN_KIND_CLIENT)
	if got, want := hex.EncodeToString(upstream.GetParentSpanId()), hex.EncodeToString(rpc.GetSpanId()); got != want {
		t.Errorf("tools/call span's parent: got %s, want the CallTool span %s", got, want)
	}
	for key, want := range map[string]string{
		"mcp.method.name":       "tools/call",
		"gen_ai.tool.name":      "whoami",
		"gen_ai.operation.name": "execute_tool",
		"mcpd.server.name":      "remote",
		"mcpd.server.transport": "http",
		"network.transport":     "tcp",
		"mcpd.outcome":          "ok",
	} {
		if got := attr(upstream.GetAttributes(), key); got != want {
			t.Errorf("tools/call span attribute %s: got %q, want %q", key, got, want)
		}
	}
	if attr(upstream.GetAttributes(), "mcp.protocol.version") == "" {
		t.Error("tools/call span: no mcp.protocol.version")
	}
	wantParent := "00-" + traceID + "-" + hex.EncodeToString(upstream.GetSpanId()) + "-01"
	calls := seen()
	if len(calls) != 1 {
		t.Fatalf("the HTTP server's tool ran %d times, want 1", len(calls))
	}
	if calls[0].header != wantParent {
		t.Errorf("traceparent header at the HTTP server: got %q, want %q", calls[0].header, wantParent)
	}
	if calls[0].meta != wantParent {
		t.Errorf("_meta.traceparent at the HTTP server: got %q, want %q", calls[0].meta, wantParent)
	}

	// Stdio: the same chain, over a pipe.
	demoRPC := findSpan(t, spans, demoTraceID, "mcpd.v1.MCPHub/CallTool", tracepb.Span_SPAN_KIND_SERVER)
	demoCall := findSpan(t, spans, demoTraceID, "tools/call echo", tracepb.Span_SPAN_KIND_CLIENT)
	if got, want := hex.EncodeToString(demoCall.GetParentSpanId()), hex.EncodeToString(demoRPC.GetSpanId()); got != want {
		t.Errorf("demo tools/call span's parent: got %s, want %s", got, want)
	}
	if got := attr(demoCall.GetAttributes(), "network.transport"); got != "pipe" {
		t.Errorf("demo tools/call network.transport: got %q, want pipe", got)
	}
	httpRPC := findSpan(t, spans, httpTraceID, "mcpd.v1.MCPHub/CallTool", tracepb.Span_SPAN_KIND_SERVER)
	if got := hex.EncodeToString(httpRPC.GetParentSpanId()); got != httpAgentSpan {
		t.Errorf("CallTool over HTTP: span's parent %s, want the agent's span %s", got, httpAgentSpan)
	}
	httpCall := findSpan(t, spans, httpTraceID, "tools/call echo", tracepb.Span_SPAN_KIND_CLIENT)
	if got, want := hex.EncodeToString(httpCall.GetParentSpanId()), hex.EncodeToString(httpRPC.GetSpanId()); got != want {
		t.Errorf("tools/call span of the HTTP call: parent %s, want %s", got, want)
	}
	if got := attr(httpRPC.GetAttributes(), "rpc.response.status_code"); got != "OK" {
		t.Errorf("CallTool over HTTP: status %q, want OK", got)
	}
	// Health checks are probes: no spans.
	for _, s := range spans {
		if strings.HasPrefix(s.GetName(), "grpc.health.v1.") {
			t.Errorf("a span for a health check: %s", s.GetName())
		}
	}
}

// findSpan returns the one span of trace traceID (hex) with name and kind.
func findSpan(t *testing.T, spans []*tracepb.Span, traceID, name string, kind tracepb.Span_SpanKind) *tracepb.Span {
	t.Helper()
	var found []*tracepb.Span
	var names []string
	for _, s := range spans {
		if hex.EncodeToString(s.GetTraceId()) != traceID {
			continue
		}
		names = append(names, s.GetName())
		if s.GetName() == name && s.GetKind() == kind {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("trace %s: %d spans %q of kind %v, want 1 (spans of the trace: %q)", traceID, len(found), name, kind, names)
	}
	return found[0]
}

// attr returns the string value of key among attrs, or "".
func attr(attrs []*commonpb.KeyValue, key string) string {
	for _, kv := range attrs {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// headerTransport adds one header to every request.
type headerTransport struct{ key, value string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPEndpointTraces: a host calls a tool through the MCP endpoint, in
// each era, with its trace context in the request's _meta (SEP-414), then
// with it in the HTTP headers only. Each call is a server span, child of
// the host's span; the upstream request's span is a child of that one; the
// server receives the upstream span's context, with the host's tracestate
// (which belongs to the host's trace).
func TestMCPEndpointTraces(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	receiver, endpoint := startOTLPReceiver(t, "http/protobuf")
	httpURL, seen := startTracedHTTPServer(t)
	cfg := map[string]any{"mcpServers": map[string]any{"remote": map[string]any{"type": "http", "url": httpURL}}}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{
		config: writeConfig(t, mustJSON(t, cfg)),
		args:   []string{"--mcp-listen", addr},
		env:    []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint},
	})
	d.waitServer(ctx, t, "remote", mcpdv1.ServerState_SERVER_STATE_READY)

	type hostCall struct {
		version, trace, span string
		inHeader             bool
	}
	calls := []hostCall{
		{"2025-11-25", "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", false},
		{"2025-11-25", "1af7651916cd43dd8448eb211c80319c", "c7ad6b7169203331", true},
		{"2026-07-28", "2af7651916cd43dd8448eb211c80319c", "d7ad6b7169203331", false},
		{"2026-07-28", "3af7651916cd43dd8448eb211c80319c", "e7ad6b7169203331", true},
	}
	for _, c := range calls {
		traceparent := "00-" + c.trace + "-" + c.span + "-01"
		tr := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}
		params := &mcp.CallToolParams{Name: "mcp__remote__whoami"}
		if c.inHeader {
			tr.HTTPClient = &http.Client{Transport: headerTransport{"traceparent", traceparent}}
		} else {
			params.Meta = mcp.Meta{"traceparent": traceparent, "tracestate": "host=1"}
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "0"}, nil).
			Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: c.version})
		if err != nil {
			t.Fatalf("connect at %s: %v", c.version, err)
		}
		if _, err := cs.CallTool(ctx, params); err != nil {
			t.Fatalf("%s: tools/call: %v", c.version, err)
		}
		cs.Close()
	}
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("mcpd exit code %d, want 0", code)
	}

	spans, _ := receiver.snapshot()
	got := seen()
	for _, c := range calls {
		served := findSpan(t, spans, c.trace, "tools/call mcp__remote__whoami", tracepb.Span_SPAN_KIND_SERVER)
		if p := hex.EncodeToString(served.GetParentSpanId()); p != c.span {
			t.Errorf("%+v: the endpoint's span has parent %s, want the host's span", c, p)
		}
		if v := attr(served.GetAttributes(), "mcp.method.name"); v != "tools/call" {
			t.Errorf("%+v: the endpoint's span: mcp.method.name %q", c, v)
		}
		if v := attr(served.GetAttributes(), "network.transport"); v != "tcp" {
			t.Errorf("%+v: the endpoint's span: network.transport %q, want tcp", c, v)
		}
		upstream := findSpan(t, spans, c.trace, "tools/call whoami", tracepb.Span_SPAN_KIND_CLIENT)
		if p, want := hex.EncodeToString(upstream.GetParentSpanId()), hex.EncodeToString(served.GetSpanId()); p != want {
			t.Errorf("%+v: the upstream span has parent %s, want the endpoint's span %s", c, p, want)
		}
		wantParent := "00-" + c.trace + "-" + hex.EncodeToString(upstream.GetSpanId()) + "-01"
		wantState := "host=1"
		if c.inHeader {
			wantState = ""
		}
		i := slices.IndexFunc(got, func(s traceSeen) bool { return s.meta == wantParent })
		if i < 0 {
			t.Errorf("%+v: the server saw no _meta.traceparent %s (saw %+v)", c, wantParent, got)
			continue
		}
		if got[i].header != wantParent || got[i].metaState != wantState {
			t.Errorf("%+v: the server saw header %q and tracestate %q; want %q and %q", c, got[i].header, got[i].metaState, wantParent, wantState)
		}
	}
}

// TestMCPEndpointTracesOnUnixSocket: the spans of an MCP endpoint on a
// Unix socket say so (network.transport unix).
func TestMCPEndpointTracesOnUnixSocket(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	receiver, endpoint := startOTLPReceiver(t, "http/protobuf")
	httpURL, _ := startTracedHTTPServer(t)
	cfg := map[string]any{"mcpServers": map[string]any{"remote": map[string]any{"type": "http", "url": httpURL}}}
	sock := filepath.Join(shortTempDir(t), "mcp.sock")
	d := startDaemon(ctx, t, daemonOptions{
		config: writeConfig(t, mustJSON(t, cfg)),
		args:   []string{"--mcp-listen", "unix://" + sock},
		env:    []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint},
	})
	d.waitServer(ctx, t, "remote", mcpdv1.ServerState_SERVER_STATE_READY)
	dial := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dialer net.Dialer
		return dialer.DialContext(ctx, "unix", sock)
	}}
	defer dial.CloseIdleConnections()
	const trace = "4af7651916cd43dd8448eb211c80319c"
	tr := &mcp.StreamableClientTransport{Endpoint: "http://mcpd/mcp", HTTPClient: &http.Client{Transport: dial}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "0"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	params := &mcp.CallToolParams{Name: "mcp__remote__whoami", Meta: mcp.Meta{"traceparent": "00-" + trace + "-f7ad6b7169203331-01"}}
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("mcpd exit code %d, want 0", code)
	}
	spans, _ := receiver.snapshot()
	served := findSpan(t, spans, trace, "tools/call mcp__remote__whoami", tracepb.Span_SPAN_KIND_SERVER)
	if v := attr(served.GetAttributes(), "network.transport"); v != "unix" {
		t.Errorf("the endpoint's span: network.transport %q, want unix", v)
	}
}

// TestTraceContextNotPassedOnWhenOff: with tracing off, the trace context a
// host puts in _meta through the MCP endpoint, or an agent in a call's
// meta over gRPC, does not reach the server.
func TestTraceContextNotPassedOnWhenOff(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	httpURL, seen := startTracedHTTPServer(t)
	cfg := map[string]any{"mcpServers": map[string]any{"remote": map[string]any{"type": "http", "url": httpURL}}}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{config: writeConfig(t, mustJSON(t, cfg)), args: []string{"--mcp-listen", addr}})
	d.waitServer(ctx, t, "remote", mcpdv1.ServerState_SERVER_STATE_READY)
	// A map per call: the SDK adds to a 2026-07-28 request's _meta.
	meta := func() map[string]any {
		return map[string]any{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "host=1"}
	}
	for _, version := range mcpEras {
		cs := connectMCP(ctx, t, "http://"+addr+"/mcp", version, "", nil)
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__remote__whoami", Meta: meta()}); err != nil {
			t.Fatalf("%s: tools/call: %v", version, err)
		}
	}
	if _, err := d.hub.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__remote__whoami", Meta: mustStruct(t, meta())}); err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	got := seen()
	if len(got) != 3 {
		t.Fatalf("the server's tool ran %d times, want 3", len(got))
	}
	for _, s := range got {
		if s != (traceSeen{}) {
			t.Errorf("with tracing off the server saw trace context %+v, want none", s)
		}
	}
}

// TestTraceExportFailureLoggedOnce: a collector that refuses every export
// is logged once when exports start failing, not at every batch; once an
// export succeeds mcpd says so, and the next failure is logged again.
func TestTraceExportFailureLoggedOnce(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	var (
		mu       sync.Mutex
		refusing = true
		exports  int
	)
	ok := &otlpReceiver{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		exports++
		refuse := refusing
		mu.Unlock()
		if refuse {
			// 400 is not retried: each batch is one failed export.
			http.Error(w, "refused", http.StatusBadRequest)
			return
		}
		ok.ServeHTTP(w, r)
	}))
	t.Cleanup(collector.Close)
	set := func(refuse bool) {
		mu.Lock()
		defer mu.Unlock()
		refusing = refuse
	}
	exported := func() int {
		mu.Lock()
		defer mu.Unlock()
		return exports
	}
	d := startDaemon(ctx, t, daemonOptions{env: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL,
		"OTEL_BSP_SCHEDULE_DELAY=1", // a batch per call
	}})
	// callExported makes a call and waits for an export after it: the
	// export before it has then ended, and been logged.
	callExported := func() {
		before := exported()
		d.mustCall(ctx, t, "mcp__demo__echo", map[string]any{"message": "traced"})
		poll(ctx, t, "an export of the call's spans", func() (bool, error) { return exported() > before, nil })
	}
	failures := func() int {
		n := 0
		for line := range strings.Lines(d.log.String()) {
			if strings.Contains(line, `"level":"warn"`) && strings.Contains(line, `"message":"trace export`) {
				n++
			}
		}
		return n
	}
	for range 3 {
		callExported()
	}
	if n := failures(); n != 1 {
		t.Fatalf("after 3 failed exports: %d warnings about trace export, want 1", n)
	}
	set(false)
	d.mustCall(ctx, t, "mcp__demo__echo", map[string]any{"message": "traced"})
	poll(ctx, t, "the log line saying exports work again", func() (bool, error) {
		return strings.Contains(d.log.String(), `"message":"trace export recovered"`), nil
	})
	set(true)
	d.mustCall(ctx, t, "mcp__demo__echo", map[string]any{"message": "traced"})
	poll(ctx, t, "a second warning, for the second outage", func() (bool, error) { return failures() == 2, nil })
}

// TestMCPEndpointTracesLeaveOutRefusedNames: a tool name, prompt name or
// resource URI longer than mcpd takes, which the MCP endpoint refuses and
// which its log and audit line leave out, is left out of the request's
// span too: a host could otherwise have mcpd hold and export spans of
// megabytes each (name and attribute alike), up to --max-message-bytes.
// The span is still there, named after the method, with its error.
func TestMCPEndpointTracesLeaveOutRefusedNames(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	receiver, endpoint := startOTLPReceiver(t, "http/protobuf")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{
		args: []string{"--mcp-listen", addr},
		env:  []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint},
	})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	const size = 64 << 10
	cs := connectMCP(ctx, t, "http://"+addr+"/mcp", "2025-11-25", "", nil)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__demo__" + strings.Repeat("x", size)}); err == nil {
		t.Error("tools/call of a name too long: no error")
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "mcp__demo__" + strings.Repeat("y", size)}); err == nil {
		t.Error("prompts/get of a name too long: no error")
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mcpd://demo/" + strings.Repeat("z", size)}); err == nil {
		t.Error("resources/read of a URI too long: no error")
	}
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("mcpd exit code %d, want 0", code)
	}
	spans, _ := receiver.snapshot()
	served := map[string]bool{}
	for _, s := range spans {
		texts := []string{s.GetName()}
		for _, kv := range s.GetAttributes() {
			texts = append(texts, kv.GetValue().GetStringValue())
		}
		all := strings.Join(texts, "\x00")
		if strings.Contains(all, strings.Repeat("x", 64)) || strings.Contains(all, strings.Repeat("y", 64)) || strings.Contains(all, strings.Repeat("z", 64)) {
			t.Errorf("span %.60q (%v) holds a refused name of %d bytes: %d bytes of name and attributes", s.GetName(), s.GetKind(), size, len(all))
		}
		if s.GetKind() == tracepb.Span_SPAN_KIND_SERVER && attr(s.GetAttributes(), "error.type") != "" {
			served[attr(s.GetAttributes(), "mcp.method.name")] = true
		}
	}
	for _, method := range []string{"tools/call", "prompts/get", "resources/read"} {
		if !served[method] {
			t.Errorf("no failed server span of %s", method)
		}
	}
}

// TestTraceExporterSettingsLogNoSecret: OTEL_EXPORTER_OTLP_HEADERS written
// wrong ("authorization:Bearer ..." with a colon, a value with a stray
// "%"), or an OTLP endpoint that does not parse, is reported as a JSON
// warning on mcpd's log, without the value: the OpenTelemetry SDK
// printed each bad header pair whole, collector token and all, and the
// endpoint with its password and query, in lines of its own format on
// stderr.
func TestTraceExporterSettingsLogNoSecret(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const (
		colonSecret    = "colon-secret-5d2e81"
		escapeSecret   = "escape-secret-a9c3f7"
		passwordSecret = "password-secret-37b0e4"
		querySecret    = "query-secret-c81d5a"
	)
	d := startDaemon(ctx, t, daemonOptions{env: []string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://mcpd:" + passwordSecret + "@127.0.0.1:port/v1/traces?key=" + querySecret,
		"OTEL_EXPORTER_OTLP_HEADERS=authorization:Bearer " + colonSecret + ",x-api-key=%zz" + escapeSecret,
	}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	log := d.log.String()
	for _, secret := range []string{colonSecret, escapeSecret, passwordSecret, querySecret} {
		if strings.Contains(log, secret) {
			t.Errorf("the log holds an OTLP header value (%s):\n%s", secret, log)
		}
	}
	headers, urls := 0, 0
	for line := range strings.Lines(log) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("a log line that is not JSON: %q", line)
			continue
		}
		msg := fmt.Sprint(m["message"])
		switch {
		case m["level"] != "warn":
		case strings.Contains(msg, "header"):
			headers++
		case strings.Contains(msg, "url"):
			urls++
		}
	}
	if headers != 2 || urls != 1 {
		t.Errorf("%d warnings about the OTLP headers and %d about the endpoint, want 2 (one per bad pair) and 1:\n%s", headers, urls, log)
	}
}
