package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
