// Package server is mcpd's gRPC edge: the mcpd.v1.MCPHub handlers, the
// interceptors (logging, authentication, panic recovery, metrics), the
// one mapping from errors to gRPC statuses, health (overall and per
// server) and server reflection.
package server

import (
	"context"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
	"github.com/mcpd-project/mcpd/internal/telemetry"
)

// HealthServicePrefix prefixes a server's name to form its health service
// name: the health of server "demo" is service "mcpd.server/demo".
const HealthServicePrefix = "mcpd.server/"

// HTTP/2 flow-control windows on a local listener (see
// Options.LocalListener): how much a client may send on one stream, and on
// the connection, before mcpd reads it.
const (
	streamWindowBytes = 1 << 20
	connWindowBytes   = 4 << 20
)

// clientPingMinInterval is how often a client may ping mcpd (HTTP/2 PING,
// gRPC keepalive), with or without a call open. gRPC's default, 5 minutes
// with calls only, makes mcpd end the connection (GOAWAY too_many_pings,
// and every stream on it) of a client that keeps it alive every 10 to 60
// seconds, as agents behind NATs and load balancers are told to; 10 s is
// the shortest interval grpc-go clients accept.
const clientPingMinInterval = 5 * time.Second

// handlerWorkers is how many goroutines the gRPC server keeps to run RPC
// handlers. Reused, they keep their grown stacks; a fresh goroutine per RPC
// copies its stack several times on the way to the upstream call. A worker
// is busy for as long as its RPC waits on the upstream, and a long-lived
// stream (Subscribe, HandleServerRequests) holds one for its life, so the
// pool is sized for the RPCs in flight, not for the threads. An RPC that
// finds every worker busy still gets a goroutine of its own. A parked
// worker keeps its stack (tens of KiB) until the collector shrinks it; 128
// of them cost a few MiB at most.
const handlerWorkers = 128

// Health reports overall and per-server health through grpc.health.v1.
// Create it before the Manager so that the Manager can report state changes
// to it.
type Health struct {
	srv *healthServer
}

// NewHealth returns a Health that reports the daemon as serving.
func NewHealth() *Health {
	return &Health{srv: newHealthServer()}
}

// SetServing sets the daemon's overall health (service ""): a daemon
// whose configured servers have not had their first start yet is
// NOT_SERVING. Once Shutdown has begun the daemon stays NOT_SERVING.
func (h *Health) SetServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	h.srv.set("", st)
}

// healthService is grpc.health.v1 as served by mcpd: healthServer's
// Check and List, and its Watch until the daemon stops (graceful stop
// waits for every open stream).
type healthService struct {
	*healthServer
	stopping context.Context // the hub's
}

// Watch streams a service's status like healthServer's Watch. At
// shutdown the watcher gets NOT_SERVING (even for a service mcpd never
// had), then the stream ends with UNAVAILABLE: a watcher must not hold
// the daemon's graceful stop open.
func (s healthService) Watch(in *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()
	w := &lastStatusStream{Health_WatchServer: stream, ctx: ctx, last: -1}
	err := s.healthServer.Watch(in, w)
	if s.stopping.Err() == nil || stream.Context().Err() != nil {
		return err
	}
	// Shutdown set NOT_SERVING before it ended the watch, but the watch
	// may have ended before it passed the change on.
	if w.last != healthpb.HealthCheckResponse_NOT_SERVING {
		if err := stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}); err != nil {
			return err
		}
	}
	return errShuttingDown
}

// lastStatusStream is a Watch stream with its own context that remembers
// the last status sent. Only the Watch goroutine uses it.
type lastStatusStream struct {
	healthpb.Health_WatchServer
	ctx  context.Context
	last healthpb.HealthCheckResponse_ServingStatus
}

func (w *lastStatusStream) Context() context.Context { return w.ctx }

func (w *lastStatusStream) Send(resp *healthpb.HealthCheckResponse) error {
	if err := w.Health_WatchServer.Send(resp); err != nil {
		return err
	}
	w.last = resp.GetStatus()
	return nil
}

