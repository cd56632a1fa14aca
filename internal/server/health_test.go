package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// TestHealthForgetsRemovedServers: servers that come and go under fresh
// names, as an agent's per task do, leave no health entry behind.
func TestHealthForgetsRemovedServers(t *testing.T) {
	h := NewHealth()
	base := h.srv.count()
	for i := range 1000 {
		name := fmt.Sprintf("task-%d", i)
		h.ServerStateChanged(name, mcpclient.StateConnecting)
		h.ServerStateChanged(name, mcpclient.StateReady)
		h.ServerStateChanged(name, mcpclient.StateStopped)
		h.ServerRemoved(name)
	}
	if got := h.srv.count(); got != base {
		t.Errorf("health entries after 1000 servers came and went: got %d, want %d as before", got, base)
	}
}

// TestHealthWatchServer: a watch of a server hears it come, go (as
// SERVICE_UNKNOWN) and come back under the same name; the removed
// server's entry lasts as long as the watch, no longer.
func TestHealthWatchServer(t *testing.T) {
	e := newEnv(t, nil)
	h := e.srv.health
	base := h.srv.count()
	ctx := testContext(t)
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch, err := healthpb.NewHealthClient(e.conn).Watch(watchCtx, &healthpb.HealthCheckRequest{Service: HealthServicePrefix + "w"})
	if err != nil {
		t.Fatal(err)
	}
	recv := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		if got, err := watch.Recv(); err != nil || got.GetStatus() != want {
			t.Fatalf("watch: got %v %v, want %v", got.GetStatus(), err, want)
		}
	}
	recv(healthpb.HealthCheckResponse_SERVICE_UNKNOWN) // not connected yet
	h.ServerStateChanged("w", mcpclient.StateReady)
	recv(healthpb.HealthCheckResponse_SERVING)
	h.ServerRemoved("w")
	recv(healthpb.HealthCheckResponse_SERVICE_UNKNOWN)
	if got := h.srv.count(); got != base+1 {
		t.Errorf("entries while a removed server is watched: got %d, want %d", got, base+1)
	}
	if _, err := h.srv.Check(ctx, &healthpb.HealthCheckRequest{Service: HealthServicePrefix + "w"}); status.Code(err) != codes.NotFound {
		t.Errorf("check of a removed server that is watched: got %v, want NOT_FOUND", err)
	}
	h.ServerStateChanged("w", mcpclient.StateConnecting)
	recv(healthpb.HealthCheckResponse_NOT_SERVING)
	h.ServerStateChanged("w", mcpclient.StateReady)
	recv(healthpb.HealthCheckResponse_SERVING)
	h.ServerRemoved("w")
	recv(healthpb.HealthCheckResponse_SERVICE_UNKNOWN)

	cancel()
	if _, err := watch.Recv(); status.Code(err) != codes.Canceled {
		t.Errorf("watch after cancel: got %v, want CANCELED", err)
	}
	// mcpd sees the end of the stream on its own goroutine.
	for h.srv.count() != base {
		if ctx.Err() != nil {
			t.Fatalf("entries after the watch of a removed server ended: got %d, want %d", h.srv.count(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// blockingWatchStream is a Watch stream whose Send reports each status
// on sent and then waits for the test to allow the next one.
type blockingWatchStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent chan healthpb.HealthCheckResponse_ServingStatus
	next chan struct{}
}

func (s *blockingWatchStream) Context() context.Context { return s.ctx }

func (s *blockingWatchStream) Send(resp *healthpb.HealthCheckResponse) error {
	select {
	case s.sent <- resp.GetStatus():
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	select {
	case <-s.next:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// TestHealthWatchSendsTheLatest: a watcher that is slow to send holds
// up no setter, and then sends the latest status only.
func TestHealthWatchSendsTheLatest(t *testing.T) {
	h := NewHealth()
	ctx, cancel := context.WithCancel(testContext(t))
	stream := &blockingWatchStream{ctx: ctx, sent: make(chan healthpb.HealthCheckResponse_ServingStatus), next: make(chan struct{})}
	ended := make(chan error, 1)
	go func() {
		ended <- h.srv.Watch(&healthpb.HealthCheckRequest{Service: HealthServicePrefix + "app"}, stream)
	}()
	defer func() {
		cancel()
		<-ended
	}()

	if got := <-stream.sent; got != healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
		t.Fatalf("first status: got %v, want SERVICE_UNKNOWN", got)
	}
	// The watch is stuck in Send: these must return all the same.
	for range 100 {
		h.ServerStateChanged("app", mcpclient.StateReady)
		h.ServerStateChanged("app", mcpclient.StateConnecting)
	}
	h.ServerStateChanged("app", mcpclient.StateReady)
	stream.next <- struct{}{}
	if got := <-stream.sent; got != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("status after the watcher caught up: got %v, want the latest, SERVING", got)
	}
	h.ServerRemoved("app")
	stream.next <- struct{}{}
	if got := <-stream.sent; got != healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
		t.Fatalf("status after removal: got %v, want SERVICE_UNKNOWN", got)
	}
}

// TestHealthWatchAtShutdown: at shutdown every watch, of mcpd, of a
// server, of a removed server or of a name mcpd never had, gets
// NOT_SERVING and then ends with UNAVAILABLE.
func TestHealthWatchAtShutdown(t *testing.T) {
	e := newEnv(t, nil)
	h := e.srv.health
	ctx := testContext(t)
	h.ServerStateChanged("app", mcpclient.StateReady)
	h.ServerStateChanged("gone", mcpclient.StateReady)
	h.ServerRemoved("gone")
	watches := map[string]healthpb.Health_WatchClient{}
	for service, first := range map[string]healthpb.HealthCheckResponse_ServingStatus{
		"":                           healthpb.HealthCheckResponse_SERVING,
		HealthServicePrefix + "app":  healthpb.HealthCheckResponse_SERVING,
		HealthServicePrefix + "gone": healthpb.HealthCheckResponse_SERVICE_UNKNOWN,
		HealthServicePrefix + "nope": healthpb.HealthCheckResponse_SERVICE_UNKNOWN,
	} {
		watch, err := healthpb.NewHealthClient(e.conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := watch.Recv(); err != nil || got.GetStatus() != first {
			t.Fatalf("watch %q: got %v %v, want %v", service, got.GetStatus(), err, first)
		}
		watches[service] = watch
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		e.srv.Shutdown(ctx)
	}()
	for service, watch := range watches {
		if got, err := watch.Recv(); err != nil || got.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("watch %q at shutdown: got %v %v, want NOT_SERVING", service, got.GetStatus(), err)
		}
		if _, err := watch.Recv(); status.Code(err) != codes.Unavailable {
			t.Errorf("watch %q after NOT_SERVING: got %v, want UNAVAILABLE", service, err)
		}
	}
	<-stopped
	// Set no more, removed or not.
	h.SetServing(true)
	h.ServerStateChanged("app", mcpclient.StateReady)
	h.ServerRemoved("app")
	for service, want := range map[string]healthpb.HealthCheckResponse_ServingStatus{
		"":                          healthpb.HealthCheckResponse_NOT_SERVING,
		HealthServicePrefix + "app": healthpb.HealthCheckResponse_NOT_SERVING,
	} {
		if got, err := h.srv.Check(ctx, &healthpb.HealthCheckRequest{Service: service}); err != nil || got.GetStatus() != want {
			t.Errorf("check %q after shutdown: got %v %v, want %v", service, got.GetStatus(), err, want)
		}
	}
}

// TestHealthListManyServers: List names mcpd's own status only, however
// many servers there are (grpc-go's health.Server refused to list more
// than 100 services, the removed ones it kept included).
func TestHealthListManyServers(t *testing.T) {
	e := newEnv(t, nil)
	for i := range 150 {
		e.srv.health.ServerStateChanged(fmt.Sprintf("s%d", i), mcpclient.StateReady)
	}
	list, err := healthpb.NewHealthClient(e.conn).List(testContext(t), &healthpb.HealthListRequest{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if got := slices.Collect(maps.Keys(list.GetStatuses())); !slices.Equal(got, []string{""}) || list.GetStatuses()[""].GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("List: got %v, want only mcpd's own (\"\"), SERVING", list.GetStatuses())
	}
}
