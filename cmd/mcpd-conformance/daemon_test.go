package main

import (
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// fakeMCPD plays mcpd for the daemon tests: it serves the health service
// on the --listen socket until SIGTERM. mode "serve" then exits 0,
// "serve-exit3" exits 3, and "die" exits 4 without serving.
func fakeMCPD(mode string, args []string) int {
	if mode == "die" {
		return 4
	}
	path := ""
	for i, a := range args {
		if a == "--listen" && i+1 < len(args) {
			path = strings.TrimPrefix(args[i+1], "unix://")
		}
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return 5
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() {
		<-term
		srv.Stop()
	}()
	_ = srv.Serve(lis)
	if mode == "serve-exit3" {
		return 3
	}
	return 0
}

func TestDaemon(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mode      string
		wantStart string // substring of startDaemon's error; "" = starts
		wantStop  string // substring of stop's error; "" = clean exit
	}{
		{mode: "serve"},
		{mode: "serve-exit3", wantStop: "exit status 3"},
		{mode: "die", wantStart: "mcpd exited before serving: exit status 4"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Setenv(fakeMCPDEnv, tt.mode)
			d, conn, err := startDaemon(testContext(t), self, "info", io.Discard)
			if tt.wantStart != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantStart) {
					t.Fatalf("startDaemon: got error %v, want one containing %q", err, tt.wantStart)
				}
				return
			}
			if err != nil {
				t.Fatalf("startDaemon: %v", err)
			}
			conn.Close()
			err = d.stop()
			if tt.wantStop == "" && err != nil {
				t.Errorf("stop: got %v, want a clean exit", err)
			}
			if tt.wantStop != "" && (err == nil || !strings.Contains(err.Error(), tt.wantStop)) {
				t.Errorf("stop: got %v, want an error containing %q", err, tt.wantStop)
			}
			if _, err := os.Stat(d.dir); !os.IsNotExist(err) {
				t.Errorf("after stop, stat %s: got %v, want not exist", d.dir, err)
			}
		})
	}
}
