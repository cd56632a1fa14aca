package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// promtoolEnv names the promtool executable (Debian's prometheus package;
// `make test` installs it). Unset, promtool is looked up on PATH.
const promtoolEnv = "MCPD_PROMTOOL_BIN"

// scrape is one parsed scrape of mcpd's metrics endpoint.
type scrape struct {
	raw      []byte
	families map[string]*dto.MetricFamily
}

// scrapeMetrics fetches http://addr/metrics and parses it.
func scrapeMetrics(ctx context.Context, t *testing.T, addr string) scrape {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d, %v: %s", resp.StatusCode, err, raw)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("parse scrape: %v\n%s", err, raw)
	}
	return scrape{raw: raw, families: families}
}

// value returns the value of the series of name whose labels include
// labels (a counter, gauge, or a histogram's sample count), and whether
// there is one. Several matching series are summed.
func (s scrape) value(name string, labels map[string]string) (float64, bool) {
	f := s.families[name]
	if f == nil {
		return 0, false
	}
	var sum float64
	found := false
series:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue series
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, found
}

// want fails the test unless the series has exactly want.
func (s scrape) want(t *testing.T, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := s.value(name, labels)
	if !ok {
		t.Errorf("%s%v: no such series", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v: got %v, want %v", name, labels, got, want)
	}
}

// TestMetrics runs mcpd with --metrics-listen, makes real calls to the
// demo server and checks that the metrics moved by exactly what the
// calls did, that labels carry no name an agent made up, and that
// promtool accepts the scrape.
func TestMetrics(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--metrics-listen", addr}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	before := scrapeMetrics(ctx, t, addr)
	before.want(t, "mcpd_server_state", map[string]string{"server": "demo", "state": "ready"}, 1)
	before.want(t, "mcpd_server_state", map[string]string{"server": "demo", "state": "failed"}, 0)
	if got, _ := before.value("mcpd_tool_calls_total", nil); got != 0 {
		t.Errorf("mcpd_tool_calls_total before any call: got %v, want 0", got)
	}
	if _, ok := before.value("mcpd_build_info", map[string]string{"goversion": runtimeVersion(t)}); !ok {
		t.Errorf("mcpd_build_info: missing or not for this Go:\n%s", grepLines(before.raw, "mcpd_build_info"))
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "grpc_server_handled_total", "mcpd_server_tools"} {
		if _, ok := before.value(name, nil); !ok {
			t.Errorf("%s: missing", name)
		}
	}

	sub := d.subscribe(ctx, t, "demo", mcpdv1.EventKind_EVENT_KIND_SERVER_STATE)
	const calls = 3
	for i := range calls {
		d.mustCall(ctx, t, "mcp__demo__echo", map[string]any{"message": fmt.Sprint("hello ", i)})
	}
	if resp, err := d.call(ctx, t, "mcp__demo__fail", map[string]any{"message": "boom"}, 0); err != nil || !resp.GetIsError() {
		t.Fatalf("fail tool: got %v, %v; want a result with is_error", resp, err)
	}
	_, err := d.call(ctx, t, "mcp__demo__no_such_tool_xyz", nil, 0)
	wantCode(t, err, codes.NotFound)
	// A restart publishes state events, which the subscriber receives.
	if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "demo"}); err != nil {
		t.Fatalf("RestartServer: %v", err)
	}
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	for range 2 { // connecting, ready
		if _, err := sub.Recv(); err != nil {
			t.Fatalf("subscribe: %v", err)
		}
	}

	after := scrapeMetrics(ctx, t, addr)
	after.want(t, "mcpd_tool_calls_total", map[string]string{"server": "demo", "tool": "echo", "outcome": "ok"}, calls)
	after.want(t, "mcpd_tool_calls_total", map[string]string{"server": "demo", "tool": "fail", "outcome": "tool_error"}, 1)
	after.want(t, "mcpd_tool_calls_total", map[string]string{"server": "demo", "tool": "", "outcome": "not_found"}, 1)
	after.want(t, "mcp_client_operation_duration_seconds", map[string]string{
		"server": "demo", "mcp_method_name": "tools/call", "gen_ai_tool_name": "echo",
		"error_type": "", "network_transport": "pipe",
	}, calls)
	after.want(t, "mcp_client_operation_duration_seconds", map[string]string{
		"server": "demo", "mcp_method_name": "tools/call", "gen_ai_tool_name": "fail", "error_type": "tool_error",
	}, 1)
	after.want(t, "grpc_server_handled_total", map[string]string{"grpc_method": "CallTool", "grpc_code": "OK"}, calls+1)
	after.want(t, "grpc_server_handled_total", map[string]string{"grpc_method": "CallTool", "grpc_code": "NotFound"}, 1)
	after.want(t, "mcpd_server_restarts_total", map[string]string{"server": "demo"}, 1)
	after.want(t, "mcpd_event_subscribers", nil, 1)
	after.want(t, "mcpd_calls_in_flight", map[string]string{"server": "demo"}, 0)
	// These are counted just after the fact the test saw (an event sent,
	// a stderr line read on its own goroutine): wait for them.
	waitMetric(ctx, t, addr, "mcpd_events_delivered_total", nil, 2)
	waitMetric(ctx, t, addr, "mcpd_events_published_total", map[string]string{"kind": "server_state"}, 4) // two starts
	waitMetric(ctx, t, addr, "mcpd_server_stderr_lines_total", map[string]string{"server": "demo"}, 2)    // a line per start
	if bytes.Contains(after.raw, []byte("no_such_tool_xyz")) {
		t.Errorf("an unknown tool's name reached the metrics:\n%s", grepLines(after.raw, "no_such_tool_xyz"))
	}
	checkWithPromtool(t, after.raw)
}

