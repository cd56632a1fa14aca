package demoserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image/png"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every test context; the tests normally take milliseconds.
const testTimeout = 15 * time.Second

// Protocol versions of the two eras.
const (
	modernVersion = "2026-07-28"
	legacyVersion = "2025-11-25"
)

// eras lists the client configurations under test: the default client, which
// negotiates 2026-07-28 through server/discover, and one forced to the legacy
// initialize handshake.
var eras = []struct {
	name      string
	requested string // ClientSessionOptions.ProtocolVersion
	want      string // negotiated version
}{
	{name: "modern", requested: "", want: modernVersion},
	{name: "legacy", requested: legacyVersion, want: legacyVersion},
}

// events collects what the server sends the client. SDK notification
// handlers must not block, so every send is non-blocking.
type events struct {
	mu       sync.Mutex
	progress map[string]chan *mcp.ProgressNotificationParams // by progress token
	logs     chan *mcp.LoggingMessageParams
	updates  chan string
}

func newEvents() *events {
	return &events{
		progress: make(map[string]chan *mcp.ProgressNotificationParams),
		logs:     make(chan *mcp.LoggingMessageParams, 64),
		updates:  make(chan string, 1),
	}
}

func (e *events) progressFor(token string) chan *mcp.ProgressNotificationParams {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch, ok := e.progress[token]
	if !ok {
		ch = make(chan *mcp.ProgressNotificationParams, 64)
		e.progress[token] = ch
	}
	return ch
}

func (e *events) clientOptions() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case e.progressFor(fmt.Sprint(req.Params.ProgressToken)) <- req.Params:
			default:
			}
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			select {
			case e.logs <- req.Params:
			default:
			}
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case e.updates <- req.Params.URI:
			default:
			}
		},
	}
}

// signalWriter is a zerolog writer that closes fired once a line contains want.
type signalWriter struct {
	want  string
	once  sync.Once
	fired chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(w.want)) {
		w.once.Do(func() { close(w.fired) })
	}
	return len(p), nil
}

type fixture struct {
	srv       *Server
	cs        *mcp.ClientSession
	ev        *events
	cancelled *signalWriter // fires when the server logs a cancelled tool
}

// connect starts a demo server with Run over an in-memory transport and
// connects a client asking for version requested ("" for the default).
// Cleanup closes the client and checks that Run returns.
func connect(t *testing.T, ctx context.Context, requested string) *fixture {
	t.Helper()
	f := &fixture{
		ev:        newEvents(),
		cancelled: &signalWriter{want: "demo tool cancelled", fired: make(chan struct{})},
	}
	f.srv = New(&Options{
		Logger:       zerolog.New(f.cancelled).Level(zerolog.DebugLevel),
		TickInterval: 20 * time.Millisecond,
	})
	st, ct := mcp.NewInMemoryTransports()
	// Run outlives the test function's ctx: t.Cleanup runs after its defers.
	runCtx, cancelRun := context.WithTimeout(context.Background(), testTimeout)
	runErr := make(chan error, 1)
	go func() { runErr <- f.srv.Run(runCtx, st) }()

	client := mcp.NewClient(&mcp.Implementation{Name: "demoserver-test", Version: "0"}, f.ev.clientOptions())
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: requested})
	if err != nil {
		cancelRun()
		<-runErr
		t.Fatalf("Connect: %v", err)
	}
	f.cs = cs
	t.Cleanup(func() {
		defer cancelRun()
		if err := cs.Close(); err != nil {
			t.Errorf("ClientSession.Close: %v", err)
		}
		select {
		case err := <-runErr:
			if err != nil {
				t.Errorf("Run after client disconnect: got %v, want nil", err)
			}
		case <-runCtx.Done():
			t.Errorf("Run did not return after the client disconnected: %v", runCtx.Err())
		}
	})
	return f
}

