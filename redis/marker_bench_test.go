package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

// BenchmarkMarkerCost measures what batch markers (marker.go) cost the
// write path: the engine's group commit under 64 writers on the single
// server, with markers and without (markers=on, markers=off), on one hot
// 16-shard counter and on counters drawn with a Zipf law (s=1.1) from
// SHARDCOUNTER_BENCH_COUNTERS counters (default 100,000; each created by
// its first write, before the timed runs). It reports the writes per commit (the batch sizes the markers are spread
// over), the script calls per write, and the server's time in the script
// per write (server-ns/op, from INFO commandstats: what the markers add on
// the server, less blurred by the client's scheduling than ns/op).
//
// With -count N, go test runs each variant N times in a row, so that
// drift of a shared machine falls on one of them: scripts/bench-markers.sh
// alternates them instead, one process each, on a server of its own
// (SHARDCOUNTER_BENCH_REDIS=ADDR) that keeps the Zipf counters between
// processes, and compares the medians with benchstat.
func BenchmarkMarkerCost(b *testing.B) {
	addr := os.Getenv("SHARDCOUNTER_BENCH_REDIS") // a server of the caller's: see scripts/bench-markers.sh
	if addr == "" {
		addr = sharedServer(b).Addr
	}
	for _, workload := range []string{"hot", "zipf"} {
		b.Run("workload="+workload, func(b *testing.B) {
			for _, markers := range []string{"on", "off"} {
				b.Run("markers="+markers, func(b *testing.B) {
					s := openBench(b, addr)
					redis.SetNoMarkers(s, markers == "off")
					next := markerWorkload(b, s, workload)
					e, err := engine.New(s, engine.Config{})
					if err != nil {
						b.Fatal(err)
					}
					defer e.Close(context.Background()) //nolint:errcheck // a benchmark
					calls0, usec0 := evalStats(b, addr)
					b.ReportAllocs()
					b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						next := next(rand.New(rand.NewPCG(rand.Uint64(), 0)))
						ctx := context.Background()
						for pb.Next() {
							if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: next(), Delta: 1}); err != nil {
								b.Error(err)
								return
							}
						}
					})
					b.StopTimer()
					calls1, usec1 := evalStats(b, addr)
					st := e.Stats()
					b.ReportMetric(float64(st.Writes.Load())/float64(max(st.Flushes.Load(), 1)), "writes/commit")
					b.ReportMetric(float64(calls1-calls0)/float64(b.N), "evalsha/op")
					b.ReportMetric(float64(usec1-usec0)*1000/float64(b.N), "server-ns/op")
				})
			}
		})
	}
}

// markerFixture is the counters of the zipf workload, made once a process.
var markerFixture struct {
	sync.Once
	prefix string
	n      int
}

// markerWorkload returns, for a writer's random source, the function
// that picks the counter of each of its writes.
func markerWorkload(b *testing.B, s *redis.CounterStore, workload string) func(*rand.Rand) func() string {
	if workload == "hot" {
		id := "markercost/hot" + runID()
		storetest.MustCreate(b, s, id, 16)
		return func(*rand.Rand) func() string { return func() string { return id } }
	}
	markerFixture.Do(func() {
		defer b.ResetTimer()
		markerFixture.n = 100_000
		if v := os.Getenv("SHARDCOUNTER_BENCH_COUNTERS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 2 {
				b.Fatalf("SHARDCOUNTER_BENCH_COUNTERS=%q: want a count", v)
			}
			markerFixture.n = n
		}
		// The same counters in every process on one server, made once.
		markerFixture.prefix = fmt.Sprintf("markercost/zipf%d/", markerFixture.n)
		if _, err := s.GetCounter(context.Background(), markerFixture.prefix+strconv.Itoa(markerFixture.n-1)); err != nil {
			createMany(b, s, markerFixture.prefix, markerFixture.n)
		}
	})
	p, n := markerFixture.prefix, markerFixture.n
	return func(rng *rand.Rand) func() string {
		z := rand.NewZipf(rng, 1.1, 1, uint64(n-1))
		return func() string { return p + strconv.FormatUint(z.Uint64(), 10) }
	}
}

