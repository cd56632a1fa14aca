package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// fakeEndpoint is an MCP endpoint in process that hands each POSTed
// message to handle, and stops with the test.
func fakeEndpoint(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			handle(w, r, nil)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		msg, err := jsonrpc.DecodeMessage(body)
		if err != nil {
			http.Error(w, "not a message", http.StatusBadRequest)
			return
		}
		handle(w, r, msg)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// answerJSON answers req with result as application/json.
func answerJSON(w http.ResponseWriter, req *jsonrpc.Request, result string) {
	data, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Result: json.RawMessage(result)})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// stdioHost runs `mcpd mcp-stdio` in process, with a stdin the test writes
// to and keeps open until it closes it.
type stdioHost struct {
	stdin *io.PipeWriter
	out   *syncBuffer
	exit  chan int
}

func startStdioHost(t *testing.T, url string, env map[string]string) *stdioHost {
	t.Helper()
	r, w := io.Pipe()
	h := &stdioHost{stdin: w, out: &syncBuffer{}, exit: make(chan int, 1)}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	go func() { h.exit <- runMCPStdio([]string{"--connect", url}, lookup, r, h.out, io.Discard) }()
	t.Cleanup(func() {
		w.Close()
		<-h.exit
	})
	return h
}

func (h *stdioHost) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(h.stdin, line+"\n"); err != nil {
		t.Fatalf("write to mcp-stdio: %v", err)
	}
}

// wait closes stdin and returns the exit code.
func (h *stdioHost) wait(ctx context.Context, t *testing.T) int {
	t.Helper()
	h.stdin.Close()
	select {
	case code := <-h.exit:
		h.exit <- code // for the cleanup
		return code
	case <-ctx.Done():
		t.Fatalf("mcp-stdio did not exit after stdin closed; stdout:\n%s", h.out.String())
		return -1
	}
}

// stdioAnswer is one JSON-RPC answer the host got.
type stdioAnswer struct {
	ID    any             `json:"id"`
	Error *jsonrpc.Error  `json:"error"`
	Raw   json.RawMessage `json:"-"`
}

// hostAnswers parses the host's output, one answer a line, by id as JSON.
func hostAnswers(t *testing.T, out string) map[string]stdioAnswer {
	t.Helper()
	got := map[string]stdioAnswer{}
	for line := range strings.Lines(out) {
		var a stdioAnswer
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		a.Raw = json.RawMessage(strings.TrimSpace(line))
		id, _ := json.Marshal(a.ID)
		got[string(id)] = a
	}
	return got
}

// TestMCPStdioRelaysRefusals: a JSON-RPC error that mcpd sends with an
// HTTP error status (as the 2026-07-28 revision wants) reaches the host
// as mcpd sent it, data included; a refusal without a JSON-RPC answer is
// made up as a short error that quotes no header and no token.
func TestMCPStdioRelaysRefusals(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const token = "tok-secret-5b1e"
	unsupported := `{"jsonrpc":"2.0","id":3,"error":{"code":-32022,"message":"protocol version \"2099-01-01\" is not supported","data":{"supported":["2025-11-25","2026-07-28"],"requested":"2099-01-01"}}}`
	srv := fakeEndpoint(t, func(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message) {
		req, _ := msg.(*jsonrpc.Request)
		if req == nil {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		switch req.Method {
		case "tools/call": // as the SDK's SEP-2575 errors
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown tool \"ghost\""}}`)
		case "no/such":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"method not found"}}`)
		case "prompts/get":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, unsupported)
		case "resources/read": // an SSE answer with an error status
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":4,\"error\":{\"code\":-32602,\"message\":\"no such resource\"}}\n\n")
		case "ping": // a refusal that answers nothing
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcpd"`)
			http.Error(w, "invalid token "+strings.Repeat("x", 400)+"\nsecond line", http.StatusUnauthorized)
		case "resources/list": // JSON that does not answer this request
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad"}}`)
		}
	})
	h := startStdioHost(t, srv.URL, map[string]string{"MCPD_API_TOKEN": token})
	h.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ghost","arguments":{}}}`)
	h.send(t, `{"jsonrpc":"2.0","id":2,"method":"no/such","params":{}}`)
	h.send(t, `{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"p"}}`)
	h.send(t, `{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"x://y"}}`)
	h.send(t, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	h.send(t, `{"jsonrpc":"2.0","id":6,"method":"resources/list"}`)
	if code := h.wait(ctx, t); code != stdioDone {
		t.Errorf("exit code: got %d, want %d", code, stdioDone)
	}
	got := hostAnswers(t, h.out.String())
	for id, want := range map[string]int64{"1": -32602, "2": -32601, "3": -32022, "4": -32602, "5": jsonrpc.CodeInternalError, "6": jsonrpc.CodeInternalError} {
		a, ok := got[id]
		if !ok || a.Error == nil {
			t.Errorf("request %s: got %s, want error %d", id, a.Raw, want)
			continue
		}
		if a.Error.Code != want {
			t.Errorf("request %s: got error %s, want code %d", id, a.Raw, want)
		}
	}
	if a := got["3"]; string(a.Raw) != unsupported {
		t.Errorf("unsupported version: got %s, want mcpd's answer as it is: %s", a.Raw, unsupported)
	}
	for _, id := range []string{"5", "6"} {
		a := got[id]
		if a.Error == nil {
			continue
		}
		msg := a.Error.Message
		if !strings.HasPrefix(msg, fmt.Sprintf("mcpd answered HTTP %d", map[string]int{"5": 401, "6": 400}[id])) || len(msg) > 300 ||
			strings.Contains(msg, token) || strings.Contains(msg, "realm") || strings.Contains(msg, "second line") {
			t.Errorf("request %s: made-up message %q: want the status and at most a short first line of the reason", id, msg)
		}
	}
}

