package http_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/internal/model"
	"github.com/shardcounter/shardcounter/tracing"
)

// BenchmarkWritePath is one POST /v1/counters/hot/increment through the
// whole write path in this process: the handler, the engine's queue and
// group commit (one write a batch, from one goroutine), and the in-memory
// model store, whose cost is small next to a real store's, so that what
// the HTTP and engine layers add is a large share of it. scripts/bench-ab.sh
// -i counts its instructions against another revision. Traces are on when
// the OTEL_* variables ask, as for serve (package tracing).
func BenchmarkWritePath(b *testing.B) {
	tr, err := tracing.FromEnv(context.Background(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	opts := shttp.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var cfg engine.Config
	if tr != nil {
		cfg.Tracer, opts.Tracer, opts.Propagator = tr.Tracer, tr.Tracer, tr.Propagator
	}
	eng, err := engine.New(model.New(model.Options{}), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		eng.Close(ctx)
		tr.Shutdown(ctx)
	})
	srv := shttp.NewServer(eng, opts)
	body := []byte(`{"by":1}`)
	rd := bytes.NewReader(body)
	r := httptest.NewRequest(http.MethodPost, "/v1/counters/hot/increment", io.NopCloser(rd))
	r.Header.Set("Content-Type", "application/json")
	r.ContentLength = int64(len(body))
	w := &statusOnly{h: make(http.Header)}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		clear(w.h)
		srv.ServeHTTP(w, r)
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
}

// statusOnly is a ResponseWriter that keeps only the status.
type statusOnly struct {
	h      http.Header
	status int
}

func (d *statusOnly) Header() http.Header         { return d.h }
func (d *statusOnly) Write(b []byte) (int, error) { return len(b), nil }
func (d *statusOnly) WriteHeader(s int)           { d.status = s }
