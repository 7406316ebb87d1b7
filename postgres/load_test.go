package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestLoadCounters loads counters in bulk, which writes only the shard
// rows that hold something, and then writes to every shard of them by
// every path (a plain batch, a locking batch, Add, AddTx, members, a
// bounded counter whose every row a batch locks, a wide one), reshards
// and deletes them: each value must be exact, as if the counters had
// been created with every row.
func TestLoadCounters(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	lo, hi := int64(-100), int64(100)
	if _, err := s.CreateCounter(ctx, "old", shardcounter.Spec{Shards: 4}); err != nil {
		t.Fatal(err)
	}
	cs := []shardcounter.NewCounter{
		{ID: "zero", Spec: shardcounter.Spec{Shards: 8}},
		{ID: "five", Spec: shardcounter.Spec{Shards: 8}, Value: 5},
		{ID: "neg", Spec: shardcounter.Spec{Shards: 1}, Value: -7},
		{ID: "bounded", Spec: shardcounter.Spec{Shards: 8, Min: &lo, Max: &hi}, Value: 3},
		{ID: "wide", Spec: shardcounter.Spec{Shards: 16}, Value: math.MaxInt64 - 3},
		{ID: "set", Spec: shardcounter.Spec{Shards: 8, Kind: shardcounter.KindDistinct}, Members: []string{"a", "b", "c", "a"}},
		{ID: "old", Spec: shardcounter.Spec{Shards: 4}, Value: 99},
	}
	created, err := s.LoadCounters(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true, true, true, true, true, false}; !slices.Equal(created, want) {
		t.Fatalf("created %v, want %v", created, want)
	}
	want := map[string]int64{"zero": 0, "five": 5, "neg": -7, "bounded": 3, "wide": math.MaxInt64 - 3, "set": 3, "old": 0}
	checkLoaded(t, s, want, "loaded")

	loadedWrites(t, s, want)
	loadedLimits(t, s, want)
	loadedRace(t, s, want)
	loadedAgain(t, s, want, lo, hi)
}

// checkLoaded fails the test unless each counter of want reads its value,
// and its shards sum to it.
func checkLoaded(t *testing.T, s *postgres.CounterStore, want map[string]int64, when string) {
	t.Helper()
	ctx := context.Background()
	for id, v := range want {
		r, err := s.ReadCounter(ctx, id)
		if err != nil {
			t.Fatalf("%s: read %s: %v", when, id, err)
		}
		_, shards, err := s.ReadShards(ctx, id)
		if err != nil {
			t.Fatalf("%s: read shards of %s: %v", when, id, err)
		}
		sum := int64(0)
		for _, x := range shards {
			sum += x
		}
		if r.Value != v || sum != v {
			t.Errorf("%s: %s reads %d, its shards sum to %d, want %d", when, id, r.Value, sum, v)
		}
	}
}

func loadedWrites(t *testing.T, s *postgres.CounterStore, want map[string]int64) {
	ctx := context.Background()
	// Every shard of every sum counter, plain batch first (no rows: it
	// falls to the locking path, which inserts them), then Add.
	var incs []shardcounter.Increment
	for _, id := range []string{"zero", "five", "neg", "bounded"} {
		for p := range 8 {
			incs = append(incs, shardcounter.Increment{Counter: id, Delta: 1, Pick: uint64(p)})
		}
	}
	apply(t, s, incs)
	for _, id := range []string{"zero", "five", "bounded"} {
		want[id] += 8
	}
	want["neg"] += 8
	checkLoaded(t, s, want, "batch")
	for p := range 8 {
		if err := s.Add(ctx, "zero", 2, uint64(p)); err != nil {
			t.Fatal(err)
		}
	}
	want["zero"] += 16
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddTx(ctx, tx, "five", 10, 7); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want["five"] += 10

}

func loadedLimits(t *testing.T, s *postgres.CounterStore, want map[string]int64) {
	ctx := context.Background()
	// Bounds hold on a loaded counter (its every row is locked).
	outs, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "bounded", Delta: 100, Pick: 3}})
	if err != nil || !errors.Is(outs[0].Err, shardcounter.ErrOutOfRange) {
		t.Fatalf("past the bound: %v %v", outs, err)
	}
	// The wide counter's total is checked: +10 leaves int64.
	outs, err = s.Apply(ctx, []shardcounter.Increment{{Counter: "wide", Delta: 10, Pick: 5}})
	if err != nil || !errors.Is(outs[0].Err, shardcounter.ErrOutOfRange) {
		t.Fatalf("past int64: %v %v", outs, err)
	}
	apply(t, s, []shardcounter.Increment{{Counter: "wide", Delta: -10, Pick: 5}})
	want["wide"] -= 10

	// Members: present ones are unchanged, new ones land on shards
	// without rows, a removal counts down.
	outs = apply(t, s, []shardcounter.Increment{
		{Counter: "set", Member: "a", Delta: 1}, {Counter: "set", Member: "d", Delta: 1},
		{Counter: "set", Member: "e", Delta: 1}, {Counter: "set", Member: "b", Delta: -1},
	})
	if !outs[0].Unchanged || outs[1].Unchanged || outs[3].Unchanged {
		t.Errorf("member outcomes %+v", outs)
	}
	want["set"] += 1
	if ms, err := s.ListMembers(ctx, "set", "", 10); err != nil || !slices.Equal(ms, []string{"a", "c", "d", "e"}) {
		t.Errorf("members %v %v", ms, err)
	}
	checkLoaded(t, s, want, "written")

}

