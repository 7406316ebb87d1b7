package tracing_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/resp/server"
	"github.com/shardcounter/shardcounter/tracing"
)

// unsampled is the name of the spans the test's sampler drops: the
// sampler samples every other root, and a child as its parent is.
const unsampled = "unsampled"

type byName struct{}

func (byName) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.Name == unsampled {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (byName) Description() string { return "byName" }

// setup returns an engine over a Pebble directory, traced into the
// returned recorder, and its tracing.
func setup(t *testing.T) (*engine.Engine, *tracing.Tracing, *tracetest.SpanRecorder) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tr := tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr),
		sdktrace.WithSampler(sdktrace.ParentBased(byName{}))), nil)
	return setupWith(t, tr), tr, sr
}

// setupWith returns an engine over a Pebble directory, traced by tr.
func setupWith(t *testing.T, tr *tracing.Tracing) *engine.Engine {
	t.Helper()
	store, err := pebble.Open(context.Background(), filepath.Join(t.TempDir(), "pebble"), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(store, engine.Config{Tracer: tr.Tracer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := eng.Close(ctx); err != nil {
			t.Error(err)
		}
		store.Close()
		tr.Shutdown(ctx)
	})
	return eng
}

// ended waits until a span named name has ended (a front end ends a
// request's span once its reply is on its way) and returns the spans
// ended by then.
func ended(t *testing.T, sr *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		spans := sr.Ended()
		for _, s := range spans {
			if s.Name() == name {
				return spans
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %q ended; ended: %v", name, names(spans))
		}
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var ns []string
	for _, s := range spans {
		ns = append(ns, s.Name())
	}
	return ns
}

// only returns the one span named name.
func only(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %q, want 1; ended: %v", len(found), name, names(spans))
	}
	return found[0]
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// linksTo reports whether from links to span to.
func linksTo(from, to sdktrace.ReadOnlySpan) bool {
	for _, l := range from.Links() {
		if l.SpanContext.SpanID() == to.SpanContext().SpanID() && l.SpanContext.TraceID() == to.SpanContext().TraceID() {
			return true
		}
	}
	return false
}

// checkCommit checks that commit is the child of write, linked from it,
// with one write of one counter in one store call, and that the store
// call is its child with outcome ok.
func checkCommit(t *testing.T, spans []sdktrace.ReadOnlySpan, write sdktrace.ReadOnlySpan) {
	t.Helper()
	commit := only(t, spans, engine.SpanCommit)
	if commit.Parent().SpanID() != write.SpanContext().SpanID() || commit.SpanContext().TraceID() != write.SpanContext().TraceID() {
		t.Errorf("commit's parent is %v, want the write's span %v", commit.Parent(), write.SpanContext())
	}
	if !linksTo(write, commit) {
		t.Errorf("the write's span links to %v, not to its commit %v", write.Links(), commit.SpanContext())
	}
	for k, want := range map[attribute.Key]int64{engine.AttrBatchWrites: 1, engine.AttrBatchCounters: 1, engine.AttrBatchIncrements: 1, engine.AttrBatchSyncs: 1} {
		if got := attr(commit, k).AsInt64(); got != want {
			t.Errorf("commit's %s = %d, want %d", k, got, want)
		}
	}
	apply := only(t, spans, "store.apply")
	if apply.Parent().SpanID() != commit.SpanContext().SpanID() {
		t.Errorf("store.apply's parent is %v, want the commit %v", apply.Parent(), commit.SpanContext())
	}
	if got := attr(apply, engine.AttrStoreOutcome).AsString(); got != "ok" {
		t.Errorf("store.apply's outcome = %q, want ok", got)
	}
	if apply.EndTime().After(commit.EndTime()) || write.EndTime().Before(commit.EndTime()) {
		t.Errorf("the spans do not nest: store call ends %v, commit %v, write %v", apply.EndTime(), commit.EndTime(), write.EndTime())
	}
}

// TestHTTPWrite: a write over HTTP with a W3C traceparent is a span of
// that trace, the child of the caller's span, whose commit is its child
// and linked from it, and the store call the commit's child.
func TestHTTPWrite(t *testing.T) {
	eng, tr, sr := setup(t)
	ts := httptest.NewServer(shttp.NewServer(eng, shttp.ServerOptions{Tracer: tr.Tracer, Propagator: tr.Propagator,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	defer ts.Close()
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/counters/likes/increment", strings.NewReader(`{"by":2}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	const name = "POST /v1/counters/{id}/increment"
	spans := ended(t, sr, name)
	write := only(t, spans, name)
	if got := write.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("request's trace %s, want the traceparent's %s", got, traceID)
	}
	if got := write.Parent().SpanID().String(); got != parentID || !write.Parent().IsRemote() {
		t.Errorf("request's parent %s (remote %v), want the traceparent's %s", got, write.Parent().IsRemote(), parentID)
	}
	if write.SpanKind() != trace.SpanKindServer || attr(write, "http.response.status_code").AsInt64() != 200 ||
		attr(write, "http.route").AsString() != "/v1/counters/{id}/increment" || attr(write, shttp.AttrRequestID).AsString() != res.Header.Get("X-Request-Id") {
		t.Errorf("request's span: kind %v, attributes %v", write.SpanKind(), write.Attributes())
	}
	checkCommit(t, spans, write)
}

// TestRESPWrite: an INCR is a root span whose commit is its child, linked
// from it, and the store call the commit's child.
// respIncr sends INCR likes to a RESP server over eng, traced by tr, and
// wants the reply want.
func respIncr(t *testing.T, eng *engine.Engine, tr *tracing.Tracing, want int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rs := server.New(eng, server.Options{Tracer: tr.Tracer, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	go rs.Serve(ln)
	defer rs.Shutdown(context.Background())
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("INCR likes\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || line != fmt.Sprintf(":%d\r\n", want) {
		t.Fatalf("INCR replied %q, %v; want %d", line, err, want)
	}
}

func TestRESPWrite(t *testing.T) {
	eng, tr, sr := setup(t)
	respIncr(t, eng, tr, 1)
	spans := ended(t, sr, "RESP INCR")
	write := only(t, spans, "RESP INCR")
	if write.Parent().IsValid() || write.SpanKind() != trace.SpanKindServer || attr(write, server.AttrCommand).AsString() != "INCR" {
		t.Errorf("INCR's span: parent %v, kind %v, attributes %v", write.Parent(), write.SpanKind(), write.Attributes())
	}
	checkCommit(t, spans, write)
}

// TestBatchLinks: the writes of three requests in one batch, the first
// not sampled: the commit is sampled, a child of the first sampled
// write's span, linking to the other, and linked from both; a batch of
// unsampled writes alone makes no span.
func TestBatchLinks(t *testing.T) {
	eng, tr, sr := setup(t)
	ctx := context.Background()
	_, a := tr.Tracer.Start(ctx, unsampled)
	_, b := tr.Tracer.Start(ctx, "b")
	_, c := tr.Tracer.Start(ctx, "c")
	ws := []shardcounter.Write{{Counter: "x", Delta: 1}, {Counter: "y", Delta: 1}, {Counter: "x", Delta: 2}}
	if _, err := eng.WriteBatch(engine.WithWriteSpans(ctx, []trace.Span{a, b, c}), ws); err != nil {
		t.Fatal(err)
	}
	a.End()
	b.End()
	c.End()
	spans := sr.Ended()
	commit := only(t, spans, engine.SpanCommit)
	sb, sc := only(t, spans, "b"), only(t, spans, "c")
	if commit.Parent().SpanID() != sb.SpanContext().SpanID() {
		t.Errorf("commit's parent %v, want the first sampled write's %v", commit.Parent(), sb.SpanContext())
	}
	if !linksTo(commit, sc) || len(commit.Links()) != 1 {
		t.Errorf("commit links to %v, want the other sampled write's span %v alone", commit.Links(), sc.SpanContext())
	}
	if !linksTo(sb, commit) || !linksTo(sc, commit) {
		t.Errorf("the writes' spans link to %v and %v, not both to the commit", sb.Links(), sc.Links())
	}
	if got := attr(commit, engine.AttrBatchWrites).AsInt64(); got != 3 {
		t.Errorf("commit carried %d writes, want 3", got)
	}
	if got := attr(commit, engine.AttrBatchCounters).AsInt64(); got != 2 {
		t.Errorf("commit wrote %d counters, want 2", got)
	}

	sr.Reset()
	_, d := tr.Tracer.Start(ctx, unsampled)
	if _, err := eng.WriteCounter(trace.ContextWithSpan(ctx, d), shardcounter.Write{Counter: "x", Delta: 1}); err != nil {
		t.Fatal(err)
	}
	d.End()
	if spans := sr.Ended(); len(spans) != 0 {
		t.Errorf("an unsampled write made spans %v", names(spans))
	}
}

func TestEnabled(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
	} {
		if got := tracing.Enabled(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("Enabled(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}