// ServerStateChanged records a server's state: SERVING when ready,
// NOT_SERVING otherwise (a STOPPED server that is still listed, such as an
// agent's whose ServeTools stream ended, included). It has the signature
// of mcpclient.Options.OnStateChange.
func (h *Health) ServerStateChanged(name string, state mcpclient.State) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if state == mcpclient.StateReady {
		st = healthpb.HealthCheckResponse_SERVING
	}
	h.srv.set(HealthServicePrefix+name, st)
}

// ServerRemoved forgets a server that is gone (disconnected), as if mcpd
// never had it: Check answers NOT_FOUND, a Watch of it gets
// SERVICE_UNKNOWN and goes on watching the name, and nothing of it is
// kept once no Watch holds it. It has the signature of
// mcpclient.Options.OnRemoved.
func (h *Health) ServerRemoved(name string) {
	h.srv.remove(HealthServicePrefix + name)
}

// Options configure a Server.
type Options struct {
	// Logger receives one line per finished RPC; default: none.
	Logger zerolog.Logger
	// APIToken, if set, must arrive as "authorization: Bearer <token>" on
	// every RPC but health checks. Ignored when Access is set.
	APIToken string
	// Access authenticates callers and checks what they may do; default:
	// an Authorizer of APIToken alone.
	Access *access.Authorizer
	// Audit writes the audit trail; nil writes none.
	Audit *access.Auditor
	// Commands restricts the commands ConnectServer may start; nil allows
	// all.
	Commands *CommandPolicy
	// Registry carries out ConnectServer, DisconnectServer,
	// SetServerEnabled and ServeTools' declaration; default: the Manager
	// alone. The daemon's registry also records them, so that config
	// reloads keep them and a state file can persist them, and holds them
	// to Claude Code's policy.
	Registry Registry
	// GRPCOptions are appended to the server's options (for example a
	// maximum message size).
	GRPCOptions []grpc.ServerOption
	// MaxSendBytes is the gRPC listener's send limit (MaxSendMsgSize), 0
	// for none: a Subscribe event larger than it goes out as a gap.
	MaxSendBytes int
	// Telemetry, if set, counts and times every RPC (grpc_server_*
	// metrics), traces them when tracing is on, and records the event
	// streams.
	Telemetry *telemetry.Telemetry
	// ClientKeepalive, if positive, pings a client connection that
	// brought nothing for this long, and closes it (ending its calls and
	// streams) when the ping goes unanswered as long again: an agent
	// whose host died or froze would otherwise hold its streams (event
	// subscriptions and their polls, server-request registrations, served
	// tools) until the kernel gives up on the connection, if ever.
	ClientKeepalive time.Duration
	// LocalListener says that the listener reaches only this machine (a
	// loopback address or a Unix socket). The HTTP/2 flow-control windows
	// are then fixed, which turns off bandwidth probing: it answers every
	// request with a PING round trip, and on a local socket there is no
	// bandwidth-delay product to discover. Across a network the windows
	// keep growing with the link.
	LocalListener bool
}

// Server is the gRPC server of mcpd.
type Server struct {
	grpc   *grpc.Server
	health *Health
	hub    *hub
	once   sync.Once
	// unary and stats are the interceptor chain and the stats handler
	// (nil without tracing) of gs, which the HTTP listener's direct
	// unary calls run too.
	unary grpc.UnaryServerInterceptor
	stats stats.Handler
	// codec decodes the requests of gs, and holds the decoding errors of
	// the HTTP listener's direct calls too.
	codec *requestCodec

	mu       sync.Mutex
	http     []*http.Server // the HTTP listeners' servers (ServeHTTP)
	stopping bool           // Shutdown began: no new HTTP listener
	// conns are the gRPC listeners' connections, for Shutdown to cut off.
	conns connSet
	// userTimeout is the TCP_USER_TIMEOUT of the gRPC listeners' TCP
	// connections (Options.ClientKeepalive; 0: the system's).
	userTimeout time.Duration
}

