package access

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Effect is what a tool rule does to the calls it matches.
type Effect int

// Effects, in the order they win at equal specificity: deny beats ask,
// ask beats allow.
const (
	// Allow lets the call through.
	Allow Effect = iota + 1
	// Ask lets the call through only when an agent approves it.
	Ask
	// Deny refuses the call and hides the tool from lists.
	Deny
)

// String returns "allow", "ask" or "deny".
func (e Effect) String() string {
	switch e {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("Effect(%d)", int(e))
}

// ParseEffect reads "allow", "ask" or "deny".
func ParseEffect(s string) (Effect, error) {
	switch s {
	case "allow":
		return Allow, nil
	case "ask":
		return Ask, nil
	case "deny":
		return Deny, nil
	}
	return 0, fmt.Errorf("%q is not a rule effect (want allow, ask or deny)", s)
}

// Rule is one tool rule: an effect on the qualified tool names
// (mcp__<server>__<tool>) its pattern matches.
type Rule struct {
	Effect  Effect
	Pattern Glob
	// Source says where the rule was written, for logs: "config",
	// "flag", "server \"github\" alwaysAllow", ...
	Source string
}

// String returns the rule as denials quote it, for example
// "deny mcp__*__delete_*".
func (r Rule) String() string { return r.Effect.String() + " " + r.Pattern.String() }

// specificity ranks how precisely a pattern names tools: first the number
// of characters that are not '*' (each pins one character of the name;
// counted in characters, as '?' matches one), then the fewer '*'. A name
// without wildcards therefore outranks every pattern with a '*' that
// matches it; a pattern of literals and '?' that matches it ties with it,
// and the stricter effect wins.
func specificity(p string) (pinned, stars int) {
	stars = strings.Count(p, "*")
	return utf8.RuneCountInString(p) - stars, stars
}

// moreSpecific orders rules so that the one that wins comes first: more
// pinned characters, then fewer '*', then the stricter effect.
func moreSpecific(a, b Rule) int {
	ap, as := specificity(a.Pattern.String())
	bp, bs := specificity(b.Pattern.String())
	if c := cmp.Compare(bp, ap); c != 0 {
		return c
	}
	if c := cmp.Compare(as, bs); c != 0 {
		return c
	}
	return cmp.Compare(b.Effect, a.Effect)
}

// Rules are the tool rules of the daemon, over every server. The most
// specific matching rule decides a call (see [Rules.Decide]); a call that
// no rule matches gets the default effect. A nil *Rules allows every call.
type Rules struct {
	rules []Rule // most specific first
	def   Effect
}

// NewRules returns the rules with def for calls no rule matches (Allow
// when zero).
func NewRules(rules []Rule, def Effect) *Rules {
	rs := &Rules{rules: slices.Clone(rules), def: def}
	if rs.def == 0 {
		rs.def = Allow
	}
	slices.SortStableFunc(rs.rules, moreSpecific)
	return rs
}

// Len returns the number of rules.
func (rs *Rules) Len() int {
	if rs == nil {
		return 0
	}
	return len(rs.rules)
}

// Decide returns the effect on the qualified tool name and the rule that
// decided it, or nil when no rule matched and the default applied.
func (rs *Rules) Decide(tool string) (Effect, *Rule) {
	if rs == nil {
		return Allow, nil
	}
	for i := range rs.rules {
		if rs.rules[i].Pattern.Match(tool) {
			return rs.rules[i].Effect, &rs.rules[i]
		}
	}
	return rs.def, nil
}

// ErrApprovalRequired is matched by an *ApprovalRequiredError.
var ErrApprovalRequired = errors.New("approval required")

// RuleDeniedError says that a tool rule refuses a call, or that an "ask"
// rule's approval was not given. It is an ErrPermissionDenied.
type RuleDeniedError struct {
	// Tool is the qualified tool name.
	Tool string
	// Rule is the deciding rule ("deny mcp__*__delete_*"), or "default
	// deny" when no rule matched.
	Rule string
	// Reason, for an "ask" rule, says why the approval was not given.
	Reason string
}

func (e *RuleDeniedError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("tool %q needs approval (rule %q): %s", e.Tool, e.Rule, e.Reason)
	}
	return fmt.Sprintf("tool %q is denied by rule %q", e.Tool, e.Rule)
}

