package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// The upstream servers.
const (
	upstreamDemo = "demo"
	upstreamFast = "fast"
)

// toolName is the tool every call invokes; both servers have it.
const toolName = "echo"

const (
	// directStopGrace is how long a directly spawned server gets to exit
	// after its stdin closes, before SIGTERM.
	directStopGrace = 2 * time.Second
	// cellSlack bounds a step of a cell beyond its plan, so that a hung
	// call ends the run instead of blocking it.
	cellSlack = 60 * time.Second
	// callsCellTimeout bounds a cell of a fixed number of calls.
	callsCellTimeout = 10 * time.Minute
)

// Paths a call can take.
const (
	pathDirect = "direct"
	pathMCPD   = "mcpd"
	pathHealth = "health"
)

// upstream is one server under test.
type upstream struct {
	name    string
	command string
	args    []string
	about   string // what the server is, for the report
}

// cellKey names one measured cell. listener is empty for direct calls;
// upstream is empty for health checks.
type cellKey struct {
	upstream string
	path     string
	listener string
	conc     int
}

// directServer is a server the bench spawned and talks to with the go-sdk.
type directServer struct {
	cs      *mcp.ClientSession
	pid     int
	version string
}

// runInfo is everything the report shows besides the cells.
type runInfo struct {
	cfg       *config
	upstreams []upstream
	listeners []string
	direct    map[string]*directServer
	viaMCPD   map[string]map[string]upstreamInfo // listener -> server -> info
	loadavg   string
	results   map[cellKey]result
}

func run(ctx context.Context, cfg *config, stdout, stderr io.Writer) (err error) {
	mcpdBin, err := filepath.Abs(cfg.mcpd)
	if err != nil {
		return fmt.Errorf("-mcpd: %w", err)
	}
	if st, err := os.Stat(mcpdBin); err != nil || st.IsDir() {
		return fmt.Errorf("-mcpd %s is not a binary (build it with 'go build -o bin/mcpd ./cmd/mcpd')", cfg.mcpd)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable for fast-server: %w", err)
	}
	dir, err := os.MkdirTemp("", "mcpd-bench-")
	if err != nil {
		return fmt.Errorf("create work folder: %w", err)
	}
	defer func() {
		if cfg.keep {
			fmt.Fprintln(stderr, "mcpd-bench: work folder kept:", dir)
			return
		}
		if rerr := os.RemoveAll(dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove work folder: %w", rerr))
		}
	}()

	all := map[string]upstream{
		upstreamDemo: {name: upstreamDemo, command: mcpdBin, args: []string{"demo-server"}, about: "mcpd demo-server, go-sdk server"},
		upstreamFast: {name: upstreamFast, command: self, args: []string{"fast-server"}, about: "mcpd-bench fast-server, hand-written JSON lines"},
	}
	info := &runInfo{
		cfg:       cfg,
		listeners: cfg.listeners,
		direct:    map[string]*directServer{},
		viaMCPD:   map[string]map[string]upstreamInfo{},
		results:   map[cellKey]result{},
		loadavg:   loadAverage(), // before this run adds its own load
	}
	var names []string
	for _, name := range cfg.upstreams {
		info.upstreams = append(info.upstreams, all[name])
		names = append(names, name)
	}
	configPath := filepath.Join(dir, "bench.mcp.json")
	if err := writeConfig(configPath, info.upstreams); err != nil {
		return err
	}

	// Every process started below is stopped on the way out, whatever
	// happens in between.
	var daemons []*daemon
	defer func() {
		for _, d := range daemons {
			err = errors.Join(err, d.stop())
		}
	}()
	for _, l := range cfg.listeners {
		d, err := startDaemon(mcpdBin, l, dir, configPath, cfg.mcpdArgs())
		if err != nil {
			return err
		}
		daemons = append(daemons, d)
	}
	defer func() {
		for _, ds := range info.direct {
			if cerr := ds.cs.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("close direct session: %w", cerr))
			}
		}
	}()
	for _, u := range info.upstreams {
		ds, err := connectDirect(ctx, u, dir)
		if err != nil {
			return err
		}
		info.direct[u.name] = ds
	}
	for _, d := range daemons {
		ui, err := d.waitReady(ctx, names)
		if err != nil {
			return err
		}
		info.viaMCPD[d.listener] = ui
	}

	// Cells that are compared with each other (one concurrency level) run
	// interleaved in rounds, so that load from elsewhere on the machine
	// skews them alike.
	for _, conc := range cfg.concurrency {
		var group []*cell
		for _, d := range daemons {
			key := cellKey{path: pathHealth, listener: d.listener, conc: conc}
			group = append(group, newCell(key, healthCall(d), cpuMeterFor(d.cmd.Process.Pid, 0)))
		}
		for _, u := range info.upstreams {
			ds := info.direct[u.name]
			key := cellKey{upstream: u.name, path: pathDirect, conc: conc}
			group = append(group, newCell(key, directCall(ds.cs, cfg.message), cpuMeterFor(0, ds.pid)))
			for _, d := range daemons {
				key := cellKey{upstream: u.name, path: pathMCPD, listener: d.listener, conc: conc}
				meter := cpuMeterFor(d.cmd.Process.Pid, info.viaMCPD[d.listener][u.name].pid)
				group = append(group, newCell(key, mcpdCall(d, u.name, cfg.message), meter))
			}
		}
		if err := runGroup(ctx, stderr, cfg, group); err != nil {
			return err
		}
		for _, c := range group {
			info.results[c.key] = c.result()
		}
	}
	writeReport(stdout, info)
	return nil
}

