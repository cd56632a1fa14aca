package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestOAuthStateDirUnusable: a default state directory that cannot be made
// (no writable home, a read-only root file system) leaves tokens in memory
// and mcpd serving; a directory named with --oauth-state-dir that cannot
// be made stops mcpd at start.
func TestOAuthStateDirUnusable(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := shortTempDir(t)
	// A path under a regular file can never be made, not even by root.
	blocker := filepath.Join(dir, "not-a-dir")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("default", func(t *testing.T) {
		d := startDaemon(ctx, t, daemonOptions{env: []string{"XDG_STATE_HOME=" + blocker, "HOME=" + blocker}})
		d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
		if log := d.log.String(); !strings.Contains(log, "OAuth tokens are kept in memory only") {
			t.Errorf("mcpd's log says nothing about keeping tokens in memory:\n%s", log)
		}
	})
	t.Run("explicit", func(t *testing.T) {
		sock := filepath.Join(shortTempDir(t), "mcpd.sock")
		code, out := runMcpd(ctx, t, "--listen", "unix://"+sock, "--config", emptyConfig(t), "--oauth-state-dir", filepath.Join(blocker, "oauth"))
		if code != 1 || !strings.Contains(out, "oauth state directory") {
			t.Errorf("got exit code %d and output %q, want 1 and an oauth state directory error", code, out)
		}
	})
}
