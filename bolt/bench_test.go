package bolt_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// BenchmarkApply applies batches of 64 increments spread over 16 counters
// of each kind, one synced transaction per batch, so that the cost of a
// kind's bookkeeping (the total a bound checks, a window's bucket and
// sweep, a member's key) shows beside the plain sum counter's. Each
// iteration is one batch; ns/op is per batch, so most of it is the fsync.
func BenchmarkApply(b *testing.B) {
	specs := []struct {
		name string
		spec shardcounter.Spec
	}{
		{"sum", shardcounter.Spec{Shards: 16}},
		{"bounded", shardcounter.Spec{Shards: 16, Min: new(int64)}},
		{"windowed", shardcounter.Spec{Shards: 16, Window: &shardcounter.Window{Bucket: shardcounter.BucketMinute, Retention: shardcounter.Duration(time.Hour)}}},
		{"distinct", shardcounter.Spec{Shards: 16, Kind: shardcounter.KindDistinct}},
	}
	for _, sp := range specs {
		b.Run(sp.name, func(b *testing.B) {
			ctx := context.Background()
			s := MustOpen(b)
			var ids []string
			for i := range 16 {
				id := fmt.Sprint("c", i)
				if _, err := s.CreateCounter(ctx, id, sp.spec); err != nil {
					b.Fatal(err)
				}
				ids = append(ids, id)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			batch := make([]shardcounter.Increment, 64)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				for j := range batch {
					batch[j] = shardcounter.Increment{Counter: ids[rng.IntN(len(ids))], Delta: 1, Pick: rng.Uint64()}
					if sp.spec.Kind == shardcounter.KindDistinct {
						batch[j].Member = fmt.Sprint("m", rng.IntN(100000))
					}
				}
				if _, err := s.Apply(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApplyZipf measures what one engine flush of the million-counter
// workload (issue 12) costs bbolt: each op is one Apply of items +1
// increments, one per counter, on distinct counters drawn with a Zipf law
// (s=1.1) from 1,000,000 counters of one shard, as the engine folds a
// flush of 64 clients' writes. Most of the counters of a flush sit on
// leaf pages of their own, so a commit writes a page or more per item:
//
//	go test ./bolt -run '^$' -bench ApplyZipf -benchtime 2000x
func BenchmarkApplyZipf(b *testing.B) {
	const counters = 1_000_000
	ctx := context.Background()
	s := MustOpen(b)
	spec := shardcounter.Spec{Shards: 1}
	for i := 0; i < counters; i += 10_000 {
		incs := make([]shardcounter.Increment, 10_000)
		for j := range incs {
			incs[j] = shardcounter.Increment{Counter: fmt.Sprint("zipf/", i+j), Delta: 1, Create: &spec}
		}
		if _, err := s.Apply(ctx, incs); err != nil {
			b.Fatal(err)
		}
	}
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, counters-1)
	for _, items := range []int{1, 64} {
		b.Run(fmt.Sprintf("items=%d", items), func(b *testing.B) {
			batch := make([]shardcounter.Increment, 0, items)
			b.ReportAllocs()
			for b.Loop() {
				batch = batch[:0]
				seen := make(map[uint64]bool, items)
				for len(batch) < items {
					if i := z.Uint64(); !seen[i] {
						seen[i] = true
						batch = append(batch, shardcounter.Increment{Counter: fmt.Sprint("zipf/", i), Delta: 1})
					}
				}
				if _, err := s.Apply(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
