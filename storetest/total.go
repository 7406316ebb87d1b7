package storetest

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// testTotalOutOfRange checks the one overflow rule every store keeps: a
// write is refused when it would take the counter's total out of int64,
// even when its own shard would still fit. Otherwise a store would
// acknowledge a write after which every read of the counter fails.
func testTotalOutOfRange(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id, other := prefix(t)+"c", prefix(t)+"other"
	MustCreate(t, s, id, 2)
	MustCreate(t, s, other, 1)
	if err := s.Add(ctx, id, math.MaxInt64, 0); err != nil {
		t.Fatal(err)
	}

	// Shard 1 holds 0: +1 fits it, but not the total. A store may place a
	// write with a request id by the id alone (store.go), so the id is one
	// that lands on shard 1 too.
	over := requestIDOnShard(id, 1, 2)
	wantCode(t, "Add that takes the total past MaxInt64", s.Add(ctx, id, 1, 1), shardcounter.EOUTOFRANGE)
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: id, Delta: 1, Pick: shard.PickFor(id, over), RequestID: over},
		{Counter: other, Delta: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "Apply item that takes the total past MaxInt64", out[0].Err, shardcounter.EOUTOFRANGE)
	if out[1].Err != nil || out[1].Duplicate {
		t.Fatalf("the in-range item of the batch: %+v, want applied", out[1])
	}
	if got, want := MustShards(t, s, id), []int64{math.MaxInt64, 0}; !equalShards(got, want) {
		t.Fatalf("shards after refused writes = %v, want %v", got, want)
	}

	// Items on one counter apply in batch order, each against the total
	// the items before it left: at MaxInt64, +1 is refused and a later −1
	// applies; −1 first makes room for +1.
	out, err = s.Apply(ctx, []shardcounter.Increment{
		{Counter: id, Delta: 1, Pick: 1},
		{Counter: id, Delta: -1, Pick: 1},
		{Counter: id, Delta: -1, Pick: 1},
		{Counter: id, Delta: 1, Pick: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "Apply +1 at MaxInt64", out[0].Err, shardcounter.EOUTOFRANGE)
	for i := 1; i < 4; i++ {
		if out[i].Err != nil || out[i].Duplicate {
			t.Fatalf("outcome %d = %+v, want applied", i, out[i])
		}
	}
	if got := MustRead(t, s, id); got != math.MaxInt64-1 {
		t.Fatalf("value = %d, want MaxInt64-1", got)
	}

	// The refused write's request id was not recorded: once it fits, it
	// applies, and the total is exactly MaxInt64 again.
	out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 1, Pick: shard.PickFor(id, over), RequestID: over}})
	if err != nil || out[0].Err != nil || out[0].Duplicate {
		t.Fatalf("retry of a refused write once it fits: %v %+v, want applied", err, out)
	}
	if got, want := MustShards(t, s, id), []int64{math.MaxInt64, 0}; !equalShards(got, want) {
		t.Fatalf("shards = %v, want %v", got, want)
	}

	// The same below MinInt64, with the shards on both sides of zero.
	neg := prefix(t) + "neg"
	MustCreate(t, s, neg, 3)
	for _, w := range []struct {
		delta int64
		pick  uint64
	}{{math.MinInt64 + 5, 0}, {5, 2}, {-10, 1}} {
		if err := s.Add(ctx, neg, w.delta, w.pick); err != nil {
			t.Fatalf("Add(%d): %v", w.delta, err)
		}
	}
	wantCode(t, "Add that takes the total past MinInt64", s.Add(ctx, neg, -1, 2), shardcounter.EOUTOFRANGE)
	out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: neg, Delta: -1, Pick: 1}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "Apply item that takes the total past MinInt64", out[0].Err, shardcounter.EOUTOFRANGE)
	if got := MustRead(t, s, neg); got != math.MinInt64 {
		t.Fatalf("value = %d, want MinInt64", got)
	}
}

// requestIDOnShard returns a request id whose writes to counter land on
// shard i of n: the shard a store derives from the id (shard.PickFor).
func requestIDOnShard(counter string, i, n int) string {
	for k := 0; ; k++ {
		id := fmt.Sprintf("over-%d", k)
		if shard.Of(shard.PickFor(counter, id), n) == i {
			return id
		}
	}
}