// waitMetric scrapes until the series reaches at least min.
func waitMetric(ctx context.Context, t *testing.T, addr, name string, labels map[string]string, min float64) {
	t.Helper()
	poll(ctx, t, fmt.Sprintf("%s%v to reach %v", name, labels, min), func() (bool, error) {
		got, _ := scrapeMetrics(ctx, t, addr).value(name, labels)
		return got >= min, fmt.Errorf("last value %v", got)
	})
}

// checkWithPromtool runs `promtool check metrics` on a scrape.
func checkWithPromtool(t *testing.T, raw []byte) {
	t.Helper()
	promtool := os.Getenv(promtoolEnv)
	if promtool == "" {
		promtool, _ = exec.LookPath("promtool")
	}
	if promtool == "" {
		if os.Getenv(requiredEnv) == "1" {
			t.Fatalf("promtool not found (%s unset, none on PATH) and %s=1: run `make tools`", promtoolEnv, requiredEnv)
		}
		t.Skip("promtool not found")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestMetricsListenerSafety checks the guards of the metrics listener: a
// non-loopback address is refused without TLS plus a credential the scrape
// presents; with TLS the metrics are served over TLS only, and with an API
// token every scrape must present it.
func TestMetricsListenerSafety(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ca := newCA(t, "server")
	cert, key := ca.serverCert(t, "mcpd")
	callers := writeCallers(t, `{"callers": []}`)

	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"no credential", nil, nil},
		{"token without TLS", []string{"MCPD_API_TOKEN=metrics-plain-5e1"}, nil},
		{"TLS without a credential", nil, []string{"--tls-cert", cert, "--tls-key", key}},
		// Callers' tokens do not open the metrics: nothing a scrape
		// presents would be checked.
		{"TLS with callers only", nil, []string{"--tls-cert", cert, "--tls-key", key, "--callers", callers}},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			// Refused before anything binds, so the address is never opened.
			args := append([]string{"--listen", "127.0.0.1:0", "--config", emptyConfig(t),
				"--metrics-listen", "0.0.0.0:" + strconv.Itoa(freePort(t))}, tc.args...)
			code, out := runMcpdEnv(ctx, t, tc.env, args...)
			if code != 1 || !strings.Contains(out, "--metrics-listen") || !strings.Contains(out, "not a loopback address") {
				t.Fatalf("mcpd: got exit code %d, want 1 and a message that says why:\n%s", code, out)
			}
			if strings.Contains(out, "metrics-plain-5e1") {
				t.Errorf("the message quotes the token:\n%s", out)
			}
		})
	}

	t.Run("TLS and token", func(t *testing.T) {
		const token = "metrics-test-token"
		port := strconv.Itoa(freePort(t))
		startDaemon(ctx, t, daemonOptions{
			config: emptyConfig(t),
			args:   []string{"--metrics-listen", "127.0.0.1:" + port, "--tls-cert", cert, "--tls-key", key},
			env:    []string{"MCPD_API_TOKEN=" + token},
			creds:  clientTLS(t, ca, "", ""),
		})
		httpsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}}
		t.Cleanup(httpsClient.CloseIdleConnections)
		for _, tc := range []struct {
			client *http.Client
			scheme string
			auth   string
			want   int
		}{
			{httpsClient, "https", "", http.StatusUnauthorized},
			{httpsClient, "https", "Bearer wrong", http.StatusUnauthorized},
			{httpsClient, "https", "Bearer " + token, http.StatusOK},
			// The scheme is case-insensitive (RFC 9110), as on the
			// other wires.
			{httpsClient, "https", "bearer " + token, http.StatusOK},
			{httpsClient, "https", "Bearer " + token + "x", http.StatusUnauthorized},
			// Plain HTTP gets no metrics, token or not: net/http answers
			// a plaintext request on a TLS listener with 400.
			{http.DefaultClient, "http", "Bearer " + token, http.StatusBadRequest},
		} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tc.scheme+"://127.0.0.1:"+port+"/metrics", nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := tc.client.Do(req)
			if err != nil {
				t.Fatalf("GET %s /metrics: %v", tc.scheme, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s /metrics with %q: got %d, want %d", tc.scheme, tc.auth, resp.StatusCode, tc.want)
			}
			if tc.want == http.StatusOK && !bytes.Contains(body, []byte("mcpd_build_info")) {
				t.Errorf("GET %s /metrics: no mcpd_build_info in\n%s", tc.scheme, body)
			}
			if bytes.Contains(body, []byte(token)) {
				t.Errorf("the response echoes the token")
			}
		}
	})
}

func runtimeVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatalf("go env GOVERSION: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// grepLines returns the lines of raw that contain s.
func grepLines(raw []byte, s string) string {
	var out []string
	for line := range strings.SplitSeq(string(raw), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestMetricsEventGap resumes a Subscribe stream from sequence 0 on a bus
// that keeps two events, after more were published: the stream starts
// with a gap, which mcpd_events_dropped_total does not count (those
// events went before the stream opened: a reconnecting client must not
// inflate the metric), and the events that follow count as delivered.
func TestMetricsEventGap(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--metrics-listen", addr, "--event-buffer", "2"}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	// Two more state events (connecting, ready) push the first two out.
	if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "demo"}); err != nil {
		t.Fatalf("RestartServer: %v", err)
	}
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	after := uint64(0)
	sub, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{AfterSequence: &after})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	first, err := sub.Recv()
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	gap := first.GetEvent().GetGap()
	if gap == nil {
		t.Fatalf("first event: got %v, want a gap", first.GetEvent())
	}
	// The two buffered events follow. The second one's arrival means the
	// stream counted the gap and the first one (it counts after a send).
	for range 2 {
		if _, err := sub.Recv(); err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
	}
	s := scrapeMetrics(ctx, t, addr)
	s.want(t, "mcpd_events_dropped_total", nil, 0)
	if got, _ := s.value("mcpd_events_delivered_total", nil); got < 1 {
		t.Errorf("mcpd_events_delivered_total: got %v, want at least 1", got)
	}
}

// TestMetricsCallLimits holds the one call slot of the demo server with a
// slow call, so that the next call waits --queue-timeout and is refused:
// the in-flight gauge, the queue rejections and the outcomes show it.
func TestMetricsCallLimits(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--metrics-listen", addr,
		"--max-inflight-calls", "1", "--queue-timeout", "200ms"}})
	demo := map[string]string{"server": "demo"}

	release := holdCallSlot(ctx, t, d, addr)

	_, err := d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "no room"}, 0)
	wantCode(t, err, codes.ResourceExhausted)
	s := scrapeMetrics(ctx, t, addr)
	s.want(t, "mcpd_call_queue_rejections_total", demo, 1)
	s.want(t, "mcpd_calls_queued", demo, 0)
	s.want(t, "mcpd_calls_in_flight", demo, 1)
	s.want(t, "mcpd_tool_calls_total", map[string]string{"server": "demo", "tool": "echo", "outcome": "resource_exhausted"}, 1)

	wantCode(t, release(), codes.Canceled)
	waitMetric(ctx, t, addr, "mcpd_tool_calls_total", map[string]string{"server": "demo", "tool": "slow", "outcome": "cancelled"}, 1)
	scrapeMetrics(ctx, t, addr).want(t, "mcpd_calls_in_flight", demo, 0)
}

