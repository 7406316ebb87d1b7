package http

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// AttrRequestID is the attribute of a request's span holding its request
// id, the X-Request-Id its reply and log lines carry.
const AttrRequestID = attribute.Key("shardcounter.request_id")

// startSpan starts r's server span, the child of the trace context its
// headers carry (W3C traceparent by default), and returns r with it.
// Until the route is known it is named for the method alone. What a
// request not sampled pays is kept small: its headers go to the
// propagator only when one of those it reads is there (looked up by its
// canonical key: Get would canonicalize it, allocating, on every request),
// and r is copied with the span's context only when the span is sampled,
// for the engine to link the commit to: an unsampled span's context
// would lead to no span below it.
func (s *Server) startSpan(r *http.Request) (*http.Request, trace.Span) {
	ctx := r.Context()
	for _, f := range s.traceFields {
		if _, ok := r.Header[f]; ok {
			ctx = s.opts.Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
			break
		}
	}
	ctx, span := s.opts.Tracer.Start(ctx, r.Method, serverSpan...)
	if !span.SpanContext().IsSampled() {
		return r, span
	}
	return r.WithContext(ctx), span
}

// serverSpan is the option of a request's span, made once: a variadic
// argument to the Tracer interface is allocated at every call.
var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// endSpan names span for r's method and route, as OpenTelemetry's HTTP
// conventions do ("POST /v1/counters/{id}/increment"), records what the
// request got, and ends it. A 5xx is an error of the server's; a 4xx is
// the client's, and leaves the status unset.
func endSpan(span trace.Span, r *http.Request, route string, status int, id string) {
	if span.IsRecording() {
		span.SetName(r.Method + " " + route)
		span.SetAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("http.route", route),
			attribute.String("url.path", r.URL.EscapedPath()),
			attribute.Int("http.response.status_code", status),
			AttrRequestID.String(id))
		if status >= 500 {
			span.SetStatus(otelcodes.Error, http.StatusText(status))
		}
	}
	span.End()
}