func TestServer(t *testing.T) {
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			f := connect(t, ctx, era.requested)

			t.Run("initialize", func(t *testing.T) { testInitialize(t, f, era.want) })
			t.Run("list tools", func(t *testing.T) { testListTools(ctx, t, f) })
			t.Run("call tools", func(t *testing.T) { testCallTools(ctx, t, f) })
			t.Run("bad arguments", func(t *testing.T) { testBadArguments(ctx, t, f) })
			t.Run("slow progress", func(t *testing.T) { testSlowProgress(ctx, t, f, era.want) })
			t.Run("slow cancelled", func(t *testing.T) { testSlowCancelled(ctx, t, f) })
			t.Run("resources", func(t *testing.T) { testResources(ctx, t, f) })
			t.Run("prompt", func(t *testing.T) { testPrompt(ctx, t, f) })
			t.Run("complete", func(t *testing.T) { testComplete(ctx, t, f) })
			t.Run("subscribe clock", func(t *testing.T) { testSubscribe(ctx, t, f, era.want) })
		})
	}
}

func testInitialize(t *testing.T, f *fixture, wantVersion string) {
	res := f.cs.InitializeResult()
	if res == nil {
		t.Fatal("InitializeResult: got nil")
	}
	if res.ProtocolVersion != wantVersion {
		t.Errorf("protocol version: got %q, want %q", res.ProtocolVersion, wantVersion)
	}
	if res.ServerInfo == nil || res.ServerInfo.Name != "mcpd-demo" || res.ServerInfo.Version != "1.0.0" {
		t.Errorf("server info: got %+v, want mcpd-demo 1.0.0", res.ServerInfo)
	}
	if res.Instructions == "" {
		t.Error("instructions: got empty, want text")
	}
	caps := res.Capabilities
	if caps == nil || caps.Tools == nil || caps.Prompts == nil || caps.Resources == nil || !caps.Resources.Subscribe || caps.Completions == nil || caps.Logging == nil {
		t.Errorf("capabilities: got %+v, want tools, prompts, resources with subscribe, completions, logging", caps)
	}
}

func testListTools(ctx context.Context, t *testing.T, f *fixture) {
	res, err := f.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" {
			t.Errorf("tool %q: got empty description", tool.Name)
		}
		schema, ok := tool.InputSchema.(map[string]any)
		if !ok || schema["type"] != "object" || schema["additionalProperties"] != false {
			t.Errorf("tool %q input schema: got %v, want a closed object schema", tool.Name, tool.InputSchema)
		}
	}
	sort.Strings(names)
	want := []string{"add", "audio", "echo", "fail", "image", "resource_link", "slow", "weather"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tool names (-want +got):\n%s", diff)
	}
	echo := findTool(t, res.Tools, "echo")
	if got := echo.InputSchema.(map[string]any)["required"]; !cmp.Equal(got, []any{"message"}) {
		t.Errorf("echo required: got %v, want [message]", got)
	}
	if findTool(t, res.Tools, "weather").OutputSchema == nil {
		t.Error("weather output schema: got nil")
	}
}

func findTool(t *testing.T, tools []*mcp.Tool, name string) *mcp.Tool {
	t.Helper()
	i := slices.IndexFunc(tools, func(tool *mcp.Tool) bool { return tool.Name == name })
	if i < 0 {
		t.Fatalf("tool %q not listed", name)
	}
	return tools[i]
}

