package telemetry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/mcpd-project/mcpd/internal/config"
)

// instrumentationName names the tracer, as OpenTelemetry asks: the package
// that makes the spans.
const instrumentationName = "github.com/mcpd-project/mcpd/internal/telemetry"

// tracingConfig reads whether to trace and over which OTLP protocol, from
// the standard variables:
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: off.
//   - OTEL_TRACES_EXPORTER=otlp: on.
//   - OTEL_TRACES_EXPORTER unset: on when OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, off otherwise (mcpd sends
//     nothing anywhere unless asked).
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL:
//     grpc or http/protobuf (the default).
func tracingConfig(lookup func(string) (string, bool)) (on bool, protocol string, err error) {
	if lookup == nil {
		return false, "", nil
	}
	// The values compared are enums, which OpenTelemetry's spec of its
	// variables reads in any case: "OTLP", "None" and "GRPC" too (of the
	// endpoints, only whether they are set counts).
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.ToLower(strings.TrimSpace(v))
	}
	if get("OTEL_SDK_DISABLED") == "true" {
		return false, "", nil
	}
	switch exporter := get("OTEL_TRACES_EXPORTER"); exporter {
	case "none":
		return false, "", nil
	case "otlp":
	case "":
		if get("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return false, "", nil
		}
	default:
		return false, "", fmt.Errorf("OTEL_TRACES_EXPORTER=%q: mcpd exports traces with otlp (or none)", exporter)
	}
	protocol = get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = get("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol {
	case "":
		protocol = "http/protobuf"
	case "grpc", "http/protobuf":
	default:
		return false, "", fmt.Errorf("OTLP protocol %q: want grpc or http/protobuf", protocol)
	}
	return true, protocol, nil
}

// startTracing builds the tracer provider and its OTLP exporter when the
// environment turns tracing on. The exporters read their endpoint,
// headers, timeout and TLS settings (OTEL_EXPORTER_OTLP_*) themselves,
// the provider its sampler (OTEL_TRACES_SAMPLER) and batching
// (OTEL_BSP_*), and the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
func (t *Telemetry) startTracing(ctx context.Context, opts *Options, version string) error {
	t.tracer = tracenoop.NewTracerProvider().Tracer(instrumentationName)
	on, protocol, err := tracingConfig(opts.LookupEnv)
	if err != nil || !on {
		return err
	}
	// Before the exporter reads its settings, which it reports there.
	otel.SetLogger(logr.New(sdkLogSink{log: opts.Logger}))
	var exp sdktrace.SpanExporter
	if protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return fmt.Errorf("trace exporter: %w", err)
	}
	// Later sources win: the environment over mcpd's defaults.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "mcpd"), attribute.String("service.version", version)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil && res == nil {
		return fmt.Errorf("trace resource: %w", err)
	}
	log := opts.Logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		if errors.As(err, new(reportedExportError)) {
			return // reportingExporter logged it, or the outage it belongs to
		}
		log.Warn().Err(err).Msg("trace export")
	}))
	exp = &reportingExporter{SpanExporter: exp, log: log}
	t.provider = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t.tracer = t.provider.Tracer(instrumentationName, trace.WithInstrumentationVersion(version))
	return nil
}

// sdkLogSink is the OpenTelemetry SDK's logger, on mcpd's log. The SDK
// reports there what it cannot use of its settings (an OTLP header
// written without "=" or with a stray "%", an endpoint that is no URL).
// It passes warnings and errors (logr verbosity 1 and less; the SDK's
// info and debug lines describe every export), each as a warning, and
// leaves out the key-value pairs the SDK adds: they quote the settings
// themselves, and an OTLP header's value is often the collector's token.
// Without it the SDK printed them whole on stderr, in a format of its
// own.
type sdkLogSink struct{ log zerolog.Logger }

func (s sdkLogSink) Init(logr.RuntimeInfo)            {}
func (s sdkLogSink) Enabled(level int) bool           { return level <= 1 }
func (s sdkLogSink) WithValues(...any) logr.LogSink   { return s }
func (s sdkLogSink) WithName(string) logr.LogSink     { return s }
func (s sdkLogSink) Info(_ int, msg string, _ ...any) { s.log.Warn().Msg("trace exporter: " + msg) }

func (s sdkLogSink) Error(err error, msg string, _ ...any) {
	ev := s.log.Warn()
	if err != nil {
		// An error may quote a setting too: a URL that does not parse,
		// with its user info or query.
		ev = ev.Str("error", config.RedactURLsIn(err.Error()))
	}
	ev.Msg("trace exporter: " + msg)
}