// holdCallSlot takes the demo server's one call slot (--max-inflight-calls
// 1) with a slow call, once the metrics at addr show it in flight. The
// call would take a minute: release cancels it and returns its error.
func holdCallSlot(ctx context.Context, t *testing.T, d *daemon, addr string) (release func() error) {
	t.Helper()
	slowCtx, cancelSlow := context.WithCancel(ctx)
	t.Cleanup(cancelSlow)
	slowDone := make(chan error, 1)
	go func() {
		_, err := d.hub.CallTool(slowCtx, slowRequest(t))
		slowDone <- err
	}()
	waitMetric(ctx, t, addr, "mcpd_calls_in_flight", map[string]string{"server": "demo"}, 1)
	return func() error {
		cancelSlow()
		return <-slowDone
	}
}

// TestMetricsCountersSurviveReplace: the counters mcpd reads from a server
// (restarts, queue rejections) never go back while its series stay: not
// when a reload restarts it with a changed config, nor when ConnectServer
// replaces it, nor when it is disabled. The Server's restarts say the same.
func TestMetricsCountersSurviveReplace(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	demoConfig := func(env string) string {
		return mustJSON(t, map[string]any{"mcpServers": map[string]any{
			"demo": map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}, "env": map[string]string{"GENERATION": env}},
		}})
	}
	cfg := writeConfig(t, demoConfig("1"))
	d := startDaemon(ctx, t, daemonOptions{config: cfg, args: []string{"--metrics-listen", addr,
		"--max-inflight-calls", "1", "--queue-timeout", "200ms"}})
	demo := map[string]string{"server": "demo"}

	// One queue rejection: a call waits for the slot a slow call holds.
	release := holdCallSlot(ctx, t, d, addr)
	_, err := d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "no room"}, 0)
	wantCode(t, err, codes.ResourceExhausted)
	wantCode(t, release(), codes.Canceled)
	// One restart.
	if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "demo"}); err != nil {
		t.Fatalf("RestartServer: %v", err)
	}
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	wantCounted := func(when string) {
		t.Helper()
		s := scrapeMetrics(ctx, t, addr)
		for _, name := range []string{"mcpd_server_restarts_total", "mcpd_call_queue_rejections_total"} {
			if got, ok := s.value(name, demo); !ok || got < 1 {
				t.Errorf("%s: %s%v = %v (present %v), want at least 1: a counter went back", when, name, demo, got, ok)
			}
		}
		st, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "demo"})
		if err != nil {
			t.Fatal(err)
		}
		if st.GetServer().GetRestarts() < 1 {
			t.Errorf("%s: restarts %d, want at least 1", when, st.GetServer().GetRestarts())
		}
	}
	wantCounted("after RestartServer")

	// A reload that changes the server restarts it.
	pid := d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY).GetPid()
	if err := os.WriteFile(cfg, []byte(demoConfig("2")), 0o600); err != nil {
		t.Fatal(err)
	}
	d.send(t, syscall.SIGHUP)
	poll(ctx, t, "the demo server restarted by the reload", func() (bool, error) {
		st, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "demo"})
		return err == nil && st.GetServer().GetPid() != pid && st.GetServer().GetState() == mcpdv1.ServerState_SERVER_STATE_READY, err
	})
	wantCounted("after a reload that changed the server")

	if _, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Replace: true,
		Server: stdioConfig("demo", mcpdBinary(t), []string{"demo-server"}, map[string]string{"GENERATION": "3"})}); err != nil {
		t.Fatalf("ConnectServer replace: %v", err)
	}
	wantCounted("after ConnectServer with replace")

	if _, err := d.hub.SetServerEnabled(ctx, &mcpdv1.SetServerEnabledRequest{Name: "demo", Enabled: false}); err != nil {
		t.Fatalf("SetServerEnabled: %v", err)
	}
	wantCounted("after disabling the server")
	checkWithPromtool(t, scrapeMetrics(ctx, t, addr).raw)
}

