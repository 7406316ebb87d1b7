package tracing_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/tracing"
)

// TestHeadSampled: with the parent-based ratio sampler at 0, an HTTP
// write whose caller sampled its trace makes the whole tree (its span,
// the commit, the store call), and HTTP and RESP writes that start a
// trace make no span at all.
func TestHeadSampled(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tr := tracing.NewSampled(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)), nil, sdktrace.WithSpanProcessor(sr))
	eng := setupWith(t, tr)
	ts := httptest.NewServer(shttp.NewServer(eng, shttp.ServerOptions{Tracer: tr.Tracer, Propagator: tr.Propagator,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	defer ts.Close()
	post := func(traceparent string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/counters/likes/increment", strings.NewReader(`{"by":2}`))
		req.Header.Set("Content-Type", "application/json")
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
	}
	post("")
	post("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00") // the caller did not sample it

	respIncr(t, eng, tr, 5)

	// The sampled request last: once its span has ended, the others'
	// would have too.
	post("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	const name = "POST /v1/counters/{id}/increment"
	spans := ended(t, sr, name)
	checkCommit(t, spans, only(t, spans, name))
	if len(spans) != 3 {
		t.Errorf("spans %v, want those of the sampled request alone", names(spans))
	}
}

// TestHeadRatio: a root span is sampled at the ratio's rate, by the trace
// id the SDK gives it, so that a ratio sampler that does not follow the
// parent (traceidratio) keeps every child of a kept root; a dropped root
// costs no allocation, and leaves ctx as it was (a span started from it
// is a root of its own).
func TestHeadRatio(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tr := tracing.NewSampled(sdktrace.TraceIDRatioBased(0.5), nil, sdktrace.WithSpanProcessor(sr))
	defer tr.Shutdown(context.Background())
	ctx := context.Background()
	kept, orphans := 0, 0
	for range 400 {
		rctx, root := tr.Tracer.Start(ctx, "root")
		_, child := tr.Tracer.Start(rctx, "child")
		if root.SpanContext().IsSampled() {
			kept++
			if !child.SpanContext().IsSampled() || child.SpanContext().TraceID() != root.SpanContext().TraceID() {
				t.Fatalf("a kept root's child: %v in trace %v, root in %v", child.SpanContext().IsSampled(), child.SpanContext().TraceID(), root.SpanContext().TraceID())
			}
		} else {
			if rctx != ctx || root.SpanContext().IsValid() {
				t.Fatalf("a dropped root made a span (%v) or a context", root.SpanContext())
			}
			if child.SpanContext().IsSampled() {
				orphans++
			}
		}
		child.End()
		root.End()
	}
	// Binomial(400, 0.5) falls outside this less often than 1 in 10^20.
	if kept < 100 || kept > 300 {
		t.Errorf("%d of 400 roots kept at a ratio of 0.5", kept)
	}
	if got := len(sr.Ended()); got != 2*kept+orphans {
		t.Errorf("%d spans ended, want %d (each kept root and its child, and %d kept roots started under dropped ones)", got, 2*kept+orphans, orphans)
	}

	never := tracing.NewSampled(sdktrace.TraceIDRatioBased(0), nil)
	if n := testing.AllocsPerRun(100, func() {
		_, span := never.Tracer.Start(ctx, "root")
		span.End()
	}); n != 0 {
		t.Errorf("a dropped root allocated %v times", n)
	}
}

func TestSamplerFromEnv(t *testing.T) {
	for _, c := range []struct {
		name, arg, want string // want: the sampler's description, or an error's words
	}{
		{"", "", "ParentBased{root:AlwaysOnSampler"},
		{"parentbased_traceidratio", "0.01", "ParentBased{root:TraceIDRatioBased{0.01}"},
		{"TraceIdRatio", " 0.25 ", "TraceIDRatioBased{0.25}"},
		{"traceidratio", "", "TraceIDRatioBased{1}"},
		{"always_off", "", "AlwaysOffSampler"},
		{"parentbased_always_off", "", "ParentBased{root:AlwaysOffSampler"},
		{"traceidratio", "1.5", "not a ratio from 0 to 1"},
		{"parentbased_traceidratio", "one", "not a ratio from 0 to 1"},
		{"jaeger_remote", "", "not a sampler this server knows"},
	} {
		env := map[string]string{"OTEL_TRACES_SAMPLER": c.name, "OTEL_TRACES_SAMPLER_ARG": c.arg}
		s, err := tracing.SamplerFromEnv(func(k string) string { return env[k] })
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = s.Description()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("OTEL_TRACES_SAMPLER=%q OTEL_TRACES_SAMPLER_ARG=%q: %q, want %q in it", c.name, c.arg, got, c.want)
		}
	}
}
