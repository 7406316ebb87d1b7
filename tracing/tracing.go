// Package tracing sets up OpenTelemetry traces from the standard OTEL_*
// variables, for the server: an exporter (autoexport: OTLP over HTTP or
// gRPC, or the console), the SDK's sampler (OTEL_TRACES_SAMPLER and its
// argument), the resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES)
// and the propagators (OTEL_PROPAGATORS, W3C trace context and baggage by
// default), all read by the OpenTelemetry packages themselves. The spans
// are made where the work is: package http (a request's), resp/server (a
// command's), and engine (a batch's commit and its store calls);
// docs/OPERATIONS.md, "Traces", lists them.
package tracing

import (
	"context"
	"errors"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of every span the server makes.
const Scope = "github.com/shardcounter/shardcounter"

// Tracing is the server's tracer and propagators, and what exports their
// spans.
type Tracing struct {
	Tracer     trace.Tracer
	Propagator propagation.TextMapPropagator
	provider   *sdktrace.TracerProvider
}

// Enabled reports whether the environment asks for traces: an exporter
// other than none (OTEL_TRACES_EXPORTER), or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT),
// and the SDK not disabled (OTEL_SDK_DISABLED=true). Without them the
// server makes no span and its paths pay nothing for tracing.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp != "" {
		return exp != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// FromEnv returns the tracing the environment configures, or nil when it
// asks for none (Enabled). version is the service.version of the
// resource. A variable with a value the packages do not know is an
// error.
func FromEnv(ctx context.Context, version string) (*Tracing, error) {
	if !Enabled(os.Getenv) {
		return nil, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, err
	}
	if autoexport.IsNoneSpanExporter(exp) {
		return nil, nil
	}
	prop := autoprop.NewTextMapPropagator() // W3C trace context and baggage
	if names := os.Getenv("OTEL_PROPAGATORS"); names != "" {
		// The same, but an unknown name is an error rather than a log line.
		if prop, err = autoprop.TextMapPropagator(strings.Split(names, ",")...); err != nil {
			return nil, errors.Join(err, exp.Shutdown(ctx))
		}
	}
	// The environment's OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// come after, and so override, the defaults.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("shardcounter"), semconv.ServiceVersion(version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, errors.Join(err, exp.Shutdown(ctx))
	}
	sampler, err := SamplerFromEnv(os.Getenv)
	if err != nil {
		return nil, errors.Join(err, exp.Shutdown(ctx))
	}
	// The SDK reads the batch processor's and the span limits' variables
	// itself.
	return NewSampled(sampler, prop, sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// New returns the tracing of provider and prop (W3C trace context when
// nil); tests give it a provider with an in-memory exporter.
func New(provider *sdktrace.TracerProvider, prop propagation.TextMapPropagator) *Tracing {
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	return &Tracing{Tracer: provider.Tracer(Scope), Propagator: prop, provider: provider}
}

// NewSampled returns the tracing of a provider made with opts and
// sampler, whose tracer decides whether to sample a span that has no
// parent before the SDK does any work for it (headTracer): most requests
// of a server sampling a small ratio of them pay for a random trace id
// and a comparison, not for a span.
func NewSampled(sampler sdktrace.Sampler, prop propagation.TextMapPropagator, opts ...sdktrace.TracerProviderOption) *Tracing {
	opts = append(opts, sdktrace.WithSampler(sampler), sdktrace.WithIDGenerator(idGenerator{}))
	t := New(sdktrace.NewTracerProvider(opts...), prop)
	t.Tracer = &headTracer{Tracer: t.Tracer, sampler: sampler}
	return t
}

// Shutdown exports the spans not yet exported and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}
