package main

import (
	"os"
	"path/filepath"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestReadinessWaitsForConfiguredServers starts mcpd with two configured
// servers: one that cannot start (it settles FAILED at once) and one that
// waits for a file the test creates. mcpd's overall health must stay
// NOT_SERVING while the second one is starting, and turn SERVING once it
// is ready.
func TestReadinessWaitsForConfiguredServers(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()
	cfg := map[string]any{"mcpServers": map[string]any{
		"gated": map[string]any{
			"command": testBinary(t),
			"env": map[string]any{
				fakeServerEnv:     fakeRendezvous,
				fakeNameEnv:       "gated",
				fakePeersEnv:      "gate",
				fakeRendezvousEnv: dir,
			},
		},
		"broken": map[string]any{
			"command": testBinary(t),
			"env":     map[string]any{fakeServerEnv: fakeExitAtStart},
		},
	}}
	d := startDaemon(ctx, t, daemonOptions{config: writeConfig(t, mustJSON(t, cfg)), unready: true})

	// The gated server runs and waits for the gate: mcpd is starting it.
	poll(ctx, t, "the gated server to start", func() (bool, error) {
		_, err := os.Stat(filepath.Join(dir, "gated"))
		return err == nil, err
	})
	d.waitServer(ctx, t, "broken", mcpdv1.ServerState_SERVER_STATE_FAILED)
	resp, err := d.health.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health check: %v", err)
	}
	if got := resp.GetStatus(); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health while a configured server is starting: got %v, want NOT_SERVING", got)
	}
	if st := d.waitServer(ctx, t, "gated", mcpdv1.ServerState_SERVER_STATE_CONNECTING); st == nil {
		t.Fatal("gated: no status")
	}

	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d.waitHealth(ctx, t, healthpb.HealthCheckResponse_SERVING)
	d.waitServer(ctx, t, "gated", mcpdv1.ServerState_SERVER_STATE_READY)
}
