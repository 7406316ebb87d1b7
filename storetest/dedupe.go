package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// RunDedupeWindow checks the dedupe window of a store that expires request
// ids (shardcounter.RequestIDExpirer) on a clock the test drives: the
// store's window must be window, and advance must move the store's clock
// on. Steps are whole microseconds, the finest time every store keeps.
// How and when a store deletes expired ids is its own business, tested in
// its package; this is the contract a client sees.
func RunDedupeWindow(t *testing.T, s shardcounter.CounterStore, window time.Duration, advance func(time.Duration)) {
	ctx := context.Background()
	id := prefix(t) + "c"
	MustCreate(t, s, id, 4)
	apply := func(t *testing.T, rid string) shardcounter.Outcome {
		t.Helper()
		out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 1, Pick: shard.PickFor(id, rid), RequestID: rid}})
		if err != nil || out[0].Err != nil {
			t.Fatalf("Apply(%s) = %+v, %v", rid, out, err)
		}
		return out[0]
	}

	t.Run("WithinWindow", func(t *testing.T) {
		if apply(t, "a").Duplicate {
			t.Fatal("first write of a is a duplicate")
		}
		advance(window - time.Microsecond)
		if !apply(t, "a").Duplicate {
			t.Fatal("a repeated just within the window was applied again")
		}
	})
	t.Run("PastWindow", func(t *testing.T) {
		// a has expired, whether or not the store has deleted it yet: it
		// is recorded afresh, and counts as new for another window.
		advance(time.Microsecond)
		if apply(t, "a").Duplicate {
			t.Fatal("a repeated a window after it was recorded is still a duplicate")
		}
		advance(window - time.Microsecond)
		if !apply(t, "a").Duplicate {
			t.Fatal("a recorded afresh was not remembered for the new window")
		}
		if got := MustRead(t, s, id); got != 2 {
			t.Fatalf("value = %d, want 2", got)
		}
	})
	t.Run("RevivedOnce", func(t *testing.T) {
		// Many batches at once repeat an expired id: taking over the
		// expired record is atomic with the duplicate check, so one applies.
		apply(t, "flood")
		advance(2 * window)
		before := MustRead(t, s, id)
		var wg sync.WaitGroup
		var mu sync.Mutex
		applied, dups := 0, 0
		for range 16 {
			wg.Go(func() {
				out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 1, Pick: shard.PickFor(id, "flood"), RequestID: "flood"}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("Apply: %v", err)
				case out[0].Err != nil:
					t.Errorf("outcome: %v", out[0].Err)
				case out[0].Duplicate:
					dups++
				default:
					applied++
				}
			})
		}
		wg.Wait()
		if applied != 1 || dups != 15 {
			t.Fatalf("16 repeats of an expired id: %d applied, %d duplicates; want 1 and 15", applied, dups)
		}
		if got := MustRead(t, s, id); got != before+1 {
			t.Fatalf("value = %d, want %d", got, before+1)
		}
	})
}

// RunRequestIDExpiry checks how a store that expires request ids deletes
// them: as a side effect of writes, never while idle or on a read, and at
// most perWrite expired ids a write beyond those it records, so that a
// backlog goes within a few writes and no write pays for all of it; and
// deleting a counter deletes its ids. ids counts the ids the store keeps
// (how is the store's business). window and advance are as in
// RunDedupeWindow. The store may keep no more than 500+perWrite other ids,
// all recorded longer than two windows ago.
func RunRequestIDExpiry(t *testing.T, s shardcounter.CounterStore, window time.Duration, advance func(time.Duration), ids func(testing.TB) int, perWrite int) {
	ctx := context.Background()
	id := prefix(t) + "c"
	MustCreate(t, s, id, 4)
	apply := func(incs []shardcounter.Increment) {
		t.Helper()
		out, err := s.Apply(ctx, incs)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range out {
			if o.Err != nil || o.Duplicate {
				t.Fatalf("Apply: item %d: %+v", i, o)
			}
		}
	}
	withID := func(rid string) shardcounter.Increment {
		return shardcounter.Increment{Counter: id, Delta: 1, Pick: shard.PickFor(id, rid), RequestID: rid}
	}

	advance(2 * window) // every id recorded so far has expired
	var incs []shardcounter.Increment
	for i := range 500 {
		incs = append(incs, withID(fmt.Sprint("old-", i)))
	}
	apply(incs)
	if got := ids(t); got != 500 {
		t.Fatalf("%d ids after a batch of 500, want 500: the older ones, expired, go with it", got)
	}
	advance(48 * time.Hour)
	MustRead(t, s, id)
	if got := ids(t); got != 500 {
		t.Fatalf("%d ids after idling and a read, want 500: only writes delete ids", got)
	}
	for i := 1; i <= (500+perWrite-1)/perWrite; i++ {
		apply([]shardcounter.Increment{{Counter: id, Delta: 1, Pick: uint64(i)}}) // a write without an id expires too
		if got, want := ids(t), max(500-perWrite*i, 0); got != want {
			t.Fatalf("after %d writes: %d ids, want %d", i, got, want)
		}
	}
	advance(time.Minute)
	apply([]shardcounter.Increment{withID("new")})
	if got := ids(t); got != 1 {
		t.Fatalf("%d ids after a new one, want 1", got)
	}
	if err := s.DeleteCounter(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := ids(t); got != 0 {
		t.Fatalf("%d ids after deleting the counter, want 0", got)
	}
}
