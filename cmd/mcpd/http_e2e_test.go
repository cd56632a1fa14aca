package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// httpAPI is a daemon's --http-listen address with clients of the real
// Connect implementation (connect-go) over HTTP/1.1 and h2c.
type httpAPI struct {
	base  string       // http://127.0.0.1:PORT
	http1 *http.Client // HTTP/1.1 only
	h2c   *http.Client // HTTP/2 without TLS, prior knowledge
}

func newHTTPAPI(t *testing.T, addr string) *httpAPI {
	t.Helper()
	var p1, p2 http.Protocols
	p1.SetHTTP1(true)
	p2.SetUnencryptedHTTP2(true)
	a := &httpAPI{
		base:  "http://" + addr,
		http1: &http.Client{Transport: &http.Transport{Protocols: &p1}},
		h2c:   &http.Client{Transport: &http.Transport{Protocols: &p2}},
	}
	t.Cleanup(func() {
		a.http1.CloseIdleConnections()
		a.h2c.CloseIdleConnections()
	})
	return a
}

// rpc is a connect-go client of one MCPHub method.
func rpc[Req, Res any](c *http.Client, base, method string, opts ...connect.ClientOption) *connect.Client[Req, Res] {
	return connect.NewClient[Req, Res](c, base+"/mcpd.v1.MCPHub/"+method, opts...)
}

// postJSON posts body to method as curl does: Connect's unary JSON form,
// without the optional Connect-Protocol-Version header.
func (a *httpAPI) postJSON(ctx context.Context, t *testing.T, method, body string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/mcpd.v1.MCPHub/"+method, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	if host := header.Get("Host"); host != "" {
		req.Host = host // the client sends req.Host, not a Host header
	}
	resp, err := a.http1.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", method, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHTTPListener serves the API on --http-listen and uses it the ways a
