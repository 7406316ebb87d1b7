package server_test

import (
	"strconv"
	"testing"

	"github.com/shardcounter/shardcounter/resp/server"
)

// BenchmarkRedisBenchmark serves an engine over bolt (durable) in this
// process and drives it with redis-benchmark -t incr, 64 clients, b.N
// requests, at -P 1 and -P 16: with -cpuprofile, a profile of the
// server's side alone, since the load generator is another process.
//
//	go test -run '^$' -bench RedisBenchmark -benchtime 200000x -cpuprofile cpu.out ./resp/server
//	go tool pprof -top server.test cpu.out
func BenchmarkRedisBenchmark(b *testing.B) {
	for _, p := range []string{"1", "16"} {
		b.Run("P"+p, func(b *testing.B) {
			_, addr := MustServe(b, MustEngine(b), server.Options{})
			h, port := hostPort(b, addr)
			b.ResetTimer()
			run(b, "redis-benchmark", "-h", h, "-p", port, "-t", "incr", "-c", "64", "-n", strconv.Itoa(max(b.N, 64)), "-P", p, "-q")
		})
	}
}