// TestMCPStdioKeepsOrder: the host's notifications reach mcpd in the order
// the host wrote them, and a long call does not hold up what follows it.
func TestMCPStdioKeepsOrder(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const notes = 200
	var mu sync.Mutex
	var arrived []int
	all := make(chan struct{}) // every notification arrived
	heldUp := make(chan bool, 1)
	srv := fakeEndpoint(t, func(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message) {
		req, _ := msg.(*jsonrpc.Request)
		switch {
		case req == nil:
			http.Error(w, "no", http.StatusMethodNotAllowed)
		case !req.IsCall():
			var p struct {
				N int `json:"n"`
			}
			_ = json.Unmarshal(req.Params, &p)
			mu.Lock()
			arrived = append(arrived, p.N)
			if len(arrived) == notes {
				close(all)
			}
			mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
		case req.Method == "tools/call":
			// A long call, answered once all that follows it has come.
			select {
			case <-all:
				heldUp <- false
			case <-ctx.Done():
				heldUp <- true
			}
			answerJSON(w, req, `{"content":[]}`)
		default:
			answerJSON(w, req, `{}`)
		}
	})
	var in strings.Builder
	in.WriteString(`{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"sleep","arguments":{}}}` + "\n")
	for i := range notes {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{"n":%d}}`+"\n", i)
		if i%20 == 0 {
			fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`+"\n", i)
		}
	}
	var out syncBuffer
	if code := runMCPStdio([]string{"--connect", srv.URL}, func(string) (string, bool) { return "", false }, strings.NewReader(in.String()), &out, io.Discard); code != stdioDone {
		t.Fatalf("exit code: got %d, want %d", code, stdioDone)
	}
	select {
	case held := <-heldUp:
		if held {
			t.Error("the notifications after a long call waited for its answer")
		}
	case <-ctx.Done():
		t.Fatal("the long call did not reach mcpd")
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.IsSorted(arrived) || len(arrived) != notes {
		t.Errorf("notifications reached mcpd in the order %v, want 0 to %d in order", arrived, notes-1)
	}
	got := hostAnswers(t, out.String())
	for _, id := range []string{`"long"`, "0", "180"} {
		if _, ok := got[id]; !ok {
			t.Errorf("no answer to request %s in %s", id, out.String())
		}
	}
}

