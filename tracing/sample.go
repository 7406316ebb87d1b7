package tracing

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// SamplerFromEnv returns the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name, as the SDK reads them (default
// parentbased_always_on; a ratio's argument defaults to 1), but with an
// unknown sampler or an argument that is not a ratio from 0 to 1 an
// error, where the SDK would log it and sample everything. The server
// builds the sampler itself because its tracer asks it before the SDK
// does (headTracer).
func SamplerFromEnv(getenv func(string) string) (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (sdktrace.Sampler, error) {
		if arg == "" {
			return sdktrace.TraceIDRatioBased(1), nil
		}
		v, err := strconv.ParseFloat(arg, 64)
		if err != nil || v < 0 || v > 1 {
			return nil, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG %q is not a ratio from 0 to 1 (0.01 samples 1%% of traces)", arg)
		}
		return sdktrace.TraceIDRatioBased(v), nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return ratio()
	case "parentbased_traceidratio":
		s, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.ParentBased(s), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER %q is not a sampler this server knows: use always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

// headTracer is the SDK's tracer, but a span without a parent (every RESP
// command's, an HTTP request's without traceparent) is sampled before
// the SDK sees it: with a fresh trace id, by the sampler the SDK was
// given. One that is dropped is not made: Start returns ctx as it is and
// a span that does nothing, neither of them allocated, where the SDK
// would allocate a non-recording span and a context holding it (so a span
// started from that ctx is a root again, sampled afresh: the server starts
// none under a dropped span). One that
// is kept is made by the SDK with that trace id (idGenerator), which its
// sampler, deciding by the trace id alone for a root, keeps too. A span
// with a parent is the SDK's to decide.
type headTracer struct {
	trace.Tracer // the SDK's
	sampler      sdktrace.Sampler
}

// noSpan is the span of a root span not sampled: it records nothing.
var noSpan = trace.SpanFromContext(context.Background())

func (t *headTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return t.Tracer.Start(ctx, name, opts...)
	}
	tid := newTraceID()
	if t.sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: ctx, TraceID: tid, Name: name}).Decision == sdktrace.Drop {
		return ctx, noSpan
	}
	_, span := t.Tracer.Start(context.WithValue(ctx, traceIDKey{}, tid), name, opts...)
	// ctx without the trace id, which would otherwise give a later root
	// started from it the same one.
	return trace.ContextWithSpan(ctx, span), span
}

// traceIDKey is the context key of the trace id headTracer chose for the
// root span it asks the SDK to make.
type traceIDKey struct{}

// idGenerator is the SDK's random ids, but a root's trace id is the one
// headTracer chose, when it chose one.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	tid, ok := ctx.Value(traceIDKey{}).(trace.TraceID)
	if !ok {
		tid = newTraceID()
	}
	return tid, newSpanID()
}

func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newTraceID() trace.TraceID {
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid
}

func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
