package server

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// healthServer is grpc.health.v1's Check, List and Watch, answering as
// grpc-go's health.Server does, over a map that forgets a removed
// service. health.Server cannot delete a service: with it, every server
// name ever used kept an entry (and its watchers' bookkeeping) for the
// life of the daemon, and an agent that connects servers under a fresh
// name per task grew mcpd by one entry per task. Here a service is in the
// map while it is set or watched, no longer.
type healthServer struct {
	healthpb.UnimplementedHealthServer

	mu       sync.RWMutex
	shutdown bool // every service is NOT_SERVING, and stays so
	services map[string]*healthEntry
}

var _ healthpb.HealthServer = (*healthServer)(nil)

// healthEntry is one service: its status, SERVICE_UNKNOWN while only
// watchers hold it (it was removed, or never set), and one channel per
// watcher. A channel holds the latest status its watcher has not sent
// yet: a setter replaces what is there rather than wait for a slow
// watcher, so a watcher skips the statuses it was too slow to see.
type healthEntry struct {
	status   healthpb.HealthCheckResponse_ServingStatus
	watchers map[chan healthpb.HealthCheckResponse_ServingStatus]struct{}
}

func newHealthServer() *healthServer {
	return &healthServer{services: map[string]*healthEntry{
		"": {status: healthpb.HealthCheckResponse_SERVING},
	}}
}

// Check answers a service's status; NOT_FOUND for one that is not set (a
// name mcpd never had, or a removed server).
func (s *healthServer) Check(_ context.Context, in *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.services[in.GetService()]
	if e == nil || e.status == healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
		return nil, status.Error(codes.NotFound, "unknown service")
	}
	return &healthpb.HealthCheckResponse{Status: e.status}, nil
}

// List lists mcpd's own status ("") only. Health needs no credential, and
// the per-server services would name every server to anyone.
func (s *healthServer) List(context.Context, *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{
		"": {Status: s.services[""].status},
	}}, nil
}

// Watch sends the service's status (SERVICE_UNKNOWN while it is not set),
// then every change to it, the latest one only when changes come faster
// than the stream takes them, until the stream's context ends.
func (s *healthServer) Watch(in *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	name := in.GetService()
	update := make(chan healthpb.HealthCheckResponse_ServingStatus, 1)
	s.mu.Lock()
	e := s.services[name]
	if e == nil {
		e = &healthEntry{status: healthpb.HealthCheckResponse_SERVICE_UNKNOWN}
		s.services[name] = e
	}
	if e.watchers == nil {
		e.watchers = make(map[chan healthpb.HealthCheckResponse_ServingStatus]struct{})
	}
	e.watchers[update] = struct{}{}
	update <- e.status
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(e.watchers, update)
		// An entry with watchers is never deleted, so e is still name's.
		if len(e.watchers) == 0 && e.status == healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
			delete(s.services, name)
		}
	}()

	var last healthpb.HealthCheckResponse_ServingStatus = -1
	for {
		select {
		case st := <-update:
			if st == last {
				continue
			}
			last = st
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return status.Error(codes.Canceled, "Stream has ended.")
			}
		case <-stream.Context().Done():
			return status.Error(codes.Canceled, "Stream has ended.")
		}
	}
}

// set sets a service's status and passes it to the service's watchers.
// After stop it does nothing.
func (s *healthServer) set(name string, st healthpb.HealthCheckResponse_ServingStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown {
		return
	}
	e := s.services[name]
	if e == nil {
		e = &healthEntry{}
		s.services[name] = e
	}
	e.setLocked(st)
}

// remove forgets a service: its watchers get SERVICE_UNKNOWN and keep
// watching (the name may be set again); its entry goes with the last of
// them. After stop it does nothing.
func (s *healthServer) remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.services[name]
	if s.shutdown || e == nil {
		return
	}
	if len(e.watchers) == 0 {
		delete(s.services, name)
		return
	}
	e.setLocked(healthpb.HealthCheckResponse_SERVICE_UNKNOWN)
}

// stop sets every service that is set to NOT_SERVING for good.
func (s *healthServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shutdown = true
	for _, e := range s.services {
		if e.status != healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
			e.setLocked(healthpb.HealthCheckResponse_NOT_SERVING)
		}
	}
}

// setLocked sets the status and replaces the one each watcher has not
// sent yet, if any. The caller holds s.mu; only it puts into a watcher's
// channel (of one), so after the drain the put never blocks.
func (e *healthEntry) setLocked(st healthpb.HealthCheckResponse_ServingStatus) {
	e.status = st
	for update := range e.watchers {
		select {
		case <-update:
		default:
		}
		update <- st
	}
}

// count is how many services the map holds, for tests.
func (s *healthServer) count() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.services)
}