// writeLines writes each line, and a newline, to the bridge's stdin.
func writeLines(t *testing.T, stdin io.Writer, lines ...string) {
	t.Helper()
	for _, line := range lines {
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMCPStdioSlowAcceptHoldsUpOnlyItsTurn: a notification mcpd is slow
// to take (no 202 yet) holds the next message up only for the bridge's
// order wait, not until mcpd takes it.
func TestMCPStdioSlowAcceptHoldsUpOnlyItsTurn(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	release := make(chan struct{})
	pinged := make(chan struct{})
	srv := fakeEndpoint(t, func(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message) {
		req, _ := msg.(*jsonrpc.Request)
		switch {
		case req == nil:
			http.Error(w, "no standalone stream", http.StatusMethodNotAllowed)
		case !req.IsCall():
			select { // held until the ping came, or the test ends
			case <-release:
			case <-ctx.Done():
			}
			w.WriteHeader(http.StatusAccepted)
		default:
			close(pinged)
			answerJSON(w, req, `{}`)
		}
	})
	stdin, host := io.Pipe()
	var out syncBuffer
	b := &bridge{endpoint: srv.URL, client: srv.Client(), out: &out, orderWait: 50 * time.Millisecond}
	returned := make(chan error, 1)
	go func() { returned <- b.run(ctx, stdin) }()
	writeLines(t, host,
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
	)
	select {
	case <-pinged:
	case <-ctx.Done():
		t.Error("the ping waited for mcpd to take the notification before it")
	}
	close(release)
	host.Close()
	if err := <-returned; err != nil {
		t.Errorf("run: %v", err)
	}
}

// TestMCPStdioRefusesTokenWithWhitespace: a token with a trailing
// newline (from $(cat file), say) is refused at start, as the daemon
// refuses it, rather than sent and refused as if mcpd were away; the
// message does not quote it.
func TestMCPStdioRefusesTokenWithWhitespace(t *testing.T) {
	var stderr syncBuffer
	lookup := func(string) (string, bool) { return "s3cret-token\n", true }
	code := runMCPStdio([]string{"--connect", "127.0.0.1:1"}, lookup, strings.NewReader(""), io.Discard, &stderr)
	if code != stdioUsage || !strings.Contains(stderr.String(), "MCPD_API_TOKEN contains whitespace") || strings.Contains(stderr.String(), "s3cret") {
		t.Errorf("exit %d, stderr %q; want %d and a message about the token that does not quote it", code, stderr.String(), stdioUsage)
	}
}

// TestMCPStdioCancelsLargeIDs: notifications/cancelled ends the POST of the
// request it names, whatever the id: numbers of a million and more (which
// a float64 prints with an exponent) as well as strings.
func TestMCPStdioCancelsLargeIDs(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	started, ended := make(chan string, 1), make(chan string, 1)
	srv := fakeEndpoint(t, func(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message) {
		req, _ := msg.(*jsonrpc.Request)
		switch {
		case req == nil:
			http.Error(w, "no", http.StatusMethodNotAllowed)
		case !req.IsCall():
			w.WriteHeader(http.StatusAccepted)
		default:
			id, _ := json.Marshal(req.ID.Raw())
			started <- string(id)
			select {
			case <-r.Context().Done():
				ended <- string(id)
			case <-ctx.Done():
			}
		}
	})
	h := startStdioHost(t, srv.URL, nil)
	for _, id := range []string{"999999", "1000000", "1700000000123", `"1000000"`, `"abc"`} {
		h.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"sleep","arguments":{}}}`)
		select {
		case got := <-started:
			if got != id {
				t.Fatalf("mcpd got request %s, want %s", got, id)
			}
		case <-ctx.Done():
			t.Fatalf("request %s did not reach mcpd", id)
		}
		h.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+id+`}}`)
		select {
		case got := <-ended:
			if got != id {
				t.Fatalf("cancelled request %s, want %s", got, id)
			}
		case <-ctx.Done():
			t.Fatalf("notifications/cancelled for id %s did not end its request", id)
		}
	}
	if code := h.wait(ctx, t); code != stdioDone {
		t.Errorf("exit code: got %d, want %d", code, stdioDone)
	}
	if out := h.out.String(); out != "" {
		t.Errorf("the host got %q, want no answer to cancelled requests", out)
	}
}

// TestMCPStdioStopsWithStdinOpen: when its context ends (SIGTERM, SIGINT)
// the bridge ends the requests in flight, ends its session and returns,
// although the host keeps stdin open.
func TestMCPStdioStopsWithStdinOpen(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const session = "session-7f3a"
	started, ended := make(chan struct{}), make(chan struct{})
	deleted := make(chan string, 1)
	srv := fakeEndpoint(t, func(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message) {
		req, _ := msg.(*jsonrpc.Request)
		switch {
		case r.Method == http.MethodDelete:
			deleted <- r.Header.Get("Mcp-Session-Id")
			w.WriteHeader(http.StatusNoContent)
		case req == nil:
			http.Error(w, "no standalone stream", http.StatusMethodNotAllowed)
		case req.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", session)
			answerJSON(w, req, `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"fake","version":"0"}}`)
		case !req.IsCall():
			w.WriteHeader(http.StatusAccepted)
		default:
			close(started)
			select {
			case <-r.Context().Done():
				close(ended)
			case <-ctx.Done():
			}
		}
	})
	stdin, host := io.Pipe()
	t.Cleanup(func() { host.Close() })
	var out syncBuffer
	bridgeCtx, signalBridge := context.WithCancel(ctx)
	b := &bridge{endpoint: srv.URL, client: srv.Client(), out: &out}
	returned := make(chan error, 1)
	go func() { returned <- b.run(bridgeCtx, stdin) }()
	writeLines(t, host,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{}}}`,
	)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the call did not reach mcpd")
	}
	signalBridge() // as SIGTERM does
	select {
	case err := <-returned:
		if err != nil {
			t.Errorf("run: got %v, want nil", err)
		}
	case <-ctx.Done():
		host.Close()
		<-returned
		t.Fatal("the bridge did not stop while stdin stayed open")
	}
	// The server sees the POST end a moment after the bridge cancelled it
	// (it notices the connection close on its own goroutine); one the
	// bridge left open never ends.
	select {
	case <-ended:
	case <-ctx.Done():
		t.Error("the call's POST was still open after the bridge stopped")
	}
	select {
	case got := <-deleted:
		if got != session {
			t.Errorf("DELETE for session %q, want %q", got, session)
		}
	default:
		t.Error("the bridge did not end its session")
	}
	if got := hostAnswers(t, out.String()); len(got) != 1 {
		t.Errorf("the host got %s, want only the answer to initialize (nothing made up for the call ended on stop)", out.String())
	}
}

