package server

import (
	"context"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// approve asks the agent registered for approval requests of server
// whether the call that need describes may proceed. It returns nil when
// the agent approves, the caller's own cancellation, or a
// *access.RuleDeniedError saying why not.
func (h *hub) approve(ctx context.Context, caller access.Caller, need *access.ApprovalRequiredError, server string, args map[string]any) error {
	return need.Settle(h.mgr.AskApproval(ctx, server, &mcpclient.ApprovalRequest{
		Tool: need.Tool, Arguments: args, Rule: need.Rule, Caller: caller.Name,
	}))
}
