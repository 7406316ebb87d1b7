package storetest

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/shardcounter/shardcounter"
)

func testAddPlacement(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "c"
	MustCreate(t, s, id, 4)
	for _, step := range []struct {
		delta int64
		pick  uint64
	}{{5, 6}, {-2, 2}, {7, 0}, {1, math.MaxUint64}} {
		if err := s.Add(ctx, id, step.delta, step.pick); err != nil {
			t.Fatalf("Add(%d, pick %d): %v", step.delta, step.pick, err)
		}
	}
	if got, want := MustShards(t, s, id), []int64{7, 0, 3, 1}; !equalShards(got, want) {
		t.Fatalf("shards = %v, want %v (pick mod 4)", got, want)
	}
	if got := MustRead(t, s, id); got != 11 {
		t.Fatalf("value = %d, want 11", got)
	}
}

func testApply(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	a, b := prefix(t)+"a", prefix(t)+"b"
	MustCreate(t, s, a, 3)
	MustCreate(t, s, b, 1)
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: a, Delta: 10, Pick: 0},
		{Counter: b, Delta: -4, Pick: 99},
		{Counter: a, Delta: 5, Pick: 4},
		{Counter: a, Delta: -1, Pick: 0},
		{Counter: b, Delta: 1, Pick: 0, RequestID: "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil || o.Duplicate {
			t.Fatalf("outcome %d = %+v, want applied", i, o)
		}
	}
	if got, want := MustShards(t, s, a), []int64{9, 5, 0}; !equalShards(got, want) {
		t.Fatalf("shards of a = %v, want %v", got, want)
	}
	if got := MustRead(t, s, b); got != -3 {
		t.Fatalf("b = %d, want -3", got)
	}
	out, err = s.Apply(ctx, nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("Apply(nil) = %v, %v; want no outcomes, no error", out, err)
	}
}

func testApplyDuplicate(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	a, b := prefix(t)+"a", prefix(t)+"b"
	MustCreate(t, s, a, 4)
	MustCreate(t, s, b, 4)
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: a, Delta: 5, Pick: 1, RequestID: "r1"},
		{Counter: a, Delta: 5, Pick: 2, RequestID: "r1"}, // repeat in the same batch
		{Counter: b, Delta: 5, Pick: 1, RequestID: "r1"}, // ids are scoped to a counter
		{Counter: a, Delta: 1, Pick: 3, RequestID: "r2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{false, true, false, false}
	for i, o := range out {
		if o.Err != nil || o.Duplicate != want[i] {
			t.Fatalf("outcome %d = %+v, want duplicate=%v", i, o, want[i])
		}
	}
	out, err = s.Apply(ctx, []shardcounter.Increment{
		{Counter: a, Delta: 5, Pick: 1, RequestID: "r1"}, // a retry in a later batch
		{Counter: a, Delta: 100, Pick: 0},                // no id: always applies
	})
	if err != nil {
		t.Fatal(err)
	}
	if !out[0].Duplicate || out[0].Err != nil || out[1].Duplicate || out[1].Err != nil {
		t.Fatalf("outcomes = %+v, want [duplicate, applied]", out)
	}
	if got := MustRead(t, s, a); got != 106 {
		t.Fatalf("a = %d, want 106", got)
	}
	if got := MustRead(t, s, b); got != 5 {
		t.Fatalf("b = %d, want 5", got)
	}
	// A request id that failed (its counter missing) was not recorded.
	missing := prefix(t) + "missing"
	out, _ = s.Apply(ctx, []shardcounter.Increment{{Counter: missing, Delta: 1, RequestID: "r3"}})
	wantCode(t, "Apply on a missing counter", out[0].Err, shardcounter.ENOTFOUND)
	MustCreate(t, s, missing, 1)
	out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: missing, Delta: 1, RequestID: "r3"}})
	if err != nil || out[0].Err != nil || out[0].Duplicate {
		t.Fatalf("retry after the counter was created: %v %+v, want applied", err, out)
	}
}

