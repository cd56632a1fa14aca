package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// inMemoryUpstreams is a Manager with an event bus whose servers are the
// in-process SDK servers of upstreams, by name, each connected and READY,
// at the protocol revision version ("": negotiated).
func inMemoryUpstreams(ctx context.Context, t *testing.T, broker *mcpclient.Broker, version string, upstreams map[string]*mcp.Server) *mcpclient.Manager {
	t.Helper()
	var mu sync.Mutex
	var sessions []*mcp.ServerSession
	dial := func(ctx context.Context, cfg config.Server) (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := upstreams[cfg.Name].Connect(ctx, st, nil)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		sessions = append(sessions, ss)
		mu.Unlock()
		return ct, nil
	}
	bus := events.NewBus(nil)
	m := mcpclient.NewManager(&mcpclient.Options{Events: bus, Dialer: dial, Requests: broker, ProbeTimeout: 10 * time.Second})
	t.Cleanup(func() {
		_ = m.Close(context.Background())
		bus.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, ss := range sessions {
			_ = ss.Close()
			_ = ss.Wait()
		}
	})
	for _, name := range slices.Sorted(maps.Keys(upstreams)) {
		cfg := config.Server{Name: name, Kind: config.TransportHTTP, URL: "http://in-memory/" + name, ProtocolVersion: version}
		st, err := m.Connect(ctx, cfg, false)
		if err != nil || st.State != mcpclient.StateReady {
			t.Fatalf("connect %s: %v, %v", name, st.State, err)
		}
	}
	return m
}

// runGateway runs g until the test ends.
func runGateway(ctx context.Context, t *testing.T, g *Gateway) {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); g.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-ran; g.Close() })
}

// withBearer sends a bearer token with every request.
type withBearer struct{ token string }

func (b withBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// waitFor polls cond until it holds.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for {
		if cond() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestUpdatesFollowPermissions: a caller that a reload of the callers file
// leaves in place, without the resources permission for a resource it
// subscribed to, no longer hears of that resource's updates, in either era
// (a session's notifications, a subscriptions/listen stream); its other
// subscription still works, and a reload that gives the permission back
// brings the updates back.
func TestUpdatesFollowPermissions(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "0"}, &mcp.ServerOptions{
				SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
				UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
			})
			for _, uri := range []string{"res://secret", "res://public"} {
				up.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
					return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "x"}}}, nil
				})
			}
			// An initialize-era upstream: its subscriptions are in place
			// when the Manager's SubscribeResource returns.
			m := inMemoryUpstreams(ctx, t, nil, "2025-11-25", map[string]*mcp.Server{"s": up})

			file := filepath.Join(t.TempDir(), "callers.json")
			allow := func(uri string) {
				t.Helper()
				data := `{"callers":[{"name":"alice","token":"${ALICE_TOKEN}","permissions":{"servers":["*"],"resources":[{"server":"s","uri":"` + uri + `"}]}}]}`
				if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			allow("*")
			authz, err := access.New(&access.Options{CallersFile: file, Lookup: func(k string) (string, bool) {
				return "tok-alice", k == "ALICE_TOKEN"
			}})
			if err != nil {
				t.Fatal(err)
			}
			g := New(m, &Options{Access: authz})
			runGateway(ctx, t, g)
			hs := httptest.NewServer(g.Handler())
			t.Cleanup(hs.Close)

			var secret, public, acks atomic.Int32
			c := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "0"}, &mcp.ClientOptions{
				ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
					switch r.Params.URI {
					case "mcpd://s/res://secret":
						secret.Add(1)
					case "mcpd://s/res://public":
						public.Add(1)
					}
				},
			})
			c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
				return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
					if method == "notifications/subscriptions/acknowledged" {
						acks.Add(1)
					}
					return next(ctx, method, req)
				}
			})
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: withBearer{"tok-alice"}}},
				&mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			for _, uri := range []string{"mcpd://s/res://secret", "mcpd://s/res://public"} {
				if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
					t.Fatalf("subscribe %s: %v", uri, err)
				}
			}
			if version >= statelessVersion {
				// A subscriptions/listen stream is acknowledged once its
				// subscriptions are in place.
				waitFor(ctx, t, "the subscriptions", func() bool { return acks.Load() == 2 })
			}
			// One update of each, which reaches the host once.
			poke := func() {
				for _, uri := range []string{"res://secret", "res://public"} {
					if err := up.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
						t.Fatal(err)
					}
				}
			}
			poke()
			waitFor(ctx, t, "the first updates", func() bool { return secret.Load() == 1 && public.Load() == 1 })

			allow("res://public")
			if err := authz.Reload(); err != nil {
				t.Fatal(err)
			}
			// Three more of each: the public ones arrive, and by then the
			// secret ones would have too.
			for want := int32(2); want <= 4; want++ {
				poke()
				waitFor(ctx, t, "an update of the public resource", func() bool { return public.Load() == want })
			}
			if got := secret.Load(); got != 1 {
				t.Fatalf("updates of res://secret after the reload took the permission away: got %d, want none", got-1)
			}

			allow("*")
			if err := authz.Reload(); err != nil {
				t.Fatal(err)
			}
			poke()
			waitFor(ctx, t, "an update of res://secret once the permission is back", func() bool { return secret.Load() == 2 })
		})
	}
}

