package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

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