// TestMCPStdioAnswersWhatIsNoRequest: a line that is not JSON is answered
// with a parse error (-32700), and JSON that is no JSON-RPC message (an
// object as id, no version, an empty batch) with invalid request
// (-32600), both with id null, as JSON-RPC 2.0 says, and without reaching
// mcpd; the lines around them go on as before.
func TestMCPStdioAnswersWhatIsNoRequest(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var reached []string
	srv := fakeEndpoint(t, func(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message) {
		req, _ := msg.(*jsonrpc.Request)
		if req == nil {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		mu.Lock()
		reached = append(reached, req.Method)
		mu.Unlock()
		answerJSON(w, req, `{}`)
	})
	in := strings.Join([]string{
		`hello`,
		`{bad`,
		`[1,`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`,
		`{"id":2,"method":"ping"}`,
		`[]`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
	}, "\n") + "\n"
	var out syncBuffer
	if code := runMCPStdio([]string{"--connect", srv.URL}, func(string) (string, bool) { return "", false }, strings.NewReader(in), &out, io.Discard); code != stdioDone {
		t.Fatalf("exit code: got %d, want %d", code, stdioDone)
	}
	var codes []int64
	answered := false
	for line := range strings.Lines(out.String()) {
		var a struct {
			ID    json.RawMessage `json:"id"`
			Error *jsonrpc.Error  `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		switch {
		case string(a.ID) == "3" && a.Error == nil:
			answered = true
		case string(a.ID) == "null" && a.Error != nil:
			codes = append(codes, a.Error.Code)
		default:
			t.Errorf("unexpected answer %s", strings.TrimSpace(line))
		}
	}
	want := []int64{jsonrpc.CodeParseError, jsonrpc.CodeParseError, jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeInvalidRequest, jsonrpc.CodeInvalidRequest}
	if !slices.Equal(codes, want) || !answered {
		t.Errorf("answers: got codes %v with id null (ping answered: %v), want %v and the ping answered\n%s", codes, answered, want, out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(reached, []string{"ping"}) {
		t.Errorf("mcpd got %v, want only the valid ping", reached)
	}
}

// TestMCPStdioUnknownMethod: mcpd's endpoint refuses an unknown method of
// an initialize-era session with HTTP 400 and a plain-text "JSON RPC not
// handled" (the Go SDK's answer; a 2026-07-28 request gets a JSON-RPC
// error): the host gets method not found (-32601), not an internal error.
func TestMCPStdioUnknownMethod(t *testing.T) {
	t.Parallel()
	srv := fakeEndpoint(t, func(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message) {
		req, _ := msg.(*jsonrpc.Request)
		switch {
		case req == nil:
			http.Error(w, "no", http.StatusMethodNotAllowed)
		case req.Method == "no/such":
			http.Error(w, `JSON RPC not handled: "no/such" unsupported`, http.StatusBadRequest)
		default:
			http.Error(w, "Bad Request: missing params", http.StatusBadRequest)
		}
	})
	in := `{"jsonrpc":"2.0","id":1,"method":"no/such","params":{}}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n"
	var out syncBuffer
	if code := runMCPStdio([]string{"--connect", srv.URL}, func(string) (string, bool) { return "", false }, strings.NewReader(in), &out, io.Discard); code != stdioDone {
		t.Fatalf("exit code: got %d, want %d", code, stdioDone)
	}
	got := hostAnswers(t, out.String())
	if a := got["1"]; a.Error == nil || a.Error.Code != jsonrpc.CodeMethodNotFound || !strings.Contains(a.Error.Message, `"no/such"`) {
		t.Errorf("unknown method: got %s, want -32601 naming it", a.Raw)
	}
	if a := got["2"]; a.Error == nil || a.Error.Code != jsonrpc.CodeInternalError {
		t.Errorf("another refusal: got %s, want -32603", a.Raw)
	}
}
