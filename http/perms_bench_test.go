package http_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// The permission checks' cost on the HTTP write path, for
// scripts/bench-perms.sh: one POST /v1/counters/hot/increment {"by":1}
// through the handler over a service that only adds, with no
// authentication (BenchmarkPermsNone), a token file's token, which is the
// user default, ~* +@all (BenchmarkPermsToken), and a user of three key
// patterns (BenchmarkPermsUser, perms_user_bench_test.go). This file uses
// only what the server had before it had users, so that the script can
// build it into an older revision and count the same requests there.

// permsAdder is a CounterService whose writes are an atomic add.
type permsAdder struct {
	shardcounter.CounterService // nil: only WriteCounter is called
	n                           atomic.Int64
}

func (a *permsAdder) WriteCounter(ctx context.Context, w shardcounter.Write) (*shardcounter.WriteResult, error) {
	a.n.Add(w.Delta)
	return &shardcounter.WriteResult{Counter: w.Counter, Applied: true}, nil
}

// permsDiscard is a ResponseWriter that keeps nothing.
type permsDiscard struct{ h http.Header }

func (d *permsDiscard) Header() http.Header         { return d.h }
func (d *permsDiscard) Write(b []byte) (int, error) { return len(b), nil }
func (d *permsDiscard) WriteHeader(int)             {}

func BenchmarkPermsNone(b *testing.B) { benchmarkPerms(b, shttp.ServerOptions{}, "") }

func BenchmarkPermsToken(b *testing.B) {
	benchmarkPerms(b, shttp.ServerOptions{AuthTokens: []string{"bench-token"}}, "Bearer bench-token")
}

// benchmarkPerms serves increments with opts, each sent with the
// Authorization header authz when it is set.
func benchmarkPerms(b *testing.B, opts shttp.ServerOptions, authz string) {
	svc := &permsAdder{}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := shttp.NewServer(svc, opts)
	body := []byte(`{"by":1}`)
	rd := bytes.NewReader(body)
	r := httptest.NewRequest(http.MethodPost, "/v1/counters/hot/increment", io.NopCloser(rd))
	r.Header.Set("Content-Type", "application/json")
	if authz != "" {
		r.Header.Set("Authorization", authz)
	}
	r.ContentLength = int64(len(body))
	w := &permsDiscard{h: make(http.Header)}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		rd.Reset(body)
		clear(w.h)
		srv.ServeHTTP(w, r)
	}
	if got := svc.n.Load(); got != int64(b.N) {
		b.Fatalf("counter = %d after %d increments", got, b.N)
	}
}
