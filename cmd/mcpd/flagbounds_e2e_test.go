package main

import (
	"path/filepath"
	"strings"
	"testing"
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
	} {
		args := append([]string{"--listen", sock, "--scopes", "", "--config", emptyConfig(t)}, tc.args...)
		code, out := runMcpd(ctx, t, args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("mcpd %q: got exit code %d and output %q, want 2 and %q", tc.args, code, out, tc.want)
		}
	}
}
