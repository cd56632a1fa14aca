package mcpclient

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource is one resource of one server.
type Resource struct {
	Server   string
	Resource *mcp.Resource
}

// ResourceTemplate is one resource template of one server.
type ResourceTemplate struct {
	Server   string
	Template *mcp.ResourceTemplate
}

// Prompt is one prompt of one server.
type Prompt struct {
	Server string
	Prompt *mcp.Prompt
}

// ListResources lists the resources of one server, or of every ready server
// when server is empty, following upstream cursors; sorted by server, then
// URI. Listing every server, it asks only those visible reports (nil: all),
// so that a caller's list sends nothing to a server it may not see.
func (m *Manager) ListResources(ctx context.Context, server string, visible func(server string) bool) ([]Resource, error) {
	out, err := gather(ctx, m, server, visible, "resources/list", hasResources, func(ctx context.Context, u *upstream, cs *mcp.ClientSession) ([]Resource, error) {
		var items []Resource
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return nil, err
			}
			items = append(items, Resource{Server: u.cfg.Name, Resource: r})
		}
		return items, nil
	})
	slices.SortFunc(out, func(a, b Resource) int {
		return cmpPair(a.Server, a.Resource.URI, b.Server, b.Resource.URI)
	})
	return out, err
}

// ListResourceTemplates lists resource templates like ListResources.
func (m *Manager) ListResourceTemplates(ctx context.Context, server string, visible func(server string) bool) ([]ResourceTemplate, error) {
	out, err := gather(ctx, m, server, visible, "resources/templates/list", hasResources, func(ctx context.Context, u *upstream, cs *mcp.ClientSession) ([]ResourceTemplate, error) {
		var items []ResourceTemplate
		for t, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return nil, err
			}
			items = append(items, ResourceTemplate{Server: u.cfg.Name, Template: t})
		}
		return items, nil
	})
	slices.SortFunc(out, func(a, b ResourceTemplate) int {
		return cmpPair(a.Server, a.Template.URITemplate, b.Server, b.Template.URITemplate)
	})
	return out, err
}

// ListPrompts lists prompts like ListResources, sorted by server, then name.
func (m *Manager) ListPrompts(ctx context.Context, server string, visible func(server string) bool) ([]Prompt, error) {
	out, err := gather(ctx, m, server, visible, "prompts/list", hasPrompts, func(ctx context.Context, u *upstream, cs *mcp.ClientSession) ([]Prompt, error) {
		var items []Prompt
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return nil, err
			}
			items = append(items, Prompt{Server: u.cfg.Name, Prompt: p})
		}
		return items, nil
	})
	slices.SortFunc(out, func(a, b Prompt) int {
		return cmpPair(a.Server, a.Prompt.Name, b.Server, b.Prompt.Name)
	})
	return out, err
}

// ReadResource reads one resource of one server.
func (m *Manager) ReadResource(ctx context.Context, server, uri string) (*mcp.ReadResourceResult, error) {
	return request(ctx, m, server, "resources/read", func(ctx context.Context, cs *mcp.ClientSession) (*mcp.ReadResourceResult, error) {
		return readResource(ctx, cs, uri)
	})
}

// GetPrompt renders one prompt of one server.
func (m *Manager) GetPrompt(ctx context.Context, server, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	return request(ctx, m, server, "prompts/get", func(ctx context.Context, cs *mcp.ClientSession) (*mcp.GetPromptResult, error) {
		return cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
	})
}

// Complete asks one server to complete an argument of a prompt or a
// resource template.
func (m *Manager) Complete(ctx context.Context, server string, params *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	return request(ctx, m, server, "completion/complete", func(ctx context.Context, cs *mcp.ClientSession) (*mcp.CompleteResult, error) {
		res, err := cs.Complete(ctx, params)
		if err == nil && res != nil {
			capCompletion(&res.Completion)
		}
		return res, err
	})
}

// maxCompletionValues is the spec's bound on the values of one completion
// result, which mcpd's clients (and its own MCP endpoint's) may rely on.
const maxCompletionValues = 100

// capCompletion keeps the first maxCompletionValues values of a server
// that sent more, and says that more exist; with the server's has_more
// unset, the count it sent is the total.
func capCompletion(c *mcp.CompletionResultDetails) {
	n := len(c.Values)
	if n <= maxCompletionValues {
		return
	}
	if c.Total == 0 && !c.HasMore {
		c.Total = n
	}
	c.Values = c.Values[:maxCompletionValues:maxCompletionValues]
	c.HasMore = true
}

func hasResources(c *mcp.ServerCapabilities) bool { return c != nil && c.Resources != nil }
func hasPrompts(c *mcp.ServerCapabilities) bool   { return c != nil && c.Prompts != nil }

func cmpPair(a1, a2, b1, b2 string) int {
	if c := strings.Compare(a1, b1); c != 0 {
		return c
	}
	return strings.Compare(a2, b2)
}

// request runs one request against a server's session, waiting for a
// reconnecting server, bounded by the server's call timeout and bound to
// its run (a stop fails it at once), and classifies its error.
func request[T any](ctx context.Context, m *Manager, server, op string, do func(context.Context, *mcp.ClientSession) (T, error)) (T, error) {
	u, err := m.lookup(server)
	if err != nil {
		var zero T
		return zero, err
	}
	res, err := onSession(ctx, u, op, do)
	if next := m.replacement(u, err); next != nil {
		return onSession(ctx, next, op, do) // never sent: the replacement takes it
	}
	return res, err
}

func onSession[T any](ctx context.Context, u *upstream, op string, do func(context.Context, *mcp.ClientSession) (T, error)) (T, error) {
	var zero T
	ctx, cancel := context.WithTimeout(callBound(ctx), u.callTimeout(0))
	defer cancel()
	cs, err := u.awaitReady(ctx)
	if err != nil {
		return zero, err
	}
	ctx, unbind := u.bindRun(ctx)
	defer unbind()
	res, err := do(ctx, cs)
	if err != nil {
		return zero, u.classify(ctx, cs, op, err)
	}
	return res, nil
}

// gather lists items of one server, or of every ready server with the
// capability that visible reports (nil: every one) when server is empty.
// Asking one server that lacks the
// capability gives an empty list; when listing all, a server that fails is
// left out (and logged) so that one broken server does not hide the rest.
// list returns the SDK's errors as they are; op names the method in the
// classified error.
func gather[T any](ctx context.Context, m *Manager, server string, visible func(string) bool, op string, capable func(*mcp.ServerCapabilities) bool,
	list func(context.Context, *upstream, *mcp.ClientSession) ([]T, error)) ([]T, error) {
	one := func(u *upstream) ([]T, error) {
		return onSession(ctx, u, op, func(ctx context.Context, cs *mcp.ClientSession) ([]T, error) {
			if !capable(cs.InitializeResult().Capabilities) {
				return nil, nil
			}
			return list(ctx, u, cs)
		})
	}
	if server != "" {
		u, err := m.lookup(server)
		if err != nil {
			return nil, err
		}
		return one(u)
	}
	var (
		mu  sync.Mutex
		out []T
		wg  sync.WaitGroup
	)
	for _, u := range m.snapshot() {
		if visible != nil && !visible(u.cfg.Name) {
			continue
		}
		if _, err := u.ready(); err != nil {
			continue
		}
		wg.Go(func() {
			items, err := one(u)
			if err != nil {
				u.log.Warn().Str("error", err.Error()).Msg("listing for all servers: left out")
				return
			}
			mu.Lock()
			out = append(out, items...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out, ctx.Err()
}
