package access

import (
	"errors"
	"strings"
	"testing"
)

// A resource grant must not cover a URI whose path steps out of it, also
// when the dot-segment ends the path and a query or fragment follows.
func TestResourceDotSegmentBeforeQuery(t *testing.T) {
	path := writeFile(t, t.TempDir(), "callers.json", `{"callers": [{"name": "r", "token_sha256": "`+hashHex("r-token")+`",
	  "permissions": {"servers": ["fs"], "resources": [{"server": "fs", "uri": "file:///srv/docs/*"}]}}]}`)
	a, err := New(&Options{CallersFile: path})
	if err != nil {
		t.Fatal(err)
	}
	r := Caller{Name: "r"}
	for _, tc := range []struct {
		uri     string
		allowed bool
	}{
		{"file:///srv/docs/a.md", true},
		{"file:///srv/docs/a..b", true},
		{"file:///srv/docs/..a", true},
		{"file:///srv/docs/x?y=..", true}, // a query is not a path segment
		{"file:///srv/docs/x#..", true},
		{"file:///srv/docs/x?y=/../", false}, // but a server may not split it off
		{"file:///srv/docs/../secret", false},
		{"file:///srv/docs/..", false},
		{"file:///srv/docs/..?", false},
		{"file:///srv/docs/..?x=1", false},
		{"file:///srv/docs/..#x", false},
		{"file:///srv/docs/.?x", false},
		{`file:///srv/docs\..#x`, false},
		{"file:///srv/docs/x?y=%2e%2e", false}, // percent-encoding is refused anywhere
	} {
		err := a.Authorize(r, Action{Verb: ReadResource, Server: "fs", URI: tc.uri})
		if tc.allowed && err != nil {
			t.Errorf("%s: got %v, want allowed", tc.uri, err)
		}
		if !tc.allowed && !errors.Is(err, ErrPermissionDenied) {
			t.Errorf("%s: got %v, want a denial", tc.uri, err)
		}
	}
}

// A repeated key in a JSON callers file is an error naming it, as in YAML:
// otherwise the last value would win unseen.
func TestCallersFileRepeatedKey(t *testing.T) {
	id := `"token_sha256": "` + hashHex("x") + `"`
	for _, tc := range []struct {
		name, content, want string
	}{
		{"top level", `{"callers": [], "callers": [{"name": "a", ` + id + `}]}`, `key "callers" appears twice`},
		{"in a caller", `{"callers": [{"name": "a", "name": "b", ` + id + `}]}`, `key "name" appears twice in callers[0]`},
		{"in permissions", `{"callers": [{"name": "a", ` + id + `, "permissions": {"tools": ["mcp__gh__get_*"], "tools": ["*"]}}]}`,
			`key "tools" appears twice in callers[0].permissions`},
		{"manage", `{"callers": [{"name": "a", "common_name": "c"}, {"name": "b", ` + id + `, "permissions": {"manage": false, "manage": true}}]}`,
			`key "manage" appears twice in callers[1].permissions`},
		{"in a resource", `{"callers": [{"name": "a", ` + id + `, "permissions": {"resources": [{"server": "fs", "uri": "x", "uri": "*"}]}}]}`,
			`key "uri" appears twice in callers[0].permissions.resources[0]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "callers.json", tc.content)
			_, err := New(&Options{CallersFile: path})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// The same key in different objects is no repetition.
	path := writeFile(t, t.TempDir(), "callers.json", `{"callers": [{"name": "a", "common_name": "a", "permissions": {"servers": ["x"]}},
	  {"name": "b", "common_name": "b", "permissions": {"servers": ["y"]}}]}`)
	if _, err := New(&Options{CallersFile: path}); err != nil {
		t.Errorf("two callers with the same fields: %v", err)
	}
}
