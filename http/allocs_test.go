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

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/internal/allocguard"
)

// connWriter is a ResponseWriter that keeps nothing and takes deadlines
// as net/http's own does, so that a guard counts the handler's
// allocations, not a recorder's or the errors of a writer without
// deadlines.
type connWriter struct{ discard }

func (connWriter) SetReadDeadline(time.Time) error  { return nil }
func (connWriter) SetWriteDeadline(time.Time) error { return nil }

// TestWriteAllocs guards the allocations of the HTTP write path: one
// POST /v1/counters/hot/increment through the server's handler (routing,
// middleware, body, decoding, the reply) over a service whose write is an
// atomic add, for the body nearly every client sends and for one the fast
// path leaves to encoding/json. The ceilings are today's counts: an
// allocation more fails the test, so that later work cannot quietly undo
// the gains (docs/BENCHMARKS.md, "Front doors"). The 4 of {"by":1}: the
// middleware's request (its state, reply writer, id, value context and
// deadline context in one), its copy of the http.Request with that
// context, the mux's path match and the test service's result. Under the
// race detector
// it runs in a build without it (package allocguard).
func TestWriteAllocs(t *testing.T) {
	for _, c := range []struct {
		body string
		max  float64
	}{
		{`{"by":1}`, 4},
		{`{"by":1,"request_id":"r-1"}`, 11},
	} {
		t.Run(c.body, func(t *testing.T) {
			srv := shttp.NewServer(&adder{}, shttp.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			body := []byte(c.body)
			rd := bytes.NewReader(body)
			r := httptest.NewRequest(http.MethodPost, "/v1/counters/hot/increment", io.NopCloser(rd))
			r.Header.Set("Content-Type", "application/json")
			r.ContentLength = int64(len(body))
			w := &connWriter{discard{h: make(http.Header)}}
			allocguard.Check(t, 1000, c.max, func() {
				rd.Reset(body)
				clear(w.h)
				srv.ServeHTTP(w, r)
			})
		})
	}
}

// taker is a service whose take is always allowed under a fixed window,
// for guarding the allocations of the HTTP take path on their own.
type taker struct {
	shardcounter.CounterService // nil: only Take is called
	shardcounter.LimitService   // nil: only Take is called
}

func (taker) Take(_ context.Context, _, _ string, _ int64, _ string) (*shardcounter.LimitResult, error) {
	return &shardcounter.LimitResult{Allowed: true, Remaining: 99, ResetAfterMS: 1500,
		Policy: shardcounter.LimitPolicy{Kind: shardcounter.LimitFixed, Limit: 100, Period: shardcounter.Duration(time.Minute)}}, nil
}

// TestTakeAllocs guards the allocations of the HTTP take path: one POST
// /v1/limits/api/keys/hot/take through the server's handler (routing,
// middleware, body, decoding, the RateLimit headers, the reply) over a
// service whose take answers at once, for the body nearly every client
// sends and for one the fast path leaves to encoding/json. The ceilings
// are today's counts: an allocation more fails the test. The 7 of
// {"cost":1}: TestWriteAllocs's middleware request, its copy of the
// http.Request and the mux's path match (4 in all), the service's result,
// and the RateLimit header's value and its []string. Before the fast path
// (its body, its reply, the RateLimit-Policy value kept for the limit,
// the headers' canonical keys) it was 20, and 21 with a request id.
func TestTakeAllocs(t *testing.T) {
	for _, c := range []struct {
		body string
		max  float64
	}{
		{`{"cost":1}`, 7},
		{`{"cost":1,"request_id":"r-1"}`, 14},
	} {
		t.Run(c.body, func(t *testing.T) {
			srv := shttp.NewServer(taker{}, shttp.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			body := []byte(c.body)
			rd := bytes.NewReader(body)
			r := httptest.NewRequest(http.MethodPost, "/v1/limits/api/keys/hot/take", io.NopCloser(rd))
			r.Header.Set("Content-Type", "application/json")
			r.ContentLength = int64(len(body))
			w := &connWriter{discard{h: make(http.Header)}}
			allocguard.Check(t, 1000, c.max, func() {
				rd.Reset(body)
				clear(w.h)
				srv.ServeHTTP(w, r)
			})
			rd.Reset(body)
			clear(w.h)
			srv.ServeHTTP(w, r) // here: under -race, the guard runs elsewhere
			if got := w.h.Get("RateLimit"); got != `"api";r=99;t=2` {
				t.Fatalf("RateLimit: %q", got)
			}
		})
	}
}
