package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestPIDOneReapsOrphans runs mcpd as PID 1 of a PID namespace of its own,
// as in a container without an init. A server run through a wrapper that
// leaves a child behind (sh's background sleep, which the demo server sh
// execs never waits for) is disconnected: the child, by then a zombie of
// the server, is handed to mcpd, the namespace's init, which must reap it
// rather than keep one zombie for each such stop.
func TestPIDOneReapsOrphans(t *testing.T) {
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), pidNamespace: true})
	if !bytes.Contains([]byte(d.log.String()), []byte("running as PID 1")) {
		t.Fatalf("mcpd did not start as PID 1:\n%s", d.log.String())
	}
	d.connect(ctx, t, "wrapped", "/bin/sh", []string{"-c", `sleep 0.1 & exec "$0" demo-server`, mcpdBinary(t)}, nil)

	// This test sees host pids: mcpd's child is the server, whose child is
	// the sleep; wait for the sleep to exit, unreaped.
	mcpd := d.cmd.Process.Pid
	var orphan int
	poll(ctx, t, "the server's child to exit", func() (bool, error) {
		for _, server := range childrenOf(mcpd) {
			for _, c := range childrenOf(server) {
				if processState(c) == 'Z' {
					orphan = c
					return true, nil
				}
			}
		}
		return false, nil
	})
	if _, err := d.hub.DisconnectServer(ctx, &mcpdv1.DisconnectServerRequest{Name: "wrapped"}); err != nil {
		t.Fatal(err)
	}
	// Reaped, it is gone (its pid perhaps reused, but not by a zombie).
	poll(ctx, t, "the orphan to be reaped", func() (bool, error) {
		return processState(orphan) != 'Z', nil
	})
}

// childrenOf returns the pids whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	var children []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		stat, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(stat[i+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(string(fields[1])); ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			children = append(children, child)
		}
	}
	return children
}

// processState is the state letter of pid in /proc (R, S, Z, ...), 0 when
// there is no such process.
func processState(pid int) byte {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}
