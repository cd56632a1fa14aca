package transport

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodeCases are wire lines whose decoding must match the SDK's.
var decodeCases = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`,
	`{"jsonrpc":"2.0","id":"abc","method":"ping"}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`,
	`{"jsonrpc":"2.0","method":"","params":{}}`,
	`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"x"}]}}`,
	`{"jsonrpc":"2.0","id":7,"result":null}`,
	`{"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"bad","data":{"k":1}}}`,
	`{"jsonrpc":"2.0","id":2.0,"result":{}}`,
	`{"jsonrpc":"2.0","result":{}}`,
	`{"jsonrpc":"1.0","id":1,"method":"m"}`,
	`{"id":1,"method":"m"}`,
	`{"jsonrpc":"2.0","id":true,"method":"m"}`,
	`{"jsonrpc":"2.0","id":null,"method":"m"}`,
	`{"jsonrpc":"2.0","id":1,"METHOD":"m"}`,
	`{"jsonrpc":"2.0","id":1,"method":5}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","extra":{"a":[1,{"b":2}]}}`,
	`{"jsonrpc":"2.0","id":1,"method":"\u00e9t\u00e9"}`,
	`{"jsonrpc":"2.0","id":1,"method":"m"`,
	`not json`,
	`{}`,
	`[]`,
}

// TestDecodeMessageMatchesSDK holds decodeMessage to the SDK's decoder:
// the same message, or an error from both.
func TestDecodeMessageMatchesSDK(t *testing.T) {
	for _, line := range decodeCases {
		checkDecodeMatches(t, []byte(line))
	}
	for _, line := range deepCases() {
		checkDecodeMatches(t, []byte(line))
	}
}

// deepCases nest values at the SDK's limit of 1000 and one past it, in
// each field, with brackets inside strings that do not count. A deep
// "id" also took quadratic time to parse before the depth was checked.
func deepCases() []string {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	var out []string
	for _, n := range []int{maxDepth - 1, maxDepth, 20000} {
		out = append(out,
			`{"jsonrpc":"2.0","id":1,"result":`+nest(n)+`}`,
			`{"jsonrpc":"2.0","id":1,"method":"m","params":`+nest(n)+`}`,
			`{"jsonrpc":"2.0","id":`+nest(n)+`,"result":{}}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":`+nest(n)+`}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"s":"`+strings.Repeat(`[\"`, n)+`"}}`,
		)
	}
	return out
}

func FuzzDecodeMessage(f *testing.F) {
	for _, line := range decodeCases {
		f.Add([]byte(line))
	}
	f.Fuzz(checkDecodeMatches)
}

func checkDecodeMatches(t *testing.T, line []byte) {
	want, wantErr := jsonrpc.DecodeMessage(line)
	got, gotErr := decodeMessage(line)
	if (wantErr != nil) != (gotErr != nil) {
		t.Fatalf("%s: got error %v, SDK error %v", line, gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b jsonrpc.ID) bool { return a == b })); diff != "" {
		t.Errorf("%s: decoded differently from the SDK (-sdk +ours):\n%s", line, diff)
	}
}