func testOutOfRange(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	one := prefix(t) + "one"
	MustCreate(t, s, one, 1)
	if err := s.Add(ctx, one, math.MaxInt64, 0); err != nil {
		t.Fatal(err)
	}
	err := s.Add(ctx, one, 1, 0)
	wantCode(t, "Add past MaxInt64", err, shardcounter.EOUTOFRANGE)
	if !errors.Is(err, shardcounter.ErrOutOfRange) {
		t.Fatalf("errors.Is(%v, ErrOutOfRange) = false", err)
	}
	other := prefix(t) + "other"
	MustCreate(t, s, other, 1)
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: one, Delta: 1, RequestID: "over"},
		{Counter: other, Delta: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "Apply item past MaxInt64", out[0].Err, shardcounter.EOUTOFRANGE)
	if out[1].Err != nil {
		t.Fatalf("the in-range item of the batch failed: %v", out[1].Err)
	}
	if got := MustRead(t, s, one); got != math.MaxInt64 {
		t.Fatalf("value after refused writes = %d, want MaxInt64", got)
	}
	// The refused write's request id was not recorded: once it fits, it applies.
	if err := s.Add(ctx, one, -1, 0); err != nil {
		t.Fatal(err)
	}
	out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: one, Delta: 1, RequestID: "over"}})
	if err != nil || out[0].Err != nil || out[0].Duplicate {
		t.Fatalf("retry of a refused write once it fits: %v %+v, want applied", err, out)
	}

	neg := prefix(t) + "neg"
	MustCreate(t, s, neg, 1)
	if err := s.Add(ctx, neg, math.MinInt64, 0); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "Add past MinInt64", s.Add(ctx, neg, -1, 0), shardcounter.EOUTOFRANGE)
}

func testReshard(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "c"
	MustCreate(t, s, id, 4)
	for i, v := range []int64{1, 2, 3, 4} {
		if err := s.Add(ctx, id, v, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.ReshardCounter(ctx, id, 8)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != id || c.Shards != 8 {
		t.Fatalf("ReshardCounter up = %+v, want 8 shards", c)
	}
	if got, want := MustShards(t, s, id), []int64{1, 2, 3, 4, 0, 0, 0, 0}; !equalShards(got, want) {
		t.Fatalf("shards after growing = %v, want %v", got, want)
	}
	for i := 4; i < 8; i++ {
		if err := s.Add(ctx, id, int64(10*i), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	// 8 → 3: shard i folds into shard i mod 3.
	if c, err = s.ReshardCounter(ctx, id, 3); err != nil {
		t.Fatal(err)
	}
	if c.Shards != 3 {
		t.Fatalf("ReshardCounter down = %+v, want 3 shards", c)
	}
	want := []int64{1 + 4 + 60, 2 + 40 + 70, 3 + 50}
	if got := MustShards(t, s, id); !equalShards(got, want) {
		t.Fatalf("shards after shrinking = %v, want %v", got, want)
	}
	if got := MustRead(t, s, id); got != 230 {
		t.Fatalf("value after resharding = %d, want 230", got)
	}
	// Growing again starts the new shards from zero, not from old values.
	if _, err = s.ReshardCounter(ctx, id, 5); err != nil {
		t.Fatal(err)
	}
	if got, want := MustShards(t, s, id), append(want, 0, 0); !equalShards(got, want) {
		t.Fatalf("shards after growing again = %v, want %v", got, want)
	}
	if c, err = s.ReshardCounter(ctx, id, 5); err != nil || c.Shards != 5 {
		t.Fatalf("ReshardCounter to the same count = %+v, %v", c, err)
	}
	if c, err = s.ReshardCounter(ctx, id, 1); err != nil || c.Shards != 1 {
		t.Fatalf("ReshardCounter to 1 = %+v, %v", c, err)
	}
	if got := MustShards(t, s, id); !equalShards(got, []int64{230}) {
		t.Fatalf("shards after shrinking to 1 = %v, want [230]", got)
	}
	if c, err = s.GetCounter(ctx, id); err != nil || c.Shards != 1 {
		t.Fatalf("GetCounter after reshard = %+v, %v", c, err)
	}
}
