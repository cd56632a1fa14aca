package mcpclient

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/testheap"
)

// TestReadsKeepNoResults: the SDK's client keeps the result of every
// resources/read of a 2026-07-28 session by URI, for the session's life
// (it drops an entry only when the same URI is read again after the
// entry's ttlMs, or on an update of the URI). mcpd holds sessions for
// months and reads what callers ask for, so each URI read would stay with
// its contents: the Manager reads every time and keeps nothing. It counts
// the SDK's cache entries that are in use (every allocation is profiled
// during the test) after reads of URIs of their own, in both eras, from a
// server that allows a minute of caching; and a URI read twice reaches
// the server twice.
func TestReadsKeepNoResults(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			ctx := testContext(t)
			testheap.Record(t)
			var reads atomic.Int64
			srv := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, &mcp.ServerOptions{
				SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
					c.TTLMs = int(time.Minute / time.Millisecond)
				},
			})
			srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "doc://{id}", Name: "doc"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				reads.Add(1)
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: strings.Repeat("x", 4096)}}}, nil
			})
			m, _ := busManager(t, &Options{ProbeTimeout: 20 * time.Second, Dialer: inMemoryDialer(t, srv)})
			cfg := config.Server{Name: "s", Kind: config.TransportHTTP, URL: "http://in-memory/s", ProtocolVersion: version}
			if st, err := m.Connect(ctx, cfg, false); err != nil || st.State != StateReady {
				t.Fatalf("Connect: got %v, %v; want ready", st.State, err)
			}

			const docs = 16
			for i := range docs {
				if _, err := m.ReadResource(ctx, "s", fmt.Sprintf("doc://%d", i)); err != nil {
					t.Fatalf("ReadResource %d: %v", i, err)
				}
			}
			if _, err := m.ReadResource(ctx, "s", "doc://0"); err != nil {
				t.Fatal(err)
			}
			if got := reads.Load(); got != docs+1 {
				t.Errorf("reads that reached the server: got %d, want %d", got, docs+1)
			}
			if kept := sdkCacheEntries(); kept != 0 {
				t.Errorf("read results the SDK's client keeps after %d reads: got %d, want 0", docs+1, kept)
			}
		})
	}
}

// sdkCacheEntries counts the entries of the SDK client's cache of read
// results that are in use: the objects its methodCache.put makes itself,
// not the room of its map, when ReadResource puts a result.
func sdkCacheEntries() int64 {
	return testheap.InUse(func(stack []string) bool {
		for i := 1; i+1 < len(stack); i++ {
			put := strings.HasPrefix(stack[i], "github.com/modelcontextprotocol/go-sdk/mcp.(*methodCache[") && strings.HasSuffix(stack[i], "]).put")
			if put && stack[i-1] == "runtime.newobject" && stack[i+1] == "github.com/modelcontextprotocol/go-sdk/mcp.(*ClientSession).ReadResource" {
				return true
			}
		}
		return false
	})
}