// reportingExporter logs a collector that fails once per outage: when
// exports start failing, and when one succeeds again. A collector that is
// away fails every batch, and a warning each time would flood the log.
type reportingExporter struct {
	sdktrace.SpanExporter
	log     zerolog.Logger
	failing atomic.Bool
}

// reportedExportError is an export error reportingExporter has dealt
// with: the error handler leaves it alone.
type reportedExportError struct{ error }

func (e reportedExportError) Unwrap() error { return e.error }

func (e *reportingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		if !e.failing.Swap(true) {
			e.log.Warn().Err(err).Msg("trace export failing: spans are dropped until the collector takes them again")
		}
		return reportedExportError{err}
	}
	if e.failing.Swap(false) {
		e.log.Info().Msg("trace export recovered")
	}
	return nil
}

// GRPCStatsHandler returns the stats handler that makes a span of every
// RPC (health and reflection excepted), child of the trace context in the
// call's metadata (traceparent); nil when tracing is off.
func (t *Telemetry) GRPCStatsHandler() stats.Handler {
	if !t.Tracing() {
		return nil
	}
	return codeOnly{otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(t.provider),
		otelgrpc.WithPropagators(t.propagator),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()), // metrics come from grpcprom
		otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool {
			return !strings.HasPrefix(info.FullMethodName, "/grpc.health.v1.") &&
				!strings.HasPrefix(info.FullMethodName, "/grpc.reflection.")
		}),
	)}
}

// codeOnly hands otelgrpc the status of a failed RPC without its message,
// which otelgrpc would record as the span's status description: the
// message may quote a server's error text, and with it whatever the
// server echoed of the caller's input. The code stays, as the span's
// status and rpc.response.status_code.
type codeOnly struct{ stats.Handler }

func (h codeOnly) HandleRPC(ctx context.Context, rs stats.RPCStats) {
	if end, ok := rs.(*stats.End); ok && end.Error != nil {
		e := *end // the End is not ours to change
		code := status.Code(end.Error)
		e.Error = status.Error(code, code.String())
		rs = &e
	}
	h.Handler.HandleRPC(ctx, rs)
}

// HTTPTransport wraps base so that each request to a Streamable HTTP or
// SSE server carries the trace context of its MCP request span as
// traceparent (and tracestate, baggage) headers; a nil base is
// http.DefaultTransport, as in an http.Client. It returns base when
// tracing is off.
func (t *Telemetry) HTTPTransport(base http.RoundTripper) http.RoundTripper {
	if !t.Tracing() {
		return base
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &propagatingTransport{base: base, propagator: t.propagator}
}

type propagatingTransport struct {
	base       http.RoundTripper
	propagator propagation.TextMapPropagator
}

func (p *propagatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(req.Context()).IsValid() {
		return p.base.RoundTrip(req)
	}
	req = req.Clone(req.Context()) // a RoundTripper must not change its request
	p.propagator.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	return p.base.RoundTrip(req)
}

// Upstream describes the server a client middleware reports on.
type Upstream struct {
	// Server is the server's name in mcpd.
	Server string
	// Transport returns how the server is reached now: "stdio", "http"
	// or "sse".
	Transport func() string
}

// operation is what the labels and attributes of one MCP request say.
type operation struct {
	server, method, tool, prompt, uri string
	transport, network                string
	protocolVersion, sessionID        string
}

// SendingMiddleware instruments the requests and notifications an MCP
// client sends to up: each one's duration goes to
// mcp_client_operation_duration_seconds and, when tracing is on, it
// becomes a client span, child of the span in its context, whose trace
// context travels in the request's _meta (traceparent, tracestate and
// baggage, as SEP-414 of the MCP specification defines).
//
// With tracing off it drops those fields from _meta instead, whoever put
// them there (an agent's meta, a host's through the MCP endpoint): mcpd
// passes on no trace context then. A nil *Telemetry does that alone.
func (t *Telemetry) SendingMiddleware(up Upstream) mcp.Middleware {
	if t == nil {
		return func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				withoutTraceContext(req)
				return next(ctx, method, req)
			}
		}
	}
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			start := time.Now()
			op := describe(up, method, req)
			var span trace.Span
			if t.provider != nil {
				ctx, span = t.tracer.Start(ctx, spanName(op), trace.WithSpanKind(trace.SpanKindClient),
					trace.WithAttributes(op.attributes()...))
				t.injectMeta(ctx, req)
			} else {
				withoutTraceContext(req)
			}
			res, err := next(ctx, method, req)
			errType := errorType(res, err)
			t.observeOperation(op, errType, time.Since(start))
			if span != nil {
				endSpan(span, errType)
			}
			return res, err
		}
	}
}