// New builds the gRPC server with MCPHub, health and reflection registered.
// Subscribe reads the Manager's event bus (Shutdown closes it), and
// HandleServerRequests attaches agents to the Manager's broker.
func New(mgr *mcpclient.Manager, h *Health, opts *Options) *Server {
	if opts == nil {
		opts = &Options{}
	}
	authz := opts.Access
	if authz == nil {
		// With no callers file the Authorizer cannot fail.
		authz, _ = access.New(&access.Options{APIToken: opts.APIToken})
	}
	// The servers' own asks (toolsAsk) are read from mgr's configs; the
	// MCP endpoint (gateway.New) sets the same on its Authorizer.
	authz.SetServerAsks(mgr.ToolAsk)
	g := &guard{authz: authz, audit: opts.Audit, qualify: mgr.QualifyToolName, poll: mgr.Poll}
	log := interceptorLogger(opts.Logger)
	logOpts := []logging.Option{
		// Payloads are never logged: they may carry secrets.
		logging.WithLogOnEvents(logging.FinishCall),
		// A line per successful call costs a syscall on the hot path:
		// successes are logged at debug, failures at info and above.
		logging.WithLevels(func(c codes.Code) logging.Level {
			if c == codes.OK {
				return logging.LevelDebug
			}
			return logging.DefaultServerCodeToLevel(c)
		}),
	}
	recoverOpt := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		opts.Logger.Error().Interface("panic", p).Msg("recovered from panic in handler")
		return status.Error(codes.Internal, "internal error")
	})
	authFn := authenticate(authz, opts.Audit)
	notHealth := skipServices(healthpb.Health_ServiceDesc.ServiceName)
	// Health and reflection need no token: probes and grpcurl use them,
	// and they reveal no server, tool or data.
	notProbe := skipServices(healthpb.Health_ServiceDesc.ServiceName,
		reflectionv1.ServerReflection_ServiceDesc.ServiceName,
		reflectionv1alpha.ServerReflection_ServiceDesc.ServiceName)
	// Health checks are probes, polled often: they are not logged.
	unary := []grpc.UnaryServerInterceptor{selector.UnaryServerInterceptor(logging.UnaryServerInterceptor(log, logOpts...), notHealth)}
	stream := []grpc.StreamServerInterceptor{selector.StreamServerInterceptor(logging.StreamServerInterceptor(log, logOpts...), notHealth)}
	// Once Shutdown began, a new call is refused (UNAVAILABLE, to be tried
	// elsewhere) rather than run and cut at the deadline: the gRPC listener
	// keeps accepting while the HTTP listener drains.
	stopping, stop := context.WithCancel(context.Background())
	// A request that did not decode is refused next, before any
	// interceptor may end the call first (see requestCodec).
	codec := newRequestCodec(opts.Audit)
	unary = append(unary, codec.refuseUnary)
	stream = append(stream, codec.refuseStream)
	// Health (NOT_SERVING) and reflection still answer, for probes.
	refuseStopping := selector.MatchFunc(func(ctx context.Context, c interceptors.CallMeta) bool {
		return stopping.Err() != nil && notProbe.Match(ctx, c)
	})
	unary = append(unary, selector.UnaryServerInterceptor(func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
		return nil, errShuttingDown
	}, refuseStopping))
	stream = append(stream, selector.StreamServerInterceptor(func(any, grpc.ServerStream, *grpc.StreamServerInfo, grpc.StreamHandler) error {
		return errShuttingDown
	}, refuseStopping))
	// Every MCPHub RPC has a caller (anonymous when no credential is
	// configured), is authorized, and is audited when it acts.
	unary = append(unary,
		selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(authFn), notProbe),
		selector.UnaryServerInterceptor(g.unary, notProbe))
	stream = append(stream,
		selector.StreamServerInterceptor(auth.StreamServerInterceptor(authFn), notProbe),
		selector.StreamServerInterceptor(g.stream, notProbe))
	// Recovery is innermost (below), so that the log, the metrics and the
	// audit see a handler's panic as INTERNAL; it is also outermost but for
	// the metrics, so that a panic in an interceptor (authentication, the
	// permission check, the audit) fails its call, not the daemon.
	unary = append([]grpc.UnaryServerInterceptor{recovery.UnaryServerInterceptor(recoverOpt)}, unary...)
	stream = append([]grpc.StreamServerInterceptor{recovery.StreamServerInterceptor(recoverOpt)}, stream...)
	if opts.Telemetry != nil {
		// Outermost, so that the metrics count refused calls too.
		u, s := opts.Telemetry.GRPCInterceptors()
		unary = append([]grpc.UnaryServerInterceptor{u}, unary...)
		stream = append([]grpc.StreamServerInterceptor{s}, stream...)
	}
	unary = append(unary, recovery.UnaryServerInterceptor(recoverOpt))
	stream = append(stream, recovery.StreamServerInterceptor(recoverOpt))

	chain := chainUnary(unary)
	gopts := append([]grpc.ServerOption{
		grpc.UnaryInterceptor(chain),
		grpc.ChainStreamInterceptor(stream...),
		grpc.NumStreamWorkers(handlerWorkers),
		grpc.ForceServerCodecV2(codec),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: clientPingMinInterval, PermitWithoutStream: true}),
	}, opts.GRPCOptions...)
	if opts.ClientKeepalive > 0 {
		gopts = append(gopts, grpc.KeepaliveParams(keepalive.ServerParameters{Time: opts.ClientKeepalive, Timeout: opts.ClientKeepalive}))
	}
	tracing := opts.Telemetry.GRPCStatsHandler()
	if tracing != nil {
		gopts = append(gopts, grpc.StatsHandler(tracing))
	}
	if opts.LocalListener {
		// The probe's wake-ups on both sides would land while the
		// upstream call runs. The windows are large enough for big
		// messages.
		gopts = append(gopts,
			grpc.StaticStreamWindowSize(streamWindowBytes),
			grpc.StaticConnWindowSize(connWindowBytes))
	}
	gs := grpc.NewServer(gopts...)
	hb := &hub{
		access:  authz,
		mgr:     mgr,
		events:  mgr.Events(),
		broker:  mgr.Requests(),
		policy:  opts.Commands,
		reg:     opts.Registry,
		log:     opts.Logger,
		tel:     opts.Telemetry,
		guard:   g,
		maxSend: opts.MaxSendBytes,
	}
	hb.stopping, hb.stop = stopping, stop
	if hb.reg == nil {
		hb.reg = ManagerRegistry{Manager: mgr}
	}
	if hb.events == nil {
		hb.events = events.NewBus(nil) // nothing publishes: streams only wait
	}
	if hb.broker == nil {
		hb.broker = mcpclient.NewBroker(nil)
	}
	g.approve = hb.approve
	mcpdv1.RegisterMCPHubServer(gs, hb)
	healthpb.RegisterHealthServer(gs, healthService{healthServer: h.srv, stopping: hb.stopping})
	reflection.Register(gs)
	opts.Telemetry.InitializeGRPC(gs)
	return &Server{grpc: gs, health: h, hub: hb, unary: chain, stats: tracing, codec: codec, userTimeout: opts.ClientKeepalive}
}

