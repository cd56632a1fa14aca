package telemetry

import (
	"iter"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
)

// durationBuckets are the latency histograms' bounds, in seconds: the
// OpenTelemetry MCP conventions' advice (10ms to 300s) below which mcpd
// adds finer ones, for a call relayed to a local stdio server takes about
// 100µs.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// instruments are mcpd's own metrics. Every label takes values from a
// bounded set: names of configured servers, tools those servers list now
// (see toolLabelLocked), MCP methods mcpd sends, and fixed outcome words;
// never arguments or URIs.
type instruments struct {
	operationDuration *prometheus.HistogramVec
	toolCalls         *prometheus.CounterVec
	toolCallResends   *prometheus.CounterVec
	eventsPublished   *prometheus.CounterVec
	eventsDelivered   prometheus.Counter
	eventsDropped     prometheus.Counter
	subscribers       prometheus.Gauge
	serverRequests    *prometheus.CounterVec
	stderrLines       *prometheus.CounterVec
	stderrDropped     *prometheus.CounterVec
	reloadOK          *prometheus.GaugeVec
	reloadOKTime      *prometheus.GaugeVec
}

func newInstruments() instruments {
	return instruments{
		// The OpenTelemetry semantic conventions' mcp.client.operation.duration,
		// under the name and labels an OpenTelemetry-to-Prometheus
		// translation gives it, plus mcpd's server name.
		operationDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_client_operation_duration_seconds",
			Help:    "Duration of the MCP requests and notifications mcpd sends to servers, until the response arrives.",
			Buckets: durationBuckets,
		}, []string{"server", "mcp_method_name", "gen_ai_tool_name", "error_type", "network_transport", "mcp_protocol_version"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpd_tool_calls_total",
			Help: "Tool calls mcpd handled, by server, tool and outcome (ok, tool_error, or the error's kind).",
		}, []string{"server", "tool", "outcome"}),
		toolCallResends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpd_tool_call_resends_total",
			Help: "Tool calls mcpd sent again on a new session after theirs ended, by server, tool and reason (not_sent: the request never reached the server; idempotent: it may have, and the tool is read-only or idempotent).",
		}, []string{"server", "tool", "reason"}),
		eventsPublished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpd_events_published_total",
			Help: "Events put on the event bus, by kind.",
		}, []string{"kind"}),
		eventsDelivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpd_events_delivered_total",
			Help: "Events sent to Subscribe streams (one per stream that received it).",
		}),
		eventsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpd_events_dropped_total",
			Help: "Events Subscribe streams missed: published while the stream was open, and evicted from the buffer before it read them, or too large to send (reported to the stream as a gap).",
		}),
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpd_event_subscribers",
			Help: "Subscribe streams open now.",
		}),
		serverRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpd_server_requests_total",
			Help: "Requests servers sent to mcpd (sampling, elicitation, roots), by server, kind and outcome.",
		}, []string{"server", "kind", "outcome"}),
		stderrLines: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpd_server_stderr_lines_total",
			Help: "Lines stdio servers wrote to stderr.",
		}, []string{"server"}),
		stderrDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpd_server_stderr_lines_dropped_total",
			Help: "Lines stdio servers wrote to stderr that mcpd did not log, being over the log's rate limit (--stderr-log-rate); the stderr tail has them.",
		}, []string{"server"}),
		// Prometheus's and Alertmanager's own names for the same facts, so
		// that alerts written for them read alike.
		reloadOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpd_config_last_reload_successful",
			Help: "Whether the last read of the files (config: the config scopes; callers: the callers file) succeeded (1) or failed and the previous contents stay in force (0).",
		}, []string{"files"}),
		reloadOKTime: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpd_config_last_reload_success_timestamp_seconds",
			Help: "When the files were last read successfully (at start or at a reload), in seconds since the epoch.",
		}, []string{"files"}),
	}
}

func (m instruments) register(r *prometheus.Registry) {
	r.MustRegister(m.operationDuration, m.toolCalls, m.toolCallResends, m.eventsPublished, m.eventsDelivered,
		m.eventsDropped, m.subscribers, m.serverRequests, m.stderrLines, m.stderrDropped, m.reloadOK, m.reloadOKTime)
}

