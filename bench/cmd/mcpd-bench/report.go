package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Targets from the issue.
const (
	// maxLatencyRatio: the p50 that mcpd adds to a call must stay within
	// two bare gRPC round trips (health p50) against the same daemon.
	maxLatencyRatio = 1.0
	// minThroughputRatio: at throughputConcurrency, calls/s through mcpd
	// must reach half of calls/s of a direct go-sdk client.
	minThroughputRatio = 0.5
	// throughputConcurrency is where the throughput target is judged; the
	// highest measured level stands in when it was not measured.
	throughputConcurrency = 64
)

// ratios compares one upstream through one listener with the direct path
// at one concurrency level.
type ratios struct {
	added      time.Duration // mcpd p50 - direct p50
	health     time.Duration // health p50
	latency    float64       // added / (2 x health)
	throughput float64       // mcpd calls/s / direct calls/s
}

// computeRatios returns the ratios of a cell, ok false if a part is
// missing.
func computeRatios(results map[cellKey]result, up, listener string, conc int) (ratios, bool) {
	direct, ok1 := results[cellKey{upstream: up, path: pathDirect, conc: conc}]
	via, ok2 := results[cellKey{upstream: up, path: pathMCPD, listener: listener, conc: conc}]
	health, ok3 := results[cellKey{path: pathHealth, listener: listener, conc: conc}]
	if !ok1 || !ok2 || !ok3 {
		return ratios{}, false
	}
	r := ratios{added: via.p50 - direct.p50, health: health.p50}
	if health.p50 > 0 {
		r.latency = float64(r.added) / float64(2*health.p50)
	}
	if d := direct.rate(); d > 0 {
		r.throughput = via.rate() / d
	}
	return r, true
}

func verdict(pass bool) string {
	if pass {
		return "PASS"
	}
	return "MISS"
}