// codeDeclined is the JSON-RPC code of a declined request (MCP's "user
// rejected"), which mcpd answers when no agent takes a sampling request.
const codeDeclined = -1

func serverRequestOutcome(res mcp.Result, err error) string {
	var wireErr *jsonrpc.Error
	switch {
	case errors.As(err, &wireErr) && wireErr.Code == codeDeclined:
		return "declined"
	case err != nil:
		return "error"
	}
	if r, ok := res.(*mcp.ElicitResult); ok && r != nil {
		switch r.Action {
		case "decline":
			return "declined"
		case "cancel":
			return "cancelled"
		}
	}
	return "ok"
}

// traceFields are the _meta fields of W3C trace context (SEP-414), the
// fields of the propagator.
var traceFields = []string{"traceparent", "tracestate", "baggage"}

// injectMeta puts the span's trace context into the request's _meta,
// on a copy: the caller's map is not ours to change. The trace fields
// the caller's _meta had go: a tracestate or baggage belongs with the
// traceparent it came with, which the span's replaces.
func (t *Telemetry) injectMeta(ctx context.Context, req mcp.Request) {
	params := req.GetParams()
	if params == nil {
		return
	}
	carrier := propagation.MapCarrier{}
	t.propagator.Inject(ctx, carrier)
	meta := maps.Clone(params.GetMeta())
	if meta == nil {
		meta = make(map[string]any, len(carrier))
	}
	for _, k := range traceFields {
		delete(meta, k)
	}
	for k, v := range carrier {
		meta[k] = v
	}
	params.SetMeta(meta)
}

// withoutTraceContext drops the trace fields from the request's _meta, on
// a copy; a request without them is left alone.
func withoutTraceContext(req mcp.Request) {
	params := req.GetParams()
	if params == nil {
		return
	}
	meta := params.GetMeta()
	if !slices.ContainsFunc(traceFields, func(k string) bool { _, ok := meta[k]; return ok }) {
		return
	}
	meta = maps.Clone(meta)
	for _, k := range traceFields {
		delete(meta, k)
	}
	params.SetMeta(meta)
}

// ServerMiddleware makes a server span of every MCP request the MCP
// endpoint serves (notifications excepted), child of the host's trace
// context: the one in the request's _meta (traceparent, and tracestate
// and baggage with it; SEP-414) or, failing that, the one in the HTTP
// request's headers. The upstream requests made for it are its children.
// With tracing off it reads nothing. network is how hosts reach the
// endpoint ("tcp" or "unix": its spans' network.transport).
func (t *Telemetry) ServerMiddleware(network string) mcp.Middleware {
	if !t.Tracing() {
		return func(next mcp.MethodHandler) mcp.MethodHandler { return next }
	}
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasPrefix(method, "notifications/") {
				return next(ctx, method, req)
			}
			ctx, span := t.tracer.Start(t.extract(ctx, req), method, trace.WithSpanKind(trace.SpanKindServer))
			defer func() {
				// A panic goes on to recoverPanics; the span ends first.
				if p := recover(); p != nil {
					endSpan(span, "panic")
					panic(p)
				}
			}()
			res, err := next(ctx, method, req)
			// Described once served: the endpoint resolves a bare tool
			// or prompt name in the request itself.
			op := describeServed(method, req, network)
			span.SetName(spanName(op))
			span.SetAttributes(op.attributes()...)
			endSpan(span, errorType(res, err))
			return res, err
		}
	}
}

// extract returns ctx with the trace context the host sent with req: in
// _meta, else in the HTTP headers. A malformed traceparent in _meta
// counts as none.
func (t *Telemetry) extract(ctx context.Context, req mcp.Request) context.Context {
	if params := req.GetParams(); params != nil {
		carrier := propagation.MapCarrier{}
		for k, v := range params.GetMeta() {
			if s, ok := v.(string); ok && slices.Contains(traceFields, k) {
				carrier[k] = s
			}
		}
		if carrier["traceparent"] != "" {
			if c := t.propagator.Extract(ctx, carrier); trace.SpanContextFromContext(c).IsValid() {
				return c
			}
		}
	}
	if extra := req.GetExtra(); extra != nil && extra.Header != nil {
		return t.propagator.Extract(ctx, propagation.HeaderCarrier(extra.Header))
	}
	return ctx
}

