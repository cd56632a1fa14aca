package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// The churn tests make names and objects come and go many times against
// one mcpd, then check that what mcpd holds (goroutines, descriptors,
// metric series, files, and the answers that tell whether a name is still
// known) is back where it was before. A leak of one goroutine or one
// series per name shows as growth with the rounds; the slack below only
// absorbs what a live daemon holds anyway (idle keep-alive connections,
// a scrape in flight).
const (
	churnRounds     = 10
	goroutineSlack  = 10
	descriptorSlack = 4
)

// churnTimeout bounds a churn test: it makes a few hundred connections
// one after another. A guard against a hang, not a measure of speed.
const churnTimeout = 3 * time.Minute

func churnContext(t *testing.T) context.Context {
	t.Helper()
	return contextWithin(t, churnTimeout)
}

// footprint is what mcpd holds, as its metrics endpoint tells.
type footprint struct {
	goroutines, fds float64
	// series are the series whose server label starts with the churn
	// prefix: servers that are gone must have none.
	series []string
}

func (f footprint) String() string {
	return fmt.Sprintf("%v goroutines, %v open fds, %d series of churned servers %v", f.goroutines, f.fds, len(f.series), f.series)
}

func measure(ctx context.Context, t *testing.T, metrics, prefix string) footprint {
	t.Helper()
	s := scrapeMetrics(ctx, t, metrics)
	var f footprint
	f.goroutines, _ = s.value("go_goroutines", nil)
	f.fds, _ = s.value("process_open_fds", nil)
	for name, fam := range s.families {
		for _, m := range fam.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "server" && strings.HasPrefix(lp.GetValue(), prefix) {
					f.series = append(f.series, name+"{server="+lp.GetValue()+"}")
				}
			}
		}
	}
	sort.Strings(f.series)
	return f
}

