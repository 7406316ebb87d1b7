package redis_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestScriptFailsPartWay makes the write script fail after it applied the
// first item of its group: Redis does not roll a script back, so an error
// that arrives after the script ran may follow applied writes. Every item
// that got an error must say its outcome is unknown, or not be counted.
func TestScriptFailsPartWay(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := MustOpen(t, dsn)
		id := t.Name() + runID()
		storetest.MustCreate(t, s, id, 1)
		// The request-id set of shard 0 is not a sorted set: the second
		// item's duplicate check fails with WRONGTYPE.
		if err := redis.Client(s).Set(ctx, redis.ShardKey(t, s, id, 0)+":ids", "not a sorted set", 0).Err(); err != nil {
			t.Fatal(err)
		}
		incs := []shardcounter.Increment{{Counter: id, Delta: 5}, {Counter: id, Delta: 7, RequestID: "r"}}
		out, err := s.Apply(ctx, incs)
		got := storetest.MustRead(t, s, id)
		if err != nil {
			if !shardcounter.IsOutcomeUnknown(err) && got != 0 {
				t.Fatalf("Apply = %v, not outcome unknown, but the value is %d", err, got)
			}
			return
		}
		var counted int64
		for i, o := range out {
			if o.Err == nil {
				counted += incs[i].Delta
			} else if shardcounter.IsOutcomeUnknown(o.Err) {
				return // the caller knows to look
			}
		}
		if got != counted {
			t.Fatalf("outcomes %+v claim %d applied, value is %d", out, counted, got)
		}
	})
}

// TestTotalOutOfRange checks the rule every store keeps: a write that
// would take the counter's total (not just its shard) outside the int64
// range is refused and changes nothing, while one that keeps the total in
// range is applied however the value is spread over the shards.
func TestTotalOutOfRange(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := MustOpen(t, dsn)
		id := t.Name() + runID()
		storetest.MustCreate(t, s, id, 2)
		if err := s.Add(ctx, id, math.MaxInt64, 0); err != nil {
			t.Fatalf("Add(MaxInt64) to shard 0: %v", err)
		}
		if err := s.Add(ctx, id, 1, 1); !errors.Is(err, shardcounter.ErrOutOfRange) {
			t.Fatalf("Add(1) to shard 1 of a counter at MaxInt64: %v, want ErrOutOfRange", err)
		}
		out, err := s.Apply(ctx, []shardcounter.Increment{
			{Counter: id, Delta: math.MaxInt64, Pick: 1, RequestID: "big"},
			{Counter: id, Delta: -3, Pick: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(out[0].Err, shardcounter.ErrOutOfRange) || out[1].Err != nil {
			t.Fatalf("Apply = %+v, want [out of range, applied]", out)
		}
		if got := storetest.MustRead(t, s, id); got != math.MaxInt64-3 {
			t.Fatalf("value = %d, want MaxInt64-3", got)
		}
		// The refused item's request id was not recorded: now it fits.
		if err := s.Add(ctx, id, -math.MaxInt64+10, 0); err != nil {
			t.Fatal(err)
		}
		// Shards 10 and -3: this fits on either (a request id picks the shard).
		out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: math.MaxInt64 - 20, Pick: 1, RequestID: "big"}})
		if err != nil || out[0].Err != nil || out[0].Duplicate {
			t.Fatalf("retry once it fits: %+v, %v; want applied", out, err)
		}
		if got := storetest.MustRead(t, s, id); got != math.MaxInt64-13 {
			t.Fatalf("value = %d, want MaxInt64-13", got)
		}
		// The other end of the range, on a shard of its own.
		if err := s.Add(ctx, id, math.MinInt64, 0); err != nil {
			t.Fatalf("Add(MinInt64): %v", err)
		}
		if err := s.Add(ctx, id, -1, 1); err != nil {
			t.Fatalf("Add(-1) to a total of -14: %v", err)
		}
		if err := s.Add(ctx, id, math.MinInt64, 1); !errors.Is(err, shardcounter.ErrOutOfRange) {
			t.Fatalf("Add(MinInt64) to a total of -15: %v, want ErrOutOfRange", err)
		}
		if got := storetest.MustRead(t, s, id); got != -15 {
			t.Fatalf("value = %d, want -15", got)
		}
	})
}

// TestTotalOutOfRangeConcurrent races 16 writers of MaxInt64/8 on four
// shards: exactly 8 fit, whatever the interleaving.
func TestTotalOutOfRangeConcurrent(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		id := t.Name() + runID()
		storetest.MustCreate(t, MustOpen(t, dsn), id, 4)
		var applied, refused atomic.Int64
		var wg sync.WaitGroup
		for w := range 16 {
			s := MustOpen(t, dsn)
			wg.Go(func() {
				switch err := s.Add(ctx, id, math.MaxInt64/8, uint64(w)); {
				case err == nil:
					applied.Add(1)
				case errors.Is(err, shardcounter.ErrOutOfRange):
					refused.Add(1)
				default:
					t.Errorf("Add: %v", err)
				}
			})
		}
		wg.Wait()
		if applied.Load() != 8 || refused.Load() != 8 {
			t.Fatalf("%d applied, %d refused; want 8 and 8", applied.Load(), refused.Load())
		}
		if got := storetest.MustRead(t, MustOpen(t, dsn), id); got != 8*(math.MaxInt64/8) {
			t.Fatalf("value = %d, want %d", got, 8*(math.MaxInt64/8))
		}
	})
}
