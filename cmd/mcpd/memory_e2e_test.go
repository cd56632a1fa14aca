//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// rssBound is the documented bound on mcpd's peak resident memory under
// each load below, with its default settings (docs/performance.md#memory).
// It is generous for a shared machine: what matters is bounded against
// unbounded, and without the bounds these loads took mcpd past 800 MiB.
const rssBound = 256 << 20

// memoryTimeout bounds each memory test's context instead of testTimeout:
// the loads move hundreds of MiB through mcpd, which under the race
// detector on a busy two-core machine (other packages' tests run beside
// them in make test) took past 60 s. It is a guard against a hang, not a
// measure of speed.
const memoryTimeout = 3 * time.Minute

// memoryContext is testContext with memoryTimeout.
func memoryContext(t *testing.T) context.Context {
	t.Helper()
	return contextWithin(t, memoryTimeout)
}

// The flood: as many log notifications as the server can write.
const (
	floodCount = 200_000
	floodBytes = 200
)

// procMemory returns a process's resident memory and its peak (VmRSS and
// VmHWM in /proc/<pid>/status), in bytes.
func procMemory(t *testing.T, pid int) (rss, peak int64) {
	t.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatalf("read status of pid %d: %v", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			t.Fatalf("pid %d: %s %q: %v", pid, name, value, err)
		}
		if name == "VmRSS" {
			rss = kib << 10
		} else {
			peak = kib << 10
		}
	}
	if peak == 0 {
		t.Fatalf("pid %d: no VmHWM in /proc status", pid)
	}
	return rss, peak
}

// checkPeak fails the test if mcpd's peak resident memory passed rssBound.
func (d *daemon) checkPeak(t *testing.T, load string) {
	t.Helper()
	rss, peak := procMemory(t, d.cmd.Process.Pid)
	t.Logf("%s: mcpd peak RSS %d MiB, now %d MiB (bound %d MiB)", load, peak>>20, rss>>20, rssBound>>20)
	if peak > rssBound {
		t.Errorf("%s: mcpd's peak RSS was %d MiB, want at most %d MiB", load, peak>>20, rssBound>>20)
	}
}

// memoryDaemon starts mcpd with its default memory settings and two fake
// servers: "load" in mode, and "other", which only echoes. The fakes
// write their goroutine stacks to d.stacksDir on SIGUSR1 (see echoes).
func memoryDaemon(ctx context.Context, t *testing.T, mode string) *daemon {
	t.Helper()
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--log-level", "warn"}})
	d.stacksDir = t.TempDir()
	for name, m := range map[string]string{"load": mode, "other": fakeFlood} {
		d.connect(ctx, t, name, testBinary(t), nil, map[string]string{fakeServerEnv: m, fakeStacksEnv: d.stacksDir})
	}
	return d
}

// hungCall is how long an echo waits before echoes takes it for hung
// and collects the stacks of mcpd and of the servers: a diagnosis, not a
// verdict (the call's own 60 s timeout fails the test).
const hungCall = 45 * time.Second