func slowRequest(t *testing.T) *mcpdv1.CallToolRequest {
	t.Helper()
	args, err := structpb.NewStruct(map[string]any{"steps": 1, "delay_ms": 60000})
	if err != nil {
		t.Fatal(err)
	}
	return &mcpdv1.CallToolRequest{Name: "mcp__demo__slow", Arguments: args}
}

// TestMetricsServerRequests has server-everything send mcpd a sampling,
// an elicitation and a roots request with no agent attached: mcpd
// declines the first two and answers roots itself, and the counter of
// server requests says so.
func TestMetricsServerRequests(t *testing.T) {
	t.Parallel()
	bin := everythingBinary(t)
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--metrics-listen", addr}})
	d.connect(ctx, t, "ev", bin, []string{"stdio"}, nil)
	poll(ctx, t, "the conditional tools to be listed", func() (bool, error) {
		tools, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "ev"})
		if err != nil {
			return false, err
		}
		n := 0
		for _, tool := range tools.GetTools() {
			switch tool.GetToolName() {
			case "trigger-sampling-request", "trigger-elicitation-request", "get-roots-list":
				n++
			}
		}
		return n == 3, nil
	})
	before := scrapeMetrics(ctx, t, addr)
	for _, tc := range []struct {
		tool    string
		args    map[string]any
		kind    string
		outcome string
	}{
		{"trigger-sampling-request", map[string]any{"prompt": "Say hi"}, "sampling", "declined"},
		{"trigger-elicitation-request", nil, "elicitation", "declined"},
		{"get-roots-list", nil, "roots", "ok"},
	} {
		labels := map[string]string{"server": "ev", "kind": tc.kind, "outcome": tc.outcome}
		was, _ := before.value("mcpd_server_requests_total", labels)
		// The tool's own result does not matter here (a declined request
		// may be a tool error): only that the request reached mcpd.
		_, _ = d.call(ctx, t, "mcp__ev__"+tc.tool, tc.args, 0)
		if tc.kind == "roots" {
			// The server may also ask for the roots on its own (after its
			// session starts), at a moment the test cannot see.
			if got, _ := scrapeMetrics(ctx, t, addr).value("mcpd_server_requests_total", labels); got < was+1 {
				t.Errorf("mcpd_server_requests_total%v: got %v, want at least %v", labels, got, was+1)
			}
			continue
		}
		scrapeMetrics(ctx, t, addr).want(t, "mcpd_server_requests_total", labels, was+1)
	}
}

// TestMetricsServerChurn connects, calls and disconnects servers under
// names of its own, as any caller with ConnectServer may: once a server is
// gone, no series names it, counters and histograms included, and a
// server connected again under a name that was used starts from zero.
func TestMetricsServerChurn(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--metrics-listen", addr}})
	const n = 5
	for i := range n {
		name := fmt.Sprintf("tmp-%d", i)
		d.connect(ctx, t, name, mcpdBinary(t), []string{"demo-server"}, nil)
		d.mustCall(ctx, t, "mcp__"+name+"__echo", map[string]any{"message": "x"})
		// The demo server's stderr line at start is counted on a goroutine
		// of its own: wait for it, so that it cannot come after the
		// disconnect.
		waitMetric(ctx, t, addr, "mcpd_server_stderr_lines_total", map[string]string{"server": name}, 1)
		if _, err := d.hub.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: name}); err != nil {
			t.Fatalf("DisconnectServer %s: %v", name, err)
		}
	}
	s := scrapeMetrics(ctx, t, addr)
	for name, f := range s.families {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "server" && strings.HasPrefix(lp.GetValue(), "tmp-") {
					t.Errorf("%s{server=%q}: a series of a disconnected server", name, lp.GetValue())
				}
			}
		}
	}

	d.connect(ctx, t, "tmp-0", mcpdBinary(t), []string{"demo-server"}, nil)
	d.mustCall(ctx, t, "mcp__tmp-0__echo", map[string]any{"message": "again"})
	again := scrapeMetrics(ctx, t, addr)
	again.want(t, "mcpd_tool_calls_total", map[string]string{"server": "tmp-0", "tool": "echo", "outcome": "ok"}, 1)
	again.want(t, "mcp_client_operation_duration_seconds", map[string]string{
		"server": "tmp-0", "mcp_method_name": "tools/call", "gen_ai_tool_name": "echo"}, 1)
	again.want(t, "mcpd_server_state", map[string]string{"server": "tmp-0", "state": "ready"}, 1)
}