// auditLines decodes the audit lines of buf.
func auditLines(t *testing.T, buf *syncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, line)
	}
	return out
}

// syncBuffer is a buffer the audit logger writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUnresolvedNamesAudited: a request refused because its bare name or
// URI resolves to no server, or to several, is audited like any refused
// request, naming what the host asked for.
func TestUnresolvedNamesAudited(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := newTestManager(t)
	for _, server := range []string{"a", "b"} {
		link, _, err := m.ServeTools(ctx, mcpclient.AgentDeclaration{Server: server, Tools: agentTools}, false)
		if err != nil {
			t.Fatalf("ServeTools %s: %v", server, err)
		}
		t.Cleanup(link.Close)
	}
	var buf syncBuffer
	g := New(m, &Options{Audit: access.NewAuditor(zerolog.New(&buf), nil)})
	runGateway(ctx, t, g)
	cs := connectHost(ctx, t, g)

	type want struct{ method, field, value, code string }
	for _, tc := range []struct {
		name string
		do   func() error
		want want
	}{
		{"ambiguous tool", func() error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{}})
			return err
		}, want{"mcp tools/call", "tool", "add", "InvalidArgument"}},
		{"unknown tool", func() error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nosuch", Arguments: map[string]any{}})
			return err
		}, want{"mcp tools/call", "tool", "nosuch", "NotFound"}}, // as gRPC's CallTool
		{"unlisted tool", func() error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__a__nosuch", Arguments: map[string]any{}})
			return err
		}, want{"mcp tools/call", "tool", "mcp__a__nosuch", "NotFound"}}, // as gRPC's CallTool
		{"tool of an unknown server", func() error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__nosuch__add", Arguments: map[string]any{}})
			return err
		}, want{"mcp tools/call", "tool", "mcp__nosuch__add", "NotFound"}}, // as gRPC's CallTool
		{"unknown prompt", func() error {
			_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "nosuch"})
			return err
		}, want{"mcp prompts/get", "prompt", "nosuch", "NotFound"}}, // as gRPC's GetPrompt
		{"prompt of an unknown server", func() error {
			_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "mcp__nosuch__greet"})
			return err
		}, want{"mcp prompts/get", "server", "nosuch", "NotFound"}}, // as gRPC's GetPrompt
		{"unresolvable resource", func() error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "res://nosuch"})
			return err
		}, want{"mcp resources/read", "uri", "res://nosuch", "InvalidArgument"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); err == nil {
				t.Fatal("got no error, want the request refused")
			}
			// The line is written before the answer is sent.
			lines := auditLines(t, &buf)
			i := slices.IndexFunc(lines, func(l map[string]any) bool {
				return l["method"] == tc.want.method && l[tc.want.field] == tc.want.value
			})
			if i < 0 {
				t.Fatalf("no audit line with method %q and %s %q; got %v", tc.want.method, tc.want.field, tc.want.value, lines)
			}
			if l := lines[i]; l["caller"] != access.AnonymousCallerName || l["code"] != tc.want.code {
				t.Errorf("audit line: got %v, want caller %s and code %s", l, access.AnonymousCallerName, tc.want.code)
			}
		})
	}
}