// The files values of the reload metrics.
const (
	FilesConfig  = "config"
	FilesCallers = "callers"
)

// FilesRead records a read of files (FilesConfig or FilesCallers) at start
// or at a reload: ok false means it failed and the previous contents stay
// in force.
func (t *Telemetry) FilesRead(files string, ok bool, at time.Time) {
	if t == nil {
		return
	}
	if !ok {
		t.m.reloadOK.WithLabelValues(files).Set(0)
		return
	}
	t.m.reloadOK.WithLabelValues(files).Set(1)
	t.m.reloadOKTime.WithLabelValues(files).Set(float64(at.UnixNano()) / 1e9)
}

// ForgetServer deletes every series labelled with server: its calls,
// durations, resends, requests and stderr lines, logged or dropped. mcpd
// calls it when the server is removed, so that names agents pick for
// servers that come and go do not pile up in the metrics. (The series
// mcpd_server_* and mcpd_calls_* are read from the servers at each
// scrape and go by themselves.)
func (t *Telemetry) ForgetServer(server string) {
	if t == nil {
		return
	}
	t.toolsMu.Lock()
	defer t.toolsMu.Unlock()
	delete(t.tools, server)
	labels := prometheus.Labels{"server": server}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		t.m.operationDuration, t.m.toolCalls, t.m.toolCallResends, t.m.serverRequests, t.m.stderrLines, t.m.stderrDropped,
	} {
		v.DeletePartialMatch(labels)
	}
}

// maxToolLabel bounds a tool label, as MCP bounds tool names.
const maxToolLabel = 128

// otherTool is the label of a listed tool whose name breaks MCP's rules
// for tool names: such a name may be of any length, and is not worth a
// series of its own.
const otherTool = "other"

// toolLabel is name as a label value: itself if it keeps MCP's rules for
// tool names (1 to 128 of A-Z a-z 0-9 _ - .), else otherTool.
func toolLabel(name string) string {
	if name == "" || len(name) > maxToolLabel {
		return otherTool
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return otherTool
		}
	}
	return name
}

// toolLabelLocked is the tool label of a call of tool on server: "" for a
// tool the server does not list now, so that a name a caller made up, or
// one the server stopped listing, makes no series. Call it with toolsMu
// held, and write the series before releasing it: ToolsListed deletes
// series under the write lock, and one written after would outlive it.
func (t *Telemetry) toolLabelLocked(server, tool string) string {
	if _, ok := t.tools[server][tool]; !ok {
		return ""
	}
	return toolLabel(tool)
}

// ToolsListed tells the metrics which tools server lists now (after its
// tool filter), each time it lists them: calls of other tools count under
// tool="" from then on, and the series of tools it no longer lists are
// deleted. A server or an agent that changes its tools, or a server
// replaced by one with other tools, thus leaves no series behind.
func (t *Telemetry) ToolsListed(server string, tools iter.Seq[string]) {
	if t == nil {
		return
	}
	listed := make(map[string]struct{})
	labels := make(map[string]bool)
	if tools != nil { // nil lists none
		for name := range tools {
			listed[name] = struct{}{}
			labels[toolLabel(name)] = true
		}
	}
	t.toolsMu.Lock()
	defer t.toolsMu.Unlock()
	gone := make(map[string]bool)
	for name := range t.tools[server] {
		if l := toolLabel(name); !labels[l] {
			gone[l] = true
		}
	}
	t.tools[server] = listed
	if len(gone) > 0 {
		// One pass over each metric's series, not one per tool that left:
		// a server that renames thousands of tools must not hold toolsMu,
		// which every tool call takes, for long.
		deleteSeries(t.m.toolCalls.MetricVec, server, "tool", gone)
		deleteSeries(t.m.toolCallResends.MetricVec, server, "tool", gone)
		deleteSeries(t.m.operationDuration.MetricVec, server, "gen_ai_tool_name", gone)
	}
}

