package mcpclient

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK's client (v1.8.0) keeps the result of every resources/read of a
// 2026-07-28 session in a cache by URI, for the session's life: it drops
// an entry only when the same URI is read again after the entry's ttlMs,
// or when the server announces an update of the URI. mcpd holds sessions
// for months and reads whatever URIs its callers ask for, so every URI
// ever read would stay, with its contents (up to --max-message-bytes
// each). mcpd keeps no read result instead: uncachedReads gives each
// result a ttlMs of 0 before the SDK keeps it, and readResource then looks
// the URI up again, which drops an entry of ttlMs 0, with a marker that
// makes uncachedReads answer the lookup's request itself, sending nothing.
// Every read reaches the server.

// dropCachedRead marks the context of readResource's second lookup.
type dropCachedRead struct{}

// errCachedReadDropped answers the request of that lookup.
var errCachedReadDropped = errors.New("cached read result dropped")

// uncachedReads is the client's outermost sending middleware (see above):
// nothing else sees the lookup's request, which is not sent.
func uncachedReads(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "resources/read" {
			return next(ctx, method, req)
		}
		if ctx.Value(dropCachedRead{}) != nil {
			return nil, errCachedReadDropped
		}
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.ReadResourceResult); ok && r != nil {
			r.TTLMs = 0
		}
		return res, err
	}
}

// readResource reads uri on cs and leaves nothing of it in the SDK's cache.
func readResource(ctx context.Context, cs *mcp.ClientSession, uri string) (*mcp.ReadResourceResult, error) {
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	// Not cut short by the caller's end: the lookup waits for nothing.
	drop := context.WithValue(context.WithoutCancel(ctx), dropCachedRead{}, true)
	_, _ = cs.ReadResource(drop, &mcp.ReadResourceParams{URI: uri})
	return res, err
}
