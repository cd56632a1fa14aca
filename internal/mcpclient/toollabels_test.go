package mcpclient

import (
	"context"
	"errors"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/telemetry"
)

// toolLabelValues returns, sorted and without repeats, the values of label
// on the lines of a scrape of tel that start with prefix and name server s.
func toolLabelValues(t *testing.T, tel *telemetry.Telemetry, prefix, label string) []string {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	re := regexp.MustCompile(label + `="([^"]*)"`)
	var out []string
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		if !strings.HasPrefix(line, prefix) || !strings.Contains(line, `server="s"`) {
			continue
		}
		if m := re.FindStringSubmatch(line); m != nil && !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return out
}

func okTool(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
}

// TestToolSeriesFollowTheToolList: a server that swaps its tool for
// another (tools/list_changed) leaves no series of the tools it no longer
// lists, and a name too long to list never becomes a label: its call
// counts with tool="".
func TestToolSeriesFollowTheToolList(t *testing.T) {
	ctx := testContext(t)
	tel, err := telemetry.New(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "churn", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "tool_0"}, okTool)
	m, _ := busManager(t, &Options{ProbeTimeout: 20 * time.Second, Dialer: inMemoryDialer(t, srv), Telemetry: tel})
	if st, err := m.Connect(ctx, config.Server{Name: "s", Kind: config.TransportHTTP, URL: "http://in-memory/s"}, false); err != nil || st.State != StateReady {
		t.Fatalf("Connect: got %v, %v; want ready", st.State, err)
	}
	u, err := m.lookup("s")
	if err != nil {
		t.Fatal(err)
	}
	// A name longer than MCP's 128 is listed and called (its label is
	// "other"); one longer than MaxToolNameLen is not, and its call counts
	// with tool="".
	long := strings.Repeat("x", MaxToolNameLen)
	names := []string{"tool_0", "tool_1", long}
	for i, name := range names {
		if i > 0 {
			srv.RemoveTools(names[i-1])
			mcp.AddTool(srv, &mcp.Tool{Name: name}, okTool)
		}
		eventually(ctx, t, "tool "+name[:min(8, len(name))]+" listed", func() bool { return u.toolLabel(name) == name })
		if _, err := m.CallTool(ctx, QualifiedToolName("s", name), nil, CallOptions{}); err != nil {
			t.Fatalf("CallTool %.8s: %v", name, err)
		}
	}
	if got := toolLabelValues(t, tel, "mcpd_tool_calls_total{", "tool"); !slices.Equal(got, []string{"other"}) {
		t.Errorf("mcpd_tool_calls_total tools with the long name listed: got %.200q, want [other]", got)
	}
	tooLong := strings.Repeat("y", MaxToolNameLen+1)
	srv.RemoveTools(long)
	mcp.AddTool(srv, &mcp.Tool{Name: tooLong}, okTool)
	eventually(ctx, t, "the too long name's note", func() bool {
		st, _ := m.Get("s")
		return len(st.Notes) == 1 && strings.HasPrefix(st.Notes[0], "tool skipped: ") && u.toolLabel(long) == ""
	})
	if _, err := m.CallTool(ctx, QualifiedToolName("s", tooLong), nil, CallOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("CallTool of the too long name: got %v, want ErrNotFound", err)
	}
	// The long name's series went with it.
	want := []string{""}
	if got := toolLabelValues(t, tel, "mcpd_tool_calls_total{", "tool"); !slices.Equal(got, want) {
		t.Errorf("mcpd_tool_calls_total tools: got %.200q, want %q", got, want)
	}
	if got := toolLabelValues(t, tel, `mcp_client_operation_duration_seconds_count{`, "gen_ai_tool_name"); !slices.Equal(got, want) {
		// "" is the other methods' (initialize, tools/list).
		t.Errorf("mcp_client_operation_duration_seconds tools: got %.200q, want %q", got, want)
	}
}

