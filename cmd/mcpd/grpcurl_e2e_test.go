package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// grpcurlEnv names the grpcurl executable (make tools installs one).
const grpcurlEnv = "MCPD_GRPCURL_BIN"

// TestGrpcurl drives mcpd the way an operator does: grpcurl over server
// reflection, with no generated code.
func TestGrpcurl(t *testing.T) {
	t.Parallel()
	bin := grpcurlBinary(t)
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	grpcurl := func(t *testing.T, args ...string) string {
		t.Helper()
		args = append([]string{"-plaintext", "-unix"}, args...)
		cmd := exec.CommandContext(ctx, bin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("grpcurl %q: %v\n%s", args, err, stderr.String())
		}
		return stdout.String()
	}

	t.Run("list", func(t *testing.T) {
		out := grpcurl(t, d.sock, "list")
		for _, want := range []string{"mcpd.v1.MCPHub", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
			if !strings.Contains(out, want) {
				t.Errorf("grpcurl list: got %q, want %s in it", out, want)
			}
		}
	})

	t.Run("CallTool", func(t *testing.T) {
		out := grpcurl(t, "-d", `{"name": "mcp__demo__add", "arguments": {"a": 1, "b": 2}}`, d.sock, "mcpd.v1.MCPHub/CallTool")
		var resp struct {
			StructuredContent struct {
				Sum float64 `json:"sum"`
			} `json:"structuredContent"`
		}
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			t.Fatalf("grpcurl output %q: %v", out, err)
		}
		if resp.StructuredContent.Sum != 3 {
			t.Errorf("sum: got %v, want 3 (output %q)", resp.StructuredContent.Sum, out)
		}
	})

	t.Run("health", func(t *testing.T) {
		out := grpcurl(t, "-d", `{"service": "mcpd.server/demo"}`, d.sock, "grpc.health.v1.Health/Check")
		if !strings.Contains(out, "SERVING") {
			t.Errorf("health of demo: got %q, want SERVING", out)
		}
	})
}

// grpcurlBinary is the grpcurl executable MCPD_GRPCURL_BIN names; without
// one the test is skipped, or fails when MCPD_E2E_REQUIRED=1.
func grpcurlBinary(t *testing.T) string {
	t.Helper()
	return externalBinary(t, grpcurlEnv, "grpcurl", "")
}
