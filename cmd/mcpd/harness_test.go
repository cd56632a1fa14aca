package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

const (
	// testTimeout bounds every test's context. Generous: the machine is
	// shared and slow, and a hang must still end as a failure.
	testTimeout = 60 * time.Second
	// exitTimeout bounds how long a signalled mcpd may take to exit before
	// the harness kills it.
	exitTimeout = 20 * time.Second
	// pollInterval is how often the harness re-checks a condition.
	pollInterval = 20 * time.Millisecond
)

// testContext returns a context that ends with the test or after
// testTimeout.
func testContext(t *testing.T) context.Context {
	t.Helper()
	return contextWithin(t, testTimeout)
}

// contextWithin is the test's context, ended after timeout at the latest.
func contextWithin(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// mcpdBinary is the binary under test (TestMain makes sure MCPD_BIN is set).
func mcpdBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(binEnv)
	if bin == "" {
		t.Fatalf("%s is not set", binEnv)
	}
	return bin
}

// testBinary is this test binary, which runs fake servers.
func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	return exe
}

// shortTempDir is a temporary directory with a short path: a Unix socket
// path must fit in 108 bytes, which t.TempDir's long names can exceed.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mcpd-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// daemonEnv is the environment mcpd runs with: the test's own, minus every
// MCPD_* variable (a developer's MCPD_LISTEN or MCPD_API_TOKEN must not
// change what the tests see), plus extra. HOME, the project directory and
// the managed files point into an empty directory (see homeEnv), so that
// only the config a test gives reaches mcpd; extra may override them.
func daemonEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCPD_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	if home := os.Getenv(homeEnv); home != "" {
		env = append(env,
			"HOME="+home,
			"MCPD_PROJECT="+filepath.Join(home, "project"),
			"MCPD_MANAGED_CONFIG="+filepath.Join(home, "managed-mcp.json"),
			"MCPD_CLAUDE_MANAGED_DIR="+filepath.Join(home, "claude-code"),
		)
	}
	return append(env, extra...)
}

// syncBuffer is a bytes.Buffer safe for one writer and many readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// daemonOptions configure startDaemon.
type daemonOptions struct {
	// listen is --listen; empty means a Unix socket in a temporary dir.
	listen string
	// config is --config; empty runs mcpd's default config (the demo
	// server).
	config string
	// args are more flags; later flags win over the harness defaults.
	args []string
	// env is more environment, "NAME=value".
	env []string
	// creds are the harness client's transport credentials (TLS);
	// default plaintext.
	creds credentials.TransportCredentials
	// unready returns once mcpd listens, without waiting for it to report
	// SERVING (which it does once its configured servers have started).
	unready bool
	// dir is mcpd's working directory; empty means the test's.
	dir string
	// pidNamespace runs mcpd as PID 1 of a PID namespace of its own, as
	// in a container (Linux, as root).
	pidNamespace bool
}

// daemon is one running mcpd process and a gRPC client to it. Its methods
// take the calling (sub)test's t, so that they fail the right test.
type daemon struct {
	cmd    *exec.Cmd
	log    *syncBuffer // mcpd's stdout and stderr
	sock   string      // Unix socket path; "" for TCP
	dialTo string      // network address to reach the listener
	net    string      // "unix" or "tcp"

	exited  chan struct{} // closed when cmd.Wait returned
	waitErr error         // cmd.Wait's result, set before exited is closed

	conn   *grpc.ClientConn
	hub    mcpdv1.MCPHubClient
	health healthpb.HealthClient

	// stacksDir, if set, is where the fake servers write their goroutine
	// stacks on SIGUSR1 (dumpStacks).
	stacksDir string
}

