package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
)

// scriptConn is a connection whose Read returns its messages in turn, then
// io.EOF.
type scriptConn struct {
	mcp.Connection // nil: only Read is used
	msgs           []jsonrpc.Message
}

func (c *scriptConn) Read(context.Context) (jsonrpc.Message, error) {
	if len(c.msgs) == 0 {
		return nil, io.EOF
	}
	m := c.msgs[0]
	c.msgs = c.msgs[1:]
	return m, nil
}

func notification(t *testing.T, method string, params any) *jsonrpc.Request {
	t.Helper()
	raw, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	return &jsonrpc.Request{Method: method, Params: raw}
}

// TestRoutedConnKeepsSDKQueueShort checks what a routed connection hands
// the SDK, whose handler queue has no bound: log and progress
// notifications are handled as they are read and never handed on,
// notifications the SDK ignores are dropped, and other notifications take
// one of maxQueuedNotifications tokens until a handler returns it.
func TestRoutedConnKeepsSDKQueueShort(t *testing.T) {
	ctx := testContext(t)
	bus := events.NewBus(nil)
	defer bus.Close()
	u := &upstream{cfg: config.Server{Name: "s"}, opts: &Options{Events: bus}}
	sub := bus.Subscribe(events.Filter{}, nil)
	defer sub.Close()

	id, err := jsonrpc.MakeID(float64(1))
	if err != nil {
		t.Fatal(err)
	}
	const logs = 1000
	script := &scriptConn{}
	for i := range logs {
		script.msgs = append(script.msgs,
			notification(t, "notifications/message", map[string]any{"level": "info", "data": fmt.Sprint("line ", i)}),
			notification(t, "notifications/progress", map[string]any{"progressToken": "t", "progress": i}),
			notification(t, "notifications/custom", map[string]any{}))
	}
	script.msgs = append(script.msgs, &jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)})
	for range maxQueuedNotifications + 1 {
		script.msgs = append(script.msgs, notification(t, "notifications/tools/list_changed", map[string]any{}))
	}
	c := &routedConn{Connection: script, u: u, queued: make(chan struct{}, maxQueuedNotifications)}
	u.liveConn = c

	msg, err := c.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); err != nil || !ok || resp.ID != id {
		t.Fatalf("first Read: got %#v, %v; want the response after the notifications", msg, err)
	}
	for i := range logs {
		e, err := sub.Next(ctx)
		if err != nil || e.Kind != events.KindLog || e.Data != fmt.Sprint("line ", i) {
			t.Fatalf("event %d: got %+v, %v; want log line %d", i, e, err, i)
		}
	}
	if n := len(c.queued); n != 0 {
		t.Errorf("after log, progress and unknown notifications: %d queue tokens taken, want 0", n)
	}

	for i := range maxQueuedNotifications {
		if msg, err := c.Read(ctx); err != nil || msg.(*jsonrpc.Request).Method != "notifications/tools/list_changed" {
			t.Fatalf("Read %d: got %v, %v; want tools/list_changed", i, msg, err)
		}
	}
	if n := len(c.queued); n != maxQueuedNotifications {
		t.Fatalf("after %d list changes: %d queue tokens taken, want all", maxQueuedNotifications, n)
	}
	u.notificationHandled()
	if n := len(c.queued); n != maxQueuedNotifications-1 {
		t.Fatalf("after a handler ran: %d queue tokens taken, want %d", n, maxQueuedNotifications-1)
	}
	// The one freed token lets one more through; the script then ends.
	if msg, err := c.Read(ctx); err != nil || msg == nil {
		t.Fatalf("Read after a handler ran: got %v, %v", msg, err)
	}
	if _, err := c.Read(ctx); err != io.EOF {
		t.Fatalf("Read at the end: got %v, want io.EOF", err)
	}
}

// TestRoutedConnStalledQueueResets: when the SDK handles queued
// notifications without calling mcpd (it handles cancellations itself),
// their tokens never return; a full queue that does not drain is taken to
// be such, and counting starts afresh instead of blocking the connection.
func TestRoutedConnStalledQueueResets(t *testing.T) {
	ctx := testContext(t)
	u := &upstream{cfg: config.Server{Name: "s"}, opts: &Options{}}
	script := &scriptConn{}
	for range maxQueuedNotifications + 1 {
		script.msgs = append(script.msgs, notification(t, "notifications/cancelled", map[string]any{"requestId": 1}))
	}
	c := &routedConn{Connection: script, u: u, queued: make(chan struct{}, maxQueuedNotifications)}
	for i := range maxQueuedNotifications + 1 {
		if _, err := c.Read(ctx); err != nil {
			t.Fatalf("Read %d: %v", i, err)
		}
	}
	if n := len(c.queued); n != 1 {
		t.Errorf("after a reset: %d queue tokens taken, want 1", n)
	}
}

