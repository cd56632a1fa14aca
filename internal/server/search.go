package server

import (
	"context"
	"slices"
	"strings"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
	"github.com/mcpd-project/mcpd/internal/toolsearch"
)

// Match counts of SearchTools.
const (
	defaultSearchLimit = 10
	maxSearchLimit     = 100
)

func (h *hub) SearchTools(ctx context.Context, req *mcpdv1.SearchToolsRequest) (*mcpdv1.SearchToolsResponse, error) {
	if strings.TrimSpace(req.GetQuery()) == "" {
		return nil, toStatus(invalidf("query is required"))
	}
	if n := len(req.GetQuery()); n > toolsearch.MaxQueryBytes {
		return nil, toStatus(invalidf("query is %d bytes, more than %d: describe the task in fewer words", n, toolsearch.MaxQueryBytes))
	}
	limit := int(req.GetLimit())
	switch {
	case limit < 0:
		return nil, toStatus(invalidf("limit must not be negative"))
	case limit == 0:
		limit = defaultSearchLimit
	case limit > maxSearchLimit:
		limit = maxSearchLimit
	}
	for _, s := range req.GetServers() {
		if _, err := h.mgr.Get(s); err != nil {
			return nil, toStatus(err)
		}
	}
	tools, err := h.mgr.Tools("")
	if err != nil {
		return nil, toStatus(err)
	}
	tools = slices.DeleteFunc(tools, func(t mcpclient.Tool) bool {
		if len(req.GetServers()) > 0 && !slices.Contains(req.GetServers(), t.Server) {
			return true
		}
		return !h.allowed(ctx, access.Action{Verb: access.CallTool, Server: t.Server, Tool: t.Name})
	})
	docs := make([]toolsearch.Document, len(tools))
	for i, t := range tools {
		docs[i] = toolsearch.ToolDocument(t.Name, t.Tool)
	}
	out := &mcpdv1.SearchToolsResponse{Matches: []*mcpdv1.ToolMatch{}}
	for _, m := range toolsearch.Rank(docs, req.GetQuery(), limit) {
		out.Matches = append(out.Matches, &mcpdv1.ToolMatch{Tool: toolToProto(tools[m.Index]), Score: m.Score})
	}
	return out, nil
}