// TestSlowServerHoldsUpOnlyItself: while one server does not answer the
// listing of its changed prompts, another server's new tool still reaches
// the hosts.
func TestSlowServerHoldsUpOnlyItself(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var hang atomic.Bool
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	hung, ended := make(chan struct{}), make(chan struct{})
	var hungOnce, endedOnce sync.Once
	slow := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "0"}, nil)
	noPrompt := func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	}
	slow.AddPrompt(&mcp.Prompt{Name: "p1"}, noPrompt)
	slow.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "prompts/list" && hang.Load() {
				hungOnce.Do(func() { close(hung) })
				select {
				case <-ctx.Done():
				case <-release:
				}
				endedOnce.Do(func() { close(ended) })
			}
			return next(ctx, method, req)
		}
	})
	fast := mcp.NewServer(&mcp.Implementation{Name: "fast", Version: "0"}, nil)
	noTool := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	fast.AddTool(&mcp.Tool{Name: "t1", InputSchema: map[string]any{"type": "object"}}, noTool)
	m := inMemoryUpstreams(ctx, t, nil, "", map[string]*mcp.Server{"aslow": slow, "bfast": fast})
	g := New(m, nil)
	runGateway(ctx, t, g)
	cs := connectHost(ctx, t, g)
	waitListed(ctx, t, cs, "mcp__bfast__t1")
	waitFor(ctx, t, "the prompt of aslow", func() bool {
		res, err := cs.ListPrompts(ctx, nil)
		return err == nil && len(res.Prompts) == 1
	})

	// aslow's prompts change, and it does not answer their listing.
	hang.Store(true)
	slow.AddPrompt(&mcp.Prompt{Name: "p2"}, noPrompt)
	select {
	case <-hung:
	case <-ctx.Done():
		t.Fatal("the gateway never listed aslow's changed prompts")
	}
	fast.AddTool(&mcp.Tool{Name: "t2", InputSchema: map[string]any{"type": "object"}}, noTool)
	for !slices.Equal(listed(ctx, t, cs), []string{"mcp__bfast__t1", "mcp__bfast__t2"}) {
		select {
		case <-ended:
			t.Fatal("bfast's new tool was not listed while aslow did not answer: the listing had to end first")
		case <-ctx.Done():
			t.Fatal("bfast's new tool was never listed")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The listing still waited when bfast's tool came (had it timed out,
	// its late answer would be dropped): its answer publishes aslow's new
	// prompt.
	releaseOnce.Do(func() { close(release) })
	waitFor(ctx, t, "aslow's new prompt, from the listing that waited while bfast's tool was listed", func() bool {
		res, err := cs.ListPrompts(ctx, nil)
		return err == nil && len(res.Prompts) == 2
	})
}

// TestProgressAfterInputRound: a 2026-07-28 host's retry, which answers
// the input a call asked for, gets the progress the server sends for the
// resumed call, under the retry's progress token.
func TestProgressAfterInputRound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sawProgress := make(chan struct{})
	var sawOnce sync.Once
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "0"}, nil)
	up.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if len(req.Params.InputResponses) == 0 {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"name": &mcp.ElicitParams{Message: "name?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}}, RequestState: "asked"}, nil
		}
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2}); err != nil {
			return nil, err
		}
		// Done once the host has the progress: a result that overtook
		// it would leave nobody to send it to.
		select {
		case <-sawProgress:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	m := inMemoryUpstreams(ctx, t, mcpclient.NewBroker(nil), "", map[string]*mcp.Server{"s": up})
	g := New(m, nil)
	runGateway(ctx, t, g)
	hs := httptest.NewServer(g.Handler())
	t.Cleanup(hs.Close)
	var mu sync.Mutex
	var tokens []any
	// The SDK's client answers the input requests of a 2026-07-28 result
	// itself and sends the retry, with the same progress token. The server
	// sends progress only in the resumed call, so the host gets it only
	// from the retry.
	c := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "0"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "x"}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			tokens = append(tokens, r.Params.ProgressToken)
			mu.Unlock()
			sawOnce.Do(func() { close(sawProgress) })
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	waitFor(ctx, t, "the tool of s", func() bool {
		res, err := cs.ListTools(ctx, nil)
		return err == nil && len(res.Tools) == 1
	})

	// The server waits for the host to get the progress: without it, the
	// call ends only with its deadline.
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "mcp__s__ask", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": "tok"}})
	mu.Lock()
	got := slices.Clone(tokens)
	mu.Unlock()
	if err != nil || res.IsError || res.NeedsInput() {
		t.Fatalf("call: got %+v, %v, with progress under the tokens %v; want the result, after the progress of the resumed call", res, err, got)
	}
	if !slices.Equal(got, []any{"tok"}) {
		t.Errorf("progress tokens: got %v, want [tok]", got)
	}
}