// startDaemon starts mcpd with JSON logs and a short stop grace, waits until
// its health service reports SERVING (its configured servers have had
// their first start), and stops it when the test ends.
func startDaemon(ctx context.Context, t *testing.T, opts daemonOptions) *daemon {
	t.Helper()
	d := &daemon{log: &syncBuffer{}, exited: make(chan struct{})}
	listen := opts.listen
	if listen == "" {
		d.sock = filepath.Join(shortTempDir(t), "mcpd.sock")
		listen = "unix://" + d.sock
	}
	if d.sock != "" {
		d.net, d.dialTo = "unix", d.sock
	} else {
		host, port, err := net.SplitHostPort(listen)
		if err != nil {
			t.Fatalf("listen address %q: %v", listen, err)
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1" // reach a wildcard listener over loopback only
		}
		d.net, d.dialTo = "tcp", net.JoinHostPort(host, port)
	}
	args := []string{"--listen", listen, "--log-format", "json", "--stop-grace", "500ms", "--shutdown-timeout", "5s"}
	if opts.config != "" {
		args = append(args, "--config", opts.config)
	}
	args = append(args, opts.args...)
	d.cmd = exec.Command(mcpdBinary(t), args...)
	d.cmd.Env = daemonEnv(opts.env...)
	d.cmd.Dir = opts.dir
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	// A process that inherited mcpd's stderr must not hang Wait forever.
	d.cmd.WaitDelay = 5 * time.Second
	dieWithTest(d.cmd)
	if opts.pidNamespace {
		inNewPIDNamespace(t, d.cmd)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start mcpd: %v", err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() { d.cleanup(t) })

	d.waitListening(ctx, t)
	target := "unix://" + d.sock
	if d.net == "tcp" {
		target = "passthrough:///" + d.dialTo
	}
	creds := opts.creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatalf("grpc.NewClient(%q): %v", target, err)
	}
	d.conn = conn
	d.hub = mcpdv1.NewMCPHubClient(conn)
	d.health = healthpb.NewHealthClient(conn)
	if !opts.unready {
		d.waitHealth(ctx, t, healthpb.HealthCheckResponse_SERVING)
	}
	return d
}

// waitHealth waits until the daemon's overall health is want.
func (d *daemon) waitHealth(ctx context.Context, t *testing.T, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	watch, err := d.health.Watch(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("health watch: %v", err)
	}
	for {
		resp, err := watch.Recv()
		if err != nil {
			t.Fatalf("health watch: %v (waiting for %v)", err, want)
		}
		if resp.GetStatus() == want {
			return
		}
	}
}

// waitListening polls until mcpd accepts connections. Polling the socket
// first keeps the gRPC client out of its reconnect backoff.
func (d *daemon) waitListening(ctx context.Context, t *testing.T) {
	t.Helper()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var dialer net.Dialer
	for {
		c, err := dialer.DialContext(ctx, d.net, d.dialTo)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-d.exited:
			t.Fatalf("mcpd exited before listening: %v", d.waitErr)
		case <-ctx.Done():
			t.Fatalf("mcpd is not listening on %s: %v", d.dialTo, err)
		case <-ticker.C:
		}
	}
}

// signal sends sig to mcpd and returns its exit code once it has exited.
func (d *daemon) signal(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	d.send(t, sig)
	return d.wait(t, sig)
}

// send sends sig to mcpd.
func (d *daemon) send(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal mcpd: %v", err)
	}
}

// wait returns mcpd's exit code once it has exited after sig, killing it
// if it takes longer than exitTimeout.
func (d *daemon) wait(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	timer := time.NewTimer(exitTimeout)
	defer timer.Stop()
	select {
	case <-d.exited:
	case <-timer.C:
		_ = d.cmd.Process.Kill()
		<-d.exited
		t.Fatalf("mcpd did not exit within %v of %v", exitTimeout, sig)
	}
	return d.cmd.ProcessState.ExitCode()
}

// cleanup closes the client and stops mcpd if it still runs.
func (d *daemon) cleanup(t *testing.T) {
	if d.conn != nil {
		d.conn.Close()
	}
	select {
	case <-d.exited:
	default:
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(exitTimeout)
		select {
		case <-d.exited:
		case <-timer.C:
			_ = d.cmd.Process.Kill()
			<-d.exited
			t.Errorf("mcpd did not exit within %v of SIGTERM; killed it", exitTimeout)
		}
		timer.Stop()
	}
	if t.Failed() {
		t.Logf("mcpd log:\n%s", d.log.String())
	}
}

