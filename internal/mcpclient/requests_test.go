package mcpclient

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/telemetry"
)

// requestEras are the protocol eras of the server-request tests: a
// 2026-07-28 server asks with input-required results, a legacy one with
// requests on its session (the SDK server turns one into the other).
var requestEras = []struct {
	name     string
	versions []string // the server's; nil = all
	want     string
}{
	{"stateless", nil, "2026-07-28"},
	{"legacy", legacyVersions, "2025-11-25"},
}

// askingServer is a go-sdk server whose tools each need one input from
// the client: "elicit" an elicitation, "sample" a sampling, "roots" the
// roots. Each answers with what it got.
func askingServer(versions []string) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "asking", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	ask := func(name string, ir mcp.InputRequest, answer func(mcp.InputResponse) string) {
		mcp.AddTool(srv, &mcp.Tool{Name: name}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if len(req.Params.InputResponses) == 0 {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"q": ir}, RequestState: name}, nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: answer(req.Params.InputResponses["q"])}}}, nil, nil
		})
	}
	ask("elicit", &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}},
	}}, func(r mcp.InputResponse) string {
		if e, ok := r.(*mcp.ElicitResult); ok {
			return e.Action
		}
		return fmt.Sprintf("%T", r)
	})
	ask("sample", &mcp.CreateMessageParams{MaxTokens: 5, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}},
		func(r mcp.InputResponse) string { return fmt.Sprintf("%T", r) })
	ask("roots", &mcp.ListRootsParams{}, func(r mcp.InputResponse) string {
		lr, ok := r.(*mcp.ListRootsResult)
		if !ok {
			return fmt.Sprintf("%T", r)
		}
		var uris []string
		for _, root := range lr.Roots {
			uris = append(uris, root.URI)
		}
		return strings.Join(uris, ",")
	})
	return srv
}

// inMemoryDialer reaches srv over in-memory transports, one session per
// dial; the sessions close when the test ends, after the Manager (which
// must be made after it).
func inMemoryDialer(t *testing.T, srv *mcp.Server) Dialer {
	var (
		mu       sync.Mutex
		sessions []*mcp.ServerSession
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, ss := range sessions {
			_ = ss.Close()
			_ = ss.Wait()
		}
	})
	return func(ctx context.Context, _ config.Server) (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, st, nil)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		sessions = append(sessions, ss)
		mu.Unlock()
		return ct, nil
	}
}

// askingManager connects a Manager with a broker and tel to an
// askingServer of the era, as server "s".
func askingManager(ctx context.Context, t *testing.T, versions []string, want string, tel *telemetry.Telemetry) (*Manager, *Broker) {
	t.Helper()
	dial := inMemoryDialer(t, askingServer(versions))
	broker := NewBroker(&BrokerOptions{Timeout: 5 * time.Second})
	m, _ := busManager(t, &Options{ProbeTimeout: 20 * time.Second, Dialer: dial, Requests: broker, Telemetry: tel})
	st, err := m.Connect(ctx, config.Server{Name: "s", Kind: config.TransportHTTP, URL: "http://in-memory/s"}, false)
	if err != nil || st.State != StateReady || st.ProtocolVersion != want {
		t.Fatalf("Connect: got %v %s, %v; want ready on %s", st.State, st.ProtocolVersion, err, want)
	}
	return m, broker
}

