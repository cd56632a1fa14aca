package main

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// callFunc makes one call. Each worker gets its own, so it may keep
// per-worker state (request values) without locking.
type callFunc func(ctx context.Context) error

// segment says how long one stretch of a cell runs: a fixed number of
// calls (byCalls) or a fixed duration.
type segment struct {
	byCalls  bool
	calls    int
	duration time.Duration
}

// meterFunc starts measuring CPU use; the function it returns stops and
// reports the CPU time spent meanwhile (negative for a process not
// measured).
type meterFunc func() func() cpuUse

// result is one measured cell.
type result struct {
	calls   int
	elapsed time.Duration
	p50     time.Duration
	p99     time.Duration
	cpu     cpuUse // per call
}

// rate is the throughput in calls per second.
func (r result) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.calls) / r.elapsed.Seconds()
}

// minLatencyCap is the smallest per-worker latency buffer.
const minLatencyCap = 1024

// cell is one measurement (a path, an upstream, a concurrency level),
// possibly taken in several segments interleaved with other cells'. It
// keeps one latency slice per worker, preallocated from the warmup's rate,
// so that recording a call is an append without locks.
type cell struct {
	key   cellKey
	calls []callFunc // one per worker
	meter meterFunc  // nil: CPU not measured
	warm  float64    // calls/s seen in the warmup, 0 before it

	lat     [][]time.Duration
	elapsed time.Duration
	cpu     cpuUse // totals
}

func newCell(key cellKey, newCall func() callFunc, meter meterFunc) *cell {
	c := &cell{key: key, meter: meter, calls: make([]callFunc, key.conc), lat: make([][]time.Duration, key.conc)}
	for i := range c.calls {
		c.calls[i] = newCall()
	}
	return c
}

// warmup runs the cell unmeasured for d and sizes the latency buffers for
// total calls, or for total time at the warmup's rate.
func (c *cell) warmup(ctx context.Context, d time.Duration, total segment) error {
	perWorker := minLatencyCap
	if d > 0 {
		n, elapsed, err := runWorkers(ctx, c.calls, segment{duration: d}, nil)
		if err != nil {
			return err
		}
		c.warm = float64(n) / elapsed.Seconds()
		if !total.byCalls {
			est := c.warm * total.duration.Seconds() / float64(len(c.calls))
			perWorker = max(perWorker, int(est*1.25))
		}
	}
	if total.byCalls {
		perWorker = total.calls/len(c.calls) + 1
	}
	for i := range c.lat {
		c.lat[i] = make([]time.Duration, 0, perWorker)
	}
	return nil
}

// run measures one segment and adds it to the cell.
func (c *cell) run(ctx context.Context, seg segment) error {
	stop := func() cpuUse { return cpuUse{-1, -1, -1} }
	if c.meter != nil {
		stop = c.meter()
	}
	_, elapsed, err := runWorkers(ctx, c.calls, seg, c.lat)
	if err != nil {
		return err
	}
	c.elapsed += elapsed
	c.cpu = c.cpu.add(stop())
	return nil
}

// result merges the segments.
func (c *cell) result() result {
	n := 0
	for _, l := range c.lat {
		n += len(l)
	}
	all := make([]time.Duration, 0, n)
	for _, l := range c.lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	return result{
		calls:   n,
		elapsed: c.elapsed,
		p50:     percentile(all, 0.50),
		p99:     percentile(all, 0.99),
		cpu:     c.cpu.div(n),
	}
}

// runWorkers runs one goroutine per call function until seg's duration has
// passed or, with seg.byCalls, until seg.calls calls were made. With lat
// non-nil, worker i appends each latency to lat[i]. It returns the number
// of calls and the wall time from the first call to the last answer. The
// first failing call stops every worker and is returned.
func runWorkers(ctx context.Context, calls []callFunc, seg segment, lat [][]time.Duration) (int, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		count     atomic.Int64
		remaining atomic.Int64
		firstErr  error
		errOnce   sync.Once
		wg        sync.WaitGroup
	)
	remaining.Store(int64(seg.calls))
	start := time.Now()
	deadline := start.Add(seg.duration)
	for i, call := range calls {
		wg.Go(func() {
			var done int64
			defer func() { count.Add(done) }()
			for {
				if seg.byCalls && remaining.Add(-1) < 0 {
					return
				}
				t0 := time.Now()
				if !seg.byCalls && !t0.Before(deadline) {
					return
				}
				if err := call(ctx); err != nil {
					errOnce.Do(func() {
						firstErr = err
						cancel()
					})
					return
				}
				if lat != nil {
					lat[i] = append(lat[i], time.Since(t0))
				}
				done++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return 0, 0, firstErr
	}
	return int(count.Load()), elapsed, nil
}

// percentile returns the nearest-rank q-quantile of sorted latencies, 0
// for none.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