// settle waits until mcpd's footprint is back to base (within the
// slack), and fails the test, with mcpd's goroutine stacks, if it is not
// by the time ctx ends.
func (d *daemon) settle(ctx context.Context, t *testing.T, metrics, prefix string, base footprint) {
	t.Helper()
	for {
		f := measure(ctx, t, metrics, prefix)
		if f.goroutines <= base.goroutines+goroutineSlack && f.fds <= base.fds+descriptorSlack && len(f.series) == 0 {
			t.Logf("after the churn: %s (baseline %s)", f, base)
			return
		}
		select {
		case <-ctx.Done():
			d.dumpStacks(t)
			t.Fatalf("after the churn: %s; want it back to the baseline %s", f, base)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// churnDaemon starts mcpd with no servers and its metrics on a free
// loopback port, which it returns.
func churnDaemon(ctx context.Context, t *testing.T, args ...string) (*daemon, string) {
	t.Helper()
	metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: append([]string{"--metrics-listen", metrics}, args...)})
	return d, metrics
}

// echoUpstream is an MCP server with one tool, echo, served over
// Streamable HTTP at /mcp and legacy HTTP+SSE at /sse on loopback.
type echoUpstream struct {
	*httptest.Server
	srv *mcp.Server
}

func echoServer(t *testing.T) *echoUpstream {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "churn", Version: "0.0.1"}, nil)
	type in struct {
		Message string `json:"message"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Message}}}, nil, nil
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	mux.Handle("/sse", mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	u := &echoUpstream{Server: httptest.NewServer(mux), srv: srv}
	t.Cleanup(u.stop)
	return u
}

// sessions counts the server's open sessions.
func (u *echoUpstream) sessions() int {
	n := 0
	for range u.srv.Sessions() {
		n++
	}
	return n
}

// stop ends the server, as a server that goes away does: connections cut,
// listener closed, and the sessions of the SDK server behind it closed
// too (it holds them without a client otherwise).
func (u *echoUpstream) stop() {
	u.CloseClientConnections()
	u.Close()
	for ss := range u.srv.Sessions() {
		_ = ss.Close()
	}
}

// remoteConfig is the config of a Streamable HTTP ("http") or legacy SSE
// ("sse") server at url.
func remoteConfig(name, kind, url string) *mcpdv1.ServerConfig {
	if kind == "sse" {
		return &mcpdv1.ServerConfig{Name: name, Transport: &mcpdv1.ServerConfig_Sse{Sse: &mcpdv1.HttpConfig{Url: url}}}
	}
	return httpServerConfig(name, url, nil)
}

// connectReady connects a server and fails unless it is READY.
func (d *daemon) connectReady(ctx context.Context, t *testing.T, cfg *mcpdv1.ServerConfig) {
	t.Helper()
	resp, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: cfg})
	if err != nil {
		t.Fatalf("ConnectServer %s: %v", cfg.GetName(), err)
	}
	if st := resp.GetServer().GetState(); st != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("ConnectServer %s: state %v (%s), want READY", cfg.GetName(), st, resp.GetServer().GetLastError())
	}
}

func (d *daemon) disconnect(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if _, err := d.hub.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: name}); err != nil {
		t.Fatalf("DisconnectServer %s: %v", name, err)
	}
}

// wantForgotten fails unless mcpd knows nothing of server name: no
// server, and no OAuth state that ForgetAuthorization could delete.
func (d *daemon) wantForgotten(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	_, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: name})
	wantCode(t, err, codes.NotFound)
	_, err = d.hub.ForgetAuthorization(ctx, &mcpdv1.ForgetAuthorizationRequest{Server: name})
	wantCode(t, err, codes.NotFound)
	_, err = d.health.Check(ctx, &healthpb.HealthCheckRequest{Service: "mcpd.server/" + name})
	wantCode(t, err, codes.NotFound)
}

// wantHealthList fails unless grpc.health.v1's List answers mcpd's own
// status alone.
func (d *daemon) wantHealthList(ctx context.Context, t *testing.T) {
	t.Helper()
	resp, err := d.health.List(ctx, &healthpb.HealthListRequest{})
	if err != nil || len(resp.GetStatuses()) != 1 {
		t.Errorf("Health/List: got %v, %v; want mcpd's own status alone", resp.GetStatuses(), err)
	}
}

// TestChurnRemoteServers connects Streamable HTTP and legacy SSE servers
// under fresh names, calls them and disconnects them, and connects
// servers that then go away mid-session before they are disconnected:
// afterwards mcpd holds no more than before, keeps no OAuth state of
// them (none of them needed a token), and knows none of the names.
func TestChurnRemoteServers(t *testing.T) {
	t.Parallel()
	ctx := churnContext(t)
	up := echoServer(t)
	stateDir := filepath.Join(shortTempDir(t), "oauth")
	d, metrics := churnDaemon(ctx, t, "--oauth-state-dir", stateDir)

	round := func(prefix string, i int) {
		for _, kind := range []string{"http", "sse"} {
			name := fmt.Sprintf("%s-%s-%d", prefix, kind, i)
			path := "/mcp"
			if kind == "sse" {
				path = "/sse"
			}
			d.connectReady(ctx, t, remoteConfig(name, kind, up.URL+path))
			d.mustCall(ctx, t, "mcp__"+name+"__echo", map[string]any{"message": "hi"})
			d.disconnect(ctx, t, name)

			// A server that goes away mid-session.
			doomed := echoServer(t)
			gone := fmt.Sprintf("%s-gone-%s-%d", prefix, kind, i)
			d.connectReady(ctx, t, remoteConfig(gone, kind, doomed.URL+path))
			d.mustCall(ctx, t, "mcp__"+gone+"__echo", map[string]any{"message": "hi"})
			doomed.stop()
			d.waitServer(ctx, t, gone, mcpdv1.ServerState_SERVER_STATE_RECONNECTING, mcpdv1.ServerState_SERVER_STATE_FAILED)
			d.disconnect(ctx, t, gone)
		}
	}
	// A first round warms up what mcpd makes once (HTTP connection pools,
	// metric families) before the baseline.
	round("warm", 0)
	base := measure(ctx, t, metrics, "churn")
	for i := range churnRounds {
		round("churn", i)
	}
	d.settle(ctx, t, metrics, "churn", base)
	for i := range churnRounds {
		for _, kind := range []string{"http", "sse"} {
			d.wantForgotten(ctx, t, fmt.Sprintf("churn-%s-%d", kind, i))
			d.wantForgotten(ctx, t, fmt.Sprintf("churn-gone-%s-%d", kind, i))
		}
	}
	// mcpd ended the sessions it had with the server that stayed.
	poll(ctx, t, "upstream sessions of disconnected servers end", func() (bool, error) {
		if n := up.sessions(); n != 0 {
			return false, fmt.Errorf("the upstream still has %d sessions", n)
		}
		return true, nil
	})
	if entries, _ := os.ReadDir(stateDir); len(entries) != 0 {
		t.Errorf("oauth state directory: got %d files, want none (no server needed a token)", len(entries))
	}
}

// TestChurnPolls starts polls of servers under fresh names, and holds a
// fallback poll of each through a Subscribe stream, then disconnects the
// servers and ends the streams: every round fills --max-polls again, so a
// poll that outlived its server or its stream fails the next round with
// RESOURCE_EXHAUSTED, and mcpd holds no more than before.
func TestChurnPolls(t *testing.T) {
	t.Parallel()
	ctx := churnContext(t)
	const maxPolls = 3
	d, metrics := churnDaemon(ctx, t, "--max-polls", strconv.Itoa(maxPolls))

	startPoll := func(server string) (string, error) {
		resp, err := d.hub.StartPoll(ctx, &mcpdv1.StartPollRequest{
			Server: server, Interval: durationpb.New(time.Second),
			Target: &mcpdv1.StartPollRequest_ResourceUri{ResourceUri: fakeClockURI},
		})
		return resp.GetPoll().GetId(), err
	}
	round := func(prefix string, i int) {
		name := fmt.Sprintf("%s-%d", prefix, i)
		d.connectFake(ctx, t, name, fakeQuietClock)
		// The first poll may wait for the last round's stream to end:
		// mcpd sees a cancelled stream a moment after the client does.
		var ids []string
		poll(ctx, t, "the first poll of "+name, func() (bool, error) {
			id, err := startPoll(name)
			if err == nil {
				ids = append(ids, id)
			}
			return err == nil, err
		})
		for len(ids) < maxPolls-1 {
			id, err := startPoll(name)
			if err != nil {
				t.Fatalf("StartPoll %s: %v", name, err)
			}
			ids = append(ids, id)
		}
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		sub, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{
			Resources:            []*mcpdv1.ResourceRef{{Server: name, Uri: fakeClockURI}},
			FallbackPollInterval: durationpb.New(time.Second),
		})
		if err != nil {
			t.Fatalf("Subscribe: %v", err)
		}
		if _, err := sub.Recv(); err != nil { // the fallback poll runs
			t.Fatalf("Subscribe: %v", err)
		}
		_, err = startPoll(name)
		wantCode(t, err, codes.ResourceExhausted)

		d.disconnect(ctx, t, name)
		for _, id := range ids {
			_, err := d.hub.StopPoll(ctx, &mcpdv1.StopPollRequest{Id: id})
			wantCode(t, err, codes.NotFound)
		}
		cancel()
	}
	round("warm", 0)
	base := measure(ctx, t, metrics, "churn")
	for i := range churnRounds {
		round("churn", i)
	}
	d.settle(ctx, t, metrics, "churn", base)
	resp, err := d.hub.ListPolls(ctx, &mcpdv1.ListPollsRequest{})
	if err != nil || len(resp.GetPolls()) != 0 {
		t.Errorf("ListPolls after the churn: got %v, %v; want none", resp.GetPolls(), err)
	}
	// The limit is whole again.
	d.connectFake(ctx, t, "churn-last", fakeQuietClock)
	poll(ctx, t, "polls up to the limit", func() (bool, error) {
		_, err := startPoll("churn-last")
		return err == nil, err
	})
	for range maxPolls - 1 {
		if _, err := startPoll("churn-last"); err != nil {
			t.Fatalf("StartPoll after the churn: %v", err)
		}
	}
}

// TestChurnToggles enables and disables servers of the config file that a
// reload then removes, and servers added through the API that are then
// disconnected, under fresh names: the state file keeps none of the names
// once they are gone, and mcpd holds no more than before.
func TestChurnToggles(t *testing.T) {
	t.Parallel()
	ctx := churnContext(t)
	dir := shortTempDir(t)
	config := filepath.Join(dir, "mcp.json")
	stateFile := filepath.Join(dir, "state.json")
	fake := func(disabled bool) map[string]any {
		return map[string]any{"command": testBinary(t), "env": map[string]string{fakeServerEnv: fakeQuietClock}, "disabled": disabled}
	}
	replaceFile(t, config, `{"mcpServers": {}}`)
	metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{config: config, args: []string{"--metrics-listen", metrics, "--state-file", stateFile}})

	reload := func(servers map[string]any) {
		t.Helper()
		replaceFile(t, config, mustJSON(t, map[string]any{"mcpServers": servers}))
		d.send(t, syscall.SIGHUP)
	}
	setEnabled := func(name string, enabled bool) {
		t.Helper()
		if _, err := d.hub.SetServerEnabled(ctx, &mcpdv1.SetServerEnabledRequest{Name: name, Enabled: enabled}); err != nil {
			t.Fatalf("SetServerEnabled %s %v: %v", name, enabled, err)
		}
	}
	round := func(prefix string, i int) {
		on, off := fmt.Sprintf("%s-on-%d", prefix, i), fmt.Sprintf("%s-off-%d", prefix, i)
		reload(map[string]any{on: fake(false), off: fake(true)})
		d.waitServer(ctx, t, on, mcpdv1.ServerState_SERVER_STATE_READY)
		d.waitServer(ctx, t, off, mcpdv1.ServerState_SERVER_STATE_DISABLED)
		setEnabled(on, false) // kept as "disabled"
		setEnabled(off, true) // kept as "enabled"
		api := fmt.Sprintf("%s-api-%d", prefix, i)
		d.connectFake(ctx, t, api, fakeQuietClock)
		setEnabled(api, false)
		if state := readState(t, stateFile); !strings.Contains(state, on) || !strings.Contains(state, off) || !strings.Contains(state, api) {
			t.Fatalf("state file while the servers are there: got %s, want %s, %s and %s in it", state, on, off, api)
		}
		d.disconnect(ctx, t, api)
		reload(map[string]any{})
		for _, name := range []string{on, off} {
			poll(ctx, t, "reload removes "+name, func() (bool, error) {
				_, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: name})
				return err != nil, err
			})
		}
	}
	round("warm", 0)
	base := measure(ctx, t, metrics, "churn")
	for i := range churnRounds {
		round("churn", i)
	}
	d.settle(ctx, t, metrics, "churn", base)
	// More names than gRPC's health server lists (100) come and go.
	many := map[string]any{}
	for i := range 120 {
		many[fmt.Sprintf("churn-many-%d", i)] = fake(true)
	}
	reload(many)
	d.waitServer(ctx, t, "churn-many-119", mcpdv1.ServerState_SERVER_STATE_DISABLED)
	reload(map[string]any{})
	poll(ctx, t, "reload removes the many", func() (bool, error) {
		_, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "churn-many-119"})
		return err != nil, err
	})
	d.wantHealthList(ctx, t)
	for i := range churnRounds {
		for _, kind := range []string{"on", "off", "api"} {
			d.wantForgotten(ctx, t, fmt.Sprintf("churn-%s-%d", kind, i))
		}
	}
	poll(ctx, t, "the state file forgets the gone servers", func() (bool, error) {
		if state := readState(t, stateFile); strings.Contains(state, "churn") || strings.Contains(state, "warm") {
			return false, fmt.Errorf("state file: %s", state)
		}
		return true, nil
	})
}

func readState(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(data)
}

// TestChurnGatewaySessions opens MCP endpoint sessions of initialize-era
// hosts that subscribe to a resource, set a log level and then go away
// without a word (no DELETE, no stream): once --mcp-session-timeout has
// closed them, the upstream subscription they held is released and mcpd
// holds no more than before.
func TestChurnGatewaySessions(t *testing.T) {
	t.Parallel()
	ctx := churnContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d, metrics := churnDaemon(ctx, t, "--mcp-listen", addr, "--mcp-session-timeout", "1s")
	d.connectFake(ctx, t, "note", fakeNote)
	url := "http://" + addr + "/mcp"
	post := func(session, body string) (string, string) {
		t.Helper()
		resp := mcpRequest(ctx, t, http.MethodPost, url, "", session, body)
		data, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: HTTP %d, %v: %s", body, resp.StatusCode, err, data)
		}
		return resp.Header.Get("Mcp-Session-Id"), string(data)
	}
	subscribed := func() string { return text(d.mustCall(ctx, t, "mcp__note__subscribed", nil)) }
	var uri string
	host := func(name string) {
		session, _ := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+mcpEras[0]+`","capabilities":{},"clientInfo":{"name":"`+name+`","version":"0"}}}`)
		if session == "" {
			t.Fatal("initialize: no session id")
		}
		post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		// The endpoint publishes the note once it has synchronised.
		poll(ctx, t, "the endpoint lists the note", func() (bool, error) {
			if uri != "" {
				return true, nil
			}
			_, list := post(session, `{"jsonrpc":"2.0","id":2,"method":"resources/list"}`)
			m := regexp.MustCompile(`"uri":"([^"]*note[^"]*)"`).FindStringSubmatch(list)
			if m == nil {
				return false, fmt.Errorf("resources/list: %s", list)
			}
			uri = m[1]
			return true, nil
		})
		post(session, `{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"`+uri+`"}}`)
		post(session, `{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"debug"}}`)
		// ... and nothing more.
	}
	waitUnsubscribed := func() {
		poll(ctx, t, "the abandoned sessions time out and release their subscription", func() (bool, error) {
			if got := subscribed(); got != "false" {
				return false, fmt.Errorf("the upstream is followed: %s", got)
			}
			return true, nil
		})
	}
	host("warm")
	waitUnsubscribed()
	base := measure(ctx, t, metrics, "churn")
	for i := range churnRounds {
		for j := range 3 {
			host(fmt.Sprintf("churn-%d-%d", i, j))
		}
		if got := subscribed(); got != "true" {
			t.Fatalf("round %d: the upstream is followed: got %s, want true while the hosts' sessions are open", i, got)
		}
	}
	waitUnsubscribed()
	d.settle(ctx, t, metrics, "churn", base)
}