// callText calls a tool of server s and returns its text.
func callText(ctx context.Context, t *testing.T, m *Manager, tool string) (string, error) {
	t.Helper()
	res, err := m.CallTool(ctx, QualifiedToolName("s", tool), nil, CallOptions{})
	if err != nil {
		return "", err
	}
	if len(res.Content) != 1 {
		return "", fmt.Errorf("%s: %d content blocks", tool, len(res.Content))
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

// metricValue scrapes tel and returns the value of the series of name
// with exactly labels, -1 when there is none.
func metricValue(t *testing.T, tel *telemetry.Telemetry, name string, labels map[string]string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
lines:
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(series, name+"{") || strings.Count(series, "=") != len(labels) {
			continue
		}
		for k, v := range labels {
			if !strings.Contains(series, k+"="+strconv.Quote(v)) {
				continue lines
			}
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return f
	}
	return -1
}

// TestServerRequestsCounted checks mcpd_server_requests_total in both eras:
// each request a server sends counts once, by how mcpd answered it (no
// agent: sampling and elicitation declined, roots from SetRoots).
func TestServerRequestsCounted(t *testing.T) {
	for _, era := range requestEras {
		t.Run(era.name, func(t *testing.T) {
			ctx := testContext(t)
			tel, err := telemetry.New(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			m, _ := askingManager(ctx, t, era.versions, era.want, tel)
			if err := m.SetRoots("", []*mcp.Root{{URI: "file:///set"}}); err != nil {
				t.Fatal(err)
			}
			if got, err := callText(ctx, t, m, "elicit"); err != nil || got != "decline" {
				t.Errorf("elicit: got %q, %v; want decline", got, err)
			}
			if _, err := callText(ctx, t, m, "sample"); err == nil || !strings.Contains(err.Error(), "sampling declined") {
				t.Errorf("sample: got %v, want the declined sampling", err)
			}
			if got, err := callText(ctx, t, m, "roots"); err != nil || got != "file:///set" {
				t.Errorf("roots: got %q, %v; want file:///set", got, err)
			}
			for _, c := range []struct{ kind, outcome string }{
				{"elicitation", "declined"}, {"sampling", "declined"}, {"roots", "ok"},
			} {
				labels := map[string]string{"server": "s", "kind": c.kind, "outcome": c.outcome}
				if got := metricValue(t, tel, "mcpd_server_requests_total", labels); got != 1 {
					t.Errorf("mcpd_server_requests_total%v: got %v, want 1", labels, got)
				}
			}
		})
	}
}

// TestRootsAskAgentInBothEras: an agent registered for roots answers a
// server's roots request in both eras, the 2026-07-28 input requests too;
// without one, the roots set with SetRoots answer.
func TestRootsAskAgentInBothEras(t *testing.T) {
	for _, era := range requestEras {
		t.Run(era.name, func(t *testing.T) {
			ctx := testContext(t)
			m, broker := askingManager(ctx, t, era.versions, era.want, nil)
			if err := m.SetRoots("s", []*mcp.Root{{URI: "file:///set"}}); err != nil {
				t.Fatal(err)
			}
			if got, err := callText(ctx, t, m, "roots"); err != nil || got != "file:///set" {
				t.Errorf("without an agent: got %q, %v; want the roots of SetRoots", got, err)
			}

			agent := broker.Attach("", []string{"s"}, []RequestKind{KindRoots})
			defer broker.Detach(agent)
			asked := make(chan RequestKind, 1)
			go func() {
				for req := range agent.Requests() {
					asked <- req.Kind
					_ = broker.Answer(agent, req.ID, Reply{Roots: []*mcp.Root{{URI: "file:///agent"}}})
					return
				}
			}()
			if got, err := callText(ctx, t, m, "roots"); err != nil || got != "file:///agent" {
				t.Errorf("with an agent: got %q, %v; want the agent's roots", got, err)
			}
			select {
			case k := <-asked:
				if k != KindRoots {
					t.Errorf("the agent was asked for %v, want roots", k)
				}
			default:
				t.Error("the agent registered for roots was never asked")
			}
		})
	}
}

// TestElicitationAnswerChecked: an agent's answer to an elicitation that
// does not fit the form's schema never reaches the server, in either era
// (the SDK checks a legacy session's; mcpd checks a 2026-07-28 input
// request's itself).
func TestElicitationAnswerChecked(t *testing.T) {
	for _, era := range requestEras {
		t.Run(era.name, func(t *testing.T) {
			ctx := testContext(t)
			m, broker := askingManager(ctx, t, era.versions, era.want, nil)
			agent := broker.Attach("", []string{"s"}, []RequestKind{KindElicitation})
			defer broker.Detach(agent)
			done := make(chan struct{})
			defer close(done)
			go func() {
				for {
					select {
					case req := <-agent.Requests():
						_ = broker.Answer(agent, req.ID, Reply{Elicitation: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": 5}}})
					case <-done:
						return
					}
				}
			}()
			if got, err := callText(ctx, t, m, "elicit"); err == nil || !strings.Contains(err.Error(), "does not match requested schema") {
				t.Errorf("an answer of the wrong type: got %q, %v; want it refused", got, err)
			}
		})
	}
}

func TestCheckElicitation(t *testing.T) {
	for _, c := range []struct {
		name    string
		params  mcp.ElicitParams
		wantErr string
	}{
		{"form", mcp.ElicitParams{RequestedSchema: map[string]any{"type": "object"}}, ""},
		{"form without schema", mcp.ElicitParams{}, ""},
		{"form with a URL", mcp.ElicitParams{URL: "https://x"}, "URL must not be set"},
		{"form of a string", mcp.ElicitParams{RequestedSchema: map[string]any{"type": "string"}}, "must be of type 'object'"},
		{"url", mcp.ElicitParams{Mode: "url", URL: "https://x"}, ""},
		{"url without one", mcp.ElicitParams{Mode: "url"}, "URL must be set"},
		{"url with a schema", mcp.ElicitParams{Mode: "url", URL: "https://x", RequestedSchema: map[string]any{}}, "must not be set"},
		{"unknown mode", mcp.ElicitParams{Mode: "voice"}, "unsupported elicitation mode"},
	} {
		_, err := checkElicitation(&c.params)
		if (err == nil) != (c.wantErr == "") || err != nil && !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.wantErr)
		}
	}
	schema, _ := checkElicitation(&mcp.ElicitParams{RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "default": 3}},
	}})
	res := &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}
	if err := checkElicitationResult(schema, res); err != nil || res.Content["n"] != float64(3) && res.Content["n"] != 3 {
		t.Errorf("defaults: got %v, %v; want n filled in with 3", res.Content, err)
	}
}
