package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestStrictStart runs mcpd --strict with a config whose servers do not
// all come up: mcpd exits 1 naming those that did not, and the one that
// did start is stopped, not left behind. With every server up, --strict
// serves as usual.
func TestStrictStart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	marker := "strict-e2e-" + filepath.Base(shortTempDir(t))
	demo := map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}, "env": map[string]string{"MCPD_E2E_MARKER": marker}}

	t.Run("a server fails", func(t *testing.T) {
		config := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{
			"good":    demo,
			"crashes": map[string]any{"command": "/bin/sh", "args": []string{"-c", "exit 3"}},
			"invalid": map[string]any{"type": "http"}, // no url
		}}))
		code, out := runMcpd(ctx, t, "--listen", "127.0.0.1:0", "--config", config, "--strict", "--crash-loop-restarts", "1")
		if code != 1 {
			t.Fatalf("mcpd --strict: got exit code %d, want 1\n%s", code, out)
		}
		if !strings.Contains(out, "--strict: servers not ready after their first start: crashes, invalid\n") {
			t.Errorf("output does not name exactly the servers that failed:\n%s", out)
		}
		// The leak check means something only if "good" did start.
		if !strings.Contains(out, `"server":"good","protocol_version"`) {
			t.Fatalf("server good never came up:\n%s", out)
		}
		if pids := processesWithEnv(t, "MCPD_E2E_MARKER="+marker); len(pids) > 0 {
			t.Errorf("mcpd --strict left processes behind: %v", pids)
		}
	})

	t.Run("a server fails while a call runs", func(t *testing.T) {
		// The server fails its first start once the call runs; the call
		// would run for hours. mcpd still exits, its drain bounded by
		// --shutdown-timeout, and the call ends.
		failNow := filepath.Join(shortTempDir(t), "fail-now")
		config := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{
			"good": demo,
			"late": map[string]any{"command": "/bin/sh", "args": []string{"-c", "while [ ! -e " + failNow + " ]; do sleep 0.05; done; exit 3"}},
		}}))
		d := startDaemon(ctx, t, daemonOptions{config: config, unready: true,
			args: []string{"--strict", "--crash-loop-restarts", "1", "--shutdown-timeout", "1s"}})
		d.waitServer(ctx, t, "good", mcpdv1.ServerState_SERVER_STATE_READY)
		stream, err := d.hub.CallToolStream(ctx, &mcpdv1.CallToolStreamRequest{
			Name: "mcp__good__slow", Arguments: mustStruct(t, map[string]any{"steps": 1000, "delay_ms": 10000}),
			Timeout: durationpb.New(time.Hour),
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("the slow call's first progress: %v", err)
		}
		if err := os.WriteFile(failNow, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		select {
		case <-d.exited:
		case <-ctx.Done():
			t.Fatal("mcpd --strict did not exit after a server failed while a call ran")
		}
		if code := d.cmd.ProcessState.ExitCode(); code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
		for {
			if _, err := stream.Recv(); err != nil {
				if status.Code(err) != codes.Unavailable {
					t.Errorf("the call: got %v, want UNAVAILABLE", err)
				}
				break
			}
		}
	})

	t.Run("every server ready", func(t *testing.T) {
		// "off" was disabled through the API (SetServerEnabled), which the
		// state file keeps: on purpose, so not a server that failed; "notes"
		// waits for an agent, which can attach only once mcpd serves.
		state := filepath.Join(shortTempDir(t), "state.json")
		if err := os.WriteFile(state, []byte(`{"mcpServers": {}, "disabled": ["off"]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		config := writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{"good": demo, "off": demo, "notes": map[string]any{"type": "sdk"}}}))
		d := startDaemon(ctx, t, daemonOptions{config: config, args: []string{"--strict", "--state-file", state}})
		d.waitServer(ctx, t, "off", mcpdv1.ServerState_SERVER_STATE_DISABLED)
		d.waitServer(ctx, t, "good", mcpdv1.ServerState_SERVER_STATE_READY)
		d.waitServer(ctx, t, "notes", mcpdv1.ServerState_SERVER_STATE_CONNECTING)
		if _, err := d.call(ctx, t, "mcp__good__echo", map[string]any{"message": "hi"}, 0); err != nil {
			t.Errorf("call through a strict mcpd: %v", err)
		}
	})
}

// processesWithEnv returns the pids of this machine's processes whose
// environment holds entry (KEY=value).
func processesWithEnv(t *testing.T, entry string) []string {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var pids []string
	for _, d := range dirs {
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil {
			continue // not a process, or gone
		}
		for _, e := range bytes.Split(env, []byte{0}) {
			if string(e) == entry {
				pids = append(pids, d.Name())
			}
		}
	}
	return pids
}