// runGroup warms every cell up, then measures them round by round, each
// round giving every cell its share of the planned duration or calls.
func runGroup(ctx context.Context, progress io.Writer, cfg *config, group []*cell) error {
	total := segment{byCalls: cfg.calls > 0, calls: cfg.calls, duration: cfg.duration}
	// Round r gets its share of the calls so that the rounds add up to
	// exactly cfg.calls.
	round := func(r int) segment {
		return segment{
			byCalls:  total.byCalls,
			calls:    cfg.calls*(r+1)/cfg.rounds - cfg.calls*r/cfg.rounds,
			duration: cfg.duration / time.Duration(cfg.rounds),
		}
	}
	timeout := cfg.warmup + cfg.duration + cellSlack
	if cfg.calls > 0 {
		timeout = cfg.warmup + callsCellTimeout
	}
	step := func(c *cell, f func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := f(ctx); err != nil {
			return fmt.Errorf("%s c=%d: %w", c.key.label(), c.key.conc, err)
		}
		return nil
	}
	for _, c := range group {
		if err := step(c, func(ctx context.Context) error { return c.warmup(ctx, cfg.warmup, total) }); err != nil {
			return err
		}
	}
	for r := range cfg.rounds {
		for _, c := range group {
			if err := step(c, func(ctx context.Context) error { return c.run(ctx, round(r)) }); err != nil {
				return err
			}
		}
	}
	for _, c := range group {
		res := c.result()
		fmt.Fprintf(progress, "mcpd-bench: %-16s c=%-3d %8.0f calls/s  p50 %s\n", c.key.label(), c.key.conc, res.rate(), fmtDur(res.p50))
	}
	return nil
}

// label names a cell's upstream and path, e.g. "demo mcpd tcp".
func (k cellKey) label() string {
	s := k.path
	if k.listener != "" {
		s += " " + k.listener
	}
	if k.upstream != "" {
		s = k.upstream + " " + s
	}
	return s
}

// writeConfig writes the .mcp.json file listing the upstreams for mcpd.
func writeConfig(path string, ups []upstream) error {
	type entry struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	servers := map[string]entry{}
	for _, u := range ups {
		servers[u.name] = entry{Command: u.command, Args: u.args}
	}
	b, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return nil
}

// connectDirect spawns u and connects a go-sdk client to it over
// mcp.CommandTransport, the way an agent without mcpd would. The server's
// stderr goes to a log file in dir.
func connectDirect(ctx context.Context, u upstream, dir string) (*directServer, error) {
	logFile, err := os.Create(filepath.Join(dir, "direct-"+u.name+".log"))
	if err != nil {
		return nil, fmt.Errorf("create server log: %w", err)
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(u.command, u.args...)
	cmd.Stderr = logFile
	dieWithBench(cmd)
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpd-bench", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: directStopGrace}, nil)
	if err != nil {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		return nil, fmt.Errorf("connect to %s directly: %w", u.name, err)
	}
	return &directServer{cs: cs, pid: cmd.Process.Pid, version: cs.InitializeResult().ProtocolVersion}, nil
}

// directCall calls echo through a go-sdk client session.
func directCall(cs *mcp.ClientSession, msg string) func() callFunc {
	return func() callFunc {
		params := &mcp.CallToolParams{Name: toolName, Arguments: map[string]any{"message": msg}}
		return func(ctx context.Context) error {
			res, err := cs.CallTool(ctx, params)
			if err != nil {
				return fmt.Errorf("CallTool: %w", err)
			}
			text := ""
			if len(res.Content) > 0 {
				if tc, ok := res.Content[0].(*mcp.TextContent); ok {
					text = tc.Text
				}
			}
			if res.IsError || text != msg {
				return fmt.Errorf("CallTool: got is_error %v, text %q; want the message back", res.IsError, text)
			}
			return nil
		}
	}
}

// mcpdCall calls echo through mcpd's CallTool.
func mcpdCall(d *daemon, server, msg string) func() callFunc {
	return func() callFunc {
		args, err := structpb.NewStruct(map[string]any{"message": msg})
		req := &mcpdv1.CallToolRequest{Name: "mcp__" + server + "__" + toolName, Arguments: args}
		return func(ctx context.Context) error {
			if err != nil {
				return fmt.Errorf("arguments: %w", err)
			}
			resp, err := d.hub.CallTool(ctx, req)
			if err != nil {
				return fmt.Errorf("CallTool: %w", err)
			}
			text := ""
			if c := resp.GetContent(); len(c) > 0 {
				text = c[0].GetText().GetText()
			}
			if resp.GetIsError() || text != msg {
				return fmt.Errorf("CallTool: got is_error %v, text %q; want the message back", resp.GetIsError(), text)
			}
			return nil
		}
	}
}

// healthCall makes the bare gRPC round trip: an overall health check.
func healthCall(d *daemon) func() callFunc {
	return func() callFunc {
		req := &healthpb.HealthCheckRequest{}
		return func(ctx context.Context) error {
			resp, err := d.health.Check(ctx, req)
			if err != nil {
				return fmt.Errorf("health Check: %w", err)
			}
			if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				return fmt.Errorf("health Check: got %s, want SERVING", resp.GetStatus())
			}
			return nil
		}
	}
}

// loadAverage returns the 1-minute load average, or "?" where unknown.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) == 0 {
		return "?"
	}
	var one string
	if _, err := fmt.Sscan(string(b), &one); err != nil {
		return "?"
	}
	return one
}
