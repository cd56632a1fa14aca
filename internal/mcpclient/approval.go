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
// answered in time); err is the caller's own cancellation, or why the call
// could not run whatever the agent answered (see callable), in which case
// nobody is asked. Every edge that enforces ask rules goes through here.
func (m *Manager) AskApproval(ctx context.Context, server string, req *ApprovalRequest) (denied string, err error) {
	if err := m.callable(server, req.Tool); err != nil {
		return "", err
	}
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

// callable returns the error a call of the qualified tool on server would
// end with whatever an agent answered, so that no agent is asked about it:
// the server is unknown, its tool filter (toolsAllow, toolsDeny) hides the
// tool, which comes before any rule, or the server is READY and does not
// have it. A server that is not READY may have the tool once it is: the
// call is asked about, and waits for it.
func (m *Manager) callable(server, qualified string) error {
	s, tool, ok := SplitQualifiedToolName(qualified)
	if !ok || s != server {
		return nil
	}
	u, err := m.lookup(server)
	if err != nil {
		return err
	}
	if !u.cfg.AllowsTool(tool) {
		return errorf(ErrPermissionDenied, "tool %q of server %q is denied by the server's tool filter", tool, server)
	}
	if _, err := u.ready(); err == nil && !u.hasTool(tool) {
		return errorf(ErrNotFound, "server %q has no tool %q", server, tool)
	}
	return nil
}
