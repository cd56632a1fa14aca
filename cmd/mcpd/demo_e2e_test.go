package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestDemoServer runs mcpd with its default config, which serves the
// built-in demo server as "demo", and checks what an agent sees.
func TestDemoServer(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	t.Run("ListServers", func(t *testing.T) {
		resp, err := d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{})
		if err != nil {
			t.Fatalf("ListServers: %v", err)
		}
		if len(resp.GetServers()) != 1 {
			t.Fatalf("got %d servers, want 1 (demo): %v", len(resp.GetServers()), resp.GetServers())
		}
		s := resp.GetServers()[0]
		for _, c := range []struct{ field, got, want string }{
			{"name", s.GetName(), "demo"},
			{"state", s.GetState().String(), mcpdv1.ServerState_SERVER_STATE_READY.String()},
			{"transport", s.GetTransport().String(), mcpdv1.Transport_TRANSPORT_STDIO.String()},
			{"protocol_version", s.GetProtocolVersion(), "2026-07-28"},
			{"server_info.name", s.GetServerInfo().GetName(), "mcpd-demo"},
			{"command", s.GetCommand(), mcpdBinary(t)},
			{"args", strings.Join(s.GetArgs(), " "), "demo-server"},
		} {
			if c.got != c.want {
				t.Errorf("server %s: got %q, want %q", c.field, c.got, c.want)
			}
		}
		if s.GetPid() <= 0 {
			t.Errorf("server pid: got %d, want > 0", s.GetPid())
		}
		if s.GetToolCount() != 8 {
			t.Errorf("tool_count: got %d, want 8", s.GetToolCount())
		}
		if s.GetCapabilities().GetFields()["tools"] == nil {
			t.Errorf("capabilities: got %v, want a tools capability", s.GetCapabilities())
		}
	})

	t.Run("Health", func(t *testing.T) {
		for _, svc := range []string{"", "mcpd.server/demo"} {
			resp, err := d.health.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			if err != nil {
				t.Fatalf("health check %q: %v", svc, err)
			}
			if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("health %q: got %v, want SERVING", svc, resp.GetStatus())
			}
		}
		_, err := d.health.Check(ctx, &healthpb.HealthCheckRequest{Service: "mcpd.server/nope"})
		wantCode(t, err, codes.NotFound)
		// List needs no credential either, so it names no server.
		list, err := d.health.List(ctx, &healthpb.HealthListRequest{})
		if err != nil {
			t.Fatalf("health List: %v", err)
		}
		if got := slices.Collect(maps.Keys(list.GetStatuses())); !slices.Equal(got, []string{""}) {
			t.Errorf("health List: got the services %q, want only mcpd's own (\"\")", got)
		}
	})

	t.Run("ListTools", func(t *testing.T) {
		resp, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "demo"})
		if err != nil {
			t.Fatalf("ListTools: %v", err)
		}
		var names []string
		for _, tool := range resp.GetTools() {
			names = append(names, tool.GetName())
			if tool.GetServer() != "demo" || "mcp__demo__"+tool.GetToolName() != tool.GetName() {
				t.Errorf("tool %q: got server %q tool_name %q, want demo and the unqualified name", tool.GetName(), tool.GetServer(), tool.GetToolName())
			}
			if tool.GetInputSchema().GetFields()["type"].GetStringValue() != "object" {
				t.Errorf("tool %q: input schema %v, want type object", tool.GetName(), tool.GetInputSchema())
			}
		}
		want := []string{"mcp__demo__add", "mcp__demo__audio", "mcp__demo__echo", "mcp__demo__fail",
			"mcp__demo__image", "mcp__demo__resource_link", "mcp__demo__slow", "mcp__demo__weather"}
		if !slices.Equal(names, want) {
			t.Errorf("tools: got %v, want %v", names, want)
		}
		// Without a server filter the same tools come back (demo is the only server).
		all, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{})
		if err != nil {
			t.Fatalf("ListTools (all): %v", err)
		}
		if len(all.GetTools()) != len(want) {
			t.Errorf("ListTools (all): got %d tools, want %d", len(all.GetTools()), len(want))
		}
		// Pages of 3 cover the list exactly once, in order.
		var paged []string
		token := ""
		for range 10 {
			page, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "demo", PageSize: 3, PageToken: token})
			if err != nil {
				t.Fatalf("ListTools page: %v", err)
			}
			for _, tool := range page.GetTools() {
				paged = append(paged, tool.GetName())
			}
			if token = page.GetNextPageToken(); token == "" {
				break
			}
		}
		if !slices.Equal(paged, want) {
			t.Errorf("paged tools: got %v, want %v", paged, want)
		}
		_, err = d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "nope"})
		wantCode(t, err, codes.NotFound)
	})

	t.Run("Echo", func(t *testing.T) {
		resp := d.mustCall(ctx, t, "mcp__demo__echo", map[string]any{"message": "hello, mcpd"})
		if got := text(resp); got != "hello, mcpd" || resp.GetIsError() {
			t.Errorf("echo: got %q (is_error %v), want %q", got, resp.GetIsError(), "hello, mcpd")
		}
	})

	// mcpd's HTTP/2 flow-control windows are fixed (1 MiB a stream, 4 MiB
	// a connection): a message larger than both still goes through, both
	// ways.
	t.Run("EchoLargerThanWindows", func(t *testing.T) {
		msg := strings.Repeat("0123456789abcdef", 6<<20/16)
		args, err := structpb.NewStruct(map[string]any{"message": msg})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := d.hub.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__demo__echo", Arguments: args},
			grpc.MaxCallRecvMsgSize(16<<20))
		if err != nil {
			t.Fatalf("CallTool echo of %d bytes: %v", len(msg), err)
		}
		if got := text(resp); got != msg {
			t.Errorf("echo of %d bytes: got %d bytes back", len(msg), len(got))
		}
	})

	t.Run("Add", func(t *testing.T) {
		resp := d.mustCall(ctx, t, "mcp__demo__add", map[string]any{"a": 2, "b": 3.5})
		if got := text(resp); got != "5.5" {
			t.Errorf("add text: got %q, want %q", got, "5.5")
		}
		sum := resp.GetStructuredContent().GetStructValue().GetFields()["sum"]
		if sum == nil || sum.GetNumberValue() != 5.5 {
			t.Errorf("add structured_content: got %v, want {sum: 5.5}", resp.GetStructuredContent())
		}
	})

	t.Run("FailIsData", func(t *testing.T) {
		resp, err := d.call(ctx, t, "mcp__demo__fail", map[string]any{"message": "boom"}, 0)
		if err != nil {
			t.Fatalf("fail tool: got RPC error %v, want OK with is_error", err)
		}
		if !resp.GetIsError() || text(resp) != "boom" {
			t.Errorf("fail tool: got is_error %v text %q, want true and %q", resp.GetIsError(), text(resp), "boom")
		}
	})

	t.Run("Image", func(t *testing.T) {
		resp := d.mustCall(ctx, t, "mcp__demo__image", nil)
		img := firstMedia(resp, func(c *mcpdv1.Content) *mcpdv1.MediaContent { return c.GetImage() })
		if img == nil {
			t.Fatalf("image: got content %v, want an image block", resp.GetContent())
		}
		if img.GetMimeType() != "image/png" || !bytes.HasPrefix(img.GetData(), []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("image: got %s with %d bytes starting %q, want image/png with the PNG signature",
				img.GetMimeType(), len(img.GetData()), head(img.GetData()))
		}
	})

	t.Run("Audio", func(t *testing.T) {
		resp := d.mustCall(ctx, t, "mcp__demo__audio", nil)
		wav := firstMedia(resp, func(c *mcpdv1.Content) *mcpdv1.MediaContent { return c.GetAudio() })
		if wav == nil {
			t.Fatalf("audio: got content %v, want an audio block", resp.GetContent())
		}
		data := wav.GetData()
		if wav.GetMimeType() != "audio/wav" || len(data) < 12 || string(data[:4]) != "RIFF" || string(data[8:12]) != "WAVE" {
			t.Errorf("audio: got %s starting %q, want audio/wav RIFF....WAVE", wav.GetMimeType(), head(data))
		}
	})

	t.Run("Weather", func(t *testing.T) {
		resp := d.mustCall(ctx, t, "mcp__demo__weather", map[string]any{"city": "Lisbon"})
		got := resp.GetStructuredContent().GetStructValue().GetFields()
		if got["city"].GetStringValue() != "Lisbon" {
			t.Errorf("weather city: got %v, want Lisbon", got["city"])
		}
		if temp, ok := got["temperature_c"].GetKind().(*structpb.Value_NumberValue); !ok || temp.NumberValue < -10 || temp.NumberValue >= 35 {
			t.Errorf("weather temperature_c: got %v, want a number in [-10, 35)", got["temperature_c"])
		}
		conditions := []string{"sunny", "cloudy", "rainy", "windy", "foggy", "snowy"}
		if !slices.Contains(conditions, got["conditions"].GetStringValue()) {
			t.Errorf("weather conditions: got %v, want one of %v", got["conditions"], conditions)
		}
		if len(got) != 3 {
			t.Errorf("weather: got fields %v, want exactly city, temperature_c, conditions", got)
		}
		// The output schema mcpd lists names the same fields.
		tools, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "demo"})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools.GetTools() {
			if tool.GetToolName() != "weather" {
				continue
			}
			props := tool.GetOutputSchema().GetFields()["properties"].GetStructValue().GetFields()
			for name := range got {
				if props[name] == nil {
					t.Errorf("weather output schema: no property %q in %v", name, props)
				}
			}
		}
	})

	t.Run("ResourceLink", func(t *testing.T) {
		resp := d.mustCall(ctx, t, "mcp__demo__resource_link", nil)
		var link *mcpdv1.ResourceLink
		var embedded *mcpdv1.ResourceContents
		for _, c := range resp.GetContent() {
			if l := c.GetResourceLink(); l != nil {
				link = l
			}
			if r := c.GetResource(); r != nil {
				embedded = r
			}
		}
		if link == nil || link.GetUri() == "" || link.GetName() != "clock" {
			t.Errorf("resource_link: got link %v, want one named clock with a uri", link)
		}
		if embedded == nil || embedded.GetMimeType() != "text/markdown" || embedded.GetText() == "" {
			t.Errorf("resource_link: got embedded resource %v, want markdown text", embedded)
		}
	})

	t.Run("BadArguments", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			tool string
			args map[string]any
			want string // in the status message
		}{
			{"missing", "mcp__demo__echo", map[string]any{}, `missing required argument "message"`},
			{"wrong type", "mcp__demo__add", map[string]any{"a": "two", "b": 1}, `argument "a": must be a number`},
			{"unknown", "mcp__demo__echo", map[string]any{"message": "x", "extra": 1}, `unknown argument "extra"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := d.call(ctx, t, tc.tool, tc.args, 0)
				st := wantCode(t, err, codes.InvalidArgument)
				if !strings.Contains(st.Message(), tc.want) {
					t.Errorf("message: got %q, want it to contain %q", st.Message(), tc.want)
				}
				var info *errdetails.ErrorInfo
				for _, d := range st.Details() {
					if i, ok := d.(*errdetails.ErrorInfo); ok {
						info = i
					}
				}
				if info == nil || info.GetMetadata()["server"] != "demo" || info.GetMetadata()["jsonrpc_code"] != "-32602" {
					t.Errorf("error details: got %v, want ErrorInfo with server demo and jsonrpc_code -32602", info)
				}
			})
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			tool string
			want codes.Code
		}{
			{"unknown tool", "mcp__demo__nope", codes.NotFound},
			{"unknown server", "mcp__nope__echo", codes.NotFound},
			{"bare name no server has", "nope", codes.NotFound},
			{"empty name", "", codes.InvalidArgument},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := d.call(ctx, t, tc.tool, map[string]any{"message": "x"}, 0)
				wantCode(t, err, tc.want)
			})
		}
		_, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: "nope"})
		wantCode(t, err, codes.NotFound)
	})

	t.Run("Timeout", func(t *testing.T) {
		_, err := d.call(ctx, t, "mcp__demo__slow", map[string]any{"steps": 1, "delay_ms": 30000}, 100*time.Millisecond)
		wantCode(t, err, codes.DeadlineExceeded)
		// The server is still usable.
		resp := d.mustCall(ctx, t, "mcp__demo__echo", map[string]any{"message": "after timeout"})
		if text(resp) != "after timeout" {
			t.Errorf("echo after timeout: got %q", text(resp))
		}
	})

	t.Run("Cancel", func(t *testing.T) {
		callCtx, cancel := context.WithCancel(ctx)
		// The cancel only has to come after the call was sent; it is not
		// a timing assertion.
		timer := time.AfterFunc(300*time.Millisecond, cancel)
		defer timer.Stop()
		_, err := d.call(callCtx, t, "mcp__demo__slow", map[string]any{"steps": 1, "delay_ms": 30000}, 0)
		wantCode(t, err, codes.Canceled)
		// mcpd saw the cancellation too: its RPC log line says Canceled.
		poll(ctx, t, "mcpd logs the cancelled CallTool", func() (bool, error) {
			return findLogLine(d.log.String(), func(m map[string]any) bool {
				return m["grpc.method"] == "CallTool" && m["grpc.code"] == "Canceled"
			}), nil
		})
		resp := d.mustCall(ctx, t, "mcp__demo__echo", map[string]any{"message": "after cancel"})
		if text(resp) != "after cancel" {
			t.Errorf("echo after cancel: got %q", text(resp))
		}
	})

	t.Run("Stream", func(t *testing.T) {
		// Progress and, once a log level is set, the server's log
		// messages reach the streamed call in the order the server sent
		// them, then the result.
		if _, err := d.hub.SetLogLevel(ctx, &mcpdv1.SetLogLevelRequest{Server: "demo", Level: mcpdv1.LogLevel_LOG_LEVEL_INFO}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, msg := range d.callStream(ctx, t, "mcp__demo__slow", map[string]any{"steps": 2, "delay_ms": 50}) {
			switch {
			case msg.GetProgress() != nil:
				got = append(got, "progress: "+msg.GetProgress().GetMessage())
			case msg.GetLog() != nil:
				got = append(got, "log: "+msg.GetLog().GetData().GetStringValue())
			case msg.GetResult() != nil:
				got = append(got, "result: "+text(msg.GetResult()))
			}
		}
		want := []string{
			"progress: step 1 of 2", "log: slow: step 1 of 2",
			"progress: step 2 of 2", "log: slow: step 2 of 2",
			"result: done after 2 steps",
		}
		if !slices.Equal(got, want) {
			t.Errorf("stream: got %q, want %q", got, want)
		}
	})

	t.Run("Reflection", func(t *testing.T) {
		stream, err := reflectionpb.NewServerReflectionClient(d.conn).ServerReflectionInfo(ctx)
		if err != nil {
			t.Fatalf("ServerReflectionInfo: %v", err)
		}
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
		}); err != nil {
			t.Fatalf("send: %v", err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		var services []string
		for _, s := range resp.GetListServicesResponse().GetService() {
			services = append(services, s.GetName())
		}
		for _, want := range []string{"mcpd.v1.MCPHub", "grpc.health.v1.Health"} {
			if !slices.Contains(services, want) {
				t.Errorf("reflection services: got %v, want %s among them", services, want)
			}
		}
		// The MCPHub descriptor itself is served, so grpcurl can describe it.
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "mcpd.v1.MCPHub"},
		}); err != nil {
			t.Fatalf("send: %v", err)
		}
		resp, err = stream.Recv()
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		if files := resp.GetFileDescriptorResponse().GetFileDescriptorProto(); len(files) == 0 {
			t.Errorf("file containing mcpd.v1.MCPHub: got %v, want descriptors", resp.GetMessageResponse())
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatalf("close send: %v", err)
		}
		if _, err := stream.Recv(); err != io.EOF {
			t.Errorf("after CloseSend: got %v, want EOF", err)
		}
	})
}

// findLogLine reports whether a JSON line of log satisfies match.
func findLogLine(log string, match func(map[string]any) bool) bool {
	for _, line := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && match(m) {
			return true
		}
	}
	return false
}

func firstMedia(resp *mcpdv1.CallToolResponse, get func(*mcpdv1.Content) *mcpdv1.MediaContent) *mcpdv1.MediaContent {
	for _, c := range resp.GetContent() {
		if m := get(c); m != nil {
			return m
		}
	}
	return nil
}

// head is the start of b, for messages.
func head(b []byte) []byte { return b[:min(len(b), 12)] }