func loadedRace(t *testing.T, s *postgres.CounterStore, want map[string]int64) {
	ctx := context.Background()
	// Concurrent writers and reshards on counters with missing rows.
	if _, err := s.LoadCounters(ctx, []shardcounter.NewCounter{{ID: "race", Spec: shardcounter.Spec{Shards: 32}, Value: 1}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if err := s.Add(ctx, "race", 1, rand.Uint64()); err != nil {
					t.Errorf("writer %d, write %d: %v", w, i, err)
					return
				}
			}
		}()
	}
	for _, n := range []int{7, 40, 32} {
		if _, err := s.ReshardCounter(ctx, "race", n); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	want["race"] = 81
	for _, id := range []string{"five", "set"} {
		if _, err := s.ReshardCounter(ctx, id, 3); err != nil {
			t.Fatal(err)
		}
	}
	checkLoaded(t, s, want, "resharded")

}

func loadedAgain(t *testing.T, s *postgres.CounterStore, want map[string]int64, lo, hi int64) {
	ctx := context.Background()
	// Deleted, it loads again; a value out of bounds loads nothing.
	if err := s.DeleteCounter(ctx, "neg"); err != nil {
		t.Fatal(err)
	}
	created, err := s.LoadCounters(ctx, []shardcounter.NewCounter{{ID: "neg", Spec: shardcounter.Spec{Shards: 2}, Value: 4}})
	if err != nil || !created[0] {
		t.Fatalf("load again: %v %v", created, err)
	}
	want["neg"] = 4
	_, err = s.LoadCounters(ctx, []shardcounter.NewCounter{
		{ID: "more", Spec: shardcounter.Spec{Shards: 2}},
		{ID: "out", Spec: shardcounter.Spec{Shards: 2, Min: &lo, Max: &hi}, Value: 101},
	})
	if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Fatalf("a value past its bounds: %v", err)
	}
	if _, err := s.GetCounter(ctx, "more"); !errors.Is(err, shardcounter.ErrNotFound) {
		t.Errorf("a failed load created a counter: %v", err)
	}
	checkLoaded(t, s, want, "reloaded")
}

func apply(t *testing.T, s *postgres.CounterStore, incs []shardcounter.Increment) []shardcounter.Outcome {
	t.Helper()
	outs, err := s.Apply(context.Background(), incs)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outs {
		if o.Err != nil {
			t.Fatal(fmt.Errorf("item %d: %w", i, o.Err))
		}
	}
	return outs
}

// TestCounterStoreLoaded runs the shared store suite on counters created
// by LoadCounters, with no shard rows: every write, read, reshard and
// delete of the suite meets missing rows. Its load cases run a quarter
// of their writes: TestCounterStore runs them whole on the same code.
func TestCounterStoreLoaded(t *testing.T) {
	dsn := pgtest.MustDatabase(t)
	s := mustOpenDSN(t, dsn, postgres.Options{})
	storetest.RunCounterStore(t, func(testing.TB) shardcounter.CounterStore { return loaded{s} }, storetest.Options{
		OpenWithClock: func(tb testing.TB, now func() time.Time) shardcounter.CounterStore {
			return loaded{mustOpenDSN(tb, dsn, postgres.Options{Now: now})}
		},
		Totals:         true,
		LoadScale:      0.25,
		NoDifferential: true, // TestCounterStore runs it; loading changes only creates
	})
}

// loaded is a store that creates counters through LoadCounters, but for
// windowed ones, which it cannot load.
type loaded struct{ *postgres.CounterStore }

func (s loaded) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	if spec.Window != nil || spec.TTL != 0 {
		return s.CounterStore.CreateCounter(ctx, id, spec)
	}
	created, err := s.LoadCounters(ctx, []shardcounter.NewCounter{{ID: id, Spec: spec}})
	if err != nil {
		return nil, err
	}
	if !created[0] {
		return nil, shardcounter.Errorf(shardcounter.EEXISTS, "counter %q already exists", id)
	}
	return s.GetCounter(ctx, id)
}
