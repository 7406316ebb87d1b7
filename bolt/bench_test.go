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
