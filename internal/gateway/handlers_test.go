package gateway

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestResultFieldsCopied: the results the endpoint builds for a host are
// new values with every field of the server's result but its resultType
// (see resultForHost). The field lists fail this test when an SDK upgrade
// adds a field that the new values would drop.
func TestResultFieldsCopied(t *testing.T) {
	for _, tt := range []struct {
		name   string
		fields []string // every exported field, embedded ones by their own fields
		json   string   // a server's result with each of them set
		host   func(json string) (mcp.Result, error)
	}{
		{
			name:   "tools/call",
			fields: []string{"Meta", "Content", "StructuredContent", "IsError", "InputRequests", "RequestState"},
			json:   `{"_meta":{"k":"v"},"content":[{"type":"text","text":"t"}],"structuredContent":{"n":1},"isError":true,"inputRequests":{"k":{"method":"roots/list","params":{}}},"requestState":"s","resultType":"complete"}`,
			host: func(in string) (mcp.Result, error) {
				var res mcp.CallToolResult
				err := json.Unmarshal([]byte(in), &res)
				return resultForHost("s", &res), err
			},
		},
		{
			name:   "resources/read",
			fields: []string{"Meta", "TTLMs", "CacheScope", "Contents", "InputRequests", "RequestState"},
			json:   `{"_meta":{"k":"v"},"ttlMs":5,"cacheScope":"private","contents":[{"uri":"demo://r","text":"t"}],"inputRequests":{"k":{"method":"roots/list","params":{}}},"requestState":"s","resultType":"complete"}`,
			host: func(in string) (mcp.Result, error) {
				var res mcp.ReadResourceResult
				err := json.Unmarshal([]byte(in), &res)
				return readResult("s", &res, true), err
			},
		},
		{
			name:   "prompts/get",
			fields: []string{"Meta", "Description", "Messages", "InputRequests", "RequestState"},
			json:   `{"_meta":{"k":"v"},"description":"d","messages":[{"role":"user","content":{"type":"text","text":"t"}}],"inputRequests":{"k":{"method":"roots/list","params":{}}},"requestState":"s","resultType":"complete"}`,
			host: func(in string) (mcp.Result, error) {
				var res mcp.GetPromptResult
				err := json.Unmarshal([]byte(in), &res)
				return promptResult("s", &res), err
			},
		},
		{
			name:   "completion/complete",
			fields: []string{"ResultType", "Meta", "Completion"},
			json:   `{"_meta":{"k":"v"},"completion":{"values":["v"],"total":1,"hasMore":true},"resultType":"complete"}`,
			host: func(in string) (mcp.Result, error) {
				var res mcp.CompleteResult
				err := json.Unmarshal([]byte(in), &res)
				return completeResult(&res), err
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.host(tt.json)
			if err != nil {
				t.Fatal(err)
			}
			if got := exportedFields(reflect.TypeOf(out).Elem()); !slices.Equal(got, tt.fields) {
				t.Errorf("fields of %T: got %v, want %v: copy the new ones to the host's result", out, got, tt.fields)
			}
			data, err := json.Marshal(out)
			if err != nil {
				t.Fatal(err)
			}
			var got, want map[string]any
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.json), &want); err != nil {
				t.Fatal(err)
			}
			delete(want, "resultType")
			if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
				t.Errorf("the host's result: got %s, want the fields of %s but resultType", data, tt.json)
			}
		})
	}
}

func exportedFields(typ reflect.Type) []string {
	var out []string
	for f := range typ.Fields() {
		switch {
		case f.Anonymous && f.Type.Kind() == reflect.Struct:
			out = append(out, exportedFields(f.Type)...)
		case f.IsExported():
			out = append(out, f.Name)
		}
	}
	return out
}

// TestReadResultTyped: the endpoint answers resources/read itself, past
// the SDK's handler that would set resultType: a 2026-07-28 host gets it
// from readResultTyped ("input_required" makes a host answer the input
// requests), an initialize-era host does not.
func TestReadResultTyped(t *testing.T) {
	inputs := mcp.InputRequestMap{"k": &mcp.ListRootsParams{}}
	for _, tt := range []struct {
		name      string
		res       *mcp.ReadResourceResult
		stateless bool
		want      string // the resultType sent; "" none
	}{
		{"complete", &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "demo://r", Text: "t"}}}, true, "complete"},
		{"input required", &mcp.ReadResourceResult{InputRequests: inputs, RequestState: "s"}, true, "input_required"},
		{"initialize era", &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "demo://r", Text: "t"}}}, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := readResultTyped(tt.res, tt.stateless)
			data, err := json.Marshal(out)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				ResultType    string          `json:"resultType"`
				Contents      json.RawMessage `json:"contents"`
				InputRequests json.RawMessage `json:"inputRequests"`
				RequestState  string          `json:"requestState"`
			}
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatal(err)
			}
			if got.ResultType != tt.want {
				t.Errorf("resultType: got %q, want %q in %s", got.ResultType, tt.want, data)
			}
			if out.NeedsInput() != (tt.want == "input_required") {
				t.Errorf("NeedsInput: got %v for resultType %q", out.NeedsInput(), tt.want)
			}
			if (len(tt.res.Contents) > 0) != (string(got.Contents) != "null") || (tt.res.InputRequests != nil) != (got.InputRequests != nil) || got.RequestState != tt.res.RequestState {
				t.Errorf("fields lost: got %s", data)
			}
		})
	}
}