// runtime without a gRPC stack would: plain JSON POSTs, and connect-go
// over the Connect protocol (JSON and binary, HTTP/1.1 and h2c), gRPC-Web
// and gRPC; unary, server streams and the bidirectional
// HandleServerRequests over h2c. Errors keep their codes and ErrorInfo.
func TestHTTPListener(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--http-listen", addr}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	api := newHTTPAPI(t, addr)

	t.Run("curl", func(t *testing.T) {
		code, body := api.postJSON(ctx, t, "CallTool", `{"name": "mcp__demo__echo", "arguments": {"message": "hi over http"}}`, nil)
		if code != http.StatusOK || !strings.Contains(body, `"text":"hi over http"`) {
			t.Errorf("CallTool: got %d %s", code, body)
		}
		code, body = api.postJSON(ctx, t, "CallTool", `{"name": "mcp__demo__nope"}`, nil)
		if code != http.StatusNotFound || !strings.Contains(body, `"code":"not_found"`) {
			t.Errorf("CallTool of an unknown tool: got %d %s, want 404 not_found", code, body)
		}
		// The content type with its charset, as .NET's JsonContent and
		// others send it.
		code, body = api.postJSON(ctx, t, "CallTool", `{"name": "mcp__demo__echo", "arguments": {"message": "with a charset"}}`,
			http.Header{"Content-Type": {"application/json; charset=utf-8"}})
		if code != http.StatusOK || !strings.Contains(body, `"text":"with a charset"`) {
			t.Errorf("CallTool as application/json; charset=utf-8: got %d %s", code, body)
		}
	})

	t.Run("get", func(t *testing.T) {
		// A method without side effects answers Connect's GET form.
		resp, err := api.http1.Get(api.base + "/mcpd.v1.MCPHub/GetServer?encoding=json&message=" + url.QueryEscape(`{"name":"demo"}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"name":"demo"`) {
			t.Errorf("GET GetServer: got %d %s", resp.StatusCode, b)
		}
		get := rpc[mcpdv1.ListToolsRequest, mcpdv1.ListToolsResponse](api.http1, api.base, "ListTools", connect.WithHTTPGet(), connect.WithProtoJSON())
		tools, err := get.CallUnary(ctx, connect.NewRequest(&mcpdv1.ListToolsRequest{Server: "demo"}))
		if err != nil || len(tools.Msg.GetTools()) == 0 {
			t.Errorf("ListTools over GET: got %v, %v", tools, err)
		}
		// One with side effects does not.
		resp, err = api.http1.Get(api.base + "/mcpd.v1.MCPHub/RestartServer?encoding=json&message=" + url.QueryEscape(`{"name":"demo"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET RestartServer: got %d, want 405", resp.StatusCode)
		}
	})

	t.Run("connect, grpc-web and grpc", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			client *http.Client
			opts   []connect.ClientOption
		}{
			{"connect json http1", api.http1, []connect.ClientOption{connect.WithProtoJSON()}},
			{"connect proto http1", api.http1, nil},
			{"connect proto h2c", api.h2c, nil},
			{"grpc-web http1", api.http1, []connect.ClientOption{connect.WithGRPCWeb()}},
			{"grpc h2c", api.h2c, []connect.ClientOption{connect.WithGRPC()}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				call := rpc[mcpdv1.CallToolRequest, mcpdv1.CallToolResponse](tc.client, api.base, "CallTool", tc.opts...)
				resp, err := call.CallUnary(ctx, connect.NewRequest(&mcpdv1.CallToolRequest{
					Name: "mcp__demo__add", Arguments: mustStruct(t, map[string]any{"a": 2, "b": 3}),
				}))
				if err != nil || resp.Msg.GetContent()[0].GetText().GetText() != "5" {
					t.Fatalf("CallTool add: got %v, %v", resp, err)
				}
				_, err = call.CallUnary(ctx, connect.NewRequest(&mcpdv1.CallToolRequest{
					Name: "mcp__demo__add", Arguments: mustStruct(t, map[string]any{"a": "two", "b": 3}),
				}))
				if connect.CodeOf(err) != connect.CodeInvalidArgument {
					t.Fatalf("CallTool with a bad argument: got %v, want invalid_argument", err)
				}
				var info *errdetails.ErrorInfo
				var ce *connect.Error
				if errors.As(err, &ce) {
					for _, d := range ce.Details() {
						if v, err := d.Value(); err == nil {
							if i, ok := v.(*errdetails.ErrorInfo); ok {
								info = i
							}
						}
					}
				}
				if info.GetMetadata()["server"] != "demo" || info.GetMetadata()["jsonrpc_code"] != "-32602" {
					t.Errorf("error details: got %v, want ErrorInfo naming demo and -32602", info)
				}
			})
		}
	})

	t.Run("server streams", func(t *testing.T) {
		call := rpc[mcpdv1.CallToolStreamRequest, mcpdv1.CallToolStreamResponse](api.http1, api.base, "CallToolStream", connect.WithProtoJSON())
		stream, err := call.CallServerStream(ctx, connect.NewRequest(&mcpdv1.CallToolStreamRequest{
			Name: "mcp__demo__slow", Arguments: mustStruct(t, map[string]any{"steps": 3, "delay_ms": 1}),
		}))
		if err != nil {
			t.Fatal(err)
		}
		var progress int
		var result *mcpdv1.CallToolResponse
		for stream.Receive() {
			if stream.Msg().GetProgress() != nil {
				progress++
			}
			if r := stream.Msg().GetResult(); r != nil {
				result = r
			}
		}
		if err := stream.Err(); err != nil || progress != 3 || result == nil {
			t.Errorf("CallToolStream slow: got %d progress messages, result %v, err %v; want 3 and a result", progress, result, err)
		}
		stream.Close()
	})

	t.Run("subscribe", func(t *testing.T) {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		call := rpc[mcpdv1.SubscribeRequest, mcpdv1.SubscribeResponse](api.http1, api.base, "Subscribe")
		// From the start: demo's first states are buffered, so the first
		// event shows that the stream is open before the restart.
		stream, err := call.CallServerStream(sctx, connect.NewRequest(&mcpdv1.SubscribeRequest{
			Servers: []string{"demo"}, Kinds: []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_SERVER_STATE}, AfterSequence: proto.Uint64(0),
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		if !stream.Receive() {
			t.Fatalf("Subscribe: %v", stream.Err())
		}
		first := stream.Msg().GetEvent().GetSequence()
		if _, err := d.hub.RestartServer(ctx, &mcpdv1.RestartServerRequest{Name: "demo"}); err != nil {
			t.Fatal(err)
		}
		// The restart's READY arrives while the stream stays open: each
		// event is flushed as it comes, not when the stream ends.
		for stream.Receive() {
			ev := stream.Msg().GetEvent()
			if ev.GetSequence() > first && ev.GetServerState().GetState() == mcpdv1.ServerState_SERVER_STATE_READY {
				return
			}
		}
		t.Fatalf("Subscribe ended before demo was READY again: %v", stream.Err())
	})
}

// TestHTTPServerRequests answers a server's sampling request from an agent
// attached over the Connect protocol's bidirectional stream (h2c).
func TestHTTPServerRequests(t *testing.T) {
	t.Parallel()
	everything := everythingBinary(t)
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--http-listen", addr}})
	api := newHTTPAPI(t, addr)

	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	agent := rpc[mcpdv1.HandleServerRequestsRequest, mcpdv1.HandleServerRequestsResponse](api.h2c, api.base, "HandleServerRequests").CallBidiStream(actx)
	defer agent.CloseResponse()
	if err := agent.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Register{
		Register: &mcpdv1.ServerRequestRegistration{Kinds: []mcpdv1.ServerRequestKind{mcpdv1.ServerRequestKind_SERVER_REQUEST_KIND_SAMPLING}},
	}}); err != nil {
		t.Fatal(err)
	}
	if m, err := agent.Receive(); err != nil || m.GetRegistered() == nil {
		t.Fatalf("registration over h2c: got %v, %v", m, err)
	}
	answered := make(chan error, 1)
	go func() {
		m, err := agent.Receive()
		if err != nil {
			answered <- err
			return
		}
		answered <- agent.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: &mcpdv1.ServerRequestReply{
			Id: m.GetRequest().GetId(),
			Result: &mcpdv1.ServerRequestReply_Sampling{Sampling: &mcpdv1.SamplingResult{
				Role: mcpdv1.Role_ROLE_ASSISTANT, Model: "http-agent", StopReason: "endTurn",
				Content: []*mcpdv1.Content{{Kind: &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: "answered over h2c"}}}},
			}},
		}}})
	}()

	// The server offers its sampling tool only to a client that can sample:
	// connect it once the agent is there.
	d.connect(ctx, t, "ev", everything, []string{"stdio"}, nil)
	resp := d.mustCall(ctx, t, "mcp__ev__trigger-sampling-request", map[string]any{"prompt": "a haiku", "maxTokens": 20})
	if err := <-answered; err != nil {
		t.Fatalf("agent: %v", err)
	}
	if got := text(resp); !strings.Contains(got, "http-agent") || !strings.Contains(got, "answered over h2c") {
		t.Errorf("sampling result: got %q, want the agent's answer", got)
	}
}

// TestHTTPListenerGuards checks the HTTP listener's rules: the API token,
// the loopback rule, the message size limit, and shutdown ending its
// streams.
func TestHTTPListenerGuards(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)

	t.Run("token", func(t *testing.T) {
		const token = "http-e2e-token-0b3f"
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
		startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--http-listen", addr}, env: []string{"MCPD_API_TOKEN=" + token}})
		api := newHTTPAPI(t, addr)
		for _, tc := range []struct {
			auth string
			want int
		}{
			{"", http.StatusUnauthorized},
			{"Bearer wrong", http.StatusUnauthorized},
			{"Bearer " + token, http.StatusOK},
		} {
			header := http.Header{}
			if tc.auth != "" {
				header.Set("Authorization", tc.auth)
			}
			code, body := api.postJSON(ctx, t, "ListServers", `{}`, header)
			if code != tc.want {
				t.Errorf("ListServers with %q: got %d %s, want %d", tc.auth, code, body, tc.want)
			}
			if strings.Contains(body, token) {
				t.Errorf("the response quotes the token")
			}
		}
	})

	t.Run("dns rebinding", func(t *testing.T) {
		// A page whose name resolves to 127.0.0.1 sends its own name as
		// Host, and its origin: both refused, on the API and the metrics.
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
		metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
		startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--http-listen", addr, "--metrics-listen", metrics}})
		api := newHTTPAPI(t, addr)
		_, port, _ := net.SplitHostPort(addr)
		for _, tc := range []struct {
			header http.Header
			want   int
		}{
			{http.Header{}, http.StatusOK},
			{http.Header{"Host": {"localhost:" + port}, "Origin": {"http://localhost:" + port}}, http.StatusOK},
			{http.Header{"Host": {"[::1]:" + port}}, http.StatusOK},
			{http.Header{"Host": {"attacker.example:" + port}}, http.StatusForbidden},
			{http.Header{"Origin": {"http://attacker.example:" + port}}, http.StatusForbidden},
			{http.Header{"Origin": {"null"}}, http.StatusForbidden},
		} {
			if code, body := api.postJSON(ctx, t, "ListServers", `{}`, tc.header); code != tc.want {
				t.Errorf("ListServers with %v: got %d %s, want %d", tc.header, code, body, tc.want)
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metrics+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "attacker.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("metrics with Host attacker.example: got %d, want 403", resp.StatusCode)
		}
	})

	t.Run("not loopback", func(t *testing.T) {
		// Refused before anything binds, so the address is never opened.
		code, out := runMcpdEnv(ctx, t, []string{"MCPD_API_TOKEN=http-plain-6c2a"}, "--listen", "127.0.0.1:0", "--config", emptyConfig(t),
			"--http-listen", "0.0.0.0:"+strconv.Itoa(freePort(t)))
		if code != 1 || !strings.Contains(out, `--http-listen "0.0.0.0:`) || !strings.Contains(out, "not a loopback address") {
			t.Errorf("got exit code %d, want 1 and a refusal naming --http-listen:\n%s", code, out)
		}
		if strings.Contains(out, "http-plain-6c2a") {
			t.Errorf("the message quotes the token:\n%s", out)
		}
	})

	t.Run("message size", func(t *testing.T) {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
		d := startDaemon(ctx, t, daemonOptions{args: []string{"--http-listen", addr, "--max-message-bytes", "4096"}})
		d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
		api := newHTTPAPI(t, addr)
		call := rpc[mcpdv1.CallToolRequest, mcpdv1.CallToolResponse](api.http1, api.base, "CallTool")
		big := &mcpdv1.CallToolRequest{Name: "mcp__demo__echo", Arguments: mustStruct(t, map[string]any{"message": strings.Repeat("x", 8192)})}
		if n := proto.Size(big); n <= 4096 {
			t.Fatalf("request of %d bytes is not over the limit", n)
		}
		_, err := call.CallUnary(ctx, connect.NewRequest(big))
		if code := connect.CodeOf(err); code != connect.CodeResourceExhausted {
			t.Errorf("a request over --max-message-bytes: got %v, want resource_exhausted", err)
		}
		code, body := api.postJSON(ctx, t, "CallTool", `{"name": "mcp__demo__echo", "arguments": {"message": "`+strings.Repeat("y", 8192)+`"}}`, nil)
		if code != http.StatusTooManyRequests || !strings.Contains(body, `"code":"resource_exhausted"`) {
			t.Errorf("a JSON request over --max-message-bytes: got %d %s, want 429 resource_exhausted", code, body)
		}
		// The limit is on the message, not on its JSON: 12 KB of escapes
		// that make 2 KB of protobuf pass.
		code, body = api.postJSON(ctx, t, "CallTool", `{"name": "mcp__demo__echo", "arguments": {"message": "`+strings.Repeat(`\u0041`, 2000)+`"}}`, nil)
		if code != http.StatusOK || !strings.Contains(body, strings.Repeat("A", 2000)) {
			t.Errorf("a JSON body over --max-message-bytes of a message under it: got %d %.200s, want 200", code, body)
		}
		if _, err := call.CallUnary(ctx, connect.NewRequest(&mcpdv1.CallToolRequest{Name: "mcp__demo__echo", Arguments: mustStruct(t, map[string]any{"message": "small"})})); err != nil {
			t.Errorf("a small request after the big ones: %v", err)
		}
		// A body far over the limit is not read to its end before the
		// refusal (nor before authentication): the server stops reading.
		pr, pw := io.Pipe()
		defer pw.Close()
		go func() {
			chunk := []byte(strings.Repeat("z", 64<<10))
			for {
				if _, err := pw.Write(chunk); err != nil {
					return
				}
			}
		}()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, api.base+"/mcpd.v1.MCPHub/CallTool", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := api.http1.Do(req)
		if err != nil {
			t.Fatalf("an endless body: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), `"code":"resource_exhausted"`) {
			t.Errorf("an endless body: got %d %s, want 429 resource_exhausted", resp.StatusCode, b)
		}
	})

	t.Run("answer size", func(t *testing.T) {
		// An answer over the limit is refused on both listeners alike: the
		// tools of two demo servers (about 3 KB each, each server's own
		// answer under the limit) over 4096 bytes.
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
		demo := fmt.Sprintf(`{"command": %q, "args": ["demo-server"]}`, mcpdBinary(t))
		config := writeConfig(t, `{"mcpServers": {"one": `+demo+`, "two": `+demo+`}}`)
		d := startDaemon(ctx, t, daemonOptions{config: config, args: []string{"--http-listen", addr, "--max-message-bytes", "4096"}})
		d.waitServer(ctx, t, "one", mcpdv1.ServerState_SERVER_STATE_READY)
		d.waitServer(ctx, t, "two", mcpdv1.ServerState_SERVER_STATE_READY)
		api := newHTTPAPI(t, addr)
		if _, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{}); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("ListTools over gRPC: got %v, want resource_exhausted (the answer must be over 4096 bytes for this test)", err)
		}
		list := rpc[mcpdv1.ListToolsRequest, mcpdv1.ListToolsResponse](api.http1, api.base, "ListTools")
		if _, err := list.CallUnary(ctx, connect.NewRequest(&mcpdv1.ListToolsRequest{})); connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Errorf("ListTools over HTTP: got %v, want resource_exhausted as over gRPC", err)
		}
		if _, err := list.CallUnary(ctx, connect.NewRequest(&mcpdv1.ListToolsRequest{Server: "one"})); err != nil {
			t.Errorf("ListTools of one server over HTTP: %v", err)
		}
	})

	t.Run("shutdown ends streams", func(t *testing.T) {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
		d := startDaemon(ctx, t, daemonOptions{args: []string{"--http-listen", addr}})
		api := newHTTPAPI(t, addr)
		call := rpc[mcpdv1.SubscribeRequest, mcpdv1.SubscribeResponse](api.http1, api.base, "Subscribe")
		stream, err := call.CallServerStream(ctx, connect.NewRequest(&mcpdv1.SubscribeRequest{AfterSequence: proto.Uint64(0)}))
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		// The stream is open once its first event (demo's first state,
		// buffered) arrives.
		if !stream.Receive() {
			t.Fatalf("Subscribe: %v", stream.Err())
		}
		d.send(t, syscall.SIGTERM)
		for stream.Receive() {
		}
		if code := connect.CodeOf(stream.Err()); code != connect.CodeUnavailable {
			t.Errorf("Subscribe at shutdown: got %v, want unavailable", stream.Err())
		}
		if code := d.wait(t, syscall.SIGTERM); code != 0 {
			t.Errorf("mcpd exit code: got %d, want 0\n%s", code, d.log.String())
		}
	})
}

