// Package telemetry owns mcpd's instruments: the Prometheus registry and
// its metrics, the OpenTelemetry tracer and its OTLP exporter, and the W3C
// trace context that travels from agents through mcpd to upstream servers.
// It is the only package that imports Prometheus or the OpenTelemetry SDK;
// the rest of mcpd records through a *Telemetry. A nil *Telemetry records
// nothing, so code and tests that need no telemetry pass nil.
package telemetry

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Options configure a Telemetry.
type Options struct {
	// Version is the version mcpd reports (build info metric, trace
	// resource); empty takes the main module's version from the build
	// info.
	Version string
	// Logger receives the trace exporter's errors (a collector that is
	// away, say). OpenTelemetry has one error handler per process: New
	// sets it when tracing is on.
	Logger zerolog.Logger
	// LookupEnv reads the OTEL_* variables that turn tracing on and pick
	// the exporter's protocol; nil means no tracing. The exporters read
	// their own OTEL_EXPORTER_OTLP_* settings from the process
	// environment.
	LookupEnv func(string) (string, bool)
}

// Telemetry holds mcpd's metrics and, when tracing is on, its tracer.
// Its methods are safe for concurrent use; on a nil *Telemetry they do
// nothing.
type Telemetry struct {
	registry *prometheus.Registry
	grpc     *grpcprom.ServerMetrics
	m        instruments
	// toolsMu guards tools, the names each server lists now: the tool
	// labels mcpd may write (see toolLabelLocked).
	toolsMu sync.RWMutex
	tools   map[string]map[string]struct{}

	// Tracing; provider is nil when tracing is off.
	provider   *sdktrace.TracerProvider
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

// New builds the registry with every mcpd metric, the Go runtime and
// process collectors and the build info, and starts the trace exporter
// if the environment asks for one (see tracingConfig). Shutdown flushes
// and stops the exporter.
func New(ctx context.Context, opts *Options) (*Telemetry, error) {
	if opts == nil {
		opts = &Options{}
	}
	version, goVersion, revision := buildInfo(opts.Version)
	t := &Telemetry{
		registry:   prometheus.NewRegistry(),
		tools:      make(map[string]map[string]struct{}),
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	t.grpc = grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets(durationBuckets)))
	t.m = newInstruments()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "mcpd_build_info",
		Help:        "Always 1; the labels say which mcpd is running.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": goVersion, "revision": revision},
	})
	buildInfo.Set(1)
	t.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		t.grpc,
		buildInfo,
	)
	t.m.register(t.registry)
	if err := t.startTracing(ctx, opts, version); err != nil {
		return nil, err
	}
	return t, nil
}

// Handler serves the metrics in the Prometheus text format, or in
// OpenMetrics to a scraper whose Accept asks for it (as Prometheus's
// does).
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{
		// A collector error is reported in the scrape, not by a panic.
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
}

// Tracing reports whether spans are recorded and exported.
func (t *Telemetry) Tracing() bool { return t != nil && t.provider != nil }

// Shutdown exports the spans still buffered and stops the exporter, up to
// ctx. It may be called more than once.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil || t.provider == nil {
		return nil
	}
	err := t.provider.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return errors.New("trace exporter: spans still buffered at shutdown were dropped")
	}
	return err
}

// buildInfo returns the version (given, else the main module's), the Go
// version and the VCS revision mcpd was built from ("unknown" without one).
func buildInfo(given string) (version, goVersion, revision string) {
	version, goVersion, revision = given, runtime.Version(), "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if version == "" {
			version = "unknown"
		}
		return version, goVersion, revision
	}
	if version == "" {
		version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			revision = s.Value
		}
	}
	if version == "" {
		version = "unknown"
	}
	return version, goVersion, revision
}
