package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/access"
	mcpconfig "github.com/mcpd-project/mcpd/internal/config"
)

// TestToolRulesDocExample checks the table of docs/tools.md against the
// example config above it.
func TestToolRulesDocExample(t *testing.T) {
	const example = `{
  "permissions": {
    "allow": ["mcp__github__get_*", "mcp__github__delete_branch"],
    "ask":   ["mcp__github__*"],
    "deny":  ["mcp__*__delete_*"],
    "default": "allow"
  },
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": { "GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}" },
      "alwaysAllow": ["list_issues"],
      "permissions": { "deny": ["merge_pull_request"] }
    }
  }
}`
	file, err := mcpconfig.LoadLayers([]mcpconfig.Layer{{Scope: mcpconfig.ScopeFlag, Path: "--config #1", Inline: []byte(example)}},
		func(string) (string, bool) { return "x", true })
	if err != nil {
		t.Fatal(err)
	}
	rules := toolRules(&config{}, file, zerolog.Nop())
	for _, tc := range []struct {
		tool string
		want access.Effect
		rule string // "" = the default
	}{
		{"mcp__github__get_issue", access.Allow, "allow mcp__github__get_*"},
		{"mcp__github__delete_repo", access.Deny, "deny mcp__*__delete_*"},
		{"mcp__github__delete_branch", access.Allow, "allow mcp__github__delete_branch"},
		{"mcp__github__create_issue", access.Ask, "ask mcp__github__*"},
		{"mcp__github__list_issues", access.Allow, "allow mcp__github__list_issues"},
		{"mcp__github__merge_pull_request", access.Deny, "deny mcp__github__merge_pull_request"},
		{"mcp__slack__delete_message", access.Deny, "deny mcp__*__delete_*"},
		{"mcp__slack__post_message", access.Allow, ""},
	} {
		eff, r := rules.Decide(tc.tool)
		got := ""
		if r != nil {
			got = r.String()
		}
		if eff != tc.want || got != tc.rule {
			t.Errorf("%s: got %v by %q, want %v by %q", tc.tool, eff, got, tc.want, tc.rule)
		}
	}
	// --tool-default overrides the file's default.
	if eff, _ := toolRules(&config{toolDefault: "deny"}, file, zerolog.Nop()).Decide("mcp__slack__post_message"); eff != access.Deny {
		t.Errorf("--tool-default deny: got %v, want deny", eff)
	}
}

// TestAlwaysAllowIsExact: alwaysAllow and autoApprove name tools; an entry
// with a wildcard is skipped with a warning, not made a pattern that would
// outrank the operator's deny rule.
func TestAlwaysAllowIsExact(t *testing.T) {
	const cfg = `{
  "permissions": {"deny": ["mcp__*__delete_*"]},
  "mcpServers": {
    "github": {"command": "npx", "autoApprove": ["delete_*", "list_issues"], "alwaysAllow": ["get_?ssue"]}
  }
}`
	file, err := mcpconfig.LoadLayers([]mcpconfig.Layer{{Scope: mcpconfig.ScopeFlag, Path: "--config #1", Inline: []byte(cfg)}},
		func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	rules := toolRules(&config{toolDefault: "ask"}, file, zerolog.New(&logs))
	for tool, want := range map[string]access.Effect{
		"mcp__github__delete_repo": access.Deny,
		"mcp__github__delete_*":    access.Deny,
		"mcp__github__list_issues": access.Allow,
		"mcp__github__get_issue":   access.Ask,
		"mcp__github__get_?ssue":   access.Ask, // no tool has this name; it is not a rule either
	} {
		if eff, r := rules.Decide(tool); eff != want {
			t.Errorf("%s: got %v by %v, want %v", tool, eff, r, want)
		}
	}
	for _, entry := range []string{"delete_*", "get_?ssue"} {
		if !strings.Contains(logs.String(), `"server":"github","entry":"`+entry+`"`) {
			t.Errorf("logs %s: want a warning naming server github and entry %q", logs.String(), entry)
		}
	}
	if strings.Contains(logs.String(), "list_issues") {
		t.Errorf("logs %s: want no warning about list_issues", logs.String())
	}
}

// TestRulesThatMatchNothingWarn: a top-level or flag rule that can match
// no qualified tool name (an unqualified name), and a qualified name in a
// server's own block, are kept as written but logged, so that an operator
// who meant to deny a tool learns it is not denied. Claude Code's
// server-wide "mcp__slack" denies every tool of slack, without a warning.
func TestRulesThatMatchNothingWarn(t *testing.T) {
	const cfg = `{
  "permissions": {"deny": ["delete_repo", "mcp__slack", "mcp__*__delete_*", "*_admin"]},
  "mcpServers": {
    "gh": {"command": "npx", "permissions": {"deny": ["mcp__gh__merge", "merge_*"]}}
  }
}`
	file, err := mcpconfig.LoadLayers([]mcpconfig.Layer{{Scope: mcpconfig.ScopeFlag, Path: "--config #1", Inline: []byte(cfg)}},
		func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	rules := toolRules(&config{denyTools: stringList{"rm_rf", "mcp__fs__rm"}}, file, zerolog.New(&logs))
	if eff, rule := rules.Decide("mcp__slack__post_message"); eff != access.Deny || rule == nil || rule.String() != "deny mcp__slack__*" {
		t.Errorf("mcp__slack__post_message: got %v by %v, want deny by the server-wide rule", eff, rule)
	}
	if eff, _ := rules.Decide("mcp__slackbot__post_message"); eff != access.Allow {
		t.Errorf("mcp__slackbot__post_message: got %v, want allow: mcp__slack names server slack only", eff)
	}
	for _, warned := range []string{`"deny delete_repo"`, `"deny rm_rf"`, `"pattern":"mcp__gh__merge"`} {
		if !strings.Contains(logs.String(), warned) {
			t.Errorf("logs %s: want a warning about %s", logs.String(), warned)
		}
	}
	for _, fine := range []string{"mcp__slack", "mcp__*__delete_*", "*_admin", "merge_*", "mcp__fs__rm"} {
		if strings.Contains(logs.String(), `"`+fine+`"`) || strings.Contains(logs.String(), ` `+fine+`"`) {
			t.Errorf("logs %s: want no warning about %s", logs.String(), fine)
		}
	}
}
