package redis_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

// The rules of package decide that the differential test (storetest)
// does not reach with its random batches, each on both backends.

// TestBucketOutOfRange: a write whose window bucket would leave int64,
// while the total has room, is refused out_of_range and changes nothing,
// neither the value nor the bucket.
func TestBucketOutOfRange(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := storetest.NewClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
		s, err := redis.Open(ctx, dsn, redis.Options{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		id := t.Name() + runID()
		w := &shardcounter.Window{Bucket: shardcounter.BucketHour, Retention: shardcounter.Duration(24 * time.Hour)}
		if _, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: 1, Window: w}); err != nil {
			t.Fatal(err)
		}
		apply := func(d int64) error {
			out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: d}})
			if err != nil {
				t.Fatal(err)
			}
			return out[0].Err
		}
		if err := apply(-math.MaxInt64); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour)
		if err := apply(math.MaxInt64); err != nil {
			t.Fatal(err)
		}
		if err := apply(5); shardcounter.ErrorCode(err) != shardcounter.EOUTOFRANGE {
			t.Fatalf("a write of 5 onto a bucket at MaxInt64: %v, want out_of_range", err)
		}
		if got := storetest.MustRead(t, s, id); got != 0 {
			t.Fatalf("value %d, want 0: the refused write applied", got)
		}
		series, err := s.ReadSeries(ctx, id, clk.Now().Add(-time.Hour), clk.Now().Add(time.Hour))
		if err != nil || len(series) != 2 || series[1].Value != math.MaxInt64 {
			t.Fatalf("buckets %+v (%v), want -MaxInt64 then MaxInt64", series, err)
		}
	})
}

// TestApproxDuplicateAddsNothing: an approx item whose request id was
// recorded is a duplicate and adds nothing to its shard's sketch, even
// with another member than its first try; the shard's other items apply.
func TestApproxDuplicateAddsNothing(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := MustOpen(t, dsn)
		id := t.Name() + runID()
		if _, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: 1, Kind: shardcounter.KindApprox}); err != nil {
			t.Fatal(err)
		}
		if out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Member: "a", Delta: 1, RequestID: "r1"}}); err != nil || out[0].Err != nil {
			t.Fatal(err, out)
		}
		out, err := s.Apply(ctx, []shardcounter.Increment{
			{Counter: id, Member: "b", Delta: 1, RequestID: "r1"},
			{Counter: id, Member: "c", Delta: 1},
		})
		if err != nil || !out[0].Duplicate || out[1].Err != nil || out[1].Duplicate || out[1].Unchanged {
			t.Fatalf("Apply = %+v, %v: want a duplicate, then an applied change", out, err)
		}
		if got := storetest.MustRead(t, s, id); got != 2 {
			t.Fatalf("estimate %d, want 2 (a, c): the duplicate added b", got)
		}
	})
}

// TestShrinkPartialSums: a shrink whose target's sum fits in int64 folds
// although a partial sum of its shards does not: shards MaxInt64,
// MaxInt64 and -MaxInt64 fold into one shard of MaxInt64.
func TestShrinkPartialSums(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := MustOpen(t, dsn)
		id := t.Name() + runID()
		storetest.MustCreate(t, s, id, 3)
		for i, v := range []int64{math.MaxInt64, math.MaxInt64, -math.MaxInt64} {
			if err := redis.Client(s).HSet(ctx, redis.ShardKey(t, s, id, i), "v", v).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.ReshardCounter(ctx, id, 1); err != nil {
			t.Fatalf("ReshardCounter to 1: %v", err)
		}
		if got := storetest.MustRead(t, s, id); got != math.MaxInt64 {
			t.Fatalf("value %d after the shrink, want MaxInt64", got)
		}
	})
}
