//go:build !linux

package server

import (
	"net"
	"time"
)

// setTCPUserTimeout does nothing where TCP_USER_TIMEOUT is Linux's alone
// (gRPC sets it on Linux only too).
func setTCPUserTimeout(*net.TCPConn, time.Duration) {}