// createMany creates counters prefix0 … prefix(n-1) by their first
// writes, 100 a batch (a server under valgrind answers a bigger one
// after the client has given up).
func createMany(b *testing.B, s *redis.CounterStore, prefix string, n int) {
	ctx := context.Background()
	for lo := 0; lo < n; lo += 100 {
		var incs []shardcounter.Increment
		for i := lo; i < min(n, lo+100); i++ {
			incs = append(incs, shardcounter.Increment{Counter: prefix + strconv.Itoa(i), Delta: 1, Create: &shardcounter.Spec{Shards: 1}})
		}
		out, err := s.Apply(ctx, incs)
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range out {
			if o.Err != nil {
				b.Fatal(fmt.Errorf("create: %w", o.Err))
			}
		}
	}
}

// evalStats returns how many EVALSHA calls the server has run and the
// microseconds it spent in them (INFO commandstats): the script's own
// cost on the server, which the client's scheduling does not blur.
func evalStats(tb testing.TB, addr string) (calls, usec int64) {
	tb.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
			fmt.Sscanf(rest, "calls=%d,usec=%d", &calls, &usec)
		}
	}
	return calls, usec
}

// BenchmarkMarkerApply is BenchmarkMarkerCost's batches without the
// engine's timing: each op is one Apply of a batch drawn in advance with
// a fixed seed, 16 items on one 16-shard counter (hot) or 60 items on
// distinct Zipf counters (zipf; the batch sizes the engine commits under
// 64 writers), markers on and off. The same ops every run, so the
// server's instructions per op (scripts/bench-markers.sh -i runs the
// server under callgrind) compare exactly.
func BenchmarkMarkerApply(b *testing.B) {
	addr := os.Getenv("SHARDCOUNTER_BENCH_REDIS")
	if addr == "" {
		addr = sharedServer(b).Addr
	}
	for _, workload := range []string{"hot", "zipf"} {
		b.Run("workload="+workload, func(b *testing.B) {
			for _, markers := range []string{"on", "off"} {
				b.Run("markers="+markers, func(b *testing.B) {
					s := openBench(b, addr)
					redis.SetNoMarkers(s, markers == "off")
					batches := markerBatches(b, s, workload)
					ctx := context.Background()
					calls0, usec0 := evalStats(b, addr)
					b.ResetTimer()
					for i := 0; b.Loop(); i++ {
						out, err := s.Apply(ctx, batches[i%len(batches)])
						if err != nil {
							b.Fatal(err)
						}
						for _, o := range out {
							if o.Err != nil {
								b.Fatal(o.Err)
							}
						}
					}
					b.StopTimer()
					calls1, usec1 := evalStats(b, addr)
					b.ReportMetric(float64(calls1-calls0)/float64(b.N), "evalsha/op")
					b.ReportMetric(float64(usec1-usec0)*1000/float64(b.N), "server-ns/op")
				})
			}
		})
	}
}

// markerBatches draws BenchmarkMarkerApply's batches, the same every run.
func markerBatches(b *testing.B, s *redis.CounterStore, workload string) [][]shardcounter.Increment {
	rng := rand.New(rand.NewPCG(1, 2))
	batches := make([][]shardcounter.Increment, 64)
	if workload == "hot" {
		id := "markerapply/hot"
		if _, err := s.GetCounter(context.Background(), id); err != nil {
			storetest.MustCreate(b, s, id, 16)
		}
		for i := range batches {
			for k := range 16 {
				batches[i] = append(batches[i], shardcounter.Increment{Counter: id, Delta: 1, Pick: uint64(k)})
			}
		}
		return batches
	}
	next := markerWorkload(b, s, "zipf")(rng)
	for i := range batches {
		seen := map[string]bool{}
		for len(batches[i]) < 60 {
			if id := next(); !seen[id] {
				seen[id] = true
				batches[i] = append(batches[i], shardcounter.Increment{Counter: id, Delta: 1})
			}
		}
	}
	return batches
}

// openBench opens a store on the server at addr whose client waits a
// minute for a reply: a server run under valgrind is that slow.
func openBench(b *testing.B, addr string) *redis.CounterStore {
	d, err := redis.ParseDSN("redis://" + addr)
	if err != nil {
		b.Fatal(err)
	}
	co := d.Options()
	co.ReadTimeout, co.WriteTimeout = time.Minute, time.Minute
	client := goredis.NewClient(co)
	b.Cleanup(func() { client.Close() })
	s, err := redis.New(client, redis.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return s
}