func testCallTools(ctx context.Context, t *testing.T, f *fixture) {
	list, err := f.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	weatherSchema, _ := findTool(t, list.Tools, "weather").OutputSchema.(map[string]any)

	tests := []struct {
		tool  string
		args  map[string]any
		check func(t *testing.T, res *mcp.CallToolResult)
	}{
		{"echo", map[string]any{"message": "hello, world"}, func(t *testing.T, res *mcp.CallToolResult) {
			if got := onlyText(t, res); got != "hello, world" {
				t.Errorf("text: got %q, want %q", got, "hello, world")
			}
		}},
		{"add", map[string]any{"a": 1.5, "b": 2}, func(t *testing.T, res *mcp.CallToolResult) {
			if got := onlyText(t, res); got != "3.5" {
				t.Errorf("text: got %q, want %q", got, "3.5")
			}
			if diff := cmp.Diff(map[string]any{"sum": 3.5}, res.StructuredContent); diff != "" {
				t.Errorf("structured content (-want +got):\n%s", diff)
			}
		}},
		{"fail", map[string]any{"message": "boom"}, func(t *testing.T, res *mcp.CallToolResult) {
			if !res.IsError {
				t.Error("IsError: got false, want true")
			}
			if got := onlyText(t, res); got != "boom" {
				t.Errorf("text: got %q, want %q", got, "boom")
			}
		}},
		{"fail", nil, func(t *testing.T, res *mcp.CallToolResult) {
			if !res.IsError || onlyText(t, res) == "" {
				t.Errorf("got IsError=%v with content %v, want an error with default text", res.IsError, res.Content)
			}
		}},
		{"image", nil, func(t *testing.T, res *mcp.CallToolResult) {
			img, ok := onlyContent(t, res).(*mcp.ImageContent)
			if !ok {
				t.Fatalf("content: got %T, want *mcp.ImageContent", res.Content[0])
			}
			if img.MIMEType != "image/png" {
				t.Errorf("mime type: got %q, want image/png", img.MIMEType)
			}
			decoded, err := png.Decode(bytes.NewReader(img.Data))
			if err != nil {
				t.Fatalf("decode PNG: %v", err)
			}
			if b := decoded.Bounds(); b.Dx() != 8 || b.Dy() != 8 {
				t.Errorf("PNG size: got %dx%d, want 8x8", b.Dx(), b.Dy())
			}
		}},
		{"audio", nil, func(t *testing.T, res *mcp.CallToolResult) {
			audio, ok := onlyContent(t, res).(*mcp.AudioContent)
			if !ok {
				t.Fatalf("content: got %T, want *mcp.AudioContent", res.Content[0])
			}
			if audio.MIMEType != "audio/wav" {
				t.Errorf("mime type: got %q, want audio/wav", audio.MIMEType)
			}
			checkWAV(t, audio.Data)
		}},
		{"weather", map[string]any{"city": "Paris"}, func(t *testing.T, res *mcp.CallToolResult) {
			w := weatherFor("Paris")
			want := map[string]any{"city": "Paris", "temperature_c": w.TemperatureC, "conditions": w.Conditions}
			if diff := cmp.Diff(want, res.StructuredContent); diff != "" {
				t.Errorf("structured content (-want +got):\n%s", diff)
			}
			if err := matchSchema(weatherSchema, res.StructuredContent); err != nil {
				t.Errorf("structured content against output schema: %v", err)
			}
			if got := onlyText(t, res); !strings.Contains(got, "Paris") || !strings.Contains(got, w.Conditions) {
				t.Errorf("text: got %q, want city and conditions", got)
			}
		}},
		{"resource_link", nil, func(t *testing.T, res *mcp.CallToolResult) {
			if len(res.Content) != 2 {
				t.Fatalf("content: got %d blocks, want 2", len(res.Content))
			}
			link, ok := res.Content[0].(*mcp.ResourceLink)
			if !ok || link.URI != "demo://clock" {
				t.Errorf("content[0]: got %#v, want a resource link to demo://clock", res.Content[0])
			}
			emb, ok := res.Content[1].(*mcp.EmbeddedResource)
			if !ok || emb.Resource == nil || emb.Resource.URI != "demo://readme" || emb.Resource.Text == "" {
				t.Errorf("content[1]: got %#v, want embedded text of demo://readme", res.Content[1])
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			res, err := f.cs.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if tt.tool != "fail" && res.IsError {
				t.Fatalf("IsError: got true (%v), want false", res.Content)
			}
			tt.check(t, res)
		})
	}
}

func onlyContent(t *testing.T, res *mcp.CallToolResult) mcp.Content {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("content: got %d blocks, want 1", len(res.Content))
	}
	return res.Content[0]
}

func onlyText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	text, ok := onlyContent(t, res).(*mcp.TextContent)
	if !ok {
		t.Fatalf("content: got %T, want *mcp.TextContent", res.Content[0])
	}
	return text.Text
}