// Is makes errors.Is(err, ErrPermissionDenied) true.
func (e *RuleDeniedError) Is(target error) bool { return target == ErrPermissionDenied }

// ApprovalRequiredError says that the call may proceed only once an agent
// approves it. The edge asks for the approval; a refusal becomes a
// *RuleDeniedError. It is both ErrApprovalRequired and, for an edge that
// cannot ask, ErrPermissionDenied.
type ApprovalRequiredError struct {
	// Tool is the qualified tool name.
	Tool string
	// Rule is the deciding rule ("ask mcp__github__*"), or "default ask".
	Rule string
}

func (e *ApprovalRequiredError) Error() string {
	return fmt.Sprintf("tool %q needs approval (rule %q)", e.Tool, e.Rule)
}

// Is matches ErrApprovalRequired and ErrPermissionDenied.
func (e *ApprovalRequiredError) Is(target error) bool {
	return target == ErrApprovalRequired || target == ErrPermissionDenied
}

// Denied returns the refusal of this call for reason.
func (e *ApprovalRequiredError) Denied(reason string) *RuleDeniedError {
	return &RuleDeniedError{Tool: e.Tool, Rule: e.Rule, Reason: reason}
}

// Settle turns the answer to the approval request into the call's error:
// nil when approved (denied is ""), err itself (the caller gave up), else
// the refusal for the reason denied gives.
func (e *ApprovalRequiredError) Settle(denied string, err error) error {
	switch {
	case err != nil:
		return err
	case denied != "":
		return e.Denied(denied)
	}
	return nil
}

// RefusedPermission names, for an audit line, what refused a request: the
// missing permission of a *DeniedError, "rule: <rule>" of a
// *RuleDeniedError, else "".
func RefusedPermission(err error) string {
	var denied *DeniedError
	var ruled *RuleDeniedError
	switch {
	case errors.As(err, &denied):
		return denied.Permission
	case errors.As(err, &ruled):
		return "rule: " + ruled.Rule
	}
	return ""
}

// SetRules replaces the tool rules; nil allows every call. Checks that run
// meanwhile see either the old or the new rules.
func (a *Authorizer) SetRules(rs *Rules) { a.rules.Store(rs) }

// ServerAsks returns, for a qualified tool name, the pattern of the
// "ask" its server's own config adds to the tool rules (a server's
// toolsAsk, qualified: "mcp__github__create_*"), or "" when there is none.
type ServerAsks func(tool string) string

// SetServerAsks sets where the servers' own asks come from. They only
// tighten: a call the rules allow needs approval when its server asks
// for it, and a call the rules hold or deny stays so whatever the server
// says. That is what lets a caller who may connect servers, but not write
// the rules, attach asks to the servers it connects.
func (a *Authorizer) SetServerAsks(asks ServerAsks) { a.asks.Store(&asks) }

// checkRules applies the tool rules, then the servers' asks, to a call of
// tool.
func (a *Authorizer) checkRules(tool string) error {
	eff, rule := a.rules.Load().Decide(tool)
	name := "default " + eff.String()
	if rule != nil {
		name = rule.String()
	}
	switch eff {
	case Deny:
		return &RuleDeniedError{Tool: tool, Rule: name}
	case Ask:
		return &ApprovalRequiredError{Tool: tool, Rule: name}
	}
	if asks := a.asks.Load(); asks != nil && *asks != nil {
		if p := (*asks)(tool); p != "" {
			return &ApprovalRequiredError{Tool: tool, Rule: Ask.String() + " " + p}
		}
	}
	return nil
}