// poll calls check every pollInterval until it reports done, failing the
// test when ctx ends first.
func poll(ctx context.Context, t *testing.T, what string, check func() (done bool, err error)) {
	t.Helper()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		done, err := check()
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: gave up: %v (last error: %v)", what, ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

// waitServer polls GetServer until the server is in one of states and
// returns it.
func (d *daemon) waitServer(ctx context.Context, t *testing.T, name string, states ...mcpdv1.ServerState) *mcpdv1.Server {
	t.Helper()
	var srv *mcpdv1.Server
	poll(ctx, t, fmt.Sprintf("wait for server %q in %v", name, states), func() (bool, error) {
		resp, err := d.hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: name})
		if err != nil {
			return false, err
		}
		srv = resp.GetServer()
		for _, s := range states {
			if srv.GetState() == s {
				return true, nil
			}
		}
		return false, fmt.Errorf("state %v, last error %q", srv.GetState(), srv.GetLastError())
	})
	return srv
}

// connect calls ConnectServer for a stdio server and fails the test on an
// RPC error.
func (d *daemon) connect(ctx context.Context, t *testing.T, name, command string, args []string, env map[string]string) *mcpdv1.Server {
	t.Helper()
	resp, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: stdioConfig(name, command, args, env)})
	if err != nil {
		t.Fatalf("ConnectServer %q: %v", name, err)
	}
	return resp.GetServer()
}

// connectFake connects this test binary as a fake server in mode.
func (d *daemon) connectFake(ctx context.Context, t *testing.T, name, mode string) *mcpdv1.Server {
	t.Helper()
	return d.connect(ctx, t, name, testBinary(t), nil, map[string]string{fakeServerEnv: mode})
}

// registerAgent opens HandleServerRequests with ctx (and its credentials)
// and registers for kinds of every server; it returns once mcpd has
// confirmed the registration.
func registerAgent(ctx context.Context, t *testing.T, d *daemon, kinds ...mcpdv1.ServerRequestKind) mcpdv1.MCPHub_HandleServerRequestsClient {
	t.Helper()
	stream, err := d.hub.HandleServerRequests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = stream.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Register{
		Register: &mcpdv1.ServerRequestRegistration{Kinds: kinds},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetRegistered() == nil {
		t.Fatalf("registration: %v %v", m, err)
	}
	return stream
}

// answerAgent registers an agent for kinds (see registerAgent) and answers
// each request it gets with answer's reply; a nil reply leaves the request
// unanswered. It stops when ctx ends or the test does.
func answerAgent(ctx context.Context, t *testing.T, d *daemon, answer func(*mcpdv1.ServerRequest) *mcpdv1.ServerRequestReply, kinds ...mcpdv1.ServerRequestKind) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	stream := registerAgent(ctx, t, d, kinds...)
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			reply := answer(m.GetRequest())
			if reply == nil {
				continue
			}
			if err := stream.Send(&mcpdv1.HandleServerRequestsRequest{Message: &mcpdv1.HandleServerRequestsRequest_Reply{Reply: reply}}); err != nil {
				return
			}
		}
	}()
}

func stdioConfig(name, command string, args []string, env map[string]string) *mcpdv1.ServerConfig {
	return &mcpdv1.ServerConfig{
		Name: name,
		Transport: &mcpdv1.ServerConfig_Stdio{Stdio: &mcpdv1.StdioConfig{
			Command: command,
			Args:    args,
			Env:     env,
		}},
	}
}

// call calls a tool; timeout 0 leaves the call's timeout unset.
func (d *daemon) call(ctx context.Context, t *testing.T, name string, args map[string]any, timeout time.Duration) (*mcpdv1.CallToolResponse, error) {
	t.Helper()
	st, err := structpb.NewStruct(args)
	if err != nil {
		t.Fatalf("arguments %v: %v", args, err)
	}
	req := &mcpdv1.CallToolRequest{Name: name, Arguments: st}
	if timeout > 0 {
		req.Timeout = durationpb.New(timeout)
	}
	return d.hub.CallTool(ctx, req)
}

// mustCall calls a tool and fails the test on an RPC error.
func (d *daemon) mustCall(ctx context.Context, t *testing.T, name string, args map[string]any) *mcpdv1.CallToolResponse {
	t.Helper()
	resp, err := d.call(ctx, t, name, args, 0)
	if err != nil {
		t.Fatalf("CallTool %s: %v", name, err)
	}
	return resp
}

