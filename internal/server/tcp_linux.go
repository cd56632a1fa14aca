package server

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// setTCPUserTimeout bounds how long data the peer has not acknowledged may
// wait before the connection is closed, as gRPC does for a keepalive's
// timeout. A failure leaves the system's default.
func setTCPUserTimeout(c *net.TCPConn, d time.Duration) {
	raw, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d/time.Millisecond))
	})
}