// describeServed is what the span of a request the MCP endpoint served
// says: the method and the (qualified) tool, prompt or URI it is about.
func describeServed(method string, req mcp.Request, network string) operation {
	op := operation{method: method, network: network}
	switch p := req.GetParams().(type) {
	case *mcp.CallToolParamsRaw:
		op.tool = bounded(p.Name, config.MaxQualifiedToolNameLen)
	case *mcp.GetPromptParams:
		op.prompt = bounded(p.Name, config.MaxQualifiedToolNameLen)
	case *mcp.ReadResourceParams:
		op.uri = bounded(p.URI, config.MaxURILen)
	}
	if v, ok := req.(interface{ ProtocolVersion() string }); ok {
		op.protocolVersion = v.ProtocolVersion()
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		op.sessionID = ss.ID()
	}
	return op
}

func describe(up Upstream, method string, req mcp.Request) operation {
	op := operation{server: up.Server, method: method}
	if up.Transport != nil {
		op.transport = up.Transport()
	}
	switch op.transport {
	case "stdio":
		op.network = "pipe"
	case "agent":
		// The agent's stream may come over TCP, a Unix socket or the
		// HTTP wire: not said.
	default:
		op.network = "tcp"
	}
	switch p := req.GetParams().(type) {
	case *mcp.CallToolParams:
		op.tool = bounded(p.Name, config.MaxQualifiedToolNameLen)
	case *mcp.GetPromptParams:
		op.prompt = bounded(p.Name, config.MaxQualifiedToolNameLen)
	case *mcp.ReadResourceParams:
		op.uri = bounded(p.URI, config.MaxURILen)
	case *mcp.InitializeParams:
		op.protocolVersion = p.ProtocolVersion
	}
	if cs, ok := req.GetSession().(*mcp.ClientSession); ok && cs != nil {
		op.sessionID = cs.ID()
		if init := cs.InitializeResult(); init != nil {
			op.protocolVersion = init.ProtocolVersion
		}
	}
	return op
}

// bounded is a tool or prompt name, or a resource URI, as a span records
// it: "" when it is longer than max, the most mcpd takes. mcpd refuses
// such a request, and its log and audit line leave the name out; so does
// the span, lest a caller have mcpd hold and export spans of megabytes
// each (the name goes into the span's name and an attribute).
func bounded(s string, max int) string {
	if len(s) > max {
		return ""
	}
	return s
}

// spanName follows the MCP conventions: the method, then the tool or
// prompt it is about.
func spanName(op operation) string {
	switch {
	case op.tool != "":
		return op.method + " " + op.tool
	case op.prompt != "":
		return op.method + " " + op.prompt
	}
	return op.method
}

func (op operation) attributes() []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("mcp.method.name", op.method)}
	if op.network != "" {
		attrs = append(attrs, attribute.String("network.transport", op.network))
	}
	if op.server != "" {
		attrs = append(attrs, attribute.String("mcpd.server.name", op.server))
	}
	if op.transport != "" {
		attrs = append(attrs, attribute.String("mcpd.server.transport", op.transport))
	}
	if op.protocolVersion != "" {
		attrs = append(attrs, attribute.String("mcp.protocol.version", op.protocolVersion))
	}
	if op.sessionID != "" {
		attrs = append(attrs, attribute.String("mcp.session.id", op.sessionID))
	}
	if op.tool != "" {
		attrs = append(attrs, attribute.String("gen_ai.tool.name", op.tool),
			attribute.String("gen_ai.operation.name", "execute_tool"))
	}
	if op.prompt != "" {
		attrs = append(attrs, attribute.String("gen_ai.prompt.name", op.prompt))
	}
	if op.uri != "" {
		attrs = append(attrs, attribute.String("mcp.resource.uri", config.RedactURI(op.uri)))
	}
	return attrs
}

// errorType is error.type as the MCP conventions define it: "tool_error"
// for a tool result with isError, the JSON-RPC code for an error answer,
// a word for a failure before any answer; "" on success.
func errorType(res mcp.Result, err error) string {
	var wireErr *jsonrpc.Error
	switch {
	case err == nil:
		if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
			return "tool_error"
		}
		return ""
	case errors.As(err, &wireErr):
		return jsonRPCErrorType(wireErr.Code)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	return "transport_error"
}

// endSpan records the outcome on span and ends it. The status says only
// the error's type: an error's text may carry a server's URL, and with
// it a token.
func endSpan(span trace.Span, errType string) {
	outcome := "ok"
	if errType != "" {
		outcome = errType
		span.SetAttributes(attribute.String("error.type", errType))
	}
	span.SetAttributes(attribute.String("mcpd.outcome", outcome))
	if errType != "" {
		span.SetStatus(codes.Error, errType)
	}
	span.End()
}
