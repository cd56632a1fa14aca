package main

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestFlagsRefusedAtStart: values that would break mcpd once it runs are
// refused before it starts, with exit code 2 and a message naming the
// flag.
func TestFlagsRefusedAtStart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	sock := "unix://" + filepath.Join(shortTempDir(t), "mcpd.sock")
	for _, tc := range []struct {
		args []string
		want string
	}{
		// GOMAXPROCS 100000 ended mcpd in thread exhaustion.
		{[]string{"--max-procs", "100000"}, "mcpd: --max-procs 100000: want 0 (one per CPU) to 1024\n"},
		// --allow-command "$LIST" with LIST empty allowed every command.
		{[]string{"--allow-command", ""}, "mcpd: invalid value \"\" for flag -allow-command: names no command: leave --allow-command out to allow every command, or give --allow-command none to allow none\n"},
		{[]string{"--allow-command", ","}, "names no command"},
		// Each keepalive probe waits half the interval: all of them failed.
		{[]string{"--keepalive-interval", "1ms"}, "mcpd: --keepalive-interval 1ms: want 0 (off) or at least 1s\n"},
	} {
		args := append([]string{"--listen", sock, "--scopes", "", "--config", emptyConfig(t)}, tc.args...)
		code, out := runMcpd(ctx, t, args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("mcpd %q: got exit code %d and output %q, want 2 and %q", tc.args, code, out, tc.want)
		}
	}
}

// TestAllowNoCommand: with --allow-command none, ConnectServer starts no
// command, not even one named none.
func TestAllowNoCommand(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--allow-command", "none"}})
	for _, command := range []string{testBinary(t), "none"} {
		_, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: stdioConfig("x", command, nil, nil)})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "--allow-command none") {
			t.Errorf("ConnectServer %s: got %v, want PERMISSION_DENIED naming --allow-command none", command, err)
		}
	}
}
