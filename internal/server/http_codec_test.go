package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// codecTestFile declares t.M, a message with every shape unmarshalJSON
// walks: a nested message, a list of messages, a map with message
// values, a map with scalar values, an enum, a list of enums and a
// Struct.
const codecTestFile = `
name: "codec_test.proto" package: "t" syntax: "proto3"
dependency: "google/protobuf/struct.proto"
message_type {
  name: "M"
  field { name: "name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "name" }
  field { name: "inner" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".t.M" json_name: "inner" }
  field { name: "items" number: 3 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".t.M" json_name: "items" }
  field { name: "by_key" number: 4 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".t.M.ByKeyEntry" json_name: "byKey" }
  field { name: "labels" number: 5 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".t.M.LabelsEntry" json_name: "labels" }
  field { name: "color" number: 6 label: LABEL_OPTIONAL type: TYPE_ENUM type_name: ".t.Color" json_name: "color" }
  field { name: "colors" number: 7 label: LABEL_REPEATED type: TYPE_ENUM type_name: ".t.Color" json_name: "colors" }
  field { name: "meta" number: 8 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".google.protobuf.Struct" json_name: "meta" }
  nested_type {
    name: "ByKeyEntry" options { map_entry: true }
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "key" }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".t.M" json_name: "value" }
  }
  nested_type {
    name: "LabelsEntry" options { map_entry: true }
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "key" }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING json_name: "value" }
  }
}
enum_type {
  name: "Color"
  value { name: "COLOR_UNSPECIFIED" number: 0 }
  value { name: "COLOR_RED" number: 1 }
}
`

