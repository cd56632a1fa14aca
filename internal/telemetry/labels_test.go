package telemetry

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestToolLabel(t *testing.T) {
	for name, want := range map[string]string{
		"echo":                      "echo",
		"get_file.v2-beta":          "get_file.v2-beta",
		strings.Repeat("a", 128):    strings.Repeat("a", 128),
		strings.Repeat("a", 129):    "other",
		"with space":                "other",
		"slash/name":                "other",
		"ünïcode":                   "other",
		"":                          "other",
		`quote"and\backslash`:       "other",
		strings.Repeat("x", 64<<10): "other",
	} {
		if got := toolLabel(name); got != want {
			t.Errorf("toolLabel(%.40q): got %.40q, want %q", name, got, want)
		}
	}
}

// toolValues returns the sorted values of label among the series of
// server in the metric family.
func toolValues(t *testing.T, tel *Telemetry, family, server, label string) []string {
	t.Helper()
	families, err := tel.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			var srv, v string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "server":
					srv = lp.GetValue()
				case label:
					v = lp.GetValue()
				}
			}
			if srv == server && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestToolsListed: a tool counts under its name only while its server
// lists it, and under "other" if the name breaks MCP's rules; the series
// of a tool the server stops listing go, from the calls, the resends and
// the durations, and those of other servers stay.
func TestToolsListed(t *testing.T) {
	tel, err := New(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 1000)
	record := func(server, tool string) {
		tel.ToolCall(server, tool, "ok")
		tel.ToolCallResent(server, tool, "not_sent")
		tel.observeOperation(operation{server: server, method: "tools/call", tool: tool}, "", time.Millisecond)
	}
	check := func(when string, want ...string) {
		t.Helper()
		slices.Sort(want)
		for family, label := range map[string]string{
			"mcpd_tool_calls_total":                 "tool",
			"mcpd_tool_call_resends_total":          "tool",
			"mcp_client_operation_duration_seconds": "gen_ai_tool_name",
		} {
			if got := toolValues(t, tel, family, "s", label); !slices.Equal(got, want) {
				t.Errorf("%s: %s values: got %.200q, want %q", when, family, got, want)
			}
		}
	}
	tel.ToolsListed("s", slices.Values([]string{"a", long, "bad name"}))
	tel.ToolsListed("kept", slices.Values([]string{"a"}))
	for _, tool := range []string{"a", long, "bad name", "made_up"} {
		record("s", tool)
	}
	record("kept", "a")
	check("listed", "a", "other", "")
	tel.ToolsListed("s", slices.Values([]string{"bad name"}))
	check("a and the long name no longer listed", "other", "")
	record("s", "a") // a call that ends after its tool left
	check("a called after it left", "other", "")
	tel.ToolsListed("s", nil)
	check("nothing listed", "")
	if got := toolValues(t, tel, "mcpd_tool_calls_total", "kept", "tool"); !slices.Equal(got, []string{"a"}) {
		t.Errorf("the other server's tools: got %q, want [a]", got)
	}
	tel.ForgetServer("kept")
	record("kept", "a")
	if got := toolValues(t, tel, "mcpd_tool_calls_total", "kept", "tool"); !slices.Equal(got, []string{""}) {
		t.Errorf("a removed server's tools: got %q, want only \"\"", got)
	}
	if got := testutil.ToFloat64(tel.m.toolCalls.WithLabelValues("s", "", "ok")); got != 2 {
		t.Errorf(`calls under tool="": got %v, want 2 (made_up, and a after it left)`, got)
	}
}

// TestOpenMetrics: a scraper that asks for OpenMetrics (as Prometheus
// does) gets it; one that does not gets the text format.
func TestOpenMetrics(t *testing.T) {
	tel, err := New(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tel.EventsDropped(1)
	for accept, want := range map[string]string{
		"application/openmetrics-text;version=1.0.0;escaping=allow-utf-8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1": "application/openmetrics-text",
		"": "text/plain",
	} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		tel.Handler().ServeHTTP(rec, req)
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, want) {
			t.Errorf("Accept %.40q: Content-Type %q, want %s", accept, ct, want)
		}
		if want == "application/openmetrics-text" && !strings.HasSuffix(rec.Body.String(), "# EOF\n") {
			t.Errorf("OpenMetrics body does not end with # EOF")
		}
	}
}
