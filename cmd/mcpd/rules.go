package main

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/access"
	mcpconfig "github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// toolRules gathers the tool rules of the command line, the config files'
// top-level "permissions" blocks, and each server entry's "permissions",
// "alwaysAllow" and "autoApprove" (qualified with the server's name) into
// one set: the most specific rule wins wherever it was written. What it
// skips, it reports on log.
func toolRules(c *config, merged *mcpconfig.Merged, log zerolog.Logger) *access.Rules {
	var rules []access.Rule
	add := func(eff access.Effect, source string, patterns ...string) {
		for _, p := range patterns {
			rules = append(rules, access.Rule{Effect: eff, Pattern: access.NewGlob(p), Source: source})
		}
	}
	// Rules on qualified names. Claude Code's server-wide "mcp__slack"
	// means every tool of slack, as there: "mcp__slack__*". One that can
	// match no name (an unqualified "delete_repo") is kept, as written,
	// but said to match nothing, so that an operator who meant to deny
	// something learns that it is not denied.
	addQualified := func(eff access.Effect, source string, patterns ...string) {
		for _, p := range patterns {
			if server, ok := serverWide(p); ok {
				p = "mcp__" + server + "__*"
			} else if !canMatchQualified(p) {
				log.Warn().Str("source", source).Str("rule", eff.String()+" "+p).
					Msg("tool rule matches no tool: rules name tools as mcp__<server>__<tool> (a server's own block names its tools bare)")
			}
			add(eff, source, p)
		}
	}
	addQualified(access.Allow, "flag --allow-tool", c.allowTools...)
	addQualified(access.Ask, "flag --ask-tool", c.askTools...)
	addQualified(access.Deny, "flag --deny-tool", c.denyTools...)
	top := merged.Permissions
	addQualified(access.Allow, "config permissions", top.Allow...)
	addQualified(access.Ask, "config permissions", top.Ask...)
	addQualified(access.Deny, "config permissions", top.Deny...)
	for _, e := range merged.Entries {
		if e.Err != nil {
			continue
		}
		s := e.Server
		source := fmt.Sprintf("server %q", s.Name)
		qualify := func(names []string) []string {
			out := make([]string, len(names))
			for i, n := range names {
				if strings.HasPrefix(n, "mcp__") {
					// Qualified again, it would name no tool.
					log.Warn().Str("source", source+" permissions").Str("pattern", n).
						Msg("a server's permissions name its tools bare: this qualified name matches no tool")
				}
				out[i] = "mcp__" + s.Name + "__" + n
			}
			return out
		}
		add(access.Allow, source+" permissions", qualify(s.Permissions.Allow)...)
		add(access.Ask, source+" permissions", qualify(s.Permissions.Ask)...)
		add(access.Deny, source+" permissions", qualify(s.Permissions.Deny)...)
		add(access.Allow, source+" alwaysAllow", qualify(exactNames(s.Name, s.AlwaysAllow, log))...)
	}
	def := c.toolDefault
	if def == "" {
		def = top.Default
	}
	eff := access.Allow
	if def != "" {
		eff, _ = access.ParseEffect(def) // both were checked when read
	}
	return access.NewRules(rules, eff)
}

// serverWide reports whether pattern is a server-wide rule as Claude Code
// writes it, "mcp__<server>" without wildcards, and names the server.
func serverWide(pattern string) (string, bool) {
	server, ok := strings.CutPrefix(pattern, "mcp__")
	if !ok || strings.ContainsAny(server, "*?") || mcpconfig.ValidateName(server) != nil {
		return "", false
	}
	return server, true
}

// canMatchQualified says whether pattern can match some qualified tool
// name, mcp__<server>__<tool>: without wildcards it must be one; with
// them, what comes before the first must agree with the "mcp__" prefix.
func canMatchQualified(pattern string) bool {
	i := strings.IndexAny(pattern, "*?")
	if i < 0 {
		_, _, ok := mcpclient.SplitQualifiedToolName(pattern)
		return ok
	}
	lit := pattern[:i]
	return strings.HasPrefix(lit, "mcp__") || strings.HasPrefix("mcp__", lit)
}

// exactNames returns the entries of a server's "alwaysAllow" and
// "autoApprove" that are tool names. Editors write these to skip prompts
// for named tools, so an entry with '*' or '?' is skipped with a warning:
// as a pattern, "delete_*" would outrank a deny rule of the operator's.
func exactNames(server string, entries []string, log zerolog.Logger) []string {
	var names []string
	for _, n := range entries {
		if strings.ContainsAny(n, "*?") {
			log.Warn().Str("server", server).Str("entry", n).
				Msg("alwaysAllow/autoApprove entry is not a tool name (it holds * or ?); ignored")
			continue
		}
		names = append(names, n)
	}
	return names
}