// TestToolSeriesAfterReplace: a server replaced (Connect with replace) by
// one with other tools keeps no series of the tools the first one listed.
func TestToolSeriesAfterReplace(t *testing.T) {
	ctx := testContext(t)
	tel, err := telemetry.New(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := mcp.NewServer(&mcp.Implementation{Name: "first", Version: "1"}, nil)
	mcp.AddTool(first, &mcp.Tool{Name: "old"}, okTool)
	second := mcp.NewServer(&mcp.Implementation{Name: "second", Version: "1"}, nil)
	mcp.AddTool(second, &mcp.Tool{Name: "new"}, okTool)
	dialFirst, dialSecond := inMemoryDialer(t, first), inMemoryDialer(t, second)
	dial := func(ctx context.Context, cfg config.Server) (mcp.Transport, error) {
		if strings.HasSuffix(cfg.URL, "/second") {
			return dialSecond(ctx, cfg)
		}
		return dialFirst(ctx, cfg)
	}
	m, _ := busManager(t, &Options{ProbeTimeout: 20 * time.Second, Dialer: dial, Telemetry: tel})
	for _, step := range []struct{ url, tool string }{{"http://in-memory/first", "old"}, {"http://in-memory/second", "new"}} {
		if st, err := m.Connect(ctx, config.Server{Name: "s", Kind: config.TransportHTTP, URL: step.url}, true); err != nil || st.State != StateReady {
			t.Fatalf("Connect %s: got %v, %v; want ready", step.url, st.State, err)
		}
		if _, err := m.CallTool(ctx, QualifiedToolName("s", step.tool), nil, CallOptions{}); err != nil {
			t.Fatalf("CallTool %s: %v", step.tool, err)
		}
	}
	if got, want := toolLabelValues(t, tel, "mcpd_tool_calls_total{", "tool"), []string{"new"}; !slices.Equal(got, want) {
		t.Errorf("mcpd_tool_calls_total tools: got %q, want %q", got, want)
	}
}

// TestToolSeriesAgentRedeclares: an agent that serves its server again
// with other tools leaves no series of the tools it declared before.
func TestToolSeriesAgentRedeclares(t *testing.T) {
	ctx := testContext(t)
	tel, err := telemetry.New(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := busManager(t, &Options{ProbeTimeout: 20 * time.Second, StopGrace: 500 * time.Millisecond, Telemetry: tel})
	schema := map[string]any{"type": "object"}
	link, _, err := m.ServeTools(ctx, AgentDeclaration{Server: "s", Tools: []*mcp.Tool{{Name: "made_up_1", InputSchema: schema}}}, false)
	if err != nil {
		t.Fatalf("ServeTools: %v", err)
	}
	defer link.Close()
	done := make(chan error, 1)
	go func() {
		_, err := m.CallTool(ctx, QualifiedToolName("s", "made_up_1"), nil, CallOptions{})
		done <- err
	}()
	c := nextForAgent(t, link)
	if err := link.Answer(c.ID, AgentReply{Result: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}}); err != nil {
		t.Fatalf("Answer: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if got, want := toolLabelValues(t, tel, "mcpd_tool_calls_total{", "tool"), []string{"made_up_1"}; !slices.Equal(got, want) {
		t.Fatalf("mcpd_tool_calls_total tools after the call: got %q, want %q", got, want)
	}
	again, st, err := m.ServeTools(ctx, AgentDeclaration{Server: "s", Tools: []*mcp.Tool{{Name: "made_up_2", InputSchema: schema}}}, true)
	if err != nil || st.State != StateReady {
		t.Fatalf("ServeTools again: got %v, %v; want ready", st.State, err)
	}
	defer again.Close()
	if got := toolLabelValues(t, tel, "mcpd_tool_calls_total{", "tool"); len(got) != 0 {
		t.Errorf("mcpd_tool_calls_total tools after the new declaration: got %q, want none", got)
	}
	if got := toolLabelValues(t, tel, "mcp_client_operation_duration_seconds_count{", "gen_ai_tool_name"); slices.Contains(got, "made_up_1") {
		t.Errorf("mcp_client_operation_duration_seconds tools after the new declaration: got %q, want no made_up_1", got)
	}
}
