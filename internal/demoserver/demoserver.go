// Package demoserver implements the MCP server behind `mcpd demo-server`: a
// small, deterministic server with tools, resources, a resource template, a
// prompt and completions that exercises every content kind and both protocol
// eras. It is the default upstream for `make run`, a test fixture and the
// benchmark target.
package demoserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// Identity advertised in initialize and server/discover results.
const (
	serverName    = "mcpd-demo"
	serverVersion = "1.0.0"
	instructions  = "Demo MCP server for mcpd. Tools: echo, add, slow, fail, image, audio, weather, resource_link. " +
		"Resources: demo://clock (subscribable), demo://readme, demo://logo.png; template demo://greeting/{name}. " +
		"Prompt: greet."
)

// defaultTickInterval is how often demo://clock changes when Options leave it unset.
const defaultTickInterval = time.Second

// Options configures a Server. The zero value (or nil) is usable.
type Options struct {
	// Logger receives the server's own logs and, at warn level and above,
	// the SDK's. The zero value logs nothing.
	Logger zerolog.Logger
	// TickInterval is how often the demo://clock resource changes and
	// subscribers are notified. 0 means 1s.
	TickInterval time.Duration
}

// Server is the demo MCP server. It wraps an *mcp.Server and owns the
// goroutine that advances demo://clock.
//
// Close may be called concurrently and more than once.
type Server struct {
	mcp      *mcp.Server
	log      zerolog.Logger
	interval time.Duration
	layout   string // time layout of demo://clock

	png []byte // demo://logo.png and the image tool
	wav []byte // the audio tool

	lastTick atomic.Int64 // UnixNano of the latest clock tick

	stop      context.CancelFunc
	done      chan struct{} // closed when the ticker goroutine exits
	closeOnce sync.Once
}

// New builds the demo server and starts its clock. Call Close (or Run, which
// closes on return) to stop the clock.
func New(opts *Options) *Server {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TickInterval <= 0 {
		o.TickInterval = defaultTickInterval
	}
	s := &Server{
		log:      o.Logger,
		interval: o.TickInterval,
		layout:   time.RFC3339,
		png:      makePNG(),
		wav:      makeWAV(),
		done:     make(chan struct{}),
	}
	// A sub-second clock must still change on every tick, so show fractions.
	if s.interval < time.Second {
		s.layout = time.RFC3339Nano
	}
	s.lastTick.Store(time.Now().UnixNano())

	// The SDK logs every resource update at info; only its warnings and
	// errors are worth a line in the daemon's log.
	sdkLog := o.Logger.Level(max(o.Logger.GetLevel(), zerolog.WarnLevel)).With().Str("component", "mcp-sdk").Logger()
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: serverName, Title: "mcpd demo server", Version: serverVersion}, &mcp.ServerOptions{
		Instructions:       instructions,
		Logger:             slog.New(zerolog.NewSlogHandler(sdkLog)),
		CompletionHandler:  s.complete,
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: s.unsubscribe,
	})
	s.addTools()
	s.addResources()
	s.addPrompts()

	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.runClock(ctx)
	return s
}

// MCP returns the underlying SDK server, for in-process connections
// (Connect with any transport) and HTTP handlers.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Run serves one connection over t until ctx is done or the client
// disconnects, then stops the clock. It returns ctx.Err() when ctx ends
// first, so callers can treat context.Canceled as a clean stop. Run leaves no
// goroutine behind.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	defer s.Close()
	ss, err := s.mcp.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("demoserver: connect: %w", err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- ss.Wait() }()
	select {
	case <-ctx.Done():
		_ = ss.Close() // the client is gone either way; Wait below reports the end
		<-waitErr
		return ctx.Err()
	case err := <-waitErr:
		if err != nil && !peerGone(err) {
			return fmt.Errorf("demoserver: session: %w", err)
		}
		return nil
	}
}

// peerGone reports whether a session error only says that the client went
// away. When a client disconnects while a request is still open (typically a
// 2026-07-28 subscriptions/listen), the SDK's last write of its result fails
// on the closed pipe and Wait reports that write error; it is a normal end.
func peerGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EPIPE)
}

// Close stops the clock and waits for its goroutine. It does not close
// sessions: their owners (Run, or whoever called MCP().Connect) do.
func (s *Server) Close() error {
	s.closeOnce.Do(s.stop)
	<-s.done
	return nil
}

// runClock advances demo://clock every interval and notifies its subscribers
// in both eras (resources/subscribe and subscriptions/listen); the SDK
// tracks who is subscribed.
func (s *Server) runClock(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.lastTick.Store(now.UnixNano())
			if err := s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: clockURI}); err != nil {
				s.log.Debug().Err(err).Msg("demo clock: notify subscribers")
			}
		}
	}
}

// clockText renders demo://clock: the time of the latest tick, so the
// contents change exactly when subscribers are told they did.
func (s *Server) clockText() string {
	return time.Unix(0, s.lastTick.Load()).UTC().Format(s.layout)
}
