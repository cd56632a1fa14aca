package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

const (
	// readyPoll is how often the driver asks a starting mcpd for health.
	readyPoll = 20 * time.Millisecond
	// stopTimeout bounds mcpd's graceful exit after SIGTERM (its own
	// shutdown is bounded by --shutdown-timeout and --stop-grace below);
	// then it is killed.
	stopTimeout = 5 * time.Second
)

// daemon is one private mcpd process serving on a Unix socket in its own
// temporary directory. stop ends it and removes the directory.
type daemon struct {
	cmd    *exec.Cmd
	dir    string
	socket string
	exited chan struct{} // closed when cmd.Wait returned
	err    error         // cmd.Wait's result, set before exited closes
}

// startDaemon starts bin with an empty config (no demo server) and waits
// until it reports SERVING on its health service.
func startDaemon(ctx context.Context, bin, logLevel string, log io.Writer) (*daemon, *grpc.ClientConn, error) {
	return startDaemonWith(ctx, bin, logLevel, log, `{"mcpServers":{}}`)
}

// startDaemonWith starts bin with the config given and more flags, and
// waits until it reports SERVING (its configured servers have had their
// first start).
func startDaemonWith(ctx context.Context, bin, logLevel string, log io.Writer, config string, args ...string) (*daemon, *grpc.ClientConn, error) {
	// A short directory: a Unix socket path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "mcpdc-")
	if err != nil {
		return nil, nil, fmt.Errorf("temp dir: %w", err)
	}
	cfgPath := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("write config: %w", err)
	}
	d := &daemon{dir: dir, socket: filepath.Join(dir, "mcpd.sock"), exited: make(chan struct{})}
	d.cmd = exec.Command(bin, append([]string{
		"--listen", "unix://" + d.socket,
		"--config", cfgPath,
		"--scopes", "", // only the config above, whatever the machine has
		"--log-level", logLevel,
		"--log-format", "console",
		"--shutdown-timeout", "2s",
		"--stop-grace", "500ms",
		"--oauth-state-dir", filepath.Join(dir, "oauth"),
	}, args...)...)
	d.cmd.Stdout = log
	d.cmd.Stderr = log
	if err := d.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.exited)
	}()

	conn, err := grpc.NewClient("unix://"+d.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		_ = d.stop()
		return nil, nil, fmt.Errorf("grpc client: %w", err)
	}
	if err := d.waitServing(ctx, healthpb.NewHealthClient(conn)); err != nil {
		conn.Close()
		_ = d.stop()
		return nil, nil, err
	}
	return d, conn, nil
}

// waitServing polls the health service until mcpd is SERVING, mcpd
// exits, or ctx ends.
func (d *daemon) waitServing(ctx context.Context, health healthpb.HealthClient) error {
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		if _, err := os.Stat(d.socket); err == nil {
			callCtx, cancel := context.WithTimeout(ctx, time.Second)
			resp, err := health.Check(callCtx, &healthpb.HealthCheckRequest{})
			cancel()
			if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for mcpd to serve: %w", ctx.Err())
		case <-d.exited:
			return fmt.Errorf("mcpd exited before serving: %v", d.err)
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM, waits for mcpd to exit (killing it after
// stopTimeout) and removes its directory. It reports an exit that was not
// clean. stop is not safe for concurrent use.
func (d *daemon) stop() error {
	defer os.RemoveAll(d.dir)
	select {
	case <-d.exited:
		return fmt.Errorf("mcpd exited early: %v", d.err)
	default:
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal mcpd: %w", err)
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-d.exited:
		if d.err != nil {
			return fmt.Errorf("mcpd exit after SIGTERM: %w", d.err)
		}
		return nil
	case <-timer.C:
		_ = d.cmd.Process.Kill()
		<-d.exited
		return fmt.Errorf("mcpd still running %v after SIGTERM; killed", stopTimeout)
	}
}
