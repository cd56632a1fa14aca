package gateway

import (
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/mcpd-project/mcpd/internal/access"
)

// Hosts may name a server's tool, prompt or resource the way the server
// does (a bare name or URI) as well as by the gateway's name, as the gRPC
// edge accepts bare tool names: a host configured for one server keeps
// working when that server moves behind mcpd. A bare name resolves when
// exactly one server the caller may see has it; several are an error
// that names the gateway's names of the candidates.

// resolveURI maps a resource URI a host sent to the server and the
// server's own URI. bare says the host used the server's URI, so that the
// answer uses it too.
func (g *Gateway) resolveURI(visible func(string) bool, uri string) (server, original string, bare bool, err error) {
	if server, original, ok := SplitResourceURI(uri); ok {
		return server, original, false, nil
	}
	var exact, matched []string
	g.mu.Lock()
	for name, items := range g.published {
		if visible != nil && !visible(name) {
			continue
		}
		if _, ok := items.resources[ResourceURI(name, uri)]; ok {
			exact = append(exact, name)
			continue
		}
		for _, t := range items.templates {
			if tpl, err := uritemplate.New(t.URITemplate); err == nil && tpl.Match(uri) != nil {
				matched = append(matched, name)
				break
			}
		}
	}
	g.mu.Unlock()
	candidates := exact
	if len(candidates) == 0 {
		candidates = matched
	}
	switch len(candidates) {
	case 0:
		return "", "", true, mcp.ResourceNotFoundError(uri)
	case 1:
		return candidates[0], uri, true, nil
	}
	return "", "", true, ambiguous("resource URI", uri, candidates, func(s string) string { return ResourceURI(s, uri) })
}

// visibleTo is the filter of the servers a caller may see.
func (g *Gateway) visibleTo(caller access.Caller) func(string) bool {
	return func(server string) bool {
		return g.allowed(caller, access.Action{Verb: access.ViewServer, Server: server})
	}
}

// resolveTemplate maps a resource template a host named (to complete one
// of its arguments) to its server and the server's own template.
func (g *Gateway) resolveTemplate(caller access.Caller, ref string) (server, original string, err error) {
	if server, original, ok := SplitResourceURI(ref); ok {
		return server, original, nil
	}
	var candidates []string
	g.mu.Lock()
	for name, items := range g.published {
		if _, ok := items.templates[ResourceURI(name, ref)]; ok && g.allowed(caller, access.Action{Verb: access.ViewServer, Server: name}) {
			candidates = append(candidates, name)
		}
	}
	g.mu.Unlock()
	switch len(candidates) {
	case 0:
		return "", "", invalidParams("no server has the resource template " + ref)
	case 1:
		return candidates[0], ref, nil
	}
	return "", "", ambiguous("resource template", ref, candidates, func(s string) string { return ResourceURI(s, ref) })
}

// resolvePrompt maps a prompt name a host sent to its server and the
// server's own name.
func (g *Gateway) resolvePrompt(caller access.Caller, name string) (server, prompt string, err error) {
	if server, prompt, ok := SplitQualifiedName(name); ok {
		return server, prompt, nil
	}
	var candidates []string
	g.mu.Lock()
	for s, items := range g.published {
		if _, ok := items.prompts[QualifiedName(s, name)]; ok && g.allowed(caller, access.Action{Verb: access.ViewServer, Server: s}) {
			candidates = append(candidates, s)
		}
	}
	g.mu.Unlock()
	switch len(candidates) {
	case 0:
		return "", "", notFound("unknown prompt " + name + " (prompts are named mcp__<server>__<prompt>)")
	case 1:
		return candidates[0], name, nil
	}
	return "", "", ambiguous("prompt name", name, candidates, func(s string) string { return QualifiedName(s, name) })
}

// resolveTool returns the qualified name of the tool a host named.
func (g *Gateway) resolveTool(caller access.Caller, name string) (string, error) {
	// The Manager's error is kept, for the audit line's code (NOT_FOUND,
	// INVALID_ARGUMENT, as on gRPC); the guard sends its wire form.
	return g.mgr.QualifyToolName(name, func(server, qualified string) bool {
		return g.allowed(caller, access.Action{Verb: access.CallTool, Server: server, Tool: qualified})
	})
}

func ambiguous(what, name string, servers []string, qualify func(string) string) error {
	slices.Sort(servers)
	names := make([]string, 0, len(servers))
	for _, s := range servers {
		names = append(names, qualify(s))
	}
	return invalidParams(what + " " + name + " is ambiguous: use one of " + strings.Join(names, ", "))
}
