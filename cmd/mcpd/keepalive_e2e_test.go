package main

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestClientKeepalivePings: a client that keeps its connection alive with
// HTTP/2 pings (gRPC keepalive) every few seconds, with no call open,
// keeps it; one that floods pings is still sent away (GOAWAY
// too_many_pings).
func TestClientKeepalivePings(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})

	conn, err := (&net.Dialer{}).DialContext(ctx, d.net, d.dialTo)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	var writeMu sync.Mutex
	write := func(f func() error) {
		writeMu.Lock()
		defer writeMu.Unlock()
		if err := f(); err != nil {
			t.Errorf("write frame: %v", err)
		}
	}
	write(func() error { return fr.WriteSettings() })

	acks := make(chan [8]byte, 16)
	goAway := make(chan string, 1)
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					write(func() error { return fr.WriteSettingsAck() })
				}
			case *http2.PingFrame:
				if f.IsAck() {
					acks <- f.Data
				}
			case *http2.GoAwayFrame:
				goAway <- f.ErrCode.String() + " " + string(f.DebugData())
				return
			}
		}
	}()
	// ping sends a ping and waits for its answer; it returns why mcpd
	// sent the client away, if it did. mcpd answers the ping that breaks
	// its rule before it sends GOAWAY, so a ping counts as kept only once
	// a moment has passed after its answer without one.
	ping := func(n byte) (sentAway string) {
		write(func() error { return fr.WritePing(false, [8]byte{n}) })
		select {
		case <-acks:
		case reason := <-goAway:
			return reason
		case <-ctx.Done():
			t.Fatalf("ping %d: no answer", n)
		}
		select {
		case reason := <-goAway:
			return reason
		case <-time.After(500 * time.Millisecond):
			return ""
		}
	}

	// gRPC sends a client away at its fourth ping too soon (three
	// strikes): four pings a little over the allowed interval apart.
	for n := byte(1); n <= 4; n++ {
		if n > 1 {
			time.Sleep(clientPingInterval)
		}
		if reason := ping(n); reason != "" {
			t.Fatalf("ping %d, %v after the last: mcpd sent the client away (%s)", n, clientPingInterval, reason)
		}
	}
	// A flood is not allowed.
	for n := byte(5); n <= 12; n++ {
		if reason := ping(n); reason != "" {
			return
		}
	}
	t.Errorf("eight pings back to back: mcpd did not send the client away")
}

// clientPingInterval is mcpd's shortest interval between a client's pings
// (server.clientPingMinInterval); with the half second each ping waits
// after its answer, the pings go out a little over it apart.
const clientPingInterval = 5 * time.Second

// TestClientKeepaliveEndsFrozenClients: with --client-keepalive, mcpd
// pings a quiet client connection, and one whose client stopped answering
// (a frozen process; a host that died looks the same) is closed after
// twice the interval, its streams with it: on the gRPC listener and on
// the HTTP listener's HTTP/2. A client that answers keeps its stream.
func TestClientKeepaliveEndsFrozenClients(t *testing.T) {
	t.Parallel()
	bin := grpcurlBinary(t)
	ctx := testContext(t)
	metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	httpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t),
		args: []string{"--client-keepalive", "2s", "--metrics-listen", metrics, "--http-listen", httpAddr}})
	subscribers := func() float64 {
		v, _ := scrapeMetrics(ctx, t, metrics).value("mcpd_event_subscribers", nil)
		return v
	}
	// subscribe starts grpcurl with a Subscribe stream open on target.
	subscribe := func(target ...string) *exec.Cmd {
		args := append(append([]string{"-plaintext", "-d", "{}"}, target...), "mcpd.v1.MCPHub/Subscribe")
		cmd := exec.Command(bin, args...)
		dieWithTest(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return cmd
	}
	frozen := []*exec.Cmd{subscribe("-unix", d.sock), subscribe(httpAddr)}
	subscribe("-unix", d.sock) // stays awake
	poll(ctx, t, "three streams open", func() (bool, error) { return subscribers() == 3, nil })
	for _, cmd := range frozen {
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	// Two intervals and change; a hang guard, no timing claim.
	guard, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	poll(guard, t, "the frozen clients' streams end", func() (bool, error) { return subscribers() == 1, nil })
	time.Sleep(5 * time.Second) // a few more pings, answered
	if n := subscribers(); n != 1 {
		t.Errorf("streams open after the frozen clients' ended: got %v, want the awake client's one", n)
	}
}
