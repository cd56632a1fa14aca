package main

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/mcpd-project/mcpd/internal/access"
	mcpconfig "github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/gateway"
	"github.com/mcpd-project/mcpd/internal/localfile"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
	"github.com/mcpd-project/mcpd/internal/server"
	"github.com/mcpd-project/mcpd/internal/telemetry"
	"github.com/mcpd-project/mcpd/internal/transport"
)

// defaultConfig is used when no config file exists and no --config is
// given (see loadConfig): the demo server, run by this very binary.
// ${MCPD_SELF} expands to the binary's path.
//
//go:embed default.mcp.json
var defaultConfig []byte

// effectiveMemoryLimit is Go's soft memory limit as it is in effect.
func effectiveMemoryLimit() *byteSize {
	l := byteSize(debug.SetMemoryLimit(-1))
	return &l
}

// run serves until ctx ends (the first SIGTERM or SIGINT) or a listener
// fails, then shuts down in order: health NOT_SERVING, in-flight RPCs
// drain up to the shutdown timeout, servers stop. Once now ends (the
// second signal) the shutdown cuts RPCs off and kills the servers at once.
// Each value on reload re-reads the config files of every scope.
func run(ctx, now context.Context, c *config, reload <-chan os.Signal) error {
	log, err := newLogger(c.logLevel, c.logFormat)
	if err != nil {
		return err
	}
	log.Debug().Int("pid", os.Getpid()).Msg("mcpd starting")
	var reaper *transport.Reaper
	if os.Getpid() == 1 {
		// The init process of a container inherits every orphan: the
		// children a server's wrapper (npx, uvx, sh -c) leaves behind.
		reaper = transport.NewReaper(log)
		defer reaper.Run()()
		log.Info().Msg("running as PID 1: reaping orphaned processes")
	}
	if err := keepFromSameUser(); err != nil {
		log.Warn().Err(err).Msg("cannot keep the daemon's memory and environment from other processes of its user")
	}
	token, err := apiToken(c)
	if err != nil {
		return err
	}
	merged, err := loadConfig(c)
	if err != nil {
		return err
	}
	authz, err := access.New(&access.Options{
		APIToken:           token,
		CallersFile:        c.callersFile,
		ClientCertificates: c.tlsClientCA != "",
	})
	if err != nil {
		return err
	}
	applyRules(authz, c, merged, log)
	var tlsConfig *tls.Config
	if c.tlsCert != "" {
		tlsConfig, err = access.NewServerTLS(access.TLSFiles{Cert: c.tlsCert, Key: c.tlsKey, ClientCA: c.tlsClientCA}, &access.TLSOptions{Logger: log})
		if err != nil {
			return err
		}
	}
	lis, err := listen(c.listen, guardedBeyondLoopback(c, token))
	if err != nil {
		return err
	}
	defer lis.Close()
	var audit *access.Auditor
	if c.audit {
		audit = access.NewAuditor(log, &access.AuditOptions{Arguments: c.auditArguments})
	}
	grpcOpts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(c.maxMessageBytes),
		grpc.MaxSendMsgSize(c.maxMessageBytes),
	}
	if tlsConfig != nil {
		grpcOpts = append(grpcOpts, grpc.Creds(credentials.NewTLS(tlsConfig)))
	}

	// The other listeners open before anything starts, so that a taken
	// port fails the start.
	var httpLis net.Listener
	if c.httpListen != "" {
		if httpLis, err = listenHTTPAPI("--http-listen", c.httpListen, c, token, log); err != nil {
			return err
		}
		defer httpLis.Close()
	}
	var mcpLis net.Listener
	if c.mcpListen != "" {
		if mcpLis, err = listenHTTPAPI("--mcp-listen", c.mcpListen, c, token, log); err != nil {
			return err
		}
		defer mcpLis.Close()
	}
	var metricsLis net.Listener
	if c.metricsListen != "" {
		if metricsLis, err = listenMetrics(c.metricsListen, metricsGuarded(c, token), tlsConfig); err != nil {
			return err
		}
		defer metricsLis.Close()
	}
	// Traces go where the standard OTEL_* variables say, if anywhere.
	telOpts := &telemetry.Options{Logger: log, LookupEnv: os.LookupEnv, Version: buildVersion()}
	tel, err := telemetry.New(ctx, telOpts)
	if err != nil {
		return err
	}
	if metricsLis == nil && !tel.Tracing() {
		// Nothing would read what it records: keep it off the hot path.
		tel = nil
	}
	defer func() {
		// A second signal says "now": the spans still buffered are dropped.
		flushCtx, cancel := context.WithTimeout(now, traceFlushTimeout)
		defer cancel()
		if err := tel.Shutdown(flushCtx); err != nil {
			log.Warn().Err(err).Msg("flushing traces")
		}
	}()
	health := server.NewHealth()
	// Not ready until the configured servers have had their first start.
	health.SetServing(false)
	bus := events.NewBus(&events.Options{BufferSize: c.eventBuffer, BufferBytes: int64(c.eventBytes), FirstSequence: events.BootSequence()})
	broker := mcpclient.NewBroker(&mcpclient.BrokerOptions{Timeout: c.requestTimeout})
	var mgr *mcpclient.Manager
	upstreamAuth, redirect, err := startOAuth(c.oauthStateDir, c.oauthStateDirDefault, c.oauthRedirect, log, func(server string) {
		mgr.AuthorizationChanged(server)
	})
	if err != nil {
		return err
	}
	defer func() {
		shutCtx, cancel := context.WithTimeout(now, c.shutdownTimeout)
		defer cancel()
		redirect.stop(shutCtx)
	}()
	mgr = mcpclient.NewManager(&mcpclient.Options{
		Logger:            log,
		ClientInfo:        &mcp.Implementation{Name: "mcpd", Version: buildVersion()},
		ProbeTimeout:      c.probeTimeout,
		ConnectTimeout:    c.connectTimeout,
		CallTimeout:       c.callTimeout,
		CallTimeoutMax:    c.maxCallTimeout,
		StopGrace:         c.stopGrace,
		DrainTimeout:      c.shutdownTimeout, // a reload's replaced servers finish their calls as RPCs do at shutdown
		MaxLineBytes:      c.maxMessageBytes,
		RestartBackoff:    c.restartBackoff,
		RestartBackoffMax: c.restartMax,
		CrashLoopRestarts: c.crashRestarts,
		CrashLoopWindow:   c.crashWindow,
		KeepAlive:         c.keepAlive,
		KeepAliveFailures: c.keepAliveFails,
		MaxInFlight:       c.maxInFlight,
		MaxPolls:          c.maxPolls,
		QueueTimeout:      c.queueTimeoutOption(),
		StderrLogRate:     c.stderrLogRateOption(),
		StderrLogBurst:    c.stderrLogBurst,
		OnStateChange:     health.ServerStateChanged,
		OnRemoved:         health.ServerRemoved,
		Events:            bus,
		Requests:          broker,
		Telemetry:         tel,
		OAuth:             upstreamAuth,
		Trace:             tracedServers(c.traceServers),
		WithholdEnv:       withheldEnv(authz),
		Reaper:            reaper,
		// Servers reached by URL: Streamable HTTP and legacy SSE.
		Dialer: mcpclient.NewRemoteDialer(&mcpclient.RemoteOptions{Logger: log, MaxMessageBytes: c.maxMessageBytes, Telemetry: tel, OAuth: upstreamAuth}),
	})
	tel.ObserveServers(mgr.ServerSamples)
	started := time.Now()
	tel.FilesRead(telemetry.FilesConfig, true, started)
	if c.callersFile != "" {
		tel.FilesRead(telemetry.FilesCallers, true, started)
	}
	commands := c.commandPolicy()
	servers, err := newRegistry(mgr, log, c.stateFile, commands, merged.Policy, stateReserved(authz))
	if err != nil {
		return err
	}
	srv := server.New(mgr, health, &server.Options{
		Registry:        servers,
		Logger:          log,
		Access:          authz,
		Audit:           audit,
		Commands:        commands,
		LocalListener:   isLocal(lis),
		Telemetry:       tel,
		GRPCOptions:     grpcOpts,
		MaxSendBytes:    c.maxMessageBytes,
		ClientKeepalive: c.clientKeepalive,
	})

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	log.Info().Str("listen", c.listen).Bool("tls", tlsConfig != nil).Bool("mtls", c.tlsClientCA != "").Str("version", buildVersion()).Int("procs", runtime.GOMAXPROCS(0)).Stringer("memory_limit", effectiveMemoryLimit()).Msg("mcpd serving")
	httpErr := make(chan error, 1)
	if httpLis != nil {
		go func() {
			httpErr <- srv.ServeHTTP(httpLis, &server.HTTPOptions{MaxMessageBytes: c.maxMessageBytes, ClientKeepalive: c.clientKeepalive})
		}()
		log.Info().Str("listen", c.httpListen).Bool("tls", c.tlsCert != "").Msg("serving the API over HTTP")
	}
	mcpErr := make(chan error, 1)
	stopMCP := func(context.Context) {}
	if mcpLis != nil {
		gw := gateway.New(mgr, &gateway.Options{
			Logger:          log,
			Access:          authz,
			Audit:           audit,
			Implementation:  &mcp.Implementation{Name: "mcpd", Version: buildVersion()},
			MaxMessageBytes: int64(c.maxMessageBytes),
			ToolSearch:      c.mcpToolSearch,
			Network:         mcpLis.Addr().Network(),
			MaxSessions:     c.mcpMaxSessions,
			SessionTimeout:  c.mcpIdleTimeout,
		})
		gwCtx, stopGateway := context.WithCancel(ctx)
		gwDone := make(chan struct{})
		go func() {
			defer close(gwDone)
			gw.Run(gwCtx)
		}()
		mcpSrv := newMCPServer(mcpLis, gw.Handler(), c.clientKeepalive)
		go func() {
			if err := mcpSrv.Serve(mcpLis); !errors.Is(err, http.ErrServerClosed) {
				mcpErr <- err
			}
		}()
		// Called before the servers stop: the hosts' sessions end (which
		// ends their long-lived streams), then their requests drain until
		// drain ends, when those still running are cut off.
		var once sync.Once
		stopMCP = func(drain context.Context) {
			once.Do(func() {
				stopGateway()
				<-gwDone
				gw.Shutdown(drain)
				if err := mcpSrv.Shutdown(drain); err != nil {
					_ = mcpSrv.Close()
				}
			})
		}
		defer func() {
			shutCtx, cancel := context.WithTimeout(now, c.shutdownTimeout)
			defer cancel()
			stopMCP(shutCtx)
		}()
		log.Info().Str("listen", c.mcpListen).Bool("tls", c.tlsCert != "").Msg("serving the MCP endpoint at " + mcpEndpointPath)
	}
	metricsErr := make(chan error, 1)
	if metricsLis != nil {
		metricsSrv := newMetricsServer(metricsLis, tel.Handler(), token)
		go func() { metricsErr <- metricsSrv.Serve(metricsLis) }()
		defer metricsSrv.Close()
		log.Info().Str("listen", c.metricsListen).Msg("serving metrics at /metrics")
	}

	// Servers from the files connect concurrently while RPCs are already
	// served; each one's state is visible through GetServer meanwhile.
	logSources(log, merged)
	servers.apply(ctx, merged)
	stopWaiting := markReadyWhenStarted(ctx, mgr, health, log)
	defer stopWaiting()
	// fatal ends mcpd with an error, after the same bounded shutdown as a
	// signal's: RPCs in flight get --shutdown-timeout, not for ever.
	var fatal error
	if c.strict {
		fatal = checkStrictStart(ctx, mgr, merged)
	}

	// A reload's servers stop and start off this loop, so that a signal
	// to stop is seen meanwhile; a reload that comes while one is applied
	// replaces any not yet begun.
	reloads := make(chan *mcpconfig.Merged, 1)
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		for merged := range reloads {
			servers.apply(ctx, merged)
		}
	}()
	endReloads := sync.OnceFunc(func() {
		close(reloads)
		<-reloaded // it ends within one server's stop once ctx is done
	})
	defer endReloads()

	for done := fatal != nil; !done; {
		select {
		case <-ctx.Done():
			log.Info().Msg("shutting down")
			done = true
		case err := <-serveErr:
			fatal, done = fmt.Errorf("serve: %w", err), true
		case err := <-httpErr:
			if err == nil {
				continue // closed by a shutdown already under way
			}
			fatal, done = fmt.Errorf("serve http: %w", err), true
		case err := <-mcpErr:
			fatal, done = fmt.Errorf("serve mcp: %w", err), true
		case err := <-metricsErr:
			fatal, done = fmt.Errorf("serve metrics: %w", err), true
		case <-reload:
			if c.callersFile != "" {
				err := authz.Reload()
				tel.FilesRead(telemetry.FilesCallers, err == nil, time.Now())
				if err != nil {
					log.Error().Err(err).Msg("reload: keeping the previous callers")
				} else {
					log.Info().Msg("reloaded callers")
				}
			}
			merged, err := loadConfig(c)
			tel.FilesRead(telemetry.FilesConfig, err == nil, time.Now())
			if err != nil {
				log.Error().Err(err).Msg("reload: keeping the running servers")
				continue
			}
			log.Info().Msg("reloading config")
			logSources(log, merged)
			applyRules(authz, c, merged, log)
			select {
			case <-reloads:
			default:
			}
			reloads <- merged
		}
	}
	// The edges drain at once, under one deadline: the gRPC side turns
	// NOT_SERVING and refuses new calls as the shutdown begins, not once
	// the MCP endpoint's calls are done. So does the OAuth redirect
	// listener, whose requests could otherwise hold mcpd for ever.
	stopNow := context.AfterFunc(now, func() {
		log.Warn().Msg("second signal: cutting off RPCs in flight and killing servers now")
		mgr.Hurry()
	})
	defer stopNow()
	drainCtx, cancel := context.WithTimeout(now, c.shutdownTimeout)
	defer cancel()
	var drained sync.WaitGroup
	drained.Go(func() { stopMCP(drainCtx) })
	drained.Go(func() { redirect.stop(drainCtx) })
	srv.Shutdown(drainCtx)
	drained.Wait()
	// Stopping servers is bounded by their stop grace; give it its own
	// deadline so that a drained RPC budget cannot skip it.
	stopCtx, cancelStop := context.WithTimeout(now, c.shutdownTimeout+3*c.stopGrace)
	defer cancelStop()
	endReloads()
	if err := mgr.Close(stopCtx); err != nil && fatal == nil && now.Err() == nil {
		return fmt.Errorf("stop servers: %w", err)
	}
	if fatal != nil {
		return fatal
	}
	log.Info().Msg("mcpd stopped")
	return nil
}