// writeReport prints the header, the cells, the ratios and one PASS/MISS
// line per target.
func writeReport(w io.Writer, info *runInfo) {
	cfg := info.cfg
	concs := make([]string, len(cfg.concurrency))
	for i, c := range cfg.concurrency {
		concs[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "mcpd-bench: CallTool %q over stdio, message %q, concurrency %s\n", toolName, cfg.message, strings.Join(concs, ","))
	if cfg.calls > 0 {
		fmt.Fprintf(w, "cells: %d calls each after a %v warmup\n", cfg.calls, cfg.warmup)
	} else {
		fmt.Fprintf(w, "cells: %v each after a %v warmup\n", cfg.duration, cfg.warmup)
	}
	fmt.Fprintf(w, "machine: %d CPUs, GOMAXPROCS %d, %s %s/%s, load average %s before the run (other work on the machine skews every number)\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, info.loadavg)
	fmt.Fprintf(w, "paths: direct = go-sdk client, mcp.CommandTransport, server spawned by the bench\n")
	fmt.Fprintf(w, "       mcpd tcp|unix = gRPC CallTool through %s (%s) on loopback TCP | a Unix socket\n", cfg.mcpd, strings.Join(cfg.mcpdArgs(), " "))
	fmt.Fprintf(w, "       health tcp|unix = grpc.health.v1 Check against the same mcpd (a bare gRPC round trip)\n")
	fmt.Fprintf(w, "upstreams:\n")
	for _, u := range info.upstreams {
		versions := []string{"direct " + info.direct[u.name].version}
		for _, l := range info.listeners {
			versions = append(versions, "mcpd "+l+" "+info.viaMCPD[l][u.name].protocolVersion)
		}
		fmt.Fprintf(w, "  %s = %s (protocol: %s)\n", u.name, u.about, strings.Join(versions, ", "))
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "Cells (CPU = CPU time per call of the bench client, mcpd and the upstream server; - = not involved)")
	const cellRow = "%-8s  %-11s  %4s  %8s  %8s  %9s  %9s  %9s  %9s  %10s\n"
	printRow(w, cellRow, "UPSTREAM", "PATH", "CONC", "CALLS", "CALLS/S", "P50", "P99", "CPU BENCH", "CPU MCPD", "CPU SERVER")
	row := func(up string, key cellKey) {
		res, ok := info.results[key]
		if !ok {
			return
		}
		path := key.path
		if key.listener != "" {
			path += " " + key.listener
		}
		printRow(w, cellRow, up, path, fmt.Sprint(key.conc), fmt.Sprint(res.calls), fmt.Sprintf("%.0f", res.rate()),
			fmtDur(res.p50), fmtDur(res.p99), fmtCPU(res.cpu.client), fmtCPU(res.cpu.mcpd), fmtCPU(res.cpu.server))
	}
	for _, u := range info.upstreams {
		for _, c := range cfg.concurrency {
			row(u.name, cellKey{upstream: u.name, path: pathDirect, conc: c})
			for _, l := range info.listeners {
				row(u.name, cellKey{upstream: u.name, path: pathMCPD, listener: l, conc: c})
			}
		}
	}
	for _, c := range cfg.concurrency {
		for _, l := range info.listeners {
			row("-", cellKey{path: pathHealth, listener: l, conc: c})
		}
	}

	thrConc := throughputTargetConcurrency(cfg.concurrency)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Ratios (ADDED = mcpd p50 - direct p50; LAT = ADDED / (2 x health p50), target <= %.1f; THR = mcpd calls/s / direct calls/s, target >= %.1f at c=%d)\n",
		maxLatencyRatio, minThroughputRatio, thrConc)
	const ratioRow = "%-8s  %-8s  %4s  %9s  %10s  %5s  %-4s  %5s  %-4s\n"
	printRow(w, ratioRow, "UPSTREAM", "LISTENER", "CONC", "ADDED P50", "HEALTH P50", "LAT", "", "THR", "")
	for _, u := range info.upstreams {
		for _, l := range info.listeners {
			for _, c := range cfg.concurrency {
				r, ok := computeRatios(info.results, u.name, l, c)
				if !ok {
					continue
				}
				thrVerdict := ""
				if c == thrConc {
					thrVerdict = verdict(r.throughput >= minThroughputRatio)
				}
				printRow(w, ratioRow, u.name, l, fmt.Sprint(c), fmtDur(r.added), fmtDur(r.health),
					fmt.Sprintf("%.2f", r.latency), verdict(r.latency <= maxLatencyRatio), fmt.Sprintf("%.2f", r.throughput), thrVerdict)
			}
		}
	}

	headline := info.listeners[0] // tcp when measured: the options keep tcp first
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Targets (mcpd on %s; the other listener is in the ratios above)\n", headline)
	for _, u := range info.upstreams {
		for _, c := range cfg.concurrency {
			r, ok := computeRatios(info.results, u.name, headline, c)
			if !ok {
				continue
			}
			fmt.Fprintf(w, "%s  latency     %-4s c=%-3d added p50 %s / (2 x health p50 %s) = %.2f, target <= %.1f\n",
				verdict(r.latency <= maxLatencyRatio), u.name, c, fmtDur(r.added), fmtDur(r.health), r.latency, maxLatencyRatio)
		}
		r, ok := computeRatios(info.results, u.name, headline, thrConc)
		if !ok {
			continue
		}
		direct := info.results[cellKey{upstream: u.name, path: pathDirect, conc: thrConc}]
		via := info.results[cellKey{upstream: u.name, path: pathMCPD, listener: headline, conc: thrConc}]
		fmt.Fprintf(w, "%s  throughput  %-4s c=%-3d mcpd %.0f calls/s / direct %.0f calls/s = %.2f, target >= %.1f\n",
			verdict(r.throughput >= minThroughputRatio), u.name, thrConc, via.rate(), direct.rate(), r.throughput, minThroughputRatio)
	}
}

// throughputTargetConcurrency is throughputConcurrency if measured, else
// the highest level measured.
func throughputTargetConcurrency(concs []int) int {
	if slices.Contains(concs, throughputConcurrency) {
		return throughputConcurrency
	}
	return slices.Max(concs)
}

// printRow prints one table row without trailing blanks.
func printRow(w io.Writer, format string, args ...any) {
	fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf(format, args...), " \n"))
}

// fmtDur formats a latency in microseconds, or milliseconds from 1 ms.
func fmtDur(d time.Duration) string {
	if d >= time.Millisecond || d <= -time.Millisecond {
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
}

// fmtCPU formats a per-call CPU time; negative means not measured.
func fmtCPU(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmtDur(d)
}
