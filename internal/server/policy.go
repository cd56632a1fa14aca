package server

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// CommandPolicy restricts which commands ConnectServer may start, and,
// while it restricts them, keeps ConnectServer from naming local files.
// Servers from the daemon's own config file are trusted and not checked;
// the ones a state file restores came from ConnectServer and are checked
// again.
type CommandPolicy struct {
	// Allowed lists the commands a request may name, compared as exact
	// strings (so "npx" does not allow "/tmp/npx"). Empty allows every
	// command.
	Allowed []string
	// None allows no command at all (--allow-command none), whatever
	// Allowed holds.
	None bool
}

// Check refuses a stdio server whose command the policy does not allow,
// and, when the policy allows not every command, a server whose oauth
// block names a file, or that has a tls block (which names files).
func (p *CommandPolicy) Check(cfg config.Server) error {
	if p == nil || (!p.None && len(p.Allowed) == 0) {
		return nil
	}
	if field := oauthFile(cfg.OAuth); field != "" {
		// mcpd reads the file as its own user and sends it (or a
		// signature made with it) to an authorization server the request
		// names: any file of that user, its API token file among them.
		return mcpclient.Deny("oauth.%s: a server added through the API names no local file while --allow-command is set; give the value itself, or put the server in the config file", field)
	}
	if cfg.TLS != nil {
		// The same for a client key, which proves mcpd's identity to a
		// server the request names, and for a CA file, which decides whom
		// mcpd trusts with the server's headers.
		return mcpclient.Deny("tls: a server added through the API names no local file while --allow-command is set; put the server in the config file")
	}
	if cfg.Kind != config.TransportStdio {
		return nil
	}
	if p.None {
		return mcpclient.Deny("command %q: mcpd starts no command for ConnectServer (--allow-command none)", cfg.Command)
	}
	if !slices.Contains(p.Allowed, cfg.Command) {
		return mcpclient.Deny("command %q is not in mcpd's --allow-command list", cfg.Command)
	}
	// A relative path such as "bin/server" is found from the working
	// directory: with a cwd of the request's choosing it could name any
	// program.
	if cfg.Cwd != "" && !filepath.IsAbs(cfg.Command) && strings.ContainsRune(cfg.Command, filepath.Separator) {
		return mcpclient.Deny("command %q is a relative path: with cwd set it is not the command --allow-command allows; allow an absolute path", cfg.Command)
	}
	// The dynamic loader's variables load code of the request's choosing
	// into any dynamically linked program, whatever the list allows.
	for _, name := range slices.Sorted(maps.Keys(cfg.Env)) {
		if strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "DYLD_") {
			return mcpclient.Deny("env %s: the dynamic loader's variables would load code of the request's choosing into command %q, so --allow-command does not let a request set them", name, cfg.Command)
		}
	}
	// A command without a slash is looked up in the server's own PATH when
	// its env sets one: with a PATH of the request's choosing, "npx" could
	// be any program.
	if _, ok := cfg.Env["PATH"]; ok && !strings.ContainsRune(cfg.Command, filepath.Separator) {
		return mcpclient.Deny("command %q with PATH in its env: the server's PATH finds it, so it is not the command --allow-command allows; allow an absolute path", cfg.Command)
	}
	return nil
}

// oauthFile names the field of o that names a local file, "" if none.
func oauthFile(o *config.OAuth) string {
	switch {
	case o == nil:
		return ""
	case o.PrivateKeyFile != "":
		return "private_key_file"
	case o.AssertionFile != "":
		return "assertion_file"
	case o.IdP != nil && o.IdP.IDTokenFile != "":
		return "idp.id_token_file"
	}
	return ""
}
