package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/events"
)

// TestHTTPStreamGzipLimit: a gzip-compressed stream message whose JSON is
// far over --max-message-bytes is refused as the same message sent plain
// is (the transcoder decompressed it whole, without a bound), and a small
// compressed one still works.
func TestHTTPStreamGzipLimit(t *testing.T) {
	const limit = 4096
	e := newHTTPEnvWith(t, &HTTPOptions{MaxMessageBytes: limit})
	first := e.bus.Publish(events.Event{Server: "x", Kind: events.KindToolsChanged})
	for _, tc := range []struct {
		name string
		pad  int // blanks in the JSON
		gzip bool
		want connect.Code // 0: the event
	}{
		{"plain, over", 8 << 20, false, connect.CodeResourceExhausted},
		{"gzip, over", 8 << 20, true, connect.CodeResourceExhausted},
		{"gzip, small", 0, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"afterSequence": "%d"%s}`, first-1, strings.Repeat(" ", tc.pad))
			opts := []connect.ClientOption{connect.WithCodec(rawJSON{})}
			if tc.gzip {
				opts = append(opts, connect.WithSendGzip())
			}
			client := connect.NewClient[string, mcpdv1.SubscribeResponse](e.client, e.base+"Subscribe", opts...)
			stream, err := client.CallServerStream(testContext(t), connect.NewRequest(&body))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			got := stream.Receive()
			switch {
			case tc.want == 0 && !got:
				t.Errorf("got %v, want the event", stream.Err())
			case tc.want != 0 && got:
				t.Errorf("got event %d: a %d-byte JSON message passed a %d-byte limit", stream.Msg().GetEvent().GetSequence(), len(body), limit)
			case tc.want != 0 && connect.CodeOf(stream.Err()) != tc.want:
				t.Errorf("got %v, want %v", stream.Err(), tc.want)
			}
		})
	}
}

// TestHTTPHealthGzipLimit: health needs no credential, and its JSON goes
// through the transcoder: a gzip body that expands far over the limit is
// refused, not decompressed whole.
func TestHTTPHealthGzipLimit(t *testing.T) {
	e := newHTTPEnvWith(t, &HTTPOptions{MaxMessageBytes: 4096})
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(`{"service": ""` + strings.Repeat(" ", 8<<20) + `}`))
	_ = zw.Close()
	url := strings.TrimSuffix(e.base, "mcpd.v1.MCPHub/") + "grpc.health.v1.Health/Check"
	req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost, url, &buf)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Code string }
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusTooManyRequests || out.Code != "resource_exhausted" {
		t.Errorf("got %d %q, want 429 resource_exhausted", resp.StatusCode, out.Code)
	}
}

// TestLoopbackCrossSiteRequests: a page of another site makes the browser
// send a GET without an Origin (an <img src>), with Sec-Fetch-Site:
// cross-site; the GET form of the read-only methods would run it as the
// anonymous caller. It is refused; a local web client's fetch, which
// carries a loopback Origin, is not.
func TestLoopbackCrossSiteRequests(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	for _, tc := range []struct {
		name   string
		origin string
		want   int
	}{
		{"no-cors GET of another site", "", http.StatusForbidden},
		{"a local web client's fetch", "http://localhost:6274", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			h := LoopbackOnly(lis, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
			req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/mcpd.v1.MCPHub/ReadResource?encoding=json&message=%7B%7D", nil)
			req.Header.Set("Sec-Fetch-Site", "cross-site")
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want || ran != (tc.want == http.StatusOK) {
				t.Errorf("got %d (handler ran: %v), want %d", rec.Code, ran, tc.want)
			}
		})
	}
}

// TestShutdownRefusesNewCalls: while Shutdown drains the HTTP listener (a
// slow call on it), a new gRPC call is refused with UNAVAILABLE, to be
// tried elsewhere, rather than run and cut off at the deadline; health
// still answers.
func TestShutdownRefusesNewCalls(t *testing.T) {
	e := newEnv(t, nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	started, release := make(chan struct{}, 1), make(chan struct{})
	mcp.AddTool(srv, &mcp.Tool{Name: "hold"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		<-release
		return &mcp.CallToolResult{}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "quick"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	e.connect(t, "s", srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.srv.ServeHTTP(lis, nil) }()
	slow := make(chan error, 1)
	go func() {
		resp, err := http.Post("http://"+lis.Addr().String()+"/mcpd.v1.MCPHub/CallTool", "application/json", strings.NewReader(`{"name": "mcp__s__hold"}`))
		if err == nil {
			resp.Body.Close()
		}
		slow <- err
	}()
	<-started
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		e.srv.Shutdown(ctx)
	}()
	defer func() { close(release); <-slow; <-stopped }()
	ctx := testContext(t)
	waitFor(t, func() bool {
		h, err := healthpb.NewHealthClient(e.conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err == nil && h.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING
	})
	_, err = e.client.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__s__quick"})
	wantCode(t, err, codes.Unavailable)
}
