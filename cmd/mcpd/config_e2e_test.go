package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestConfigFile starts mcpd with a .mcp.json holding a good server and
// broken entries: the good one serves, each broken one is a FAILED server
// that says why, and ${VAR} references are expanded from mcpd's
// environment.
func TestConfigFile(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	cfg := map[string]any{"mcpServers": map[string]any{
		"good": map[string]any{
			"command": mcpdBinary(t),
			// The demo server ignores arguments after demo-server. Status
			// shows them as written (a value may be a secret).
			"args": []string{"demo-server", "${MCPD_E2E_SET}", "${MCPD_E2E_UNSET_WITH_DEFAULT:-the-default}", "${MCPD_E2E_SET:-unused}"},
			// The child starts only in an existing directory: the server
			// being ready shows that both forms expanded.
			"cwd": "${MCPD_E2E_DIR}${MCPD_E2E_UNSET_WITH_DEFAULT:-}",
		},
		"unset-var":  map[string]any{"command": "${MCPD_E2E_NEVER_SET}"},
		"no-command": map[string]any{"args": []string{"serve"}},
		"no-binary":  map[string]any{"command": "/nonexistent/mcpd-e2e-server"},
		// VS Code prompts for ${input:...} values; mcpd cannot.
		"vscode-input": map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}, "env": map[string]any{"API_KEY": "${input:api-key}"}},
	}}
	d := startDaemon(ctx, t, daemonOptions{
		config: writeConfig(t, mustJSON(t, cfg)),
		env:    []string{"MCPD_E2E_SET=from-env", "MCPD_E2E_DIR=" + t.TempDir()},
	})

	good := d.waitServer(ctx, t, "good", mcpdv1.ServerState_SERVER_STATE_READY)
	wantArgs := []string{"demo-server", "${MCPD_E2E_SET}", "${MCPD_E2E_UNSET_WITH_DEFAULT:-the-default}", "${MCPD_E2E_SET:-unused}"}
	if !slices.Equal(good.GetArgs(), wantArgs) {
		t.Errorf("good args: got %q, want %q", good.GetArgs(), wantArgs)
	}
	resp := d.mustCall(ctx, t, "mcp__good__echo", map[string]any{"message": "configured"})
	if text(resp) != "configured" {
		t.Errorf("good echo: got %q, want %q", text(resp), "configured")
	}

	for _, tc := range []struct {
		name string
		want []string // in last_error
	}{
		{"unset-var", []string{"MCPD_E2E_NEVER_SET", "not set"}},
		{"no-command", []string{"command"}},
		{"no-binary", []string{"/nonexistent/mcpd-e2e-server", "no such file"}},
		{"vscode-input", []string{"env.API_KEY", "${input:api-key}", "VS Code", "cannot prompt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := d.waitServer(ctx, t, tc.name, mcpdv1.ServerState_SERVER_STATE_FAILED)
			for _, w := range tc.want {
				if !strings.Contains(s.GetLastError(), w) {
					t.Errorf("last_error: got %q, want it to contain %q", s.GetLastError(), w)
				}
			}
		})
	}

	list, err := d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.GetServers() {
		names = append(names, s.GetName())
	}
	if want := []string{"good", "no-binary", "no-command", "unset-var", "vscode-input"}; !slices.Equal(names, want) {
		t.Errorf("servers: got %v, want %v (sorted, and no demo server when --config is given)", names, want)
	}
}

