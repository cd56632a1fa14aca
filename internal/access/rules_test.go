package access

import (
	"errors"
	"strings"
	"testing"
)

func rule(e Effect, p string) Rule { return Rule{Effect: e, Pattern: NewGlob(p)} }

func TestRulesMostSpecificWins(t *testing.T) {
	rs := NewRules([]Rule{
		rule(Allow, "mcp__github__*"),
		rule(Deny, "mcp__*__delete_*"),
		rule(Allow, "mcp__github__delete_branch"),
		rule(Ask, "mcp__*"),
		rule(Allow, "mcp__fs__read_?ile"),
		rule(Deny, "mcp__fs__read_*"),
		rule(Allow, "mcp__x__a*"),
		rule(Deny, "mcp__x__*a"),
		rule(Ask, "mcp__y__*"),
		rule(Allow, "mcp__y__*"),
	}, Allow)
	for _, tc := range []struct {
		tool string
		want Effect
		rule string // "" = the default
	}{
		// 17 pinned characters beat 13.
		{"mcp__github__delete_repo", Deny, "deny mcp__*__delete_*"},
		// A name without wildcards beats every pattern that matches it.
		{"mcp__github__delete_branch", Allow, "allow mcp__github__delete_branch"},
		{"mcp__github__get_issue", Allow, "allow mcp__github__*"},
		{"mcp__slack__delete_message", Deny, "deny mcp__*__delete_*"},
		{"mcp__slack__post", Ask, "ask mcp__*"},
		// '?' pins a character: 17 pinned beat 14.
		{"mcp__fs__read_file", Allow, "allow mcp__fs__read_?ile"},
		{"mcp__fs__read_dir", Deny, "deny mcp__fs__read_*"},
		// Equal specificity: deny beats allow, deny beats ask beats allow.
		{"mcp__x__aba", Deny, "deny mcp__x__*a"},
		{"mcp__y__t", Ask, "ask mcp__y__*"},
		{"other", Allow, ""},
	} {
		eff, r := rs.Decide(tc.tool)
		got := ""
		if r != nil {
			got = r.String()
		}
		if eff != tc.want || got != tc.rule {
			t.Errorf("Decide(%q) = %v by %q, want %v by %q", tc.tool, eff, got, tc.want, tc.rule)
		}
	}
}

func TestRulesDefault(t *testing.T) {
	var none *Rules
	if eff, r := none.Decide("mcp__a__b"); eff != Allow || r != nil {
		t.Errorf("nil rules: got %v %v, want allow by default", eff, r)
	}
	rs := NewRules([]Rule{rule(Allow, "mcp__a__*")}, Ask)
	if eff, r := rs.Decide("mcp__b__c"); eff != Ask || r != nil {
		t.Errorf("got %v %v, want the default ask", eff, r)
	}
	if eff, _ := rs.Decide("mcp__a__c"); eff != Allow {
		t.Errorf("got %v, want allow", eff)
	}
}

func TestAuthorizeAppliesRulesToEveryCaller(t *testing.T) {
	a, anyone := withoutCallersFile(t)
	a.SetRules(NewRules([]Rule{rule(Deny, "mcp__*__delete_*"), rule(Ask, "mcp__demo__echo")}, Allow))
	call := func(tool string) error {
		return a.Authorize(anyone, Action{Verb: CallTool, Server: "demo", Tool: tool})
	}
	var denied *RuleDeniedError
	if err := call("mcp__demo__delete_all"); !errors.As(err, &denied) || !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("delete: got %v, want a RuleDeniedError", err)
	}
	if a.Allowed(anyone, Action{Verb: CallTool, Server: "demo", Tool: "mcp__demo__delete_all"}) {
		t.Error("a denied tool is Allowed (it would be listed)")
	}
	var ask *ApprovalRequiredError
	if err := call("mcp__demo__echo"); !errors.As(err, &ask) || !errors.Is(err, ErrApprovalRequired) || !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("echo: got %v, want an ApprovalRequiredError", err)
	}
	if !a.Allowed(anyone, Action{Verb: CallTool, Server: "demo", Tool: "mcp__demo__echo"}) {
		t.Error("a tool that needs approval is not Allowed (it would be hidden)")
	}
	if err := call("mcp__demo__add"); err != nil {
		t.Errorf("add: got %v, want nil", err)
	}
	a.SetRules(nil)
	if err := call("mcp__demo__delete_all"); err != nil {
		t.Errorf("without rules: got %v, want nil", err)
	}
}

// TestServerAsksOnlyTighten: a server's asks make an allowed call ask, and
// leave a call the rules hold or deny as it was.
func TestServerAsksOnlyTighten(t *testing.T) {
	a, anyone := withoutCallersFile(t)
	a.SetRules(NewRules([]Rule{rule(Allow, "mcp__s__write_file"), rule(Deny, "mcp__s__delete_*"), rule(Ask, "mcp__s__move")}, Allow))
	a.SetServerAsks(func(tool string) string {
		if strings.HasPrefix(tool, "mcp__s__") && tool != "mcp__s__read" {
			return "mcp__s__*"
		}
		return ""
	})
	for _, tc := range []struct {
		tool, want string // want: "" (runs), or the deciding rule of an ask or a deny
		deny       bool
	}{
		{"mcp__s__read", "", false},
		{"mcp__other__write_file", "", false},
		{"mcp__s__write_file", "ask mcp__s__*", false}, // the rules' more specific allow does not undo the server's ask
		{"mcp__s__delete_all", "deny mcp__s__delete_*", true},
		{"mcp__s__move", "ask mcp__s__move", false},
	} {
		err := a.Authorize(anyone, Action{Verb: CallTool, Server: "s", Tool: tc.tool})
		var ask *ApprovalRequiredError
		var denied *RuleDeniedError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: got %v, want it to run", tc.tool, err)
		case tc.want == "":
		case tc.deny && (!errors.As(err, &denied) || denied.Rule != tc.want):
			t.Errorf("%s: got %v, want denied by %q", tc.tool, err, tc.want)
		case !tc.deny && (!errors.As(err, &ask) || ask.Rule != tc.want):
			t.Errorf("%s: got %v, want approval asked by %q", tc.tool, err, tc.want)
		}
	}
}

// withoutCallersFile returns an Authorizer without a callers file and the
// caller every request then is.
func withoutCallersFile(t *testing.T) (*Authorizer, Caller) {
	t.Helper()
	a, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	anyone, err := a.Authenticate(Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	return a, anyone
}

// TestRulesSpecificityCountsCharacters: specificity counts characters,
// not bytes, so that a '?' standing for a character outside ASCII ties
// with the exact name, and the stricter effect wins, as it does for ASCII.
func TestRulesSpecificityCountsCharacters(t *testing.T) {
	rs := NewRules([]Rule{rule(Allow, "mcp__s__café"), rule(Deny, "mcp__s__caf?")}, Allow)
	if eff, r := rs.Decide("mcp__s__café"); eff != Deny {
		t.Errorf("Decide(mcp__s__café) = %v by %v, want deny by the tie of deny mcp__s__caf?", eff, r)
	}
	// The same rules in ASCII, for comparison.
	rs = NewRules([]Rule{rule(Allow, "mcp__s__cafe"), rule(Deny, "mcp__s__caf?")}, Allow)
	if eff, r := rs.Decide("mcp__s__cafe"); eff != Deny {
		t.Errorf("Decide(mcp__s__cafe) = %v by %v, want deny", eff, r)
	}
}
