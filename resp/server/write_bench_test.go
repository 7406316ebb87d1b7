package server_test

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/model"
	"github.com/shardcounter/shardcounter/resp/server"
	"github.com/shardcounter/shardcounter/tracing"
)

// BenchmarkWritePath is one INCR through the whole write path: the
// server's read, parse and dispatch, the engine's queue and group commit
// (one write a batch, from one client) over the in-memory model store,
// and the reply, read by a client that does no more than write the
// command's bytes and read a line back, so that a profile or an
// instruction count (scripts/bench-ab.sh -i) is the server's. Traces are
// on when the OTEL_* variables ask, as for serve (package tracing).
func BenchmarkWritePath(b *testing.B) {
	tr, err := tracing.FromEnv(context.Background(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	var cfg engine.Config
	var opts server.Options
	if tr != nil {
		cfg.Tracer, opts.Tracer = tr.Tracer, tr.Tracer
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
	_, addr := MustServe(b, eng, opts)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	cmd := []byte("*2\r\n$4\r\nINCR\r\n$3\r\nhot\r\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := conn.Write(cmd); err != nil {
			b.Fatal(err)
		}
		line, err := rd.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if line[0] != ':' {
			b.Fatalf("reply %q", line)
		}
	}
}