// deleteSeries deletes the series of vec whose server label is server and
// whose label toolLabel is in gone.
func deleteSeries(vec *prometheus.MetricVec, server, toolLabel string, gone map[string]bool) {
	metrics := make(chan prometheus.Metric)
	go func() {
		vec.Collect(metrics)
		close(metrics)
	}()
	var doomed []prometheus.Labels
	for m := range metrics {
		var pb dto.Metric
		if m.Write(&pb) != nil {
			continue
		}
		labels := make(prometheus.Labels, len(pb.GetLabel()))
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["server"] == server && gone[labels[toolLabel]] {
			doomed = append(doomed, labels)
		}
	}
	// Deleted once Collect is done: it holds the vector's lock.
	for _, labels := range doomed {
		vec.Delete(labels)
	}
}

// ToolCall counts one tool call that ended with outcome: "ok",
// "tool_error", or a word for the error (see mcpclient). It counts under
// tool="" when the server does not list the tool (ToolsListed).
func (t *Telemetry) ToolCall(server, tool, outcome string) {
	if t == nil {
		return
	}
	t.toolsMu.RLock()
	defer t.toolsMu.RUnlock()
	t.m.toolCalls.WithLabelValues(server, t.toolLabelLocked(server, tool), outcome).Inc()
}

// ToolCallResent counts one tool call sent again on a new session, for
// reason "not_sent" or "idempotent", by tool as ToolCall does.
func (t *Telemetry) ToolCallResent(server, tool, reason string) {
	if t == nil {
		return
	}
	t.toolsMu.RLock()
	defer t.toolsMu.RUnlock()
	t.m.toolCallResends.WithLabelValues(server, t.toolLabelLocked(server, tool), reason).Inc()
}

// EventPublished counts one event of kind put on the bus.
func (t *Telemetry) EventPublished(kind string) {
	if t == nil {
		return
	}
	t.m.eventsPublished.WithLabelValues(kind).Inc()
}

// EventDelivered counts one event sent to one Subscribe stream.
func (t *Telemetry) EventDelivered() {
	if t == nil {
		return
	}
	t.m.eventsDelivered.Inc()
}

// EventsDropped counts n events a Subscribe stream missed.
func (t *Telemetry) EventsDropped(n uint64) {
	if t == nil {
		return
	}
	t.m.eventsDropped.Add(float64(n))
}

// SubscriberOpened counts an open Subscribe stream until the returned
// func is called.
func (t *Telemetry) SubscriberOpened() (closed func()) {
	if t == nil {
		return func() {}
	}
	t.m.subscribers.Inc()
	return t.m.subscribers.Dec
}

// StderrLines returns a func that counts one stderr line of server.
func (t *Telemetry) StderrLines(server string) func() {
	if t == nil {
		return nil
	}
	return t.m.stderrLines.WithLabelValues(server).Inc
}

// StderrLinesDropped returns a func that counts one stderr line of server
// that was kept from the log by its rate limit.
func (t *Telemetry) StderrLinesDropped(server string) func() {
	if t == nil {
		return nil
	}
	return t.m.stderrDropped.WithLabelValues(server).Inc
}

// ServerRequest counts one request of kind ("sampling", "elicitation" or
// "roots") that server sent to mcpd, by how mcpd answered it (res or
// err): ok, declined (an elicitation the agent declined, or a refusal
// with the spec's code -1), cancelled (an elicitation dismissed), or error.
// It is called where mcpd answers, once per request whichever protocol
// era carried it.
func (t *Telemetry) ServerRequest(server, kind string, res mcp.Result, err error) {
	if t == nil {
		return
	}
	t.m.serverRequests.WithLabelValues(server, kind, serverRequestOutcome(res, err)).Inc()
}

// observeOperation records one MCP request or notification mcpd sent,
// by tool as ToolCall counts calls.
func (t *Telemetry) observeOperation(op operation, errorType string, took time.Duration) {
	tool := op.tool
	if tool != "" {
		t.toolsMu.RLock()
		defer t.toolsMu.RUnlock()
		tool = t.toolLabelLocked(op.server, tool)
	}
	t.m.operationDuration.WithLabelValues(op.server, op.method, tool, errorType, op.network, op.protocolVersion).
		Observe(took.Seconds())
}

