//go:build linux

package main

import "golang.org/x/sys/unix"

// keepFromSameUser makes the daemon's memory, environment and command line
// unreadable to the other processes of its user (/proc/PID/environ,
// ptrace), the servers it starts included, as ssh-agent does: they run as
// mcpd's user but must not read its API token or its callers' tokens. It
// also turns off core dumps, which would hold the same secrets. A child
// is dumpable again after its exec, so the servers are not affected.
func keepFromSameUser() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
