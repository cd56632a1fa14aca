package mcpclient

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// Tools of the hand-made fake server whose results break the protocol.
var handMadeResults = map[string]string{
	// Its image data is not base64.
	"bad_image": `{"content":[{"type":"image","data":"%%% not base64","mimeType":"image/png"}]}`,
	// Its number fits no float64.
	"huge_number": `{"content":[{"type":"text","text":"x"}],"structuredContent":{"n":1e400}}`,
}

// handMadeLongName is a tool name over MaxToolNameLen.
var handMadeLongName = strings.Repeat("l", 5000)

// handMadeTools are the tools the hand-made fake lists, in order: three
// valid ones, echo listed twice, names no request can use and one off
// MCP's rule.
func handMadeTools() []any {
	tool := func(name, desc string) map[string]any {
		return map[string]any{"name": name, "description": desc, "inputSchema": map[string]any{"type": "object"}}
	}
	return []any{
		tool("echo", "the first echo"),
		tool("bad_image", ""),
		tool("huge_number", ""),
		tool("", "no name"),
		tool("sp ace", "a space"),
		tool("ctl\x01", "a control character"),
		tool(handMadeLongName, "too long"),
		tool("echo", "the second echo"),
	}
}

// serveHandMade is a server written by hand, line by line, that breaks
// the protocol in its answers: its tools/list has names MCP does not
// allow and a name twice, its tools bad_image and huge_number, its
// resource and its prompt answer results no MCP client can read. Its tool
// echo works. It answers only initialize (server/discover is an unknown
// method).
func serveHandMade() int {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Name            string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.ID == nil {
			continue // a notification
		}
		var result any
		switch msg.Method {
		case "initialize":
			result = map[string]any{
				"protocolVersion": msg.Params.ProtocolVersion,
				"capabilities":    map[string]any{"tools": map[string]any{}, "resources": map[string]any{}, "prompts": map[string]any{}},
				"serverInfo":      map[string]any{"name": "hand-made", "version": "0"},
			}
		case "tools/list":
			result = map[string]any{"tools": handMadeTools()}
		case "tools/call":
			if raw, ok := handMadeResults[msg.Params.Name]; ok {
				result = json.RawMessage(raw)
			} else {
				result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "echoed"}}}
			}
		case "resources/read":
			result = json.RawMessage(`{"contents":[{"uri":"test://bad","blob":"%%% not base64"}]}`)
		case "prompts/get":
			result = json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"x"}}],"_meta":{"n":1e400}}`)
		case "ping":
			result = map[string]any{}
		}
		reply := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
		if result != nil {
			reply["result"] = result
		} else {
			reply["error"] = map[string]any{"code": -32601, "message": "method not found: " + msg.Method}
		}
		out, _ := json.Marshal(reply)
		fmt.Printf("%s\n", out)
	}
	return 0
}

// TestMalformedResult: a result the server answered that mcpd cannot
// read (image data that is not base64, a number out of range) fails that
// request with ErrMalformedResult, not ErrUnavailable: the session is
// fine, the tool ran, and calling it again would run it again. The
// message names the server and says what is wrong, without Go's types.
func TestMalformedResult(t *testing.T) {
	ctx := testContext(t)
	m, _ := newTestManager(t)
	if st, err := m.Connect(ctx, fakeServer("f", "hand-made"), false); err != nil || st.State != StateReady {
		t.Fatalf("connect: %v, %v (%s)", err, st.State, st.LastError)
	}
	requests := map[string]func() error{
		"tools/call bad_image": func() error {
			_, err := m.CallTool(ctx, "mcp__f__bad_image", nil, CallOptions{})
			return err
		},
		"tools/call huge_number": func() error {
			_, err := m.CallTool(ctx, "mcp__f__huge_number", nil, CallOptions{})
			return err
		},
		"resources/read": func() error {
			_, err := m.ReadResource(ctx, "f", "test://bad")
			return err
		},
		"prompts/get": func() error {
			_, err := m.GetPrompt(ctx, "f", "p", nil)
			return err
		},
	}
	for name, request := range requests {
		t.Run(name, func(t *testing.T) {
			err := request()
			if !errors.Is(err, ErrMalformedResult) || errors.Is(err, ErrUnavailable) {
				t.Fatalf("got %v, want ErrMalformedResult and not ErrUnavailable", err)
			}
			var interrupted *CallInterruptedError
			if errors.As(err, &interrupted) {
				t.Errorf("got a CallInterruptedError %v: the session did not end", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, `server "f" answered a result mcpd cannot read`) {
				t.Errorf("message %q does not say the server's result cannot be read", msg)
			}
			for _, internal := range []string{"struct {", "mcp.", "Go struct", "interface {", "float64", "%%%"} {
				if strings.Contains(msg, internal) {
					t.Errorf("message %q shows %q", msg, internal)
				}
			}
		})
	}
	st, _ := m.Get("f")
	if st.State != StateReady || st.Restarts != 0 {
		t.Errorf("server state %v after %d restarts, want ready, none", st.State, st.Restarts)
	}
	res, err := m.CallTool(ctx, "mcp__f__echo", nil, CallOptions{})
	if err != nil || len(res.Content) != 1 {
		t.Errorf("echo after the malformed results: %v, %v", res, err)
	}
}

// TestToolNamesChecked: tools under names no request can use (empty, a
// control character, over MaxToolNameLen) are left out of the server's
// tools, and a name listed twice keeps its first tool; a name off MCP's
// rule (a space) is kept. The server's notes say which, naming no more
// than the start of a long name.
func TestToolNamesChecked(t *testing.T) {
	ctx := testContext(t)
	m, _ := newTestManager(t)
	st, err := m.Connect(ctx, fakeServer("f", "hand-made"), false)
	if err != nil || st.State != StateReady {
		t.Fatalf("connect: %v, %v (%s)", err, st.State, st.LastError)
	}
	tools, err := m.Tools("f")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
		if tool.Tool.Name == "echo" && tool.Tool.Description != "the first echo" {
			t.Errorf("echo: got %q, want the first one listed", tool.Tool.Description)
		}
	}
	want := []string{"mcp__f__bad_image", "mcp__f__echo", "mcp__f__huge_number", "mcp__f__sp ace"}
	if !slices.Equal(names, want) {
		t.Errorf("tools: got %q, want %q", names, want)
	}
	if st.ToolCount != len(want) {
		t.Errorf("tool count: got %d, want %d", st.ToolCount, len(want))
	}
	notes := strings.Join(st.Notes, "\n")
	for _, say := range []string{`tool skipped: tool name is empty`, `tool skipped: tool name "ctl\x01" holds a control character`,
		`tool skipped: tool name "llllllll`, `tool skipped: tool name "echo" is listed twice`,
		`tool name kept, but model APIs may refuse it: tool name "sp ace"`} {
		if !strings.Contains(notes, say) {
			t.Errorf("notes %q do not say %q", st.Notes, say)
		}
	}
	if strings.Contains(notes, handMadeLongName[:200]) {
		t.Errorf("notes hold the whole long name: %q", st.Notes)
	}
}