// TestMetricsRefusedCalls: tool calls that a deny rule, or an ask rule
// nobody approved, refuses count as permission_denied, over gRPC (unary
// and streaming) and through the MCP endpoint alike, as the other ways a
// call ends count.
func TestMetricsRefusedCalls(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	mcpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--metrics-listen", addr, "--mcp-listen", mcpAddr,
		"--deny-tool", "mcp__demo__fail", "--ask-tool", "mcp__demo__echo"}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	_, err := d.call(ctx, t, "mcp__demo__fail", map[string]any{"message": "x"}, 0)
	wantCode(t, err, codes.PermissionDenied)
	_, err = d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "x"}, 0) // no agent approves it
	wantCode(t, err, codes.PermissionDenied)
	stream, err := d.hub.CallToolStream(ctx, &mcpdv1.CallToolStreamRequest{Name: "mcp__demo__fail"})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, err, codes.PermissionDenied)
	cs := connectMCP(ctx, t, "http://"+mcpAddr+"/mcp", "2025-11-25", "", nil)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__demo__fail"}); err == nil {
		t.Error("the MCP endpoint called a denied tool")
	}

	s := scrapeMetrics(ctx, t, addr)
	s.want(t, "mcpd_tool_calls_total", map[string]string{"server": "demo", "tool": "fail", "outcome": "permission_denied"}, 3)
	s.want(t, "mcpd_tool_calls_total", map[string]string{"server": "demo", "tool": "echo", "outcome": "permission_denied"}, 1)
}

// TestMetricsCallCutByDisable: a call of a read-only tool whose server is
// disabled while it runs ends UNAVAILABLE (CALL_MAY_HAVE_RUN): its
// session ended, and mcpd had no session to send it again on. The tool
// calls metric counts it under the code the caller got, unavailable, and
// the resends metric counts nothing, for nothing was sent again.
func TestMetricsCallCutByDisable(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--metrics-listen", addr}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	done := make(chan error, 1)
	go func() {
		_, err := d.hub.CallTool(ctx, slowRequest(t))
		done <- err
	}()
	waitMetric(ctx, t, addr, "mcpd_calls_in_flight", map[string]string{"server": "demo"}, 1)
	if _, err := d.hub.SetServerEnabled(ctx, &mcpdv1.SetServerEnabledRequest{Name: "demo", Enabled: false}); err != nil {
		t.Fatalf("SetServerEnabled: %v", err)
	}
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		t.Fatal("the slow call did not end")
	}
	st := wantCode(t, err, codes.Unavailable)
	if !strings.Contains(st.Message(), "not sent again") {
		t.Errorf("status %q: want the call said not sent again", st.Message())
	}
	s := scrapeMetrics(ctx, t, addr)
	s.want(t, "mcpd_tool_calls_total", map[string]string{"server": "demo", "tool": "slow", "outcome": "unavailable"}, 1)
	if got, _ := s.value("mcpd_tool_calls_total", map[string]string{"server": "demo", "outcome": "error"}); got != 0 {
		t.Errorf("mcpd_tool_calls_total{outcome=\"error\"}: got %v, want 0 (the caller got UNAVAILABLE)", got)
	}
	if got, _ := s.value("mcpd_tool_call_resends_total", nil); got != 0 {
		t.Errorf("mcpd_tool_call_resends_total: got %v, want 0: the call was not sent again\n%s", got, grepLines(s.raw, "mcpd_tool_call_resends_total"))
	}
}
