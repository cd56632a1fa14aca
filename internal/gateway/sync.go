package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// What syncServer refreshes, and why.
type syncWhat int

const (
	syncTools syncWhat = 1 << iota
	syncPrompts
	syncResources
	// The server said that list changed: every item of it is published
	// again, so that the hosts hear a list_changed even when mcpd sees no
	// difference (the server's notice is theirs to have). Syncs for other
	// reasons (a state change, a gap) publish only what differs.
	toolsChanged
	promptsChanged
	resourcesChanged
	syncAll = syncTools | syncPrompts | syncResources
)

// listTimeout bounds listing one server's prompts or resources while
// syncing: a server that does not answer must not keep its own later
// changes waiting for good (the others' never wait for it: syncer).
const listTimeout = 30 * time.Second

// syncer runs the syncs Run asks for, each server's on a goroutine of its
// own, so that a server slow to list its prompts or resources holds up only
// its own changes. A server has at most one sync running: what is asked
// for it meanwhile is merged into one sync that runs after it. So what
// the hosts see of a server is published in order, and the last sync,
// which reads the server afresh, leaves it in step with the server.
type syncer struct {
	g      *Gateway
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// next holds, for each server with a sync running, what to sync
	// after it (0: nothing).
	next map[string]syncWhat
}

func (g *Gateway) newSyncer(ctx context.Context) *syncer {
	ctx, cancel := context.WithCancel(ctx)
	return &syncer{g: g, ctx: ctx, cancel: cancel, next: make(map[string]syncWhat)}
}

// request syncs what of server: at once on a goroutine of its own, or
// after the sync of server that runs.
func (s *syncer) request(server string, what syncWhat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if next, running := s.next[server]; running {
		s.next[server] = next | what
		return
	}
	s.next[server] = 0
	s.wg.Go(func() { s.run(server, what) })
}

// run syncs server until nothing more is asked for it.
func (s *syncer) run(server string, what syncWhat) {
	for {
		if s.ctx.Err() == nil {
			s.g.syncServer(s.ctx, server, what)
			s.g.forgetGone(server)
		}
		s.mu.Lock()
		what = s.next[server]
		if what == 0 || s.ctx.Err() != nil {
			delete(s.next, server)
			s.mu.Unlock()
			return
		}
		s.next[server] = 0
		s.mu.Unlock()
	}
}

// wait waits for the syncs asked for so far (and those asked meanwhile)
// to finish.
func (s *syncer) wait() { s.wg.Wait() }

// stop cancels the syncs that run and waits for them; nothing is
// requested after it.
func (s *syncer) stop() {
	s.cancel()
	s.wg.Wait()
}

// syncServer brings the SDK server's items of one upstream server in step
// with it: a server that is not ready (or gone) has none. The SDK sends
// list_changed to the hosts when an item is added or removed.
func (g *Gateway) syncServer(ctx context.Context, server string, what syncWhat) {
	ready := g.ready(server)
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return
	}
	items := g.itemsOf(server)

	if what&syncTools != 0 {
		g.toolsMu.Lock()
		// Looked up again under the lock: forgetGone may have dropped the
		// items of a server gone meanwhile, and this one is back.
		items := g.itemsOf(server)
		// The state is read under the lock: a refresh that waited for it
		// must not publish a state older than the one before it did.
		next := map[string]*mcp.Tool{}
		if g.ready(server) {
			tools, err := g.mgr.Tools(server)
			g.mu.Lock()
			for _, t := range tools {
				if _, loaded := g.loaded[t.Name]; !g.opts.ToolSearch || loaded {
					next[t.Name] = t.Tool
				}
			}
			if err == nil {
				g.forgetUnlistedLocked(server, tools)
			}
			g.mu.Unlock()
		}
		next = apply(items.tools, next, what&toolsChanged != 0, g.srv.RemoveTools, func(name string, t *mcp.Tool) {
			g.srv.AddTool(publishedTool(name, t), g.callTool)
		})
		g.mu.Lock()
		items.tools = next
		g.mu.Unlock()
		g.toolsMu.Unlock()
	}
	if what&syncPrompts != 0 {
		next := map[string]*mcp.Prompt{}
		keep := false
		if ready {
			lctx, cancel := context.WithTimeout(ctx, listTimeout)
			prompts, err := g.mgr.ListPrompts(lctx, server, nil)
			cancel()
			keep = err != nil
			for _, p := range prompts {
				next[QualifiedName(server, p.Prompt.Name)] = p.Prompt
			}
		}
		if !keep {
			next = apply(items.prompts, next, what&promptsChanged != 0, g.srv.RemovePrompts, func(name string, p *mcp.Prompt) {
				cp := *p
				cp.Name = name
				g.srv.AddPrompt(&cp, g.getPrompt)
			})
			g.mu.Lock()
			items.prompts = next
			g.mu.Unlock()
		}
	}
	if what&syncResources != 0 {
		nextR := map[string]*mcp.Resource{}
		nextT := map[string]*mcp.ResourceTemplate{}
		keep := false
		if ready {
			lctx, cancel := context.WithTimeout(ctx, listTimeout)
			resources, err := g.mgr.ListResources(lctx, server, nil)
			templates, terr := g.mgr.ListResourceTemplates(lctx, server, nil)
			cancel()
			keep = err != nil || terr != nil
			for _, r := range resources {
				nextR[ResourceURI(server, r.Resource.URI)] = r.Resource
			}
			for _, t := range templates {
				nextT[ResourceURI(server, t.Template.URITemplate)] = t.Template
			}
		}
		if !keep {
			nextR = apply(items.resources, nextR, what&resourcesChanged != 0, g.srv.RemoveResources, func(uri string, r *mcp.Resource) {
				cp := *r
				cp.URI = uri
				g.srv.AddResource(&cp, g.readResource)
			})
			nextT = apply(items.templates, nextT, what&resourcesChanged != 0, g.srv.RemoveResourceTemplates, func(uri string, t *mcp.ResourceTemplate) {
				cp := *t
				cp.URITemplate = uri
				if !validTemplate(uri) {
					g.log.Warn().Str("server", server).Str("uri_template", t.URITemplate).Msg("resource template not exposed: invalid URI template")
					return
				}
				g.srv.AddResourceTemplate(&cp, g.readResource)
			})
			g.mu.Lock()
			items.resources, items.templates = nextR, nextT
			g.mu.Unlock()
		}
	}
}