// callStream calls a tool with CallToolStream and returns every message
// the stream yields; it fails the test on an RPC error.
func (d *daemon) callStream(ctx context.Context, t *testing.T, name string, args map[string]any) []*mcpdv1.CallToolStreamResponse {
	t.Helper()
	stream, err := d.hub.CallToolStream(ctx, &mcpdv1.CallToolStreamRequest{Name: name, Arguments: mustStruct(t, args)})
	if err != nil {
		t.Fatalf("CallToolStream %s: %v", name, err)
	}
	var msgs []*mcpdv1.CallToolStreamResponse
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return msgs
		}
		if err != nil {
			t.Fatalf("CallToolStream %s: %v", name, err)
		}
		msgs = append(msgs, m)
	}
}

// subscribe opens a Subscribe stream of one server's events of one kind,
// from now on; it ends with the test.
func (d *daemon) subscribe(ctx context.Context, t *testing.T, server string, kind mcpdv1.EventKind) mcpdv1.MCPHub_SubscribeClient {
	t.Helper()
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	sub, err := d.hub.Subscribe(sctx, &mcpdv1.SubscribeRequest{Servers: []string{server}, Kinds: []mcpdv1.EventKind{kind}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	return sub
}

// text joins the text blocks of a result.
func text(resp *mcpdv1.CallToolResponse) string {
	var parts []string
	for _, c := range resp.GetContent() {
		if t := c.GetText(); t != nil {
			parts = append(parts, t.GetText())
		}
	}
	return strings.Join(parts, "\n")
}

// wantCode fails the test unless err is a status with code want.
func wantCode(t *testing.T, err error, want codes.Code) *status.Status {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != want {
		t.Fatalf("got error %v, want code %v", err, want)
	}
	return st
}

// processGone reports whether pid no longer runs. A zombie counts as gone:
// an orphan is reparented to pid 1, which in a container may never reap it.
func processGone(pid int) bool {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, readErr := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if readErr != nil {
		return errors.Is(readErr, os.ErrNotExist)
	}
	// The state follows the parenthesised command name, which may itself
	// contain spaces or parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state == 'Z' || state == 'X'
}

// freePort returns a loopback TCP port that no one listens on, for a
// daemon to bind. It is taken from below the kernel's ephemeral range: a
// port in that range, once released, can go to any outgoing connection or
// port-0 listener before the daemon binds it, and the tests here open many
// of both at once (a CI run failed with "address already in use" that
// way). Below the range the kernel hands out nothing, and freePort never
// hands out the same port twice.
func freePort(t *testing.T) int {
	t.Helper()
	freePorts.Lock()
	defer freePorts.Unlock()
	if freePorts.given == nil {
		freePorts.given = make(map[int]bool)
	}
	low := ephemeralPortsFrom() - freePortSpan
	for range 1000 {
		port := low + rand.IntN(freePortSpan)
		if freePorts.given[port] {
			continue
		}
		lis, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // someone else's
		}
		lis.Close()
		freePorts.given[port] = true
		return port
	}
	t.Fatalf("no free port in %d..%d", low, low+freePortSpan-1)
	return 0
}

// freePortSpan is how many ports below the ephemeral range freePort
// picks from.
const freePortSpan = 10000

// freePorts are the ports freePort has handed out in this process.
var freePorts struct {
	sync.Mutex
	given map[int]bool
}

// ephemeralPortsFrom is the first port of the kernel's ephemeral range,
// or Linux's default where it cannot be read.
func ephemeralPortsFrom() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return linuxDefault
	}
	from, err := strconv.Atoi(fields[0])
	if err != nil || from <= freePortSpan+1024 {
		return linuxDefault
	}
	return from
}

// writeConfig writes a .mcp.json file and returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(shortTempDir(t), "mcp.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// emptyConfig is a config file with no servers, for tests that add their
// own servers and do not need the demo server.
func emptyConfig(t *testing.T) string {
	t.Helper()
	return writeConfig(t, `{"mcpServers": {}}`)
}
