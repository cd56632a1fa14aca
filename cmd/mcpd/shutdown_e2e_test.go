package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// reapTimeout bounds the wait for a process that was killed to be marked
// dead by the kernel.
const reapTimeout = 5 * time.Second

// TestShutdown stops mcpd with SIGTERM or SIGINT and checks that it exits
// with status 0 and leaves no process behind: neither its servers nor a
// grandchild that one of them started.
func TestShutdown(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			dir := shortTempDir(t)
			pidFile := filepath.Join(dir, "grandchild.pid")
			cfg := map[string]any{"mcpServers": map[string]any{
				"demo": map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}},
				"parent": map[string]any{
					"command": testBinary(t),
					"env":     map[string]string{fakeServerEnv: fakeGrandchild, fakePidFileEnv: pidFile},
				},
			}}
			d := startDaemon(ctx, t, daemonOptions{config: writeConfig(t, mustJSON(t, cfg))})

			var pids []int
			for _, name := range []string{"demo", "parent"} {
				s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
				if s.GetPid() <= 0 {
					t.Fatalf("server %s: got pid %d, want > 0", name, s.GetPid())
				}
				pids = append(pids, int(s.GetPid()))
			}
			// The fake writes the file before it serves, so it is there now.
			raw, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatalf("grandchild pid: %v", err)
			}
			grandchild, err := strconv.Atoi(strings.TrimSpace(string(raw)))
			if err != nil {
				t.Fatalf("grandchild pid %q: %v", raw, err)
			}
			pids = append(pids, grandchild)
			t.Cleanup(func() {
				// Do not leak the grandchild when mcpd failed to kill it.
				if !processGone(grandchild) {
					_ = syscall.Kill(grandchild, syscall.SIGKILL)
				}
			})
			for _, pid := range pids {
				if processGone(pid) {
					t.Fatalf("process %d is gone before shutdown; the test would prove nothing", pid)
				}
			}

			if code := d.signal(t, sig); code != 0 {
				t.Fatalf("mcpd exit code after %v: got %d, want 0", sig, code)
			}
			// mcpd reaped its children before exiting; the grandchild is an
			// orphan that mcpd must have killed before it exited, so it is
			// dead or about to be marked so: a short bound suffices.
			reapCtx, cancel := context.WithTimeout(ctx, reapTimeout)
			defer cancel()
			for _, pid := range pids {
				poll(reapCtx, t, "process "+strconv.Itoa(pid)+" is gone", func() (bool, error) {
					return processGone(pid), nil
				})
			}
			if !logHasLine(d.log.String(), "mcpd stopped") {
				t.Errorf("mcpd log: no 'mcpd stopped' line")
			}
		})
	}
}