// TestChurnOAuthServers connects servers that need a person's consent
// under fresh names: some are authorized, called and disconnected, others
// disconnected while the consent is pending. What stays of a gone name is
// what the docs say stays (its record of tokens and client registration,
// and the record's lock file, for the next connect) until
// ForgetAuthorization, which leaves nothing: no file, and no name it can
// forget again.
func TestChurnOAuthServers(t *testing.T) {
	t.Parallel()
	ctx := churnContext(t)
	up := newOAuthUpstream(t, nil)
	stateDir := filepath.Join(shortTempDir(t), "oauth")
	d, metrics := churnDaemon(ctx, t, "--oauth-state-dir", stateDir)

	connect := func(name string) string {
		t.Helper()
		resp, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: httpServerConfig(name, up.url(), nil)})
		if err != nil {
			t.Fatalf("ConnectServer %s: %v", name, err)
		}
		srv := resp.GetServer()
		if srv.GetState() != mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED {
			t.Fatalf("ConnectServer %s: state %v (%s), want AUTHORIZATION_REQUIRED", name, srv.GetState(), srv.GetLastError())
		}
		return srv.GetAuthorizationUrl()
	}
	var names []string
	round := func(prefix string, i int) {
		authorized := fmt.Sprintf("%s-auth-%d", prefix, i)
		redirect := approve(ctx, t, connect(authorized))
		if r := httpGet(ctx, t, http.DefaultClient, redirect); r.StatusCode != http.StatusOK {
			t.Fatalf("the redirect listener: got HTTP %d, want 200", r.StatusCode)
		}
		d.waitServer(ctx, t, authorized, mcpdv1.ServerState_SERVER_STATE_READY)
		d.mustCall(ctx, t, "mcp__"+authorized+"__echo", map[string]any{"message": "hi"})
		d.disconnect(ctx, t, authorized)

		pending := fmt.Sprintf("%s-pending-%d", prefix, i)
		connect(pending)
		d.disconnect(ctx, t, pending)
		names = append(names, authorized, pending)
	}
	round("warm", 0)
	for _, name := range names {
		if _, err := d.hub.ForgetAuthorization(ctx, &mcpdv1.ForgetAuthorizationRequest{Server: name}); err != nil {
			t.Fatalf("ForgetAuthorization %s: %v", name, err)
		}
	}
	names = nil
	base := measure(ctx, t, metrics, "churn")
	for i := range churnRounds {
		round("churn", i)
	}
	d.settle(ctx, t, metrics, "churn", base)
	files, err := os.ReadDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		// A record, or the lock file that goes with one.
		name, isLock := strings.CutSuffix(f.Name(), ".lock")
		if !isLock {
			name = strings.TrimSuffix(f.Name(), ".json")
		}
		_, err := os.Stat(filepath.Join(stateDir, name+".json"))
		if !slices.Contains(names, name) || err != nil {
			t.Errorf("oauth state directory: %s, which is no gone server's record, nor the lock of one", f.Name())
		}
	}
	for _, name := range names {
		if _, err := d.hub.ForgetAuthorization(ctx, &mcpdv1.ForgetAuthorizationRequest{Server: name}); err != nil {
			t.Fatalf("ForgetAuthorization %s: %v", name, err)
		}
	}
	if files, _ := os.ReadDir(stateDir); len(files) != 0 {
		t.Errorf("oauth state directory after ForgetAuthorization of every gone server: got %d files, want none", len(files))
	}
	for _, name := range names {
		d.wantForgotten(ctx, t, name)
	}
}