func checkWAV(t *testing.T, data []byte) {
	t.Helper()
	if len(data) < 44 || string(data[0:4]) != "RIFF" || string(data[8:16]) != "WAVEfmt " || string(data[36:40]) != "data" {
		t.Fatalf("WAV header: got % x, want RIFF/WAVE/fmt/data", data[:min(len(data), 44)])
	}
	if got, want := int(binary.LittleEndian.Uint32(data[40:44])), len(data)-44; got != want {
		t.Errorf("WAV data size: got %d, want %d", got, want)
	}
}

// matchSchema checks v against the subset of JSON Schema the demo server's
// output schemas use: an object with typed, required, closed properties.
func matchSchema(schema map[string]any, v any) error {
	obj, ok := v.(map[string]any)
	if !ok || schema["type"] != "object" {
		return fmt.Errorf("got %T for schema type %v, want an object", v, schema["type"])
	}
	props, _ := schema["properties"].(map[string]any)
	required, _ := schema["required"].([]any)
	for _, name := range required {
		if _, ok := obj[name.(string)]; !ok {
			return fmt.Errorf("missing required property %q", name)
		}
	}
	for name, val := range obj {
		prop, ok := props[name].(map[string]any)
		if !ok {
			return fmt.Errorf("property %q not in schema", name)
		}
		var typ string
		switch val.(type) {
		case string:
			typ = "string"
		case float64:
			typ = "number"
		default:
			typ = fmt.Sprintf("%T", val)
		}
		if prop["type"] != typ {
			return fmt.Errorf("property %q: got %s, want %v", name, typ, prop["type"])
		}
	}
	return nil
}

