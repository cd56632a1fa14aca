package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

// TestMain lets this test binary stand in for mcpd-bench as the fast
// server that mcpd spawns (run finds the server through os.Executable).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "fast-server" {
		os.Exit(runFastServer())
	}
	goleak.VerifyTestMain(m)
}

const testTimeout = 2 * time.Minute

func TestParseConcurrency(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "1,16,64", want: []int{1, 16, 64}},
		{in: " 4 , 2,4,", want: []int{4, 2}},
		{in: "", wantErr: true},
		{in: "0", wantErr: true},
		{in: "1,x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseConcurrency(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error: got %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(*config) bool
		wantErr bool
	}{
		{name: "defaults", args: nil, check: func(c *config) bool {
			return c.mcpd == "bin/mcpd" && c.duration == 2*time.Second && c.calls == 0 && c.rounds == 4 &&
				cmp.Equal(c.concurrency, []int{1, 16, 64}) && cmp.Equal(c.listeners, []string{"tcp", "unix"}) &&
				cmp.Equal(c.upstreams, []string{upstreamDemo, upstreamFast}) &&
				cmp.Equal(c.mcpdArgs(), []string{"--log-level", "info", "--max-procs", "1"})
		}},
		{name: "mcpd flags", args: []string{"-mcpd-log-level", "debug", "-mcpd-max-procs", "0"}, check: func(c *config) bool {
			return cmp.Equal(c.mcpdArgs(), []string{"--log-level", "debug", "--max-procs", "0"})
		}},
		{name: "listeners keep tcp first", args: []string{"-listen", "unix,tcp"}, check: func(c *config) bool {
			return cmp.Equal(c.listeners, []string{"tcp", "unix"})
		}},
		{name: "calls", args: []string{"-calls", "100", "-duration", "0"}, check: func(c *config) bool { return c.calls == 100 }},
		{name: "unknown listener", args: []string{"-listen", "udp"}, wantErr: true},
		{name: "unknown upstream", args: []string{"-upstreams", "everything"}, wantErr: true},
		{name: "no duration", args: []string{"-duration", "0"}, wantErr: true},
		{name: "no rounds", args: []string{"-rounds", "0"}, wantErr: true},
		{name: "negative max-procs", args: []string{"-mcpd-max-procs", "-1"}, wantErr: true},
		{name: "stray argument", args: []string{"demo-server"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags(tt.args, &bytes.Buffer{})
			if (err != nil) != tt.wantErr {
				t.Fatalf("error: got %v, want error %v", err, tt.wantErr)
			}
			if err == nil && !tt.check(c) {
				t.Errorf("got config %+v, want the checked values", *c)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Microsecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", []time.Duration{7}, 0.99, 7},
		{"p50 of 100", hundred, 0.50, 50 * time.Microsecond},
		{"p99 of 100", hundred, 0.99, 99 * time.Microsecond},
		{"p100 of 100", hundred, 1, 100 * time.Microsecond},
		{"p50 of 3", []time.Duration{1, 2, 3}, 0.5, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.q); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name   string
		stat   string
		want   time.Duration
		wantOK bool
	}{
		{"plain", "42 (mcpd) S 1 42 42 0 -1 4194560 100 0 0 0 150 25 0 0 20 0 7 0", 175 * clockTick, true},
		{"name with spaces and parens", "42 (a b) c) R 1 42 42 0 -1 0 0 0 0 0 3 4 0 0", 7 * clockTick, true},
		{"truncated", "42 (x) S 1 2", 0, false},
		{"no name", "garbage", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseStatCPU([]byte(tt.stat))
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("got %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
	if _, ok := procCPU(os.Getpid()); !ok {
		t.Log("no /proc here; CPU columns would read -")
	}
}

func TestComputeRatios(t *testing.T) {
	results := map[cellKey]result{
		{upstream: "fast", path: pathDirect, conc: 1}:                   {calls: 1000, elapsed: time.Second, p50: 100 * time.Microsecond},
		{upstream: "fast", path: pathMCPD, listener: "tcp", conc: 1}:    {calls: 600, elapsed: time.Second, p50: 180 * time.Microsecond},
		{path: pathHealth, listener: "tcp", conc: 1}:                    {calls: 5000, elapsed: time.Second, p50: 50 * time.Microsecond},
		{upstream: "fast", path: pathMCPD, listener: "unix", conc: 1}:   {calls: 600, elapsed: time.Second, p50: 180 * time.Microsecond},
		{upstream: "fast", path: pathDirect, conc: 64}:                  {calls: 1000, elapsed: time.Second, p50: time.Millisecond},
		{upstream: "fast", path: pathMCPD, listener: "tcp", conc: 64}:   {calls: 400, elapsed: time.Second, p50: 2 * time.Millisecond},
		{path: pathHealth, listener: "tcp", conc: 64}:                   {calls: 9000, elapsed: time.Second, p50: 250 * time.Microsecond},
		{upstream: "other", path: pathMCPD, listener: "tcp", conc: 128}: {calls: 10, elapsed: time.Second},
	}
	tests := []struct {
		name     string
		up       string
		listener string
		conc     int
		want     ratios
		wantOK   bool
	}{
		{"c=1 passes latency", "fast", "tcp", 1, ratios{added: 80 * time.Microsecond, health: 50 * time.Microsecond, latency: 0.8, throughput: 0.6}, true},
		{"c=64 misses both", "fast", "tcp", 64, ratios{added: time.Millisecond, health: 250 * time.Microsecond, latency: 2, throughput: 0.4}, true},
		{"no health over unix", "fast", "unix", 1, ratios{}, false},
		{"no direct", "other", "tcp", 128, ratios{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := computeRatios(results, tt.up, tt.listener, tt.conc)
			if ok != tt.wantOK {
				t.Fatalf("ok: got %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(ratios{}), cmp.Comparer(func(a, b float64) bool {
				return a-b < 1e-9 && b-a < 1e-9
			})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if got := throughputTargetConcurrency([]int{1, 16, 64}); got != 64 {
		t.Errorf("throughput concurrency of 1,16,64: got %d, want 64", got)
	}
	if got := throughputTargetConcurrency([]int{8, 2}); got != 8 {
		t.Errorf("throughput concurrency of 8,2: got %d, want 8", got)
	}
}

func TestCell(t *testing.T) {
	t.Run("fixed calls over rounds", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		var made atomic.Int64
		newCall := func() callFunc {
			return func(context.Context) error { made.Add(1); return nil }
		}
		c := newCell(cellKey{path: pathDirect, conc: 4}, newCall, nil)
		if err := c.warmup(ctx, 0, segment{byCalls: true, calls: 100}); err != nil {
			t.Fatalf("warmup: %v", err)
		}
		for range 2 {
			if err := c.run(ctx, segment{byCalls: true, calls: 50}); err != nil {
				t.Fatalf("run: %v", err)
			}
		}
		res := c.result()
		if res.calls != 100 || made.Load() != 100 {
			t.Errorf("calls: got %d recorded, %d made; want 100, 100", res.calls, made.Load())
		}
		if res.cpu.client >= 0 {
			t.Errorf("cpu without a meter: got %v, want not measured", res.cpu.client)
		}
		if res.p50 > res.p99 {
			t.Errorf("got p50 %v > p99 %v", res.p50, res.p99)
		}
	})
	t.Run("a round of zero calls makes none", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		var made atomic.Int64
		newCall := func() callFunc {
			return func(context.Context) error { made.Add(1); return nil }
		}
		c := newCell(cellKey{path: pathDirect, conc: 2}, newCall, nil)
		if err := c.warmup(ctx, 0, segment{byCalls: true, calls: 1}); err != nil {
			t.Fatalf("warmup: %v", err)
		}
		for _, n := range []int{0, 1} {
			if err := c.run(ctx, segment{byCalls: true, calls: n, duration: time.Hour}); err != nil {
				t.Fatalf("run: %v", err)
			}
		}
		if got := c.result().calls; got != 1 || made.Load() != 1 {
			t.Errorf("calls: got %d recorded, %d made; want 1, 1", got, made.Load())
		}
	})
	t.Run("duration with warmup", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		var made atomic.Int64
		newCall := func() callFunc {
			return func(context.Context) error { made.Add(1); return nil }
		}
		c := newCell(cellKey{path: pathDirect, conc: 2}, newCall, nil)
		if err := c.warmup(ctx, 5*time.Millisecond, segment{duration: 10 * time.Millisecond}); err != nil {
			t.Fatalf("warmup: %v", err)
		}
		if err := c.run(ctx, segment{duration: 10 * time.Millisecond}); err != nil {
			t.Fatalf("run: %v", err)
		}
		res := c.result()
		if res.calls == 0 || int64(res.calls) >= made.Load() {
			t.Errorf("got %d measured of %d made; want some measured and the warmup's not", res.calls, made.Load())
		}
	})
	t.Run("first error stops the cell", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		boom := errors.New("boom")
		var made atomic.Int64
		newCall := func() callFunc {
			return func(ctx context.Context) error {
				if made.Add(1) == 10 {
					return boom
				}
				return ctx.Err()
			}
		}
		c := newCell(cellKey{path: pathDirect, conc: 3}, newCall, nil)
		if err := c.warmup(ctx, 0, segment{byCalls: true, calls: 1000}); err != nil {
			t.Fatalf("warmup: %v", err)
		}
		err := c.run(ctx, segment{byCalls: true, calls: 1000})
		if !errors.Is(err, boom) {
			t.Errorf("got %v, want boom", err)
		}
	})
	t.Run("meter totals divide by calls", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		meter := func() func() cpuUse {
			return func() cpuUse { return cpuUse{client: time.Millisecond, mcpd: -1, server: 2 * time.Millisecond} }
		}
		newCall := func() callFunc { return func(context.Context) error { return nil } }
		c := newCell(cellKey{path: pathHealth, conc: 2}, newCall, meter)
		if err := c.warmup(ctx, 0, segment{byCalls: true, calls: 10}); err != nil {
			t.Fatalf("warmup: %v", err)
		}
		for range 2 {
			if err := c.run(ctx, segment{byCalls: true, calls: 5}); err != nil {
				t.Fatalf("run: %v", err)
			}
		}
		got := c.result().cpu
		want := cpuUse{client: 200 * time.Microsecond, mcpd: -1, server: 400 * time.Microsecond}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
}

// TestRun runs the whole benchmark for a few calls against a real mcpd
// (MCPD_BIN, which make test sets), with this test binary as the fast
// server. It checks that every cell ran and that the report has its parts;
// it asserts nothing about the numbers.
func TestRun(t *testing.T) {
	bin := mcpdBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cfg, err := parseFlags([]string{"-mcpd", bin, "-calls", "20", "-warmup", "0", "-rounds", "2", "-concurrency", "1,3", "-mcpd-max-procs", "2"}, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	var out, progress bytes.Buffer
	if err := run(ctx, cfg, &out, &progress); err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	report := out.String()
	for _, want := range []string{
		"demo      direct",
		"demo      mcpd tcp",
		"fast      mcpd unix",
		"-         health unix",
		"Ratios",
		"Targets (mcpd on tcp",
		"(--log-level info --max-procs 2)",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	targets := regexp.MustCompile(`(?m)^(PASS|MISS)  (latency|throughput) `).FindAllString(report, -1)
	// Per upstream: latency at c=1 and c=3, throughput at c=3.
	if got, want := len(targets), 6; got != want {
		t.Errorf("got %d PASS/MISS lines, want %d:\n%s", got, want, report)
	}
	if got, want := strings.Count(progress.String(), "calls/s"), 16; got != want {
		t.Errorf("got %d cells in progress, want %d:\n%s", got, want, progress.String())
	}
}

// mcpdBinary returns MCPD_BIN as an absolute path. Without it the test is
// skipped, unless MCPD_E2E_REQUIRED=1.
func mcpdBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("MCPD_BIN")
	if bin == "" {
		if os.Getenv("MCPD_E2E_REQUIRED") == "1" {
			t.Fatal("MCPD_BIN is not set and MCPD_E2E_REQUIRED=1")
		}
		t.Skip("MCPD_BIN is not set (make test sets it); build mcpd and set it to run this test")
	}
	if !filepath.IsAbs(bin) {
		// A relative path (bin/mcpd) is relative to the repository root.
		if _, err := os.Stat(bin); err != nil {
			bin = filepath.Join("..", "..", "..", bin)
		}
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatalf("MCPD_BIN: %v", err)
		}
		bin = abs
	}
	return bin
}
