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

// countingReads wraps a real store and counts its read calls.
type countingReads struct {
	shardcounter.CounterStore
	calls atomic.Int64
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
// batch: each gets the value after the batch's commit, from one store read
// for the whole batch; writes that did not ask get none.
func TestWantValue(t *testing.T) {
	for _, mode := range []engine.Durability{engine.Durable, engine.Async} {
		t.Run(string(mode), func(t *testing.T) {
			store := MustOpenStore(t)
			storetest.MustCreate(t, store, "c", 4)
			reads := &countingReads{CounterStore: store}
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
			if got := reads.calls.Load(); got != 2 {
				t.Fatalf("%d store reads for the values of two batches, want 2", got)
			}
		})
	}
}

// TestWantValueManyCounters gives one batch more counters wanting their
// value than one store read may carry: the values are read in chunks of
// MaxReadBatch, and every write gets its own.
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
	reads := &countingReads{CounterStore: store}
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
	if got := reads.calls.Load(); got != 2 {
		t.Fatalf("%d store reads for the values of %d counters, want 2", got, n)
	}
}