// TestConfigServersKeyStartsTogether starts mcpd with a config under the
// "servers" key whose two servers each wait for the other before they read
// anything: both become READY only if mcpd starts them side by side. Each
// then reports what its ${VAR} references in command, args, env and cwd
// expanded to.
func TestConfigServersKeyStartsTogether(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	rendezvousDir, cwd := t.TempDir(), t.TempDir()
	entry := func(name, peer string) map[string]any {
		return map[string]any{
			"command": "${MCPD_E2E_FAKE}",
			"args":    []string{"${MCPD_E2E_SET}", "${MCPD_E2E_UNSET:-fallback}", "plain"},
			"env": map[string]any{
				fakeServerEnv:     fakeRendezvous,
				fakeNameEnv:       name,
				fakePeersEnv:      peer,
				fakeRendezvousEnv: "${MCPD_E2E_RENDEZVOUS}",
				fakeValueEnv:      "${MCPD_E2E_SET}-${MCPD_E2E_UNSET:-x}",
			},
			"cwd": "${MCPD_E2E_CWD}",
		}
	}
	cfg := map[string]any{"servers": map[string]any{
		"left":  entry("left", "right"),
		"right": entry("right", "left"),
	}}
	d := startDaemon(ctx, t, daemonOptions{
		config: writeConfig(t, mustJSON(t, cfg)),
		env: []string{
			"MCPD_E2E_FAKE=" + testBinary(t),
			"MCPD_E2E_SET=from-env",
			"MCPD_E2E_RENDEZVOUS=" + rendezvousDir,
			"MCPD_E2E_CWD=" + cwd,
		},
	})

	wantCwd, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"left", "right"} {
		d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY)
		got := d.describe(ctx, t, name)
		if want := []string{"from-env", "fallback", "plain"}; !slices.Equal(got.Args, want) {
			t.Errorf("%s args: got %q, want %q", name, got.Args, want)
		}
		if gotCwd, err := filepath.EvalSymlinks(got.Cwd); err != nil || gotCwd != wantCwd {
			t.Errorf("%s cwd: got %q (%v), want %q", name, got.Cwd, err, wantCwd)
		}
		if want := "from-env-x"; got.Value != want {
			t.Errorf("%s env %s: got %q, want %q", name, fakeValueEnv, got.Value, want)
		}
	}
}

// describe calls the describe tool of the rendezvous fake named server.
func (d *daemon) describe(ctx context.Context, t *testing.T, server string) describe {
	t.Helper()
	resp := d.mustCall(ctx, t, "mcp__"+server+"__describe", map[string]any{})
	var got describe
	if err := json.Unmarshal([]byte(mustJSON(t, resp.GetStructuredContent().AsInterface())), &got); err != nil {
		t.Fatalf("%s describe: %v", server, err)
	}
	return got
}

// TestMaxProcs checks that --max-procs sets how many threads run mcpd's Go
// code, and that a server mcpd starts keeps its own default. The value is
// one more than any default here, so that a flag left unapplied shows.
func TestMaxProcs(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	// The line is written as serving starts, so it may trail the health
	// check that startDaemon waits for.
	servingWith := func(d *daemon, procs int) {
		t.Helper()
		poll(ctx, t, fmt.Sprintf("a \"mcpd serving\" log line with procs %d", procs), func() (bool, error) {
			return findLogLine(d.log.String(), func(m map[string]any) bool {
				return m["message"] == "mcpd serving" && m["procs"] == float64(procs)
			}), nil
		})
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		servingWith(startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)}), 1)
	}

	procs := max(runtime.NumCPU(), runtime.GOMAXPROCS(0)) + 1
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--max-procs", strconv.Itoa(procs)}})
	servingWith(d, procs)
	d.connect(ctx, t, "child", testBinary(t), nil, map[string]string{
		fakeServerEnv:     fakeRendezvous,
		fakeNameEnv:       "child",
		fakePeersEnv:      "child",
		fakeRendezvousEnv: t.TempDir(),
	})
	d.waitServer(ctx, t, "child", mcpdv1.ServerState_SERVER_STATE_READY)
	if got := d.describe(ctx, t, "child").Procs; got == procs {
		t.Errorf("server's GOMAXPROCS: got %d, mcpd's own; want the server's default", got)
	}
}

// TestConfigDisabledTools reads "disabledTools", with which Windsurf,
// Roo Code and Kiro keep tools of a server from the model, as toolsDeny:
// the tools it names are hidden and refused, not exposed with a warning
// that the field is not understood.
func TestConfigDisabledTools(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: writeConfig(t, mustJSON(t, map[string]any{"mcpServers": map[string]any{
		"demo": map[string]any{"command": mcpdBinary(t), "args": []string{"demo-server"}, "disabledTools": []string{"echo", "weather"}},
	}}))})
	s := d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	if w := s.GetConfigWarnings(); len(w) > 0 {
		t.Errorf("config warnings: got %q, want none", w)
	}
	tools, err := d.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.GetTools() {
		names = append(names, tool.GetToolName())
	}
	if slices.Contains(names, "echo") || slices.Contains(names, "weather") || !slices.Contains(names, "add") {
		t.Errorf("tools: got %q, want add and neither echo nor weather", names)
	}
	_, err = d.call(ctx, t, "mcp__demo__echo", map[string]any{"message": "hi"}, 0)
	wantCode(t, err, codes.PermissionDenied)
}
