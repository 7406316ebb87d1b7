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
)

// The permission checks' cost on the RESP write path, for
// scripts/bench-perms.sh: one INCR hot at a time through the server and
// the engine over the in-memory model store, on a connection that has
// not authenticated (BenchmarkPermsNone), that has with a token file's
// token, the user default, ~* +@all (BenchmarkPermsToken), and that has
// as a user of three key patterns (BenchmarkPermsUser,
// perms_user_bench_test.go). This file uses only what the server had
// before it had users, so that the script can build it into an older
// revision and count the same commands there.

func BenchmarkPermsNone(b *testing.B) { benchmarkPerms(b, server.Options{}, nil) }

func BenchmarkPermsToken(b *testing.B) {
	benchmarkPerms(b, server.Options{AuthTokens: []string{"bench-token"}}, []byte("*2\r\n$4\r\nAUTH\r\n$11\r\nbench-token\r\n"))
}

// benchmarkPerms serves with opts and sends auth, when set, before the
// INCRs.
func benchmarkPerms(b *testing.B, opts server.Options, auth []byte) {
	eng, err := engine.New(model.New(model.Options{}), engine.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := server.New(eng, opts)
	go s.Serve(ln)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		eng.Close(ctx)
	})
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	if auth != nil {
		if _, err := conn.Write(auth); err != nil {
			b.Fatal(err)
		}
		if line, err := rd.ReadSlice('\n'); err != nil || string(line) != "+OK\r\n" {
			b.Fatalf("AUTH: %q, %v", line, err)
		}
	}
	cmd := []byte("*2\r\n$4\r\nINCR\r\n$3\r\nhot\r\n")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
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