// dumpStacks asks mcpd (its stacks go to its log, shown when the test
// fails) and the fake servers of d.stacksDir for their goroutine stacks,
// and logs the servers', and what waits unread in the pipes of each: a
// request in a server's stdin, or an answer in its stdout, says which side
// stopped.
func (d *daemon) dumpStacks(t *testing.T) {
	t.Logf("pipes of mcpd (pid %d):\n%s", d.cmd.Process.Pid, pipeBacklogs(d.cmd.Process.Pid))
	_ = d.cmd.Process.Signal(syscall.SIGUSR1)
	resp, err := d.hub.ListServers(context.Background(), &mcpdv1.ListServersRequest{})
	if err != nil {
		t.Logf("stacks: ListServers: %v", err)
	}
	for _, s := range resp.GetServers() {
		if pid := int(s.GetPid()); pid > 0 {
			t.Logf("pipes of server %s (pid %d):\n%s", s.GetName(), pid, pipeBacklogs(pid))
			_ = syscall.Kill(pid, syscall.SIGUSR1)
		}
	}
	time.Sleep(2 * time.Second) // the dumps take a moment
	files, _ := filepath.Glob(filepath.Join(d.stacksDir, "*.stacks"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		t.Logf("stacks of %s:\n%s", filepath.Base(f), data)
	}
}

// pipeBacklogs reports, for each pipe process pid holds, how many bytes
// wait in it unread, and the kernel wait channel of each of its threads.
// Opening /proc/<pid>/fd/<n> gives a new file of the same pipe: FIONREAD
// on it counts the queued bytes without taking any.
func pipeBacklogs(pid int) string {
	var b strings.Builder
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err.Error() + "\n"
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		target, err := os.Readlink(path)
		if err != nil || !strings.HasPrefix(target, "pipe:") {
			continue
		}
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			fmt.Fprintf(&b, "fd %s %s: %v\n", e.Name(), target, err)
			continue
		}
		n, err := unix.IoctlGetInt(fd, unix.TIOCINQ)
		_ = unix.Close(fd)
		if err != nil {
			fmt.Fprintf(&b, "fd %s %s: FIONREAD: %v\n", e.Name(), target, err)
			continue
		}
		fmt.Fprintf(&b, "fd %s %s: %d bytes unread\n", e.Name(), target, n)
	}
	threads, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*")
	for _, th := range threads {
		wchan, _ := os.ReadFile(filepath.Join(th, "wchan"))
		fmt.Fprintf(&b, "thread %s: waits in %s\n", filepath.Base(th), wchan)
	}
	return b.String()
}

