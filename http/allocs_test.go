package http_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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