// ServerSample is one server's state at scrape time.
type ServerSample struct {
	Name string
	// State is the server's state; States lists every state, so that the
	// others read 0.
	State    string
	States   []string
	Restarts uint64
	Tools    int
	// InFlight and Queued are the tool calls running on the server and
	// waiting for a slot; QueueRejections counts the calls that waited
	// too long.
	InFlight, Queued int
	QueueRejections  uint64
}

// ObserveServers reports the servers' state, restarts, tools, calls in
// flight and queued, and queue rejections, as samples reads them at
// every scrape. A server that is gone is gone from the metrics too.
// Call it once.
func (t *Telemetry) ObserveServers(samples func() []ServerSample) {
	if t == nil {
		return
	}
	t.registry.MustRegister(serverCollector(samples))
}

var (
	descServerState = prometheus.NewDesc("mcpd_server_state",
		"1 for the state the server is in, 0 for the others.", []string{"server", "state"}, nil)
	descServerRestarts = prometheus.NewDesc("mcpd_server_restarts_total",
		"Times mcpd reconnected or restarted the server since it was added.", []string{"server"}, nil)
	descServerTools = prometheus.NewDesc("mcpd_server_tools",
		"Tools the server lists (after its tool filter).", []string{"server"}, nil)
	descCallsInFlight = prometheus.NewDesc("mcpd_calls_in_flight",
		"Tool calls running on the server now.", []string{"server"}, nil)
	descCallsQueued = prometheus.NewDesc("mcpd_calls_queued",
		"Tool calls waiting for a free slot under --max-inflight-calls now.", []string{"server"}, nil)
	descQueueRejections = prometheus.NewDesc("mcpd_call_queue_rejections_total",
		"Tool calls refused with RESOURCE_EXHAUSTED after waiting --queue-timeout for a slot.", []string{"server"}, nil)
)

// serverCollector turns ServerSamples into metrics at scrape time.
type serverCollector func() []ServerSample

func (c serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descServerState, descServerRestarts, descServerTools,
		descCallsInFlight, descCallsQueued, descQueueRejections} {
		ch <- d
	}
}

func (c serverCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c() {
		for _, st := range s.States {
			v := 0.0
			if st == s.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descServerState, prometheus.GaugeValue, v, s.Name, st)
		}
		ch <- prometheus.MustNewConstMetric(descServerRestarts, prometheus.CounterValue, float64(s.Restarts), s.Name)
		ch <- prometheus.MustNewConstMetric(descServerTools, prometheus.GaugeValue, float64(s.Tools), s.Name)
		ch <- prometheus.MustNewConstMetric(descCallsInFlight, prometheus.GaugeValue, float64(s.InFlight), s.Name)
		ch <- prometheus.MustNewConstMetric(descCallsQueued, prometheus.GaugeValue, float64(s.Queued), s.Name)
		ch <- prometheus.MustNewConstMetric(descQueueRejections, prometheus.CounterValue, float64(s.QueueRejections), s.Name)
	}
}

// GRPCInterceptors returns the interceptors that count and time every
// RPC (grpc_server_* metrics), to run outermost.
func (t *Telemetry) GRPCInterceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	return t.grpc.UnaryServerInterceptor(), t.grpc.StreamServerInterceptor()
}

// InitializeGRPC creates the grpc_server_* series of every method of s
// at zero, so that rates exist before the first call.
func (t *Telemetry) InitializeGRPC(s *grpc.Server) {
	if t == nil {
		return
	}
	t.grpc.InitializeMetrics(s)
}

// jsonRPCErrorType is error.type for a JSON-RPC error: the code for the
// codes JSON-RPC and MCP define, one word for the rest, which servers may
// pick freely.
func jsonRPCErrorType(code int64) string {
	switch code {
	case -32700, -32600, -32601, -32602, -32603, -32002, -32021, -32022, -32042, -1:
		return strconv.FormatInt(code, 10)
	}
	return "jsonrpc_error"
}