func codecTestMessage(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	var fdp descriptorpb.FileDescriptorProto
	if err := prototext.Unmarshal([]byte(codecTestFile), &fdp); err != nil {
		t.Fatal(err)
	}
	fd, err := protodesc.NewFile(&fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().ByName("M")
}

// TestUnmarshalJSON holds the HTTP listener's JSON decoding to its
// contract: unknown fields are ignored at every depth (not inside a
// Struct, where every key is data), and anything else protojson refuses
// (unknown enum names, bad JSON, duplicates) is still refused, with
// protojson's positions pointing into the request as sent.
func TestUnmarshalJSON(t *testing.T) {
	md := codecTestMessage(t)
	for _, tc := range []struct {
		name string
		in   string
		want string // the same message without the unknown fields; "" for an error
		err  string // what the error names
	}{
		{name: "known only", in: `{"name":"a","color":"COLOR_RED"}`, want: `{"name":"a","color":"COLOR_RED"}`},
		{name: "unknown first", in: `{"future":1,"name":"a"}`, want: `{"name":"a"}`},
		{name: "unknown last", in: `{"name":"a", "future": [1, {"x": 2}] }`, want: `{"name":"a"}`},
		{name: "unknown between", in: "{\n \"name\": \"a\",\n \"f1\": null, \"f2\": \"}\" ,\n \"color\": \"COLOR_RED\"\n}", want: `{"name":"a","color":"COLOR_RED"}`},
		{name: "unknown only", in: `{ "f1": 1, "f2": 2 }`, want: `{}`},
		{name: "escaped key", in: `{"a\"b,": 1, "name": "a"}`, want: `{"name":"a"}`},
		{name: "proto name", in: `{"by_key": {"k": {"name": "v", "future": true}}, "future": 1}`, want: `{"byKey": {"k": {"name": "v"}}}`},
		{name: "nested", in: `{"inner": {"future": 1, "inner": {"name": "x", "future": {}}}}`, want: `{"inner": {"inner": {"name": "x"}}}`},
		{name: "list", in: `{"items": [{"name": "x", "f": 1}, {"f": 2}, {}]}`, want: `{"items": [{"name": "x"}, {}, {}]}`},
		{name: "map", in: `{"byKey": {"a": {"f": 1}, "b": {"name": "y"}}, "labels": {"f": "kept: a key"}}`, want: `{"byKey": {"a": {}, "b": {"name": "y"}}, "labels": {"f": "kept: a key"}}`},
		{name: "struct", in: `{"meta": {"future": {"any": ["thing"]}}, "f": 1}`, want: `{"meta": {"future": {"any": ["thing"]}}}`},
		{name: "null message", in: `{"inner": null, "items": null, "f": 1}`, want: `{}`},
		{name: "enum number", in: `{"color": 7}`, want: `{"color": 7}`},
		{name: "unknown enum", in: `{"color": "COLOR_REDD"}`, err: `color: "COLOR_REDD"`},
		{name: "unknown enum in list", in: `{"colors": ["COLOR_RED", "COLOR_BLUE"]}`, err: `colors: "COLOR_BLUE"`},
		{name: "unknown enum after unknown field", in: `{"future": 1, "inner": {"f": 2, "color": "COLOR_REDD"}}`, err: `color: "COLOR_REDD"`},
		{name: "not JSON", in: `{"name": "a"`, err: "unexpected EOF"},
		{name: "not JSON after unknown field", in: `{"future": 1, "name": }`, err: "unexpected token }"},
		{name: "wrong type after unknown field", in: `{"future": 1, "inner": 3}`, err: "(line 1:24): unexpected token 3"},
		{name: "duplicate after unknown field", in: `{"name": "a", "future": 1, "name": "b"}`, err: `duplicate field "name"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := dynamicpb.NewMessage(md)
			err := unmarshalJSON(protojson.UnmarshalOptions{}, []byte(tc.in), got)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := dynamicpb.NewMessage(md)
			if err := protojson.Unmarshal([]byte(tc.want), want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("error position", func(t *testing.T) {
		in := "{\"future\": 1,\n  \"f\": [\"COLOR_REDD\"], \"color\": \"COLOR_REDD\"}"
		err := unmarshalJSON(protojson.UnmarshalOptions{}, []byte(in), dynamicpb.NewMessage(md))
		col := strings.LastIndex(in, `"COLOR_REDD"`) - strings.Index(in, "\n")
		if want := "(line 2:" + strconv.Itoa(col) + ")"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want the position of the enum name as sent, %s", err, want)
		}
	})
}

// httpEnv is an mcpd server (no upstreams) serving its HTTP listener on a
// loopback port.
type httpEnv struct {
	base   string
	bus    *events.Bus
	client *http.Client
}

func newHTTPEnv(t *testing.T) *httpEnv {
	t.Helper()
	return newHTTPEnvWith(t, nil)
}

// newHTTPEnvWith is newHTTPEnv with the listener's options.
func newHTTPEnvWith(t *testing.T, opts *HTTPOptions) *httpEnv {
	t.Helper()
	bus := events.NewBus(nil)
	mgr := mcpclient.NewManager(&mcpclient.Options{Events: bus, Requests: mcpclient.NewBroker(nil)})
	srv := New(mgr, NewHealth(), nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeHTTP(lis, opts) }()
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("ServeHTTP: %v", err)
		}
		_ = lis.Close()
		if err := mgr.Close(ctx); err != nil {
			t.Errorf("manager close: %v", err)
		}
	})
	return &httpEnv{base: "http://" + lis.Addr().String() + "/mcpd.v1.MCPHub/", bus: bus, client: client}
}

// post makes a unary call with body as sent, as curl does, and returns
// the HTTP status and the response (or Connect error) JSON.
func (e *httpEnv) post(t *testing.T, method, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, e.base+method, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s answered %s, not JSON: %v", method, resp.Status, err)
	}
	return resp.StatusCode, out
}

// subscribe opens Subscribe over the Connect protocol with JSON, the
// request as sent.
func (e *httpEnv) subscribe(t *testing.T, body string) *connect.ServerStreamForClient[mcpdv1.SubscribeResponse] {
	t.Helper()
	client := connect.NewClient[string, mcpdv1.SubscribeResponse](e.client, e.base+"Subscribe", connect.WithCodec(rawJSON{}))
	stream, err := client.CallServerStream(testContext(t), connect.NewRequest(&body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stream.Close() })
	return stream
}

// rawJSON is connect-go's JSON codec for a request given as its JSON
// text, which may hold what no generated message can: unknown fields,
// unknown enum names, JSON that does not parse.
type rawJSON struct{}

func (rawJSON) Name() string                    { return "json" }
func (rawJSON) Marshal(v any) ([]byte, error)   { return []byte(*v.(*string)), nil }
func (rawJSON) Unmarshal(b []byte, v any) error { return protojson.Unmarshal(b, v.(proto.Message)) }

// TestHTTPUnaryJSON checks, on the direct unary path, that an unknown
// field is ignored and an unknown enum name refused, as on a stream.
func TestHTTPUnaryJSON(t *testing.T) {
	e := newHTTPEnv(t)
	t.Run("unknown field", func(t *testing.T) {
		if code, out := e.post(t, "ListServers", `{"futureOption": {"x": [1]}}`); code != http.StatusOK {
			t.Errorf("got %d %v, want 200: an unknown field is ignored", code, out)
		}
	})
	t.Run("unknown enum name", func(t *testing.T) {
		code, out := e.post(t, "SetLogLevel", `{"server": "demo", "level": "LOG_LEVEL_DEBUGG"}`)
		msg, _ := out["message"].(string)
		if code != http.StatusBadRequest || out["code"] != "invalid_argument" ||
			!strings.Contains(msg, `level: "LOG_LEVEL_DEBUGG"`) {
			t.Errorf("got %d %v, want 400 invalid_argument naming the field and value", code, out)
		}
	})
}

// TestHTTPStreamJSON checks the same on a server stream, which goes
// through the transcoder, and that a request that does not parse is
// INVALID_ARGUMENT there too, as on the unary path.
func TestHTTPStreamJSON(t *testing.T) {
	e := newHTTPEnv(t)
	// Every stream below resumes from the start: one that opens when it
	// should not gets this event at once.
	e.bus.Publish(events.Event{Server: "x", Kind: events.KindServerState, State: "ready"})
	t.Run("unknown field", func(t *testing.T) {
		prompts := e.bus.Publish(events.Event{Server: "x", Kind: events.KindPromptsChanged})
		tools := e.bus.Publish(events.Event{Server: "x", Kind: events.KindToolsChanged})
		stream := e.subscribe(t, fmt.Sprintf(`{"kinds": ["EVENT_KIND_TOOLS_CHANGED"], "afterSequence": "%d", "futureOption": {"x": 1}}`, prompts-1))
		if !stream.Receive() {
			t.Fatalf("got %v, want an event: an unknown field is ignored", stream.Err())
		}
		if ev := stream.Msg().GetEvent(); ev.GetSequence() != tools || ev.GetToolsChanged() == nil {
			t.Errorf("got %v, want the tools_changed event %d alone (kinds applies)", ev, tools)
		}
	})
	for _, tc := range []struct{ name, body, want string }{
		{"unknown enum name", `{"kinds": ["EVENT_KIND_SERVER_STATES"], "afterSequence": "0"}`, `kinds: "EVENT_KIND_SERVER_STATES"`},
		{"does not parse", `{"kinds": [`, "request does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := e.subscribe(t, tc.body)
			if stream.Receive() {
				t.Fatalf("got %v, want an error", stream.Msg())
			}
			if err := stream.Err(); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want invalid_argument naming %s", err, tc.want)
			}
		})
	}
}
