package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ),
// 100 Hz on every Linux that matters. Over a 2 s cell of thousands of calls
// it resolves a fraction of a microsecond per call.
const clockTick = 10 * time.Millisecond

// procCPU returns the user plus system CPU time a process has used, all
// threads included. ok is false where /proc is not available.
func procCPU(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from the contents
// of /proc/<pid>/stat. The command name (field 2) may hold spaces and
// parentheses, so fields are counted after its closing parenthesis.
func parseStatCPU(b []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(b[i+1:])
	// fields[0] is field 3 (state), so utime is fields[11], stime fields[12].
	if len(fields) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(string(fields[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(fields[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * clockTick, true
}

// selfCPU returns the CPU time this process has used.
func selfCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// cpuMeter samples the CPU time of the bench itself and of up to two other
// processes (mcpd and the upstream server) around a measured cell.
type cpuMeter struct {
	pids  [2]int
	start [3]time.Duration
	ok    [3]bool
}

// cpuMeterFor returns a meterFunc for the given processes; a pid of 0
// leaves that process unmeasured.
func cpuMeterFor(mcpdPid, serverPid int) meterFunc {
	return func() func() cpuUse {
		m := &cpuMeter{pids: [2]int{mcpdPid, serverPid}}
		m.start, m.ok = m.sample()
		return m.stop
	}
}

func (m *cpuMeter) sample() ([3]time.Duration, [3]bool) {
	var t [3]time.Duration
	var ok [3]bool
	t[0], ok[0] = selfCPU()
	for i, pid := range m.pids {
		t[i+1], ok[i+1] = procCPU(pid)
	}
	return t, ok
}

// stop returns the CPU time each process used since the meter started.
func (m *cpuMeter) stop() cpuUse {
	end, ok := m.sample()
	var d [3]time.Duration
	for i := range d {
		d[i] = -1
		if ok[i] && m.ok[i] {
			d[i] = end[i] - m.start[i]
		}
	}
	return cpuUse{client: d[0], mcpd: d[1], server: d[2]}
}

// cpuUse is CPU time of the bench client, mcpd and the server, in total
// or per call; a negative value means not measured.
type cpuUse struct {
	client, mcpd, server time.Duration
}

// add sums two measurements; not measured in either stays not measured.
func (u cpuUse) add(v cpuUse) cpuUse {
	sum := func(a, b time.Duration) time.Duration {
		if a < 0 || b < 0 {
			return -1
		}
		return a + b
	}
	return cpuUse{client: sum(u.client, v.client), mcpd: sum(u.mcpd, v.mcpd), server: sum(u.server, v.server)}
}

// div divides totals by a number of calls.
func (u cpuUse) div(calls int) cpuUse {
	per := func(a time.Duration) time.Duration {
		if a < 0 || calls <= 0 {
			return -1
		}
		return a / time.Duration(calls)
	}
	return cpuUse{client: per(u.client), mcpd: per(u.mcpd), server: per(u.server)}
}