// logSources logs which config files were read.
func logSources(log zerolog.Logger, merged *mcpconfig.Merged) {
	for _, src := range merged.Read {
		log.Info().Str("scope", src.Scope.String()).Str("file", src.Name).Msg("config read")
	}
}

// applyRules puts the tool rules of the flags and files in force, and logs
// what the files held outside their entries that mcpd does not understand.
func applyRules(authz *access.Authorizer, c *config, merged *mcpconfig.Merged, log zerolog.Logger) {
	for _, w := range merged.Warnings {
		log.Warn().Msg(w)
	}
	rules := toolRules(c, merged, log)
	authz.SetRules(rules)
	log.Debug().Int("rules", rules.Len()).Msg("tool rules in force")
}

// tracedServers says which servers --trace-server names ("*": all); nil
// when it names none.
func tracedServers(names []string) func(string) bool {
	if len(names) == 0 {
		return nil
	}
	return func(server string) bool { return slices.Contains(names, server) || slices.Contains(names, "*") }
}

// commandPolicy is what --allow-command allows ConnectServer to start.
func (c *config) commandPolicy() *server.CommandPolicy {
	if slices.Equal(c.allowCommands, commandList{allowNoCommand}) {
		return &server.CommandPolicy{None: true}
	}
	return &server.CommandPolicy{Allowed: c.allowCommands}
}

