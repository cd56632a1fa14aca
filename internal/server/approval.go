package server

import (
	"context"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// approve asks the agent registered for approval requests of server
// whether the call that need describes (req says by whom, with which
// arguments, and whether it is a poll) may proceed. It returns nil when
// the agent approves, the caller's own cancellation, or a
// *access.RuleDeniedError saying why not.
func (h *hub) approve(ctx context.Context, need *access.ApprovalRequiredError, server string, req mcpclient.ApprovalRequest) error {
	req.Tool, req.Rule = need.Tool, need.Rule
	return need.Settle(h.mgr.AskApproval(ctx, server, &req))
}
