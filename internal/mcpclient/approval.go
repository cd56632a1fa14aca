package mcpclient

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// AskApproval asks the agent registered for approval requests of server
// whether the call req describes may proceed, filling in the tool's
// annotations. It returns "" when the agent approves, else why the call
// may not proceed (the agent denied it, no agent is attached, or none
// answered in time); err is the caller's own cancellation. Every edge that
// enforces ask rules goes through here.
func (m *Manager) AskApproval(ctx context.Context, server string, req *ApprovalRequest) (denied string, err error) {
	if req.Annotations == nil {
		req.Annotations = m.toolAnnotations(server, req.Tool)
	}
	if m.opts.Requests == nil {
		return "no agent is attached for approval requests", nil
	}
	reply, err := m.opts.Requests.Approve(ctx, server, req)
	switch {
	case errors.Is(err, ErrNoApprover):
		return "no agent is attached for approval requests", nil
	case errors.Is(err, ErrApprovalTimeout):
		return "no agent answered the approval request in time", nil
	case err != nil:
		return "", err // the caller gave up
	case !reply.Approved:
		reason := "the agent denied it"
		if reply.Reason != "" {
			reason += ": " + reply.Reason
		}
		return reason, nil
	}
	return "", nil
}

// toolAnnotations returns the annotations of a server's tool, by its
// qualified name, or nil.
func (m *Manager) toolAnnotations(server, qualified string) *mcp.ToolAnnotations {
	if server == "" {
		return nil
	}
	tools, err := m.Tools(server)
	if err != nil {
		return nil
	}
	for _, t := range tools {
		if t.Name == qualified {
			return t.Tool.Annotations
		}
	}
	return nil
}
