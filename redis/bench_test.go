package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

// BenchmarkAdd measures the naive path (Add: one script call per write) on
// one hot counter, on the single server and on the 3-master cluster, with
// 1 and 16 shards. On the cluster it reports how many script calls each
// master ran (INFO commandstats), which shows the writes spreading.
func BenchmarkAdd(b *testing.B) {
	for _, backend := range []string{"Standalone", "Cluster"} {
		for _, shards := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/shards=%d", backend, shards), func(b *testing.B) {
				var dsn string
				var masters []string
				if backend == "Cluster" {
					c := sharedCluster(b)
					dsn, masters = clusterDSN(c), c.Addrs()
				} else {
					srv := sharedServer(b)
					dsn, masters = serverDSN(srv), []string{srv.Addr}
				}
				s := MustOpen(b, dsn)
				ctx := context.Background()
				id := fmt.Sprintf("%s%s", b.Name(), runID())
				if _, err := s.GetCounter(ctx, id); err != nil {
					storetest.MustCreate(b, s, id, shards)
				}
				before := evalCalls(b, masters)
				b.ReportAllocs()
				b.SetParallelism(8) // 8 × GOMAXPROCS writers
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
					for pb.Next() {
						if err := s.Add(ctx, id, 1, rng.Uint64()); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				after := evalCalls(b, masters)
				for i := range masters {
					b.ReportMetric(float64(after[i]-before[i])/float64(b.N), fmt.Sprintf("evalsha/op/master%d", i))
				}
			})
		}
	}
}

// evalCalls returns how many EVALSHA calls each server has run.
func evalCalls(tb testing.TB, addrs []string) []int64 {
	tb.Helper()
	out := make([]int64, len(addrs))
	for i, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		info, err := c.Info(context.Background(), "commandstats").Result()
		c.Close()
		if err != nil {
			tb.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
				fmt.Sscanf(rest, "%d", &out[i])
			}
		}
	}
	return out
}

// BenchmarkStrongRead measures strong reads of one 16-shard counter, idle
// and while 64 writers add to it through the engine (group commit,
// durable), on the single server and on the 3-master cluster. On the cluster it runs the
// read twice in one run: collect=1 is the read before it was made
// linearizable (one round of HMGETs, which can return a value the counter
// never held), collect=2 the double collect with its freeze fallback. It
// reports the writes committed meanwhile, and per read the collects made
// and the freezes needed.
func BenchmarkStrongRead(b *testing.B) {
	for _, backend := range []string{"Standalone", "Cluster"} {
		modes := []int{2}
		if backend == "Cluster" {
			modes = []int{1, 2}
		}
		for _, writers := range []int{0, 64} {
			for _, collects := range modes {
				benchmarkStrongRead(b, backend, 16, writers, collects)
			}
			if backend == "Cluster" {
				// A counter of one shard: one collect whatever the mode.
				benchmarkStrongRead(b, backend, 1, writers, 2)
			}
		}
	}
}

// benchmarkStrongRead reads a counter of shards shards, 16 unless named
// in the run's name, while writers write it through an engine; collects
// is 1 for the former one-round read on a cluster, 2 for the protocol.
func benchmarkStrongRead(b *testing.B, backend string, shards, writers, collects int) {
	name := fmt.Sprintf("%s/writers=%d/collect=%d", backend, writers, collects)
	if shards != 16 {
		name = fmt.Sprintf("%s/shards=%d/writers=%d", backend, shards, writers)
	}
	b.Run(name, func(b *testing.B) {
		dsn := serverDSN(sharedServer(b))
		if backend == "Cluster" {
			dsn = clusterDSN(sharedCluster(b))
		}
		ctx := context.Background()
		id := fmt.Sprintf("%s%s", b.Name(), runID())
		store := MustOpen(b, dsn)
		storetest.MustCreate(b, store, id, shards)
		eng, err := engine.New(store, engine.Config{})
		if err != nil {
			b.Fatal(err)
		}
		defer eng.Close(ctx)
		var writes atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := eng.WriteCounter(ctx, shardcounter.Write{Counter: id, Delta: 1}); err != nil {
						b.Error(err)
						return
					}
					writes.Add(1)
				}
			})
		}
		reader := MustOpen(b, dsn)
		redis.SetSingleCollect(reader, collects == 1)
		before, w0 := reader.Stats(), writes.Load()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := reader.ReadCounter(ctx, id); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.StopTimer()
		elapsed := b.Elapsed().Seconds()
		close(stop)
		wg.Wait()
		after := reader.Stats()
		b.ReportMetric(float64(b.N)/elapsed, "reads/s")
		b.ReportMetric(float64(writes.Load()-w0)/elapsed, "writes/s")
		b.ReportMetric(float64(after.Collects-before.Collects)/float64(b.N), "collects/read")
		b.ReportMetric(float64(after.Freezes-before.Freezes)/float64(b.N), "freezes/read")
	})
}
