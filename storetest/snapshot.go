package storetest

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// RunSnapshotReads checks that a strong read is one snapshot while
// commits touch several shards of the counters it reads at once: writers
// apply batches that move an amount from one shard of a counter to
// another (a delta and its opposite, in one batch), so the counters never
// change value; readers read them (ReadCounter, ReadShards, ReadCounters)
// and a resharder reshards them until the writers stop. A read that saw
// part of a commit sees the value moved. One counter has 16 shards; the
// other is bounded to [0, 8] and held at its bound of 8 (its writes take
// 1 from a shard and give it to another), so a store that decided on a
// torn read would also refuse writes. It is for stores that read shards
// as documents (Firestore, Datastore), where a batch get outside a
// transaction tears (Firestore's did, across a reshard's commit).
func RunSnapshotReads(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	many, bound := prefix(t)+"many", prefix(t)+"bound"
	MustCreate(t, s, many, 16)
	const hi = 8
	if _, err := s.CreateCounter(ctx, bound, shardcounter.Spec{Shards: 4, Min: ptr(0), Max: ptr(hi)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, bound, hi, 0); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{many: 0, bound: hi}
	const writers, readers = 8, 4
	n := scale(4, 12)
	done := make(chan struct{})
	var wg, rd sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for range n {
				d := 1 + rng.Int64N(1_000_000)
				a := rng.Uint64N(16)
				incs := []shardcounter.Increment{
					{Counter: many, Delta: d, Pick: a}, {Counter: many, Delta: -d, Pick: a + 1 + rng.Uint64N(15)},
					{Counter: bound, Delta: -1, Pick: a}, {Counter: bound, Delta: 1, Pick: a + 1 + rng.Uint64N(3)},
				}
				out, err := s.Apply(ctx, incs)
				if err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				for j, o := range out {
					if o.Err != nil {
						t.Errorf("item %d %+v: %v (a write decided on a torn read?)", j, incs[j], o.Err)
					}
				}
			}
		})
	}
	check := func(how, id string, v int64) {
		if v != want[id] {
			t.Errorf("%s(%q) = %d, want %d: the read saw part of a commit", how, id, v, want[id])
		}
	}
	for r := range readers {
		rd.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				id := []string{many, bound}[(r+i)%2]
				switch i % 3 {
				case 0:
					rs, err := s.ReadCounter(ctx, id)
					if err != nil {
						t.Errorf("ReadCounter: %v", err)
						return
					}
					check("ReadCounter", id, rs.Value)
				case 1:
					_, vals, err := s.ReadShards(ctx, id)
					if err != nil {
						t.Errorf("ReadShards: %v", err)
						return
					}
					var sum int64
					for _, v := range vals {
						sum += v
					}
					check("ReadShards", id, sum)
				default:
					rs, err := s.ReadCounters(ctx, []string{many, bound})
					if err != nil {
						t.Errorf("ReadCounters: %v", err)
						return
					}
					for _, r := range rs {
						check("ReadCounters", r.ID, r.Value)
					}
				}
			}
		})
	}
	rd.Go(func() { reshardUntil(t, s, []string{many, bound}, done) })
	wg.Wait()
	close(done)
	rd.Wait()
}
