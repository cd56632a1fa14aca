package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// statelessVersion is the first protocol revision without sessions.
const statelessVersion = "2026-07-28"

// routeEra sends a request to the handler of its protocol era. A
// 2026-07-28 request says so in its MCP-Protocol-Version header. One
// without the header whose _meta names that revision (or that is
// server/discover, its first request) goes to the same handler, which
// refuses it (-32020: the revision requires the header), so that the host
// learns what is wrong rather than getting the initialize era's answer;
// anything else is the initialize era.
func (g *Gateway) routeEra(w http.ResponseWriter, r *http.Request) {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		g.byVersion(v).ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost || r.Body == nil || r.Header.Get("Mcp-Session-Id") != "" {
		g.stateful.ServeHTTP(w, r)
		return
	}
	limit := g.opts.MaxMessageBytes
	if limit <= 0 {
		limit = 16 << 20
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if bodyIsStateless(body) {
		g.stateless.ServeHTTP(w, r)
		return
	}
	g.stateful.ServeHTTP(w, r)
}

func (g *Gateway) byVersion(v string) http.Handler {
	if v >= statelessVersion {
		return g.stateless
	}
	return g.stateful
}

// bodyIsStateless reports whether a POST body holds a 2026-07-28 request.
func bodyIsStateless(body []byte) bool {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return false // a batch or garbage: the initialize era's handler answers it
	}
	if msg.Method == "server/discover" {
		return true
	}
	v, _ := msg.Params.Meta[mcp.MetaKeyProtocolVersion].(string)
	return v >= statelessVersion
}
