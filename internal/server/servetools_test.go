package server

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// declareTools opens ServeTools for server, declares tools and returns
// the error of mcpd's first answer (nil once it serves them).
func declareTools(t *testing.T, e *env, server string, tools ...*mcpdv1.ToolDefinition) error {
	t.Helper()
	stream, err := e.client.ServeTools(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stream.CloseSend() })
	decl := &mcpdv1.ToolServerDeclaration{Server: server, Tools: tools}
	if err := stream.Send(&mcpdv1.ServeToolsRequest{Message: &mcpdv1.ServeToolsRequest_Declare{Declare: decl}}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	return err
}

// TestServeToolsToolNames: an agent's tool names follow MCP's rule (1 to
// 128 of A-Z, a-z, 0-9, _, - and .): mcpd hands mcp__<server>__<name> to
// models, whose APIs refuse other names, and with them the whole list.
func TestServeToolsToolNames(t *testing.T) {
	e := newEnv(t, nil)
	if err := declareTools(t, e, "good", &mcpdv1.ToolDefinition{Name: "Get.item-2_b"}); err != nil {
		t.Fatalf("a name MCP allows: %v", err)
	}
	for i, name := range []string{"has space", "a/b", "émoji", strings.Repeat("x", 129)} {
		err := declareTools(t, e, "bad"+string(rune('a'+i)), &mcpdv1.ToolDefinition{Name: name})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "tool name") {
			t.Errorf("tool name %.20q: got %v, want INVALID_ARGUMENT about the tool name", name, err)
		}
	}
}

// TestServeToolsSchemas: input and output schemas must be JSON Schemas
// that resolve; they go on to every caller and model as they are.
func TestServeToolsSchemas(t *testing.T) {
	e := newEnv(t, nil)
	for i, tc := range []struct {
		input, output map[string]any
	}{
		{input: map[string]any{"type": "object", "required": "x"}}, // required is an array
		{input: map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"$ref": "#/$defs/missing"}}}},
		{output: map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"minimum": "one"}}}},
	} {
		def := &mcpdv1.ToolDefinition{Name: "t"}
		if tc.input != nil {
			def.InputSchema, _ = structpb.NewStruct(tc.input)
		}
		if tc.output != nil {
			def.OutputSchema, _ = structpb.NewStruct(tc.output)
		}
		err := declareTools(t, e, "schema"+string(rune('a'+i)), def)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "_schema") {
			t.Errorf("input %v, output %v: got %v, want INVALID_ARGUMENT naming the schema", tc.input, tc.output, err)
		}
	}
}
