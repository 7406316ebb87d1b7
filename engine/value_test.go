package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/storetest"
)

// countingReads wraps a real store and counts its read calls. With
// noTotals it drops the totals the store returns with its commits, as a
// store that does not read them (Redis) gives none.
type countingReads struct {
	shardcounter.CounterStore
	calls    atomic.Int64
	noTotals bool
}

func (s *countingReads) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	out, err := s.CounterStore.Apply(ctx, incs)
	if s.noTotals {
		for i := range out {
			out[i].Total = nil
		}
	}
	return out, err
}

func (s *countingReads) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	s.calls.Add(1)
	return s.CounterStore.ReadCounter(ctx, id)
}

func (s *countingReads) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	s.calls.Add(1)
	return s.CounterStore.ReadCounters(ctx, ids)
}

// TestWantValue queues writes that ask for the counter's value into one
// batch: each gets the value after the batch's commit, from the commit
// itself where the store returns it (the model does), and otherwise from one
// store read for the whole batch; writes that did not ask get none.
func TestWantValue(t *testing.T) {
	for _, tc := range []struct {
		mode     engine.Durability
		noTotals bool
		reads    int64
	}{{engine.Durable, false, 0}, {engine.Async, false, 0}, {engine.Durable, true, 2}, {engine.Async, true, 2}} {
		name := string(tc.mode) + "/totals"
		if tc.noTotals {
			name = string(tc.mode) + "/read"
		}
		t.Run(name, func(t *testing.T) {
			mode := tc.mode
			store := MustOpenStore(t)
			storetest.MustCreate(t, store, "c", 4)
			reads := &countingReads{CounterStore: store, noTotals: tc.noTotals}
			g := newGate(reads, 10)
			e := MustNew(t, g, engine.Config{Durability: mode})
			g.releaseOnCleanup(t)
			first := startHeld(t, g, e, shardcounter.Write{Counter: "c", Delta: 100, WantValue: true})
			const n = 30
			results, errs, wait := queueWrites(t, e, n, func(i int) shardcounter.Write {
				return shardcounter.Write{Counter: "c", Delta: 1, WantValue: i%3 != 0}
			})
			close(g.hold)
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			wait()
			for i := range n {
				switch {
				case errs[i] != nil || !results[i].Applied:
					t.Fatalf("write %d = %+v, %v", i, results[i], errs[i])
				case i%3 == 0 && results[i].Value != nil:
					t.Fatalf("write %d did not ask for the value and got %d", i, *results[i].Value)
				case i%3 != 0 && (results[i].Value == nil || *results[i].Value != 100+n):
					t.Fatalf("write %d value = %v, want %d: the value after its batch", i, results[i].Value, 100+n)
				}
			}
			if got := reads.calls.Load(); got != tc.reads {
				t.Fatalf("%d store reads for the values of two batches, want %d", got, tc.reads)
			}
		})
	}
}

// TestWantValueManyCounters gives one batch more counters wanting their
// value than one store read may carry, from a store that returns no
// totals: the values are read in chunks of MaxReadBatch, and every write
// gets its own.
func TestWantValueManyCounters(t *testing.T) {
	const n = shardcounter.MaxReadBatch + 500
	store := MustOpenStore(t)
	incs := []shardcounter.Increment{{Counter: "first", Delta: 1, Create: &shardcounter.Spec{Shards: 1}}}
	for i := range n {
		incs = append(incs, shardcounter.Increment{Counter: fmt.Sprint("c", i), Delta: int64(i + 1), Create: &shardcounter.Spec{Shards: 2}})
	}
	if _, err := store.Apply(context.Background(), incs); err != nil {
		t.Fatal(err)
	}
	reads := &countingReads{CounterStore: store, noTotals: true}
	g := newGate(reads, 10)
	e := MustNew(t, g, engine.Config{})
	g.releaseOnCleanup(t)
	first := startHeld(t, g, e, shardcounter.Write{Counter: "first", Delta: 1})
	results, errs, wait := queueWrites(t, e, n, func(i int) shardcounter.Write {
		return shardcounter.Write{Counter: fmt.Sprint("c", i), Delta: int64(i + 1), WantValue: true}
	})
	close(g.hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wait()
	for i := range n {
		if want := int64(2 * (i + 1)); errs[i] != nil || results[i].Value == nil || *results[i].Value != want {
			t.Fatalf("write %d = %+v, %v; want the value %d", i, results[i], errs[i], want)
		}
	}
	// The writes were all queued before the first flush ended, so they
	// are one batch and two reads (MaxReadBatch, then the rest). A loaded
	// machine may let the flusher cut a batch while they queue: each batch
	// reads its own counters, in ceil(len/MaxReadBatch) store reads at
	// most, so k batches of n counters take between 2 and k+1.
	batches := len(g.entered)
	got := reads.calls.Load()
	if got < 2 || got > int64(batches)+1 {
		t.Fatalf("%d store reads for the values of %d counters in %d batches, want 2 to %d", got, n, batches, batches+1)
	}
}