// pipeConn is a connection whose Read returns what the test sends on in
// and whose Write hands each message to out.
type pipeConn struct {
	mcp.Connection // nil: only Read and Write are used
	in, out        chan jsonrpc.Message
}

func (c *pipeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case msg := <-c.in:
		return msg, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *pipeConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	select {
	case c.out <- msg:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestRoutedConnKeepAliveProbe: a keepalive probe is a server/discover
// request with the _meta of the SDK's own server/discover and an id the
// SDK never uses; its answer, a result or a JSON-RPC error alike, proves
// the server alive and is taken off the stream, as is a late one: the SDK
// reads only what answers its own requests.
func TestRoutedConnKeepAliveProbe(t *testing.T) {
	ctx := testContext(t)
	u := &upstream{cfg: config.Server{Name: "s"}, opts: &Options{}}
	pipe := &pipeConn{in: make(chan jsonrpc.Message, 8), out: make(chan jsonrpc.Message, 8)}
	c := &routedConn{Connection: pipe, u: u, queued: make(chan struct{}, maxQueuedNotifications)}

	sdkID, err := jsonrpc.MakeID(float64(1))
	if err != nil {
		t.Fatal(err)
	}
	meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"mcpd","version":"1"}}`
	if err := c.Write(ctx, &jsonrpc.Request{ID: sdkID, Method: "server/discover", Params: json.RawMessage(`{"_meta":` + meta + `}`)}); err != nil {
		t.Fatal(err)
	}
	<-pipe.out

	// probe sends one probe and answers it with what answer returns; with
	// nil it gives up on it (the probe's context ends) instead.
	probe := func(answer func(id jsonrpc.ID) *jsonrpc.Response) error {
		t.Helper()
		probeCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- c.discover(probeCtx) }()
		req, ok := (<-pipe.out).(*jsonrpc.Request)
		if !ok || req.Method != "server/discover" || !req.IsCall() {
			t.Fatalf("probe: wrote %#v, want a server/discover request", req)
		}
		if id, ok := req.ID.Raw().(string); !ok || !strings.HasPrefix(id, "mcpd-keepalive-") {
			t.Errorf("probe id %#v: want a string starting mcpd-keepalive-", req.ID.Raw())
		}
		var params struct {
			Meta json.RawMessage `json:"_meta"`
		}
		if err := json.Unmarshal(req.Params, &params); err != nil || string(params.Meta) != meta {
			t.Errorf("probe params %s: want the _meta of the SDK's server/discover", req.Params)
		}
		if resp := answer(req.ID); resp != nil {
			pipe.in <- resp
		} else {
			cancel()
		}
		return <-done
	}

	reads := make(chan jsonrpc.Message, 8)
	readCtx, stopReading := context.WithCancel(ctx)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			msg, err := c.Read(readCtx)
			if err != nil {
				return
			}
			reads <- msg
		}
	}()
	defer func() {
		stopReading()
		<-readDone
	}()

	if err := probe(func(id jsonrpc.ID) *jsonrpc.Response {
		return &jsonrpc.Response{ID: id, Result: json.RawMessage(`{"supportedVersions":["2026-07-28"]}`)}
	}); err != nil {
		t.Errorf("probe answered with a result: %v, want nil", err)
	}
	if err := probe(func(id jsonrpc.ID) *jsonrpc.Response {
		return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "busy"}}
	}); err != nil {
		t.Errorf("probe answered with a JSON-RPC error: %v, want nil (the server answered)", err)
	}
	var lateID jsonrpc.ID
	if err := probe(func(id jsonrpc.ID) *jsonrpc.Response { lateID = id; return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("unanswered probe: %v, want its context's end", err)
	}
	pipe.in <- &jsonrpc.Response{ID: lateID, Result: json.RawMessage(`{}`)}
	pipe.in <- &jsonrpc.Response{ID: sdkID, Result: json.RawMessage(`{}`)}
	if msg := <-reads; msg.(*jsonrpc.Response).ID != sdkID {
		t.Errorf("Read: got %#v, want only the answer to the SDK's request", msg)
	}
	select {
	case msg := <-reads:
		t.Errorf("Read also returned %#v", msg)
	default:
	}
}
