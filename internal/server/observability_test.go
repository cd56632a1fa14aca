package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/telemetry"
)

// metricValue scrapes tel and returns the value of the unlabelled metric
// name.
func metricValue(t *testing.T, tel *telemetry.Telemetry, name string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("%s: not in the scrape", name)
	return 0
}

// TestEventsDroppedNotForResume: a stream that resumes from before what
// the buffer holds (from 0, "everything buffered", or from an old
// sequence) gets a gap, but missed nothing while it was open:
// mcpd_events_dropped_total stays 0, whatever its filter.
func TestEventsDroppedNotForResume(t *testing.T) {
	tel, err := telemetry.New(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, &envOptions{server: Options{Telemetry: tel}, eventBuffer: 4})
	for i := range 1000 {
		e.bus.Publish(events.Event{Kind: events.KindLog, Server: "x", Data: []byte(`"hi"`)})
		if i%100 == 0 { // evicted events the stream below wants: it gets a gap
			e.bus.Publish(events.Event{Kind: events.KindServerState, Server: "x"})
		}
	}
	for _, after := range []uint64{0, 500} {
		ctx, cancel := context.WithCancel(testContext(t))
		st, err := e.client.Subscribe(ctx, &mcpdv1.SubscribeRequest{AfterSequence: &after,
			Kinds: []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_SERVER_STATE}})
		if err != nil {
			t.Fatal(err)
		}
		first, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if first.GetEvent().GetGap() == nil {
			t.Fatalf("after %d: first event %v, want a gap", after, first.GetEvent())
		}
		// The stream counts the gap before it sends the next event.
		e.bus.Publish(events.Event{Kind: events.KindServerState, Server: "x", Data: []byte(`{}`)})
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		cancel()
		if got := metricValue(t, tel, "mcpd_events_dropped_total"); got != 0 {
			t.Errorf("after %d: mcpd_events_dropped_total: got %v, want 0 (the gap was evicted before the stream opened)", after, got)
		}
	}
}

// TestEventsDroppedLiveStream: a live stream whose client does not read
// falls behind the buffer; the events evicted before it read them are
// reported to it as gaps, and mcpd_events_dropped_total counts exactly
// those.
func TestEventsDroppedLiveStream(t *testing.T) {
	tel, err := telemetry.New(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Fixed, small windows (no window growth): the stream's sends block
	// once about 64 KiB wait for the client.
	e := newEnv(t, &envOptions{server: Options{Telemetry: tel}, eventBuffer: 4,
		dialOpts: []grpc.DialOption{grpc.WithInitialWindowSize(64 << 10), grpc.WithInitialConnWindowSize(64 << 10)}})
	ctx := testContext(t)
	st, err := e.client.Subscribe(ctx, &mcpdv1.SubscribeRequest{Kinds: []mcpdv1.EventKind{mcpdv1.EventKind_EVENT_KIND_LOG}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Header(); err != nil { // the stream is open
		t.Fatal(err)
	}
	data := []byte(strconv.Quote(strings.Repeat("a", 32<<10)))
	var last uint64
	for range 64 { // 2 MiB: far more than the windows and the buffer hold
		last = e.bus.Publish(events.Event{Kind: events.KindLog, Server: "x", Data: data})
	}
	var gaps uint64
	for {
		msg, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if g := msg.GetEvent().GetGap(); g != nil {
			gaps += g.GetLastSequence() - g.GetFirstSequence() + 1
		}
		if msg.GetEvent().GetSequence() == last {
			break
		}
	}
	if gaps == 0 {
		t.Fatal("the stream got no gap")
	}
	if got := metricValue(t, tel, "mcpd_events_dropped_total"); got != float64(gaps) {
		t.Errorf("mcpd_events_dropped_total: got %v, want %d (the gaps' events)", got, gaps)
	}
}

// syncBuffer is a bytes.Buffer for a logger written from handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(s.b.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestFailedCallLogLine: the line of a failed RPC names its method and
// code but not the error's text, which may quote what a server echoed of
// the arguments; with the log at debug, the text comes on a debug line
// of its own.
func TestFailedCallLogLine(t *testing.T) {
	for _, level := range []zerolog.Level{zerolog.InfoLevel, zerolog.DebugLevel} {
		t.Run(level.String(), func(t *testing.T) {
			var buf syncBuffer
			e := newEnv(t, &envOptions{server: Options{Logger: zerolog.New(&buf).Level(level)}})
			srv := mcp.NewServer(&mcp.Implementation{Name: "v", Version: "1"}, nil)
			mcp.AddTool(srv, &mcp.Tool{Name: "login"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
				Password string `json:"password"`
			}) (*mcp.CallToolResult, any, error) {
				return nil, nil, &jsonrpc.Error{Code: -32602, Message: "1 validation error: input_value='" + in.Password + "'"}
			})
			e.connect(t, "v", srv)
			args, _ := structpb.NewStruct(map[string]any{"password": "hunter2-SECRET"})
			if _, err := e.client.CallTool(testContext(t), &mcpdv1.CallToolRequest{Name: "mcp__v__login", Arguments: args}); err == nil {
				t.Fatal("CallTool: want an error")
			}
			var finished, withText int
			for _, l := range buf.lines() {
				if l["grpc.method"] != "CallTool" {
					continue
				}
				text, _ := l["grpc.error"].(string)
				if strings.Contains(text, "hunter2") {
					withText++
					if l["level"] != "debug" {
						t.Errorf("the error's text on a %v line: %v", l["level"], l)
					}
				}
				if l["message"] == "finished call" {
					finished++
					if l["grpc.code"] != "InvalidArgument" || l["level"] != "info" || text != "" {
						t.Errorf("finished call line: got %v, want InvalidArgument at info, without grpc.error", l)
					}
				}
			}
			if finished != 1 {
				t.Errorf("finished call lines: got %d, want 1", finished)
			}
			if want := map[zerolog.Level]int{zerolog.InfoLevel: 0, zerolog.DebugLevel: 1}[level]; withText != want {
				t.Errorf("lines with the error's text: got %d, want %d", withText, want)
			}
		})
	}
}
