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
			json:   `{"_meta":{"k":"v"},"content":[{"type":"text","text":"t"}],"structuredContent":{"n":1},"isError":true,"requestState":"s","resultType":"complete"}`,
			host: func(in string) (mcp.Result, error) {
				var res mcp.CallToolResult
				err := json.Unmarshal([]byte(in), &res)
				return resultForHost("s", &res), err
			},
		},
		{
			name:   "resources/read",
			fields: []string{"Meta", "TTLMs", "CacheScope", "Contents", "InputRequests", "RequestState"},
			json:   `{"_meta":{"k":"v"},"ttlMs":5,"cacheScope":"private","contents":[{"uri":"demo://r","text":"t"}],"requestState":"s","resultType":"complete"}`,
			host: func(in string) (mcp.Result, error) {
				var res mcp.ReadResourceResult
				err := json.Unmarshal([]byte(in), &res)
				return readResult("s", &res, true), err
			},
		},
		{
			name:   "prompts/get",
			fields: []string{"Meta", "Description", "Messages", "InputRequests", "RequestState"},
			json:   `{"_meta":{"k":"v"},"description":"d","messages":[{"role":"user","content":{"type":"text","text":"t"}}],"requestState":"s","resultType":"complete"}`,
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
