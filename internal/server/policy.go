package server

import (
	"slices"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// CommandPolicy restricts which commands ConnectServer may start. Servers
// from the daemon's own config file are trusted and not checked.
type CommandPolicy struct {
	// Allowed lists the commands a request may name, compared as exact
	// strings (so "npx" does not allow "/tmp/npx"). Empty allows every
	// command.
	Allowed []string
}

// Check refuses a stdio server whose command the policy does not allow.
func (p *CommandPolicy) Check(cfg config.Server) error {
	if p == nil || len(p.Allowed) == 0 || cfg.Kind != config.TransportStdio {
		return nil
	}
	if slices.Contains(p.Allowed, cfg.Command) {
		return nil
	}
	return mcpclient.Deny("command %q is not in mcpd's --allow-command list", cfg.Command)
}
