package storetest

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// RunWholeCommitReads races strong reads of a 64-shard counter with
// batches that each write all 64 shards, moving amounts between them
// (deltas that sum to 0): every read (ReadCounter, ReadCounters,
// ReadShards summed) must give the counter's value, 0. It is for stores
// that read shards as documents (Firestore, Datastore): on their
// emulator a read in a read-only transaction sees the documents a commit
// has written so far and not the rest (with 64 shards a run catches it
// far more often than with 16), which RunSnapshotReads, whose commits
// write two shards of a counter, seldom catches. Both stores run it, and
// read in a read-write transaction on their emulator for it.
func RunWholeCommitReads(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "c"
	const shards, batches, readers = 64, 150, 4
	MustCreate(t, s, id, shards)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(1, 2))
		for range batches {
			incs := make([]shardcounter.Increment, shards)
			var sum int64
			for i := range incs {
				d := rng.Int64N(2_000_001) - 1_000_000
				if i == shards-1 {
					d = -sum
				}
				sum += d
				incs[i] = shardcounter.Increment{Counter: id, Delta: d, Pick: uint64(i)}
			}
			out, err := s.Apply(ctx, incs)
			if err != nil {
				t.Errorf("Apply: %v", err)
				return
			}
			for j, o := range out {
				if o.Err != nil {
					t.Errorf("item %d: %v", j, o.Err)
					return
				}
			}
		}
	})
	torn := 0
	var mu sync.Mutex
	for r := range readers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				var v int64
				switch how := (r + i) % 3; how {
				case 0:
					rd, err := s.ReadCounter(ctx, id)
					if err != nil {
						t.Errorf("ReadCounter: %v", err)
						return
					}
					v = rd.Value
				case 1:
					rs, err := s.ReadCounters(ctx, []string{id})
					if err != nil {
						t.Errorf("ReadCounters: %v", err)
						return
					}
					v = rs[0].Value
				case 2:
					_, vals, err := s.ReadShards(ctx, id)
					if err != nil {
						t.Errorf("ReadShards: %v", err)
						return
					}
					for _, x := range vals {
						v += x
					}
				}
				if v != 0 {
					mu.Lock()
					torn++
					if torn <= 3 {
						t.Errorf("a strong read (%d) gave %d: it saw part of a commit", (r+i)%3, v)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if torn > 3 {
		t.Errorf("%d torn reads in all", torn)
	}
}