// TestSubscribeSaysWhereItStarts: Subscribe's response headers, sent at
// once on gRPC and the HTTP wire, name the sequence the stream's events
// follow. A client that loses the stream before any event resumes from it
// and gets what happened meanwhile; "from now" would have skipped it.
func TestSubscribeSaysWhereItStarts(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{args: []string{"--http-listen", addr}})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	api := newHTTPAPI(t, addr)
	states := &mcpdv1.SubscribeRequest{Kinds: []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_SERVER_STATE}}

	// Each wire: open a stream, read its header before any event, drop it.
	starts := map[string]string{}
	sctx, cancel := context.WithCancel(ctx)
	sub, err := d.hub.Subscribe(sctx, states)
	if err != nil {
		t.Fatal(err)
	}
	h, err := sub.Header()
	if err != nil {
		t.Fatalf("gRPC: header: %v", err)
	}
	starts["grpc"] = strings.Join(h.Get("mcpd-after-sequence"), ",")
	cancel()
	for name, c := range map[string]*http.Client{"connect http/1.1": api.http1, "connect h2c": api.h2c} {
		sctx, cancel := context.WithCancel(ctx)
		stream, err := rpc[mcpdv1.SubscribeRequest, mcpdv1.SubscribeResponse](c, api.base, "Subscribe").CallServerStream(sctx, connect.NewRequest(states))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Header blocks until the response's headers came: at once.
		starts[name] = stream.ResponseHeader().Get("Mcpd-After-Sequence")
		cancel()
		_ = stream.Close()
	}

	// Something happens while no stream is open.
	if _, err := d.hub.SetServerEnabled(ctx, &mcpdv1.SetServerEnabledRequest{Name: "demo", Enabled: false}); err != nil {
		t.Fatal(err)
	}
	for name, start := range starts {
		after, err := strconv.ParseUint(start, 10, 64)
		if err != nil {
			t.Errorf("%s: mcpd-after-sequence %q: %v", name, start, err)
			continue
		}
		rctx, cancel := context.WithCancel(ctx)
		resumed, err := d.hub.Subscribe(rctx, &mcpdv1.SubscribeRequest{Kinds: states.GetKinds(), AfterSequence: &after})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := resumed.Recv()
		cancel()
		if err != nil || ev.GetEvent().GetServerState().GetState() != mcpdv1.ServerState_SERVER_STATE_DISABLED {
			t.Errorf("%s: resumed after %d: got %v, %v; want the disable that came while no stream was open", name, after, ev, err)
		}
	}
}