// TestPipeBacklogs: pipeBacklogs counts what waits unread in a pipe, and
// takes none of it.
func TestPipeBacklogs(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := w.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^fd ` + strconv.Itoa(int(r.Fd())) + ` pipe:\[\d+\]: 6 bytes unread$`)
	if out := pipeBacklogs(os.Getpid()); !want.MatchString(out) {
		t.Fatalf("pipeBacklogs: got\n%s\nwant a line matching %s", out, want)
	}
	buf := make([]byte, 16)
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "hello\n" {
		t.Errorf("after pipeBacklogs, read %q, %v; want the 6 bytes", buf[:n], err)
	}
}

// echoes calls echo on server until stop is closed, at least once, and
// reports the first failure, or nil.
func (d *daemon) echoes(ctx context.Context, t *testing.T, server string, stop <-chan struct{}) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			want := fmt.Sprintf("ping %d", i)
			dumped := make(chan struct{})
			watch := time.AfterFunc(hungCall, func() {
				defer close(dumped)
				t.Logf("%s echo %d: no answer after %v; collecting stacks", server, i, hungCall)
				d.dumpStacks(t)
			})
			resp, err := d.call(ctx, t, "mcp__"+server+"__echo", map[string]any{"text": want}, 0)
			if !watch.Stop() {
				<-dumped // logged while the test runs
			}
			if err == nil && text(resp) != want {
				err = fmt.Errorf("echo: got %q, want %q", text(resp), want)
			}
			if err != nil {
				done <- fmt.Errorf("%s echo %d: %w", server, i, err)
				return
			}
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
		}
	}()
	return done
}

// wantEcho calls echo on server once and fails the test unless it answers.
func (d *daemon) wantEcho(ctx context.Context, t *testing.T, server string) {
	t.Helper()
	resp := d.mustCall(ctx, t, "mcp__"+server+"__echo", map[string]any{"text": "still here"})
	if got := text(resp); got != "still here" {
		t.Errorf("%s echo: got %q, want %q", server, got, "still here")
	}
}

// flood asks the load server to write count log notifications of size
// bytes each; it returns once the server has written them all.
func (d *daemon) flood(ctx context.Context, t *testing.T, count, size int) {
	t.Helper()
	resp := d.mustCall(ctx, t, "mcp__load__flood", map[string]any{"count": count, "bytes": size})
	if want := "flooded " + strconv.Itoa(count); text(resp) != want {
		t.Fatalf("flood: got %q, want %q", text(resp), want)
	}
}

// lastLogger is the logger name of the flood's last notification.
func lastLogger(count int) string { return "flood-" + strconv.Itoa(count-1) }

// readLogs reads a Subscribe stream until it delivers the log event of
// logger last, and returns how many log and gap events it read.
func readLogs(sub mcpdv1.MCPHub_SubscribeClient, last string) (logs, gaps int, err error) {
	for {
		m, err := sub.Recv()
		if err != nil {
			return logs, gaps, err
		}
		switch ev := m.GetEvent(); {
		case ev.GetGap() != nil:
			gaps++
		case ev.GetLog() != nil:
			logs++
			if ev.GetLog().GetLogger() == last {
				return logs, gaps, nil
			}
		}
	}
}

// TestMemoryNotificationFlood: a server writes 200,000 log notifications
// as fast as it can while an agent subscribes to them. mcpd's memory stays
// bounded, the subscriber gets through to the last notification, and both
// the flooding server and another one answer calls during and after.
func TestMemoryNotificationFlood(t *testing.T) {
	ctx := memoryContext(t)
	d := memoryDaemon(ctx, t, fakeFlood)
	sub := d.subscribe(ctx, t, "load", mcpdv1.EventKind_EVENT_KIND_LOG)

	stop := make(chan struct{})
	other := d.echoes(ctx, t, "other", stop)
	loaded := d.echoes(ctx, t, "load", stop)
	type read struct {
		logs, gaps int
		err        error
	}
	subDone := make(chan read, 1)
	go func() {
		logs, gaps, err := readLogs(sub, lastLogger(floodCount))
		subDone <- read{logs, gaps, err}
	}()
	d.flood(ctx, t, floodCount, floodBytes)
	close(stop)
	for _, done := range []<-chan error{other, loaded} {
		if err := <-done; err != nil {
			t.Errorf("during the flood: %v", err)
		}
	}
	r := <-subDone
	if r.err != nil {
		t.Fatalf("subscriber: %v after %d log events", r.err, r.logs)
	}
	t.Logf("subscriber: %d of %d log events, %d gaps", r.logs, floodCount, r.gaps)
	d.wantEcho(ctx, t, "load")
	d.wantEcho(ctx, t, "other")
	d.checkPeak(t, "notification flood")
}

// TestMemoryHugeResults: callers fetch results of several MiB each, four
// at a time, while another server is called. mcpd's memory stays bounded.
func TestMemoryHugeResults(t *testing.T) {
	const (
		callers      = 4
		callsEach    = 8
		resultBytes  = 6 << 20
		maxRecvBytes = 16 << 20 // mcpd's --max-message-bytes
	)
	ctx := memoryContext(t)
	d := memoryDaemon(ctx, t, fakeBig)
	stop := make(chan struct{})
	other := d.echoes(ctx, t, "other", stop)

	var wg sync.WaitGroup
	var failed atomic.Int32
	for c := range callers {
		wg.Go(func() {
			for i := range callsEach {
				args := mustStruct(t, map[string]any{"bytes": resultBytes})
				resp, err := d.hub.CallTool(ctx, &mcpdv1.CallToolRequest{Name: "mcp__load__big", Arguments: args}, grpc.MaxCallRecvMsgSize(maxRecvBytes))
				if err == nil && len(text(resp)) != resultBytes {
					err = fmt.Errorf("got %d bytes of text, want %d", len(text(resp)), resultBytes)
				}
				if err != nil {
					failed.Add(1)
					t.Errorf("caller %d call %d: %v", c, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-other; err != nil {
		t.Errorf("during the huge results: %v", err)
	}
	if failed.Load() > 0 {
		return
	}
	d.wantEcho(ctx, t, "load")
	d.wantEcho(ctx, t, "other")
	d.checkPeak(t, fmt.Sprintf("%d results of %d MiB", callers*callsEach, resultBytes>>20))
}

// TestMemoryStalledSubscriber: a Subscribe stream that never reads, while
// a server floods large log notifications. mcpd's memory stays bounded
// (its event buffer drops the oldest events), a subscriber that reads gets
// through to the last one, and the stalled one, when it reads at last, is
// told with a gap what it missed.
func TestMemoryStalledSubscriber(t *testing.T) {
	const (
		count = 6000
		size  = 64 << 10
	)
	ctx := memoryContext(t)
	d := memoryDaemon(ctx, t, fakeFlood)
	stalled := d.subscribe(ctx, t, "load", mcpdv1.EventKind_EVENT_KIND_LOG)
	reading := d.subscribe(ctx, t, "load", mcpdv1.EventKind_EVENT_KIND_LOG)
	// Both streams are open once an event reaches the reading one.
	d.flood(ctx, t, 1, 1)
	if m, err := reading.Recv(); err != nil || m.GetEvent().GetLog() == nil {
		t.Fatalf("first event: got %v, %v; want a log event", m, err)
	}
	type read struct {
		logs int
		err  error
	}
	readDone := make(chan read, 1)
	go func() {
		logs, _, err := readLogs(reading, lastLogger(count))
		readDone <- read{logs, err}
	}()

	stop := make(chan struct{})
	other := d.echoes(ctx, t, "other", stop)
	d.flood(ctx, t, count, size)
	close(stop)
	if err := <-other; err != nil {
		t.Errorf("during the flood: %v", err)
	}
	if r := <-readDone; r.err != nil {
		t.Fatalf("reading subscriber: %v after %d log events", r.err, r.logs)
	}
	d.wantEcho(ctx, t, "load")
	d.wantEcho(ctx, t, "other")
	d.checkPeak(t, fmt.Sprintf("%d log notifications of %d KiB, one subscriber stalled", count, size>>10))

	logs, gaps, err := readLogs(stalled, lastLogger(count))
	if err != nil {
		t.Fatalf("stalled subscriber: %v after %d log events", err, logs)
	}
	if gaps == 0 {
		t.Errorf("stalled subscriber: got %d log events and no gap, want a gap for the events it missed", logs)
	}
	t.Logf("stalled subscriber: %d log events, %d gaps", logs, gaps)
}

// TestMemoryLimitFlag checks, in mcpd's "mcpd serving" line, which soft
// memory limit is in effect: the default, GOMEMLIMIT without the flag,
// and the flag over GOMEMLIMIT.
func TestMemoryLimitFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{name: "default", want: "128MiB"},
		{name: "GOMEMLIMIT", env: []string{"GOMEMLIMIT=100MiB"}, want: "100MiB"},
		{name: "flag beats GOMEMLIMIT", args: []string{"--memory-limit", "64MiB"}, env: []string{"GOMEMLIMIT=100MiB"}, want: "64MiB"},
		{name: "environment", env: []string{"MCPD_MEMORY_LIMIT=1GiB", "GOMEMLIMIT=100MiB"}, want: "1GiB"},
		{name: "off", args: []string{"--memory-limit", "off"}, want: "off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, set := os.LookupEnv("GOMEMLIMIT"); set && tc.env == nil {
				t.Skip("GOMEMLIMIT is set in the test's environment")
			}
			ctx := memoryContext(t)
			d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: tc.args, env: tc.env})
			var got string
			for line := range strings.Lines(d.log.String()) {
				var entry struct {
					Message     string `json:"message"`
					MemoryLimit string `json:"memory_limit"`
				}
				if json.Unmarshal([]byte(line), &entry) == nil && entry.Message == "mcpd serving" {
					got = entry.MemoryLimit
				}
			}
			if got != tc.want {
				t.Errorf("memory_limit in the mcpd serving line: got %q, want %q", got, tc.want)
			}
		})
	}
}