// itemsOf returns the items published of server, made if there are none.
func (g *Gateway) itemsOf(server string) *serverItems {
	g.mu.Lock()
	defer g.mu.Unlock()
	items := g.published[server]
	if items == nil {
		items = &serverItems{}
		g.published[server] = items
	}
	return items
}

// forgetGone drops what the gateway keeps of a server the Manager no
// longer has (disconnected, removed from the config), once a sync has
// unpublished its items: its entry in published and the tools of it that
// search_tools loaded. Server names are the callers' to choose, and a
// daemon that lives for months sees many come and go. A server connected
// again under the name starts afresh. The tools lock keeps a tool refresh
// of the server (loadTools) from publishing into the dropped items.
func (g *Gateway) forgetGone(server string) {
	g.toolsMu.Lock()
	defer g.toolsMu.Unlock()
	if _, err := g.mgr.Get(server); !errors.Is(err, mcpclient.ErrNotFound) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if items := g.published[server]; items != nil {
		if len(items.tools)+len(items.prompts)+len(items.resources)+len(items.templates) > 0 {
			return
		}
		delete(g.published, server)
	}
	maps.DeleteFunc(g.loaded, func(_, of string) bool { return of == server })
}

// forgetUnlistedLocked drops the loaded tools of server that it no longer
// lists (tools, from its READY session): a server that stays for months
// while its tools come and go would otherwise keep every name ever loaded.
// Its name, listed again, is loaded as a new one is. g.mu must be held.
func (g *Gateway) forgetUnlistedLocked(server string, tools []mcpclient.Tool) {
	listed := make(map[string]bool, len(tools))
	for _, t := range tools {
		listed[t.Name] = true
	}
	maps.DeleteFunc(g.loaded, func(name, of string) bool { return of == server && !listed[name] })
}

// ready says whether server is READY.
func (g *Gateway) ready(server string) bool {
	st, err := g.mgr.Get(server)
	return err == nil && st.State == mcpclient.StateReady
}

// apply turns the published items old into next: it removes what is gone
// and adds what is new or changed, or, with all, everything in next. It
// returns next.
func apply[T comparable](old, next map[string]T, all bool, remove func(...string), add func(string, T)) map[string]T {
	var gone []string
	for name := range old {
		if _, ok := next[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		remove(gone...)
	}
	for _, name := range slices.Sorted(maps.Keys(next)) {
		if prev, ok := old[name]; all || !ok || !sameDefinition(prev, next[name]) {
			addSafely(name, next[name], add)
		}
	}
	return next
}

// sameDefinition says whether two definitions of an item are the same.
// Prompts and resources are listed afresh on every sync: compared by
// identity, a sync for a server's state change would publish them all
// again, and every host would hear a list_changed for nothing.
func sameDefinition[T comparable](a, b T) bool {
	if a == b {
		return true
	}
	ja, err := json.Marshal(a)
	if err != nil {
		return false
	}
	jb, err := json.Marshal(b)
	return err == nil && bytes.Equal(ja, jb)
}

// publishedTool is a server's tool as the hosts see it: its qualified name
// and, where the server's input schema is not one the SDK accepts (an
// object schema), the most general one.
func publishedTool(name string, t *mcp.Tool) *mcp.Tool {
	cp := *t
	cp.Name = name
	if m, ok := cp.InputSchema.(map[string]any); !ok || m["type"] != "object" {
		cp.InputSchema = map[string]any{"type": "object"}
	}
	if cp.OutputSchema != nil {
		if _, ok := cp.OutputSchema.(map[string]any); !ok {
			cp.OutputSchema = nil
		}
	}
	return &cp
}

// addSafely adds an item, recovering from the SDK's panic on a definition
// it refuses (an invalid schema or URI): one odd item of one server must not
// stop the daemon. The item is then not shown.
func addSafely[T any](name string, item T, add func(string, T)) {
	defer func() { _ = recover() }()
	add(name, item)
}
