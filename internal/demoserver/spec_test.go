package demoserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// specDir holds the MCP schema of every revision, mcp-schema-VERSION.json,
// as the specification publishes it.
const specDir = "testdata/spec"

// recorder is a transport that keeps the raw result of the latest
// response the client read, so that a test checks what went over the wire
// rather than what the SDK's client made of it.
type recorder struct {
	mcp.Transport
	mu     sync.Mutex
	result json.RawMessage
}

// last returns the raw result of the latest response.
func (r *recorder) last() json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.result
}

func (r *recorder) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Connection: c, r: r}, nil
}

type recordingConn struct {
	mcp.Connection
	r *recorder
}

func (c *recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil {
		c.r.mu.Lock()
		c.r.result = resp.Result
		c.r.mu.Unlock()
	}
	return msg, err
}

// TestResultsMatchSpec calls every tool, reads every resource, gets the
// prompt and completes its argument in every protocol revision the server
// speaks, and checks each raw result against that revision's schema: a
// client of 2024-11-05 knows no audio block, and one before 2025-06-18 no
// resource_link.
func TestResultsMatchSpec(t *testing.T) {
	for _, version := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(specDir, "mcp-schema-"+version+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var spec map[string]json.RawMessage
			if err := json.Unmarshal(raw, &spec); err != nil {
				t.Fatal(err)
			}
			defsKey := "$defs"
			if _, ok := spec[defsKey]; !ok {
				defsKey = "definitions"
			}
			resolved := map[string]*jsonschema.Resolved{} // by definition: resolving is most of the test's time
			validate := func(what, def string, result json.RawMessage) {
				t.Helper()
				rs := resolved[def]
				if rs == nil {
					root := map[string]json.RawMessage{defsKey: spec[defsKey], "$ref": json.RawMessage(`"#/` + defsKey + `/` + def + `"`)}
					if s, ok := spec["$schema"]; ok {
						root["$schema"] = s
					}
					b, _ := json.Marshal(root)
					var s jsonschema.Schema
					if err := json.Unmarshal(b, &s); err != nil {
						t.Fatalf("%s: schema: %v", def, err)
					}
					var err error
					if rs, err = s.Resolve(nil); err != nil {
						t.Fatalf("%s: resolve schema: %v", def, err)
					}
					resolved[def] = rs
				}
				var v any
				if err := json.Unmarshal(result, &v); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if err := rs.Validate(v); err != nil {
					t.Errorf("%s: the result is no %s of %s: %v\n%s", what, def, version, err, result)
				}
			}

			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			srv := New(&Options{TickInterval: time.Hour})
			t.Cleanup(func() { _ = srv.Close() })
			st, ct := mcp.NewInMemoryTransports()
			ss, err := srv.MCP().Connect(ctx, st, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ss.Close() })
			rec := &recorder{Transport: ct}
			requested := version
			if version == modernVersion {
				requested = ""
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "spec-test", Version: "0"}, nil).
				Connect(ctx, rec, &mcp.ClientSessionOptions{ProtocolVersion: requested})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %s, want %s", got, version)
			}

			for _, c := range []struct {
				tool string
				args map[string]any
			}{
				{toolEcho, map[string]any{"message": "hi"}},
				{toolAdd, map[string]any{"a": 1, "b": 2}},
				{toolSlow, map[string]any{"steps": 1, "delay_ms": 0}},
				{toolFail, nil},
				{toolImage, nil},
				{toolAudio, nil},
				{toolWeather, map[string]any{"city": "Lisbon"}},
				{toolResourceLink, nil},
			} {
				if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args}); err != nil {
					t.Errorf("call %s: %v", c.tool, err)
					continue
				}
				validate("tools/call "+c.tool, "CallToolResult", rec.last())
			}
			if _, err := cs.ListTools(ctx, nil); err != nil {
				t.Fatal(err)
			}
			validate("tools/list", "ListToolsResult", rec.last())
			if _, err := cs.ListResources(ctx, nil); err != nil {
				t.Fatal(err)
			}
			validate("resources/list", "ListResourcesResult", rec.last())
			if _, err := cs.ListResourceTemplates(ctx, nil); err != nil {
				t.Fatal(err)
			}
			validate("resources/templates/list", "ListResourceTemplatesResult", rec.last())
			for _, uri := range []string{clockURI, readmeURI, logoURI, greetingPrefix + "Ada"} {
				if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
					t.Fatalf("read %s: %v", uri, err)
				}
				validate("resources/read "+uri, "ReadResourceResult", rec.last())
			}
			if _, err := cs.ListPrompts(ctx, nil); err != nil {
				t.Fatal(err)
			}
			validate("prompts/list", "ListPromptsResult", rec.last())
			if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: promptGreet, Arguments: map[string]string{"name": "Ada", "style": "pirate"}}); err != nil {
				t.Fatal(err)
			}
			validate("prompts/get", "GetPromptResult", rec.last())
			if _, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: promptGreet},
				Argument: mcp.CompleteParamsArgument{Name: "style", Value: "f"}}); err != nil {
				t.Fatal(err)
			}
			validate("completion/complete", "CompleteResult", rec.last())
		})
	}
}
