package server

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestTrackedConnectionsKeepTheUserTimeout: a connection the gRPC listener
// tracks gets the TCP_USER_TIMEOUT that gRPC gives a keepalive's
// connections, which it cannot set through the tracking wrapper.
func TestTrackedConnectionsKeepTheUserTimeout(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tracked := &trackedListener{Listener: lis, set: &connSet{}, userTimeout: 7 * time.Second}
	defer tracked.Close()
	client, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := tracked.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*trackedConn).Conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var getErr error
	if err := raw.Control(func(fd uintptr) { got, getErr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT) }); err != nil || getErr != nil {
		t.Fatal(err, getErr)
	}
	if got != 7000 {
		t.Errorf("TCP_USER_TIMEOUT: got %d ms, want 7000", got)
	}
}
