package http_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// adder is a CounterService whose writes are an atomic add: what is left
// of a write's cost in the benchmarks below is the HTTP layer's.
type adder struct {
	shardcounter.CounterService // nil: only WriteCounter is called
	n                           atomic.Int64
}

func (a *adder) WriteCounter(ctx context.Context, w shardcounter.Write) (*shardcounter.WriteResult, error) {
	a.n.Add(w.Delta)
	return &shardcounter.WriteResult{Counter: w.Counter, Applied: true}, nil
}

// discard is a ResponseWriter that keeps nothing, so that the handler
// benchmark measures the handler, not a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkHandlerIncrement is the server's own work for one
// POST /v1/counters/hot/increment {"by":1}, without the network and
// without a store: routing, body, JSON, the reply.
func BenchmarkHandlerIncrement(b *testing.B) {
	svc := &adder{}
	srv := shttp.NewServer(svc, shttp.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	body := []byte(`{"by":1}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		rd := bytes.NewReader(body)
		r := httptest.NewRequest(http.MethodPost, "/v1/counters/hot/increment", io.NopCloser(rd))
		r.Header.Set("Content-Type", "application/json")
		r.ContentLength = int64(len(body)) // as a client sends it
		w := &discard{h: make(http.Header)}
		for pb.Next() {
			rd.Reset(body)
			clear(w.h)
			srv.ServeHTTP(w, r)
		}
	})
	if got := svc.n.Load(); got != int64(b.N) {
		b.Fatalf("counter = %d after %d increments", got, b.N)
	}
}

// BenchmarkServerIncrement is the same request through a real
// http.Server and http.Client on the loopback, keep-alive, from
// GOMAXPROCS×16 goroutines: how much of a request's cost is the handler.
func BenchmarkServerIncrement(b *testing.B) {
	svc := &adder{}
	ts := httptest.NewServer(shttp.NewServer(svc, shttp.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	defer ts.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 1024}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	url := ts.URL + "/v1/counters/hot/increment"
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(url, "application/json", strings.NewReader(`{"by":1}`))
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.StopTimer()
	if got := svc.n.Load(); got != int64(b.N) {
		b.Fatalf("counter = %d after %d increments", got, b.N)
	}
}

// BenchmarkHandlerTake is the server's own work for one POST
// /v1/limits/api/keys/hot/take {"cost":1}, without the network and
// without a store: routing, body, decoding, the RateLimit headers, the
// reply.
func BenchmarkHandlerTake(b *testing.B) {
	srv := shttp.NewServer(taker{}, shttp.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	body := []byte(`{"cost":1}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		rd := bytes.NewReader(body)
		r := httptest.NewRequest(http.MethodPost, "/v1/limits/api/keys/hot/take", io.NopCloser(rd))
		r.Header.Set("Content-Type", "application/json")
		r.ContentLength = int64(len(body))
		w := &connWriter{discard{h: make(http.Header)}}
		for pb.Next() {
			rd.Reset(body)
			clear(w.h)
			srv.ServeHTTP(w, r)
		}
	})
}