// chainUnary is the interceptors as one, the first outermost, as
// grpc.ChainUnaryInterceptor makes them; the HTTP listener's direct
// calls run the same chain as the gRPC server.
func chainUnary(interceptors []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return interceptors[0](ctx, req, info, nextUnary(interceptors, 1, info, handler))
	}
}

func nextUnary(interceptors []grpc.UnaryServerInterceptor, i int, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) grpc.UnaryHandler {
	if i == len(interceptors) {
		return handler
	}
	return func(ctx context.Context, req any) (any, error) {
		return interceptors[i](ctx, req, info, nextUnary(interceptors, i+1, info, handler))
	}
}

// Serve accepts connections on lis until Shutdown.
func (s *Server) Serve(lis net.Listener) error {
	return s.grpc.Serve(&trackedListener{Listener: lis, set: &s.conns, userTimeout: s.userTimeout})
}

// Shutdown marks the daemon NOT_SERVING, ends the long-lived streams
// (health Watch, Subscribe, HandleServerRequests, ServeTools) with
// UNAVAILABLE so that clients reconnect elsewhere or later, lets other
// in-flight RPCs finish until ctx ends, then closes whatever is left.
func (s *Server) Shutdown(ctx context.Context) {
	s.health.srv.stop() // before the watches end: they pass NOT_SERVING on
	s.once.Do(func() {
		s.hub.stop()
		s.hub.events.Close()
	})
	// HTTP requests reach the gRPC server through its handler transport,
	// which a graceful stop closes at once: drain them first.
	s.shutdownHTTP(ctx)
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		// Stop waits for the connections still in their handshake (a
		// client that connected and sent nothing), up to the gRPC
		// server's connection timeout of two minutes: close them.
		s.conns.cutOff()
		s.grpc.Stop()
		<-stopped
	}
}