// TestLongNamesRefused: a tool name longer than any qualified tool name
// can be is refused as invalid params, quoting only its start, and its
// audit line does not copy it: a megabyte name must not cost a megabyte
// of answer and of log per call.
func TestLongNamesRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := newTestManager(t)
	t.Cleanup(serveAgent(ctx, t, m).Close)
	var buf syncBuffer
	g := New(m, &Options{Audit: access.NewAuditor(zerolog.New(&buf), nil)})
	runGateway(ctx, t, g)
	cs := connectHost(ctx, t, g)
	long := strings.Repeat("a", 1<<20)
	for name, do := range map[string]func() error{
		"bare tool name": func() error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: long, Arguments: map[string]any{}})
			return err
		},
		"qualified, long server": func() error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__" + long + "__add", Arguments: map[string]any{}})
			return err
		},
		"qualified, long tool": func() error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__app__" + long, Arguments: map[string]any{}})
			return err
		},
		"resource uri": func() error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "mcpd://app/" + long})
			return err
		},
		"prompt name": func() error {
			_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "mcp__app__" + long})
			return err
		},
		"completion ref": func() error {
			_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: long},
				Argument: mcp.CompleteParamsArgument{Name: "a"}})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			var je *jsonrpc.Error
			if err := do(); !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || len(je.Message) > 300 || !strings.Contains(je.Message, "bytes long") {
				t.Errorf("got %.300v, want invalid params saying how long the name is, quoting only its start", err)
			}
		})
	}
	if n := len(buf.String()); n > 10_000 {
		t.Fatalf("audit trail of %d bytes after six requests: want lines without the name", n)
	}
	lines := auditLines(t, &buf)
	if len(lines) != 6 {
		t.Errorf("audit lines: got %d, want 6, one per refused request", len(lines))
	}
	for _, l := range lines {
		for k, v := range l {
			if s, ok := v.(string); ok && len(s) > 1000 {
				t.Errorf("audit line of %v: field %s of %d bytes, want none that copies the name", l["method"], k, len(s))
			}
		}
		if l["code"] != "InvalidArgument" {
			t.Errorf("audit line of %v: code %v, want InvalidArgument", l["method"], l["code"])
		}
	}
}

// TestDeepArgumentsRefused: arguments nested deeper than
// mcpclient.MaxJSONDepth are invalid params, refused before any server
// sees them, as on the gRPC listener: the SDK decodes 1000 levels, far
// more than many servers' decoders take before they end the session.
func TestDeepArgumentsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := newTestManager(t)
	t.Cleanup(serveAgent(ctx, t, m).Close)
	g := New(m, nil)
	runGateway(ctx, t, g)
	cs := connectHost(ctx, t, g)
	var deep any = "x"
	for range mcpclient.MaxJSONDepth + 1 {
		deep = map[string]any{"a": deep}
	}
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__app__add", Arguments: deep})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || !strings.Contains(je.Message, "nested more than") {
		t.Errorf("arguments %d levels deep: got %v, want invalid params saying they nest too deeply", mcpclient.MaxJSONDepth+1, err)
	}
}
