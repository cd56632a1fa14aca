package server

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
)

// rawCodec sends a request's bytes as they are, whatever they hold.
type rawCodec struct{}

func (rawCodec) Name() string                  { return "proto" }
func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = bytes.Clone(b)
	return nil
}

// stringField is a message of one length-delimited field, as a string
// field is encoded.
func stringField(num protowire.Number, value string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), value)
}

// TestUndecodableRequests: a request that is no message of its type
// (bytes that are not protobuf, a string field that is not UTF-8, a
// message nested deeper than protobuf decodes) is the caller's error,
// INVALID_ARGUMENT, as on the HTTP listener, not INTERNAL, which says
// that mcpd has a bug. The refusal is logged and audited as any other.
// Health and reflection keep answering well-formed requests.
func TestUndecodableRequests(t *testing.T) {
	var log, audit syncBuffer
	e := newEnv(t, &envOptions{server: Options{
		Logger: zerolog.New(&log),
		Audit:  access.NewAuditor(zerolog.New(&audit), nil),
	}})
	ctx := testContext(t)
	deep, err := proto.Marshal(&mcpdv1.CallToolRequest{Name: "mcp__x__y", Arguments: nested(4000, structpb.NewNullValue())})
	if err != nil {
		t.Fatal(err)
	}
	promptArgs := protowire.AppendTag(nil, 3, protowire.BytesType) // arguments {"k": "\xff"}
	promptArgs = protowire.AppendBytes(promptArgs, append(stringField(1, "k"), stringField(2, "\xff")...))
	for _, tc := range []struct {
		name, method string
		req          []byte
	}{
		{"name not UTF-8", "/mcpd.v1.MCPHub/GetServer", stringField(1, "de\xffmo")},
		{"tool name not UTF-8", "/mcpd.v1.MCPHub/CallTool", stringField(1, "mcp__demo__\xc3")},
		{"query not UTF-8", "/mcpd.v1.MCPHub/SearchTools", stringField(1, "\xfe")},
		{"prompt argument not UTF-8", "/mcpd.v1.MCPHub/GetPrompt", promptArgs},
		{"not protobuf", "/mcpd.v1.MCPHub/ListServers", []byte{0xff, 0xff, 0xff, 0xff}},
		{"nested too deep", "/mcpd.v1.MCPHub/CallTool", deep},
		{"health, not protobuf", "/grpc.health.v1.Health/Check", []byte{0x0a, 0x05, 'a'}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp []byte
			err := e.conn.Invoke(ctx, tc.method, &tc.req, &resp, grpc.ForceCodec(rawCodec{}))
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "request does not parse") {
				t.Errorf("got %v, want INVALID_ARGUMENT: the request does not parse", err)
			}
		})
	}
	t.Run("stream", func(t *testing.T) {
		desc := &grpc.StreamDesc{ServerStreams: true}
		stream, err := e.conn.NewStream(ctx, desc, "/mcpd.v1.MCPHub/Subscribe", grpc.ForceCodec(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		req := stringField(1, "\xff") // servers: ["\xff"]
		if err := stream.SendMsg(&req); err != nil {
			t.Fatal(err)
		}
		_ = stream.CloseSend()
		var resp []byte
		if err := stream.RecvMsg(&resp); status.Code(err) != codes.InvalidArgument {
			t.Errorf("Subscribe: got %v, want INVALID_ARGUMENT", err)
		}
	})

	// Well-formed requests of every service still pass.
	if _, err := healthpb.NewHealthClient(e.conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health: %v", err)
	}
	if _, err := e.client.ListServers(ctx, &mcpdv1.ListServersRequest{}); err != nil {
		t.Errorf("ListServers: %v", err)
	}
	if _, err := e.client.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "demo"}); status.Code(err) != codes.NotFound {
		t.Errorf("GetServer of an unknown server: got %v, want NOT_FOUND", err)
	}

	// The log has a line for each refused MCPHub call, as for any failed
	// call; the audit trail one for each that acts (CallTool, GetPrompt).
	refused := map[string]int{}
	for _, l := range log.lines() {
		if l["message"] == "finished call" && l["grpc.code"] == "InvalidArgument" {
			refused[l["grpc.method"].(string)]++
		}
	}
	for method, want := range map[string]int{"GetServer": 1, "CallTool": 2, "SearchTools": 1, "GetPrompt": 1, "ListServers": 1, "Subscribe": 1} {
		if refused[method] != want {
			t.Errorf("log lines of refused %s calls: got %d, want %d (all: %v)", method, refused[method], want, refused)
		}
	}
	audited := map[string]int{}
	for _, l := range audit.lines() {
		if l["code"] == "InvalidArgument" {
			audited[l["method"].(string)]++
		}
	}
	if audited["CallTool"] != 2 || audited["GetPrompt"] != 1 || audited["GetServer"] != 0 {
		t.Errorf("audit lines of refused calls: got %v, want 2 CallTool, 1 GetPrompt, no GetServer (it does not act)", audited)
	}
	if n := e.srv.codec.held.Load(); n != 0 {
		t.Errorf("decoding errors held after the calls ended: %d, want 0", n)
	}
}

// TestUndecodableRequestWithoutCredentials: a request that does not decode
// is refused as such before it is authenticated, and leaves nothing held
// behind.
func TestUndecodableRequestWithoutCredentials(t *testing.T) {
	e := newEnv(t, &envOptions{server: Options{APIToken: "secret"}})
	req := stringField(1, "\xff")
	var resp []byte
	err := e.conn.Invoke(testContext(t), "/mcpd.v1.MCPHub/GetServer", &req, &resp, grpc.ForceCodec(rawCodec{}))
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("got %v, want INVALID_ARGUMENT", err)
	}
	_, err = e.client.GetServer(testContext(t), &mcpdv1.GetServerRequest{Name: "x"})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("a well-formed request without the token: got %v, want UNAUTHENTICATED", err)
	}
	if n := e.srv.codec.held.Load(); n != 0 {
		t.Errorf("decoding errors held after the call ended: %d, want 0", n)
	}
}
