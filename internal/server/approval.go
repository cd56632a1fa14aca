package server

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// approve asks the agent registered for approval requests of server
// whether the call that need describes may proceed. It returns nil when
// the agent approves, the caller's own cancellation, or a
// *access.RuleDeniedError saying why not: the agent denied it, no agent
// is attached, or none answered in time.
func (h *hub) approve(ctx context.Context, caller access.Caller, need *access.ApprovalRequiredError, server string, args map[string]any) error {
	req := &mcpclient.ApprovalRequest{
		Tool:        need.Tool,
		Arguments:   args,
		Annotations: h.toolAnnotations(server, need.Tool),
		Rule:        need.Rule,
		Caller:      caller.Name,
	}
	reply, err := h.broker.Approve(ctx, server, req)
	switch {
	case errors.Is(err, mcpclient.ErrNoApprover):
		return need.Denied("no agent is attached for approval requests")
	case errors.Is(err, mcpclient.ErrApprovalTimeout):
		return need.Denied("no agent answered the approval request in time")
	case err != nil:
		return err // the caller gave up
	case !reply.Approved:
		reason := "the agent denied it"
		if reply.Reason != "" {
			reason += ": " + reply.Reason
		}
		return need.Denied(reason)
	}
	return nil
}

// toolAnnotations returns the annotations of a server's tool, or nil.
func (h *hub) toolAnnotations(server, tool string) *mcp.ToolAnnotations {
	if server == "" {
		return nil
	}
	tools, err := h.mgr.Tools(server)
	if err != nil {
		return nil
	}
	for _, t := range tools {
		if t.Name == tool {
			return t.Tool.Annotations
		}
	}
	return nil
}
