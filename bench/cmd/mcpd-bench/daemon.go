package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

const (
	// readyTimeout bounds how long mcpd may take to serve and to get every
	// upstream ready; both are sub-second normally.
	readyTimeout = 30 * time.Second
	// readyPoll is the interval between readiness checks.
	readyPoll = 20 * time.Millisecond
	// stopTimeout bounds mcpd's shutdown after SIGTERM before it is killed;
	// mcpd itself gives servers --stop-grace (2s) twice at most.
	stopTimeout = 15 * time.Second
	// logTailBytes is how much of mcpd's log an error shows.
	logTailBytes = 2048
)

// daemon is a running mcpd and a gRPC connection to it. stop ends both.
type daemon struct {
	listener string // "tcp" or "unix"
	addr     string // the --listen value
	logPath  string
	cmd      *exec.Cmd
	exited   chan struct{} // closed once cmd.Wait returned
	waitErr  error         // cmd.Wait's result, read after exited
	conn     *grpc.ClientConn
	hub      mcpdv1.MCPHubClient
	health   healthpb.HealthClient
}

// startDaemon starts bin serving on a fresh loopback port ("tcp") or a
// socket in dir ("unix") with the given config file and more flags. Its
// output goes to a log file in dir.
func startDaemon(bin, listener, dir, configPath string, args []string) (*daemon, error) {
	d := &daemon{listener: listener, exited: make(chan struct{})}
	var target string
	switch listener {
	case "tcp":
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		d.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		target = "passthrough:///" + d.addr
	case "unix":
		sock := filepath.Join(dir, "mcpd.sock")
		d.addr = "unix://" + sock
		target = d.addr
	default:
		return nil, fmt.Errorf("unknown listener %q", listener)
	}
	d.logPath = filepath.Join(dir, "mcpd-"+listener+".log")
	logFile, err := os.Create(d.logPath)
	if err != nil {
		return nil, fmt.Errorf("create mcpd log: %w", err)
	}
	defer logFile.Close() // the child holds its own descriptor

	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("grpc client for %s: %w", d.addr, err)
	}
	d.conn = conn
	d.hub = mcpdv1.NewMCPHubClient(conn)
	d.health = healthpb.NewHealthClient(conn)

	d.cmd = exec.Command(bin, append([]string{"--listen", d.addr, "--config", configPath}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = logFile, logFile
	dieWithBench(d.cmd)
	if err := d.cmd.Start(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	return d, nil
}

// freePort asks the kernel for an unused loopback port. Another process
// could take it before mcpd binds it; mcpd would then fail to start, and
// the bench says so.
func freePort() (int, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port, nil
}

// upstreamInfo is what the bench learns about a server mcpd connected.
type upstreamInfo struct {
	pid             int
	protocolVersion string
}

// waitReady waits until mcpd serves health checks and every named server is
// READY, and returns each server's info. A FAILED server, an exited mcpd or
// the timeout is an error that quotes mcpd's log.
func (d *daemon) waitReady(ctx context.Context, servers []string) (map[string]upstreamInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	ticker := time.NewTicker(readyPoll)
	defer ticker.Stop()
	info := map[string]upstreamInfo{}
	var last string
	for {
		done, why, err := d.checkReady(ctx, servers, info)
		if err != nil {
			return nil, d.errorWithLog(err)
		}
		if done {
			return info, nil
		}
		last = why
		select {
		case <-ticker.C:
		case <-d.exited:
			return nil, d.errorWithLog(fmt.Errorf("mcpd exited while starting: %v", d.waitErr))
		case <-ctx.Done():
			return nil, d.errorWithLog(fmt.Errorf("mcpd not ready (%s): %w", last, ctx.Err()))
		}
	}
}

// checkReady makes one round of readiness checks. It returns done once all
// is ready, otherwise what it waits for; err only for a server that failed.
func (d *daemon) checkReady(ctx context.Context, servers []string, info map[string]upstreamInfo) (done bool, why string, err error) {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	h, err := d.health.Check(rctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return false, "health: " + err.Error(), nil
	}
	if h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return false, "health: " + h.GetStatus().String(), nil
	}
	for _, name := range servers {
		resp, err := d.hub.GetServer(rctx, &mcpdv1.GetServerRequest{Name: name})
		if err != nil {
			return false, "GetServer " + name + ": " + err.Error(), nil
		}
		s := resp.GetServer()
		switch s.GetState() {
		case mcpdv1.ServerState_SERVER_STATE_READY:
			info[name] = upstreamInfo{pid: int(s.GetPid()), protocolVersion: s.GetProtocolVersion()}
		case mcpdv1.ServerState_SERVER_STATE_FAILED, mcpdv1.ServerState_SERVER_STATE_STOPPED:
			return false, "", fmt.Errorf("server %q is %s: %s", name, s.GetState(), s.GetLastError())
		default:
			return false, "server " + name + " is " + s.GetState().String(), nil
		}
	}
	return true, "", nil
}

// stop closes the connection, sends mcpd SIGTERM and waits for it to exit,
// killing it after stopTimeout. It is called once.
func (d *daemon) stop() error {
	connErr := d.conn.Close()
	select {
	case <-d.exited:
		return errors.Join(connErr, d.exitError())
	default:
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal mcpd: %w", err)
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-d.exited:
		return errors.Join(connErr, d.exitError())
	case <-timer.C:
		_ = d.cmd.Process.Kill()
		<-d.exited
		return d.errorWithLog(fmt.Errorf("mcpd (%s) did not stop within %v of SIGTERM; killed", d.listener, stopTimeout))
	}
}

func (d *daemon) exitError() error {
	if d.waitErr != nil {
		return d.errorWithLog(fmt.Errorf("mcpd (%s) exited: %w", d.listener, d.waitErr))
	}
	return nil
}

// errorWithLog appends the tail of mcpd's log to err.
func (d *daemon) errorWithLog(err error) error {
	b, rerr := os.ReadFile(d.logPath)
	if rerr != nil || len(b) == 0 {
		return err
	}
	if len(b) > logTailBytes {
		b = b[len(b)-logTailBytes:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return fmt.Errorf("%w\nmcpd log (%s), last lines:\n%s", err, d.logPath, strings.TrimRight(string(b), "\n"))
}