func testBadArguments(ctx context.Context, t *testing.T, f *fixture) {
	tests := []struct {
		name    string
		tool    string
		args    any
		wantMsg string // a substring of the error message
	}{
		{"echo wrong type", "echo", map[string]any{"message": 5}, `"message": must be a string`},
		{"echo null", "echo", map[string]any{"message": nil}, `"message": must be a string`},
		{"echo missing", "echo", map[string]any{}, `missing required argument "message"`},
		{"echo no arguments", "echo", nil, `missing required argument "message"`},
		{"echo unknown argument", "echo", map[string]any{"message": "x", "loud": true}, `unknown argument "loud"`},
		{"echo arguments not an object", "echo", []any{"x"}, "arguments must be an object"},
		{"add string", "add", map[string]any{"a": "1", "b": 2}, `"a": must be a number`},
		{"slow fraction", "slow", map[string]any{"steps": 1.5}, `"steps": must be an integer`},
		{"slow too few steps", "slow", map[string]any{"steps": 0}, `"steps": must be >= 1`},
		{"slow negative delay", "slow", map[string]any{"delay_ms": -1}, `"delay_ms": must be >= 0`},
		{"weather empty city", "weather", map[string]any{"city": ""}, `"city": must be at least 1 characters long`},
		{"image with argument", "image", map[string]any{"size": 2}, `unknown argument "size"`},
		{"unknown tool", "nope", nil, `unknown tool "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := f.cs.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
			if err == nil {
				t.Fatalf("CallTool: got result %+v, want an error", res)
			}
			var wireErr *jsonrpc.Error
			if !errors.As(err, &wireErr) {
				t.Fatalf("CallTool error: got %T %v, want *jsonrpc.Error", err, err)
			}
			if wireErr.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("code: got %d, want %d", wireErr.Code, jsonrpc.CodeInvalidParams)
			}
			if !strings.Contains(wireErr.Message, tt.wantMsg) {
				t.Errorf("message: got %q, want it to contain %q", wireErr.Message, tt.wantMsg)
			}
		})
	}
}

func testSlowProgress(ctx context.Context, t *testing.T, f *fixture, version string) {
	// Log messages are sent only once the client asks for a level: through
	// logging/setLevel in the legacy era, per request from 2026-07-28.
	meta := mcp.Meta{}
	if version == legacyVersion {
		if err := f.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatalf("SetLoggingLevel: %v", err)
		}
	} else {
		meta[mcp.MetaKeyLogLevel] = "info"
	}
	const token = "progress-slow"
	params := &mcp.CallToolParams{Meta: meta, Name: "slow", Arguments: map[string]any{"steps": 3, "delay_ms": 1}}
	params.SetProgressToken(token)
	res, err := f.cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if got := onlyText(t, res); got != "done after 3 steps" {
		t.Errorf("text: got %q, want %q", got, "done after 3 steps")
	}

	progress := f.ev.progressFor(token)
	for i := 1; i <= 3; i++ {
		want := &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d of 3", i)}
		select {
		case got := <-progress:
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("progress %d (-want +got):\n%s", i, diff)
			}
		case <-ctx.Done():
			t.Fatalf("progress %d: none received: %v", i, ctx.Err())
		}
	}
	for i := 1; i <= 3; i++ {
		select {
		case got := <-f.ev.logs:
			if want := fmt.Sprintf("slow: step %d of 3", i); got.Data != want || got.Level != "info" {
				t.Errorf("log %d: got %s %v, want info %q", i, got.Level, got.Data, want)
			}
		case <-ctx.Done():
			t.Fatalf("log %d: none received: %v", i, ctx.Err())
		}
	}
}

func testSlowCancelled(ctx context.Context, t *testing.T, f *fixture) {
	const token = "progress-cancel"
	callCtx, cancelCall := context.WithCancel(ctx)
	defer cancelCall()
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 1000, "delay_ms": 20}}
	params.SetProgressToken(token)
	callErr := make(chan error, 1)
	go func() {
		_, err := f.cs.CallTool(callCtx, params)
		callErr <- err
	}()

	// The first progress notification proves the handler is running.
	select {
	case <-f.ev.progressFor(token):
	case <-ctx.Done():
		t.Fatalf("no progress before cancelling: %v", ctx.Err())
	}
	cancelCall()
	select {
	case err := <-callErr:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("CallTool after cancel: got %v, want context.Canceled", err)
		}
	case <-ctx.Done():
		t.Fatalf("CallTool did not return after cancel: %v", ctx.Err())
	}
	// The server saw notifications/cancelled and stopped the tool, rather than
	// running the remaining steps.
	select {
	case <-f.cancelled.fired:
	case <-ctx.Done():
		t.Fatalf("server did not stop the cancelled tool: %v", ctx.Err())
	}
}

func testResources(ctx context.Context, t *testing.T, f *fixture) {
	list, err := f.cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatalf("ListResources: %v", err)
	}
	var uris []string
	for _, r := range list.Resources {
		uris = append(uris, r.URI)
	}
	sort.Strings(uris)
	if diff := cmp.Diff([]string{"demo://clock", "demo://logo.png", "demo://readme"}, uris); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	templates, err := f.cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatalf("ListResourceTemplates: %v", err)
	}
	if len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "demo://greeting/{name}" {
		t.Errorf("templates: got %+v, want demo://greeting/{name}", templates.ResourceTemplates)
	}

	tests := []struct {
		uri      string
		wantMIME string
		check    func(t *testing.T, c *mcp.ResourceContents)
	}{
		{"demo://clock", "text/plain", func(t *testing.T, c *mcp.ResourceContents) {
			if _, err := time.Parse(time.RFC3339Nano, c.Text); err != nil {
				t.Errorf("clock text %q: %v", c.Text, err)
			}
		}},
		{"demo://readme", "text/markdown", func(t *testing.T, c *mcp.ResourceContents) {
			if !strings.HasPrefix(c.Text, "# mcpd demo server") {
				t.Errorf("readme: got %q, want a markdown title", c.Text)
			}
		}},
		{"demo://logo.png", "image/png", func(t *testing.T, c *mcp.ResourceContents) {
			if c.Text != "" {
				t.Errorf("text: got %q, want empty for a blob", c.Text)
			}
			if _, err := png.Decode(bytes.NewReader(c.Blob)); err != nil {
				t.Errorf("decode logo: %v", err)
			}
		}},
		{"demo://greeting/Ada", "text/plain", func(t *testing.T, c *mcp.ResourceContents) {
			if c.Text != "Hello, Ada!" {
				t.Errorf("greeting: got %q, want %q", c.Text, "Hello, Ada!")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			res, err := f.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: tt.uri})
			if err != nil {
				t.Fatalf("ReadResource: %v", err)
			}
			if len(res.Contents) != 1 {
				t.Fatalf("contents: got %d, want 1", len(res.Contents))
			}
			c := res.Contents[0]
			if c.URI != tt.uri || c.MIMEType != tt.wantMIME {
				t.Errorf("contents: got %s (%s), want %s (%s)", c.URI, c.MIMEType, tt.uri, tt.wantMIME)
			}
			tt.check(t, c)
		})
	}
	t.Run("unknown", func(t *testing.T) {
		if _, err := f.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://nope"}); err == nil {
			t.Error("ReadResource demo://nope: got nil error, want not found")
		}
	})
}

func testPrompt(ctx context.Context, t *testing.T, f *fixture) {
	list, err := f.cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatalf("ListPrompts: %v", err)
	}
	if len(list.Prompts) != 1 || list.Prompts[0].Name != "greet" {
		t.Fatalf("prompts: got %+v, want greet", list.Prompts)
	}
	var args []string
	for _, a := range list.Prompts[0].Arguments {
		args = append(args, fmt.Sprintf("%s required=%v", a.Name, a.Required))
	}
	if diff := cmp.Diff([]string{"name required=true", "style required=false"}, args); diff != "" {
		t.Errorf("greet arguments (-want +got):\n%s", diff)
	}

	res, err := f.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "Ada", "style": "pirate"}})
	if err != nil {
		t.Fatalf("GetPrompt: %v", err)
	}
	if len(res.Messages) != 1 || res.Messages[0].Role != "user" {
		t.Fatalf("messages: got %+v, want one user message", res.Messages)
	}
	text, ok := res.Messages[0].Content.(*mcp.TextContent)
	if !ok || !strings.Contains(text.Text, "Ada") || !strings.Contains(text.Text, "pirate") {
		t.Errorf("message: got %#v, want text naming Ada and pirate", res.Messages[0].Content)
	}

	for _, bad := range []map[string]string{{"style": "formal"}, {"name": "Ada", "style": "shouty"}} {
		_, err := f.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: bad})
		var wireErr *jsonrpc.Error
		if !errors.As(err, &wireErr) || wireErr.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("GetPrompt %v: got %v, want code %d", bad, err, jsonrpc.CodeInvalidParams)
		}
	}
}

func testComplete(ctx context.Context, t *testing.T, f *fixture) {
	prompt := &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"}
	template := &mcp.CompleteReference{Type: "ref/resource", URI: "demo://greeting/{name}"}
	tests := []struct {
		name  string
		ref   *mcp.CompleteReference
		arg   mcp.CompleteParamsArgument
		want  []string
		isErr bool
	}{
		{"style all", prompt, mcp.CompleteParamsArgument{Name: "style", Value: ""}, []string{"formal", "casual", "pirate"}, false},
		{"style prefix", prompt, mcp.CompleteParamsArgument{Name: "style", Value: "P"}, []string{"pirate"}, false},
		{"style none", prompt, mcp.CompleteParamsArgument{Name: "style", Value: "x"}, []string{}, false},
		{"prompt name", prompt, mcp.CompleteParamsArgument{Name: "name", Value: "gr"}, []string{"Grace"}, false},
		{"template name", template, mcp.CompleteParamsArgument{Name: "name", Value: "a"}, []string{"Ada", "Alan"}, false},
		{"unknown prompt", &mcp.CompleteReference{Type: "ref/prompt", Name: "nope"}, mcp.CompleteParamsArgument{Name: "x"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := f.cs.Complete(ctx, &mcp.CompleteParams{Ref: tt.ref, Argument: tt.arg})
			if tt.isErr {
				if err == nil {
					t.Fatalf("Complete: got %+v, want an error", res)
				}
				return
			}
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if diff := cmp.Diff(tt.want, res.Completion.Values); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
		})
	}
}

// testSubscribe subscribes to demo://clock (resources/subscribe in the legacy
// era, subscriptions/listen from 2026-07-28) and checks that updates arrive
// and that the clock changes between them.
func testSubscribe(ctx context.Context, t *testing.T, f *fixture, version string) {
	if err := f.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "demo://clock"}); err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	readClock := func() string {
		t.Helper()
		select {
		case uri := <-f.ev.updates:
			if uri != "demo://clock" {
				t.Fatalf("updated URI: got %q, want demo://clock", uri)
			}
		case <-ctx.Done():
			t.Fatalf("no resource update received: %v", ctx.Err())
		}
		res, err := f.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://clock"})
		if err != nil {
			t.Fatalf("ReadResource: %v", err)
		}
		return res.Contents[0].Text
	}
	first := readClock()
	// The clock stores the new time before it sends the update, so a read
	// can see a time whose update is still on its way: the next update may
	// then show that time again. Some later update shows a new one.
	for second := readClock(); second == first; second = readClock() {
		if ctx.Err() != nil {
			t.Fatalf("clock after updates: got %q until the end, want a new time", second)
		}
	}
	if err := f.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "demo://clock"}); err != nil {
		t.Errorf("Unsubscribe: %v", err)
	}
	if version == legacyVersion {
		// Only the legacy RPC reports a refused subscription synchronously;
		// subscriptions/listen runs in the background.
		if err := f.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "demo://nope"}); err == nil {
			t.Error("Subscribe demo://nope: got nil error, want not found")
		}
		// A resource of the template is as real as the fixed ones: it reads,
		// so it may be subscribed to (it never changes), and one that does
		// not read may not.
		if err := f.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "demo://greeting/Ada"}); err != nil {
			t.Errorf("Subscribe demo://greeting/Ada: %v, want it accepted as demo://readme is", err)
		}
		if err := f.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "demo://greeting/a/b"}); err == nil {
			t.Error("Subscribe demo://greeting/a/b: got nil error, want not found")
		}
	}
}

func TestRunStopsOnContextCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	srv := New(nil)
	st, ct := mcp.NewInMemoryTransports()
	runCtx, cancelRun := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(runCtx, st) }()

	client := mcp.NewClient(&mcp.Implementation{Name: "demoserver-test", Version: "0"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		cancelRun()
		<-runErr
		t.Fatalf("Connect: %v", err)
	}
	defer cs.Close()
	cancelRun()
	select {
	case err := <-runErr:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run: got %v, want context.Canceled", err)
		}
	case <-ctx.Done():
		t.Fatalf("Run did not return after cancel: %v", ctx.Err())
	}
	if err := srv.Close(); err != nil { // already closed by Run: idempotent
		t.Errorf("Close after Run: %v", err)
	}
}

func TestCloseIdempotent(t *testing.T) {
	srv := New(&Options{TickInterval: time.Millisecond})
	for i := range 2 {
		if err := srv.Close(); err != nil {
			t.Errorf("Close #%d: %v", i+1, err)
		}
	}
}

// BenchmarkEcho measures an in-process echo round trip in each era.
func BenchmarkEcho(b *testing.B) {
	for _, era := range eras {
		b.Run(era.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			srv := New(nil)
			defer srv.Close()
			st, ct := mcp.NewInMemoryTransports()
			ss, err := srv.MCP().Connect(ctx, st, nil)
			if err != nil {
				b.Fatalf("server Connect: %v", err)
			}
			defer ss.Wait()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).
				Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: era.requested})
			if err != nil {
				b.Fatalf("client Connect: %v", err)
			}
			defer cs.Close()
			params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "ping"}}
			for b.Loop() {
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatalf("CallTool: %v", err)
				}
			}
		})
	}
}
