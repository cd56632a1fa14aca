package access

import "testing"

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"mcp__github__get_*", "mcp__github__get_issue", true},
		{"mcp__github__get_*", "mcp__github__get_", true},
		{"mcp__github__get_*", "mcp__github__list_issues", false},
		{"mcp__github__get_*", "mcp__gitlab__get_issue", false},
		{"mcp__*__delete_*", "mcp__github__delete_repo", true},
		{"mcp__*__delete_*", "mcp__a__b__delete_x", true},
		{"mcp__*__delete_*", "mcp__github__remove_repo", false},
		{"*", "", true},
		{"*", "anything/at all", true},
		{"", "", true},
		{"", "x", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"file:///srv/docs/*", "file:///srv/docs/a/b.md", true},
		{"file:///srv/docs/*", "file:///srv/other.md", false},
		{"demo?", "demo1", true},
		{"demo?", "demo", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"**", "x", true},
		{"mcp__demo__caf?", "mcp__demo__café", true}, // '?' is one character
		{"mcp__demo__caf??", "mcp__demo__café", false},
		{"mcp__*__caf?", "mcp__demo__café", true},
	} {
		if got := NewGlob(tc.pattern).Match(tc.name); got != tc.want {
			t.Errorf("Glob(%q).Match(%q): got %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
	if !(Globs{NewGlob("x"), NewGlob("*")}).MatchesEverything() || (Globs{NewGlob("*x")}).MatchesEverything() {
		t.Errorf("MatchesEverything: want true only with the pattern *")
	}
}