// connSet holds the connections the gRPC listeners accepted and that are
// not closed yet. The zero value is ready to use.
type connSet struct {
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
	cut   bool // cutOff was called: later connections are closed at once
}

// cutOff closes every connection of the set, and each one accepted later.
func (cs *connSet) cutOff() {
	cs.mu.Lock()
	conns := cs.conns
	cs.conns, cs.cut = nil, true
	cs.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
}

// trackedListener adds the connections it accepts to set.
type trackedListener struct {
	net.Listener
	set *connSet
	// userTimeout, if set, is given to TCP connections as their
	// TCP_USER_TIMEOUT: gRPC sets it along with its keepalive, but only on
	// a *net.TCPConn, which a trackedConn hides from it.
	userTimeout time.Duration
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tcp, ok := c.(*net.TCPConn); ok && l.userTimeout > 0 {
		setTCPUserTimeout(tcp, l.userTimeout)
	}
	tc := &trackedConn{Conn: c, set: l.set}
	l.set.mu.Lock()
	cut := l.set.cut
	if !cut {
		if l.set.conns == nil {
			l.set.conns = make(map[*trackedConn]struct{})
		}
		l.set.conns[tc] = struct{}{}
	}
	l.set.mu.Unlock()
	if cut {
		_ = c.Close()
	}
	return tc, nil
}

// trackedConn leaves its set when closed.
type trackedConn struct {
	net.Conn
	set *connSet
}

func (c *trackedConn) Close() error {
	c.set.mu.Lock()
	delete(c.set.conns, c)
	c.set.mu.Unlock()
	return c.Conn.Close()
}

// skipServices matches every RPC but those of the named services.
func skipServices(names ...string) selector.Matcher {
	return selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return !slices.Contains(names, c.Service)
	})
}

// interceptorLogger adapts zerolog to go-grpc-middleware's logging
// interface. A failed call's error text (grpc.error) stays off its line,
// logged at info and above, and goes on a debug line of its own: the text
// may quote a server's error, and with it what the server echoed of the
// caller's arguments.
func interceptorLogger(l zerolog.Logger) logging.Logger {
	return logging.LoggerFunc(func(_ context.Context, lvl logging.Level, msg string, fields ...any) {
		var errText any
		var ev *zerolog.Event
		switch lvl {
		case logging.LevelDebug:
			ev = l.Debug()
		case logging.LevelInfo:
			ev = l.Info()
		case logging.LevelWarn:
			ev = l.Warn()
		default:
			ev = l.Error()
		}
		if lvl != logging.LevelDebug {
			fields, errText = withoutField(fields, errorField)
		}
		ev.Fields(fields).Msg(msg)
		if errText != nil {
			l.Debug().Fields(fields).Interface(errorField, errText).Msg(msg + ": error")
		}
	})
}

// errorField is the field in which go-grpc-middleware logs a call's error.
const errorField = "grpc.error"

// withoutField returns fields (key, value, key, value, ...) without key,
// and key's value, nil if it had none. fields is not changed.
func withoutField(fields []any, key string) ([]any, any) {
	for i := 0; i+1 < len(fields); i += 2 {
		if k, ok := fields[i].(string); ok && k == key {
			return append(slices.Clip(fields[:i]), fields[i+2:]...), fields[i+1]
		}
	}
	return fields, nil
}
