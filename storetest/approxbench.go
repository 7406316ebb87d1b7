package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// BenchApproxLoad is a PFADD-like load on a store: 64 goroutines add
// distinct members, 64 to a batch, through Apply into one approx counter
// of 16 shards for 5 s (SHARDCOUNTER_BENCH_SECONDS changes it), then the
// same goroutines write +1 deltas in batches of 64 into a sum counter of
// 16 shards for as long; it reports both rates and their ratio. Stores
// call it from a BenchmarkApproxLoad, one sub-benchmark a backend:
//
//	go test ./postgres -run '^$' -bench ApproxLoad -benchtime 1x
func BenchApproxLoad(b *testing.B, name string, open OpenFunc) {
	d := 5 * time.Second
	if v, err := strconv.Atoi(os.Getenv("SHARDCOUNTER_BENCH_SECONDS")); err == nil && v > 0 {
		d = time.Duration(v) * time.Second
	}
	b.Run(name, func(b *testing.B) {
		s := open(b)
		id := fmt.Sprintf("load%d", time.Now().UnixNano())
		MustCreateApprox(b, s, id+"x", 16)
		MustCreate(b, s, id+"s", 16)
		var approx, sum float64
		var added int64
		for range b.N {
			approx, added = applyLoad(b, s, id+"x", true, d)
			sum, _ = applyLoad(b, s, id+"s", false, d)
		}
		v, err := s.ReadCounter(context.Background(), id+"x")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(approx, "approx-adds/s")
		b.ReportMetric(sum, "sum-adds/s")
		b.ReportMetric(approx/sum, "ratio")
		b.Logf("%s: approx %.0f adds/s (%d members, estimate %d), sum %.0f adds/s, ratio %.3f", name, approx, added, v.Value, sum, approx/sum)
	})
}

// applyLoad runs 64 writers of batches of 64 for d and returns the items
// applied per second and in all: distinct members on an approx counter,
// +1 deltas on a sum counter.
func applyLoad(tb testing.TB, s shardcounter.CounterStore, id string, approx bool, d time.Duration) (float64, int64) {
	const writers, batch = 64, 64
	var n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for w := range writers {
		wg.Go(func() {
			incs := make([]shardcounter.Increment, batch)
			for k := 0; time.Now().Before(stop); k++ {
				for j := range incs {
					incs[j] = shardcounter.Increment{Counter: id, Delta: 1, Pick: rand.Uint64()}
					if approx {
						incs[j].Member = fmt.Sprintf("%d-%d-%d", w, k, j)
					}
				}
				out, err := s.Apply(context.Background(), incs)
				if err != nil {
					tb.Error(err)
					return
				}
				for _, o := range out {
					if o.Err != nil {
						tb.Error(o.Err)
						return
					}
				}
				n.Add(batch)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds(), n.Load()
}
