package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/storetest"
)

// BenchmarkEngineHotCounter is the in-process library path of
// docs/BENCHMARKS.md: 1,000 goroutines increment one counter on bolt
// through the engine, in each durability mode. ns/op is per increment;
// the writes/s it implies is 1e9 / (ns/op). Async runs end with Close, so
// every increment counted was committed.
func BenchmarkEngineHotCounter(b *testing.B) {
	const goroutines = 1000
	for _, mode := range []engine.Durability{engine.Durable, engine.Async} {
		for _, shards := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/shards=%d", mode, shards), func(b *testing.B) {
				store, err := bolt.Open(context.Background(), filepath.Join(b.TempDir(), "shardcounter.db"), bolt.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { store.Close() })
				storetest.MustCreate(b, store, "hot", shards)
				e := MustStart(b, store, engine.Config{Durability: mode})
				ctx := context.Background()
				w := shardcounter.Write{Counter: "hot", Delta: 1}
				b.ReportAllocs()
				b.SetParallelism((goroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := e.WriteCounter(ctx, w); err != nil {
							b.Error(err)
							return
						}
					}
				})
				if err := e.Close(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if got := storetest.MustRead(b, store, "hot"); got != int64(b.N) {
					b.Fatalf("hot = %d after %d increments", got, b.N)
				}
				st := e.Stats()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
				b.ReportMetric(float64(st.Writes.Load())/float64(max(st.Flushes.Load(), 1)), "writes/commit")
			})
		}
	}
}
