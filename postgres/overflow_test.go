package postgres_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestTotalOutOfRange checks the one overflow rule every store keeps: a
// write that would take the counter's total (not only its shard) out of
// int64 is refused and changes nothing, so that no acknowledged write is
// followed by reads that fail. The subtests share one store; each uses
// counters of its own.
func TestTotalOutOfRange(t *testing.T) {
	s := MustOpen(t)
	t.Run("Add", func(t *testing.T) { testTotalOutOfRangeAdd(t, s) })
	t.Run("Apply", func(t *testing.T) { testTotalOutOfRangeApply(t, s) })
	t.Run("AddTx", func(t *testing.T) { testTotalOutOfRangeAddTx(t, s) })
	t.Run("Concurrent", func(t *testing.T) { testTotalOutOfRangeConcurrent(t, s) })
	t.Run("AfterReshard", func(t *testing.T) { testTotalOutOfRangeAfterReshard(t, s) })
}

// wantTotal fails the test unless counter id reads want.
func wantTotal(t *testing.T, s *postgres.CounterStore, id string, want int64) {
	t.Helper()
	if got := storetest.MustRead(t, s, id); got != want {
		t.Fatalf("ReadCounter(%q) = %d, want %d", id, got, want)
	}
}

// testTotalOutOfRangeAdd checks Add at both ends of int64, with the
// overflowing write on a shard that would itself still fit.
func testTotalOutOfRangeAdd(t *testing.T, s *postgres.CounterStore) {
	ctx := context.Background()
	storetest.MustCreate(t, s, "add", 2)
	if err := s.Add(ctx, "add", math.MaxInt64, 0); err != nil {
		t.Fatal(err)
	}
	err := s.Add(ctx, "add", 1, 1) // shard 1 would hold 1: fits; the total does not
	if !errors.Is(err, shardcounter.ErrOutOfRange) {
		t.Fatalf("Add past the total's range = %v, want ErrOutOfRange", err)
	}
	if err := s.Add(ctx, "add", -5, 1); err != nil {
		t.Fatalf("Add back into range: %v", err)
	}
	wantTotal(t, s, "add", math.MaxInt64-5)

	storetest.MustCreate(t, s, "add-neg", 3)
	if err := s.Add(ctx, "add-neg", math.MinInt64, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, "add-neg", -1, 0); !errors.Is(err, shardcounter.ErrOutOfRange) {
		t.Fatalf("Add past MinInt64 on another shard = %v, want ErrOutOfRange", err)
	}
	wantTotal(t, s, "add-neg", math.MinInt64)
}

// testTotalOutOfRangeApply checks that a batch refuses only the items that
// no longer fit, counting the items before them in the same batch, and
// that a refused item's request id is not kept.
func testTotalOutOfRangeApply(t *testing.T, s *postgres.CounterStore) {
	ctx := context.Background()
	storetest.MustCreate(t, s, "apply", 4)
	storetest.MustCreate(t, s, "bystander", 4)
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: "apply", Delta: math.MaxInt64 - 10, Pick: 0},
		{Counter: "bystander", Delta: 1, Pick: 0},
		{Counter: "apply", Delta: 20, Pick: 1, RequestID: "over"}, // the total would pass MaxInt64
		{Counter: "apply", Delta: 10, Pick: 2},                    // fits exactly
		{Counter: "apply", Delta: 1, Pick: 3},                     // no longer fits
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, nil, shardcounter.ErrOutOfRange, nil, shardcounter.ErrOutOfRange} {
		if !errors.Is(out[i].Err, want) || (want == nil && out[i].Err != nil) {
			t.Errorf("item %d: %v, want %v", i, out[i].Err, want)
		}
	}
	wantTotal(t, s, "apply", math.MaxInt64)
	wantTotal(t, s, "bystander", 1)
	// The refused item's request id was not kept: once it fits, it applies.
	if err := s.Add(ctx, "apply", -20, 0); err != nil {
		t.Fatal(err)
	}
	out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: "apply", Delta: 20, Pick: 1, RequestID: "over"}})
	if err != nil || out[0].Err != nil || out[0].Duplicate {
		t.Fatalf("retry of the refused item once it fits: %+v, %v", out, err)
	}
	wantTotal(t, s, "apply", math.MaxInt64)
}

// testTotalOutOfRangeAddTx checks that AddTx, inside the caller's
// transaction, keeps the same rule as Add.
func testTotalOutOfRangeAddTx(t *testing.T, s *postgres.CounterStore) {
	ctx := context.Background()
	storetest.MustCreate(t, s, "tx", 2)
	if err := s.Add(ctx, "tx", math.MaxInt64, 0); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := s.AddTx(ctx, tx, "tx", 1, 1); !errors.Is(err, shardcounter.ErrOutOfRange) {
		t.Fatalf("AddTx past the total's range = %v, want ErrOutOfRange", err)
	}
}

// testTotalOutOfRangeConcurrent runs writers on different shards, each of
// which fits on its own: only as many apply as the total allows, whoever
// wins, and every read works.
func testTotalOutOfRangeConcurrent(t *testing.T, s *postgres.CounterStore) {
	const shards, writers = 8, 16
	storetest.MustCreate(t, s, "race", shards)
	delta := int64(math.MaxInt64/6) + 1 // 5 fit, 6 do not
	var mu sync.Mutex
	applied := 0
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			switch err := writeRace(s, delta, i); {
			case err == nil:
				mu.Lock()
				applied++
				mu.Unlock()
			case !errors.Is(err, shardcounter.ErrOutOfRange):
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if applied != 5 {
		t.Errorf("%d of %d writes of %d applied, want the 5 that fit", applied, writers, delta)
	}
	wantTotal(t, s, "race", int64(applied)*delta)
}

// writeRace is writer i of testTotalOutOfRangeConcurrent: even writers
// use Add and odd ones Apply, so that the two paths race each other.
func writeRace(s *postgres.CounterStore, delta int64, i int) error {
	ctx := context.Background()
	if i%2 == 0 {
		return s.Add(ctx, "race", delta, uint64(i))
	}
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "race", Delta: delta, Pick: uint64(i)}})
	if err != nil {
		return err
	}
	return out[0].Err
}

// testTotalOutOfRangeAfterReshard checks that a reshard is taken into
// account: growing narrows what each shard may hold before the total must
// be checked.
func testTotalOutOfRangeAfterReshard(t *testing.T, s *postgres.CounterStore) {
	ctx := context.Background()
	storetest.MustCreate(t, s, "grow", 2)
	half := int64(math.MaxInt64/2) - 10
	for pick := range 2 {
		if err := s.Add(ctx, "grow", half, uint64(pick)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ReshardCounter(ctx, "grow", 4); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, "grow", 100, 2); !errors.Is(err, shardcounter.ErrOutOfRange) {
		t.Fatalf("Add past the total's range after growing = %v, want ErrOutOfRange", err)
	}
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "grow", Delta: 100, Pick: 3}})
	if err != nil || !errors.Is(out[0].Err, shardcounter.ErrOutOfRange) {
		t.Fatalf("Apply past the total's range after growing = %+v, %v, want ErrOutOfRange", out, err)
	}
	wantTotal(t, s, "grow", 2*half)
}