func apiToken(c *config) (string, error) {
	if c.apiTokenFile == "" {
		return c.apiToken, nil
	}
	b, err := localfile.Read(c.apiTokenFile, localfile.CredentialLimit)
	if err != nil {
		return "", fmt.Errorf("read API token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", errors.New("API token file is empty")
	}
	return token, nil
}

// guardedBeyondLoopback reports whether the listener may serve beyond this
// machine: with TLS plus a token (MCPD_API_TOKEN, --api-token-file or a
// callers file), or with mutual TLS. A token without TLS would cross the
// network in clear text.
func guardedBeyondLoopback(c *config, token string) bool {
	tlsOn := c.tlsCert != ""
	return tlsOn && (token != "" || c.callersFile != "" || c.tlsClientCA != "")
}

// listen opens the gRPC listener; see listenFor.
func listen(addr string, guarded bool) (net.Listener, error) {
	return listenFor("--listen", addr, guarded)
}

// listenFor opens the listener of an API flag (--listen, --http-listen).
// Whoever reaches mcpd can start processes, so a TCP address must be
// loopback unless TLS and a credential guard it (guarded), and a Unix
// socket is created with mode 0600. Errors name the flag.
func listenFor(flag, addr string, guarded bool) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		if path == "" {
			return nil, fmt.Errorf("%s unix:// needs a path, e.g. unix:///run/mcpd.sock", flag)
		}
		if err := removeStaleSocket(flag, path); err != nil {
			return nil, err
		}
		// The umask makes the socket 0600 from the moment it exists.
		old := syscall.Umask(0o177)
		lis, err := net.Listen("unix", path)
		syscall.Umask(old)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		return lis, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s %q: want host:port or unix:///path: %w", flag, addr, err)
	}
	if !server.IsLoopbackHost(host) && !guarded {
		return nil, fmt.Errorf("%s %q is not a loopback address: to serve beyond this machine, use TLS (--tls-cert, --tls-key) with MCPD_API_TOKEN, --api-token-file or --callers, or mutual TLS (--tls-client-ca)", flag, addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return lis, nil
}

// removeStaleSocket clears the way for a Unix socket at path. Only a socket
// that nothing listens on any more is removed: a regular file, or the
// socket of a running daemon, is an error.
func removeStaleSocket(flag, path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("%s %s: the path exists and is not a socket; remove it or choose another path", flag, path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%s %s: another process is listening on this socket", flag, path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}

// isLocal reports whether lis reaches only this machine: a Unix socket or
// a loopback address.
func isLocal(lis net.Listener) bool {
	switch a := lis.Addr().(type) {
	case *net.UnixAddr:
		return true
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	}
	return false
}

func newLogger(level, format string) (zerolog.Logger, error) {
	// Only the four levels the flag names: zerolog also takes "trace",
	// "fatal", "panic", "disabled" and numbers, and "disabled" would mute
	// the daemon.
	var lvl zerolog.Level
	switch strings.ToLower(level) {
	case "debug", "info", "warn", "error":
		lvl, _ = zerolog.ParseLevel(level) // it knows these, in any case
	default:
		return zerolog.Logger{}, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	var w = os.Stderr
	switch format {
	case "json":
		return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
	case "console":
		return zerolog.New(zerolog.ConsoleWriter{Out: w}).Level(lvl).With().Timestamp().Logger(), nil
	}
	return zerolog.Logger{}, fmt.Errorf("--log-format %q: want json or console", format)
}

// checkStrictStart waits for the first start of every server the config
// files list (but those they disable, and "sdk" entries, which wait for an
// agent that can attach only once mcpd serves) and reports, naming them,
// those that are not READY then: failed, stopped, or waiting for an OAuth
// consent nobody is there to give. A signal during the wait is not a
// failure.
func checkStrictStart(ctx context.Context, mgr *mcpclient.Manager, merged *mcpconfig.Merged) error {
	if mgr.WaitStarted(ctx) != nil {
		return nil // stopping anyway
	}
	var failed []string
	for _, e := range merged.Entries {
		if e.Disabled || (e.Err == nil && e.Server.Kind == mcpconfig.TransportAgent) {
			continue
		}
		st, err := mgr.Get(e.Name)
		if err == nil && st.State == mcpclient.StateDisabled {
			continue // disabled through the API, and kept so by the state file
		}
		if err != nil || st.State != mcpclient.StateReady {
			failed = append(failed, e.Name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("--strict: servers not ready after their first start: %s", strings.Join(failed, ", "))
	}
	return nil
}

// listenHTTPAPI opens the listener of an HTTP edge (--http-listen,
// --mcp-listen) under the rules of the gRPC one, with TLS when the gRPC
// listener has it (offering HTTP/2 and HTTP/1.1).
func listenHTTPAPI(flag, addr string, c *config, token string, log zerolog.Logger) (net.Listener, error) {
	lis, err := listenFor(flag, addr, guardedBeyondLoopback(c, token))
	if err != nil {
		return nil, err
	}
	if c.tlsCert == "" {
		return lis, nil
	}
	cfg, err := access.NewServerTLS(access.TLSFiles{Cert: c.tlsCert, Key: c.tlsKey, ClientCA: c.tlsClientCA},
		&access.TLSOptions{Logger: log, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		lis.Close()
		return nil, err
	}
	return tls.NewListener(lis, cfg), nil
}

// withheldEnv names the variables of mcpd's environment that the stdio
// servers it starts do not inherit: mcpd's own settings and credentials
// (every MCPD_ variable: the API token, and the state file's references to
// other servers' secrets), the variables the callers file reads tokens
// from, and the headers mcpd sends its OTLP collector (often its token).
// A server whose config sets such a variable in its env gets it.
func withheldEnv(authz *access.Authorizer) func(string) bool {
	return func(name string) bool {
		return strings.HasPrefix(name, "MCPD_") || authz.TokenVariable(name) || otlpHeaders[name]
	}
}

// otlpHeaders are the OpenTelemetry variables that hold the headers of
// mcpd's exports to its collector.
var otlpHeaders = map[string]bool{
	"OTEL_EXPORTER_OTLP_HEADERS":         true,
	"OTEL_EXPORTER_OTLP_TRACES_HEADERS":  true,
	"OTEL_EXPORTER_OTLP_METRICS_HEADERS": true,
	"OTEL_EXPORTER_OTLP_LOGS_HEADERS":    true,
}

// stateReserved names the variables no reference in the state file may
// read: those mcpd reads its own settings and API token from, the callers
// file's token variables, and its collector's headers. Without it, a
// caller who may connect servers could name a server and a header so that
// a restarted mcpd sends its own token upstream (server api, header
// Token: ${MCPD_API_TOKEN}).
func stateReserved(authz *access.Authorizer) func(string) bool {
	return func(name string) bool { return ownVariables()[name] || authz.TokenVariable(name) || otlpHeaders[name] }
}
