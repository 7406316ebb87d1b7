package storetest

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// testReadCounters checks a batch read: one reading per id, in order, nil
// for a counter that does not exist, an id as often as it is asked for.
func testReadCounters(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	p := prefix(t)
	a, b, d := p+"a", p+"b", p+"d"
	MustCreate(t, s, a, 4)
	MustCreate(t, s, b, 1)
	if _, err := s.CreateCounter(ctx, d, shardcounter.Spec{Shards: 3, Kind: shardcounter.KindDistinct}); err != nil {
		t.Fatal(err)
	}
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: a, Delta: 7, Pick: 1}, {Counter: a, Delta: -2, Pick: 3},
		{Counter: b, Delta: -9},
		{Counter: d, Member: "x", Delta: 1}, {Counter: d, Member: "y", Delta: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil {
			t.Fatalf("outcome %d: %v", i, o.Err)
		}
	}
	ids := []string{b, p + "missing", a, d, a, p + "missing-too"}
	want := []struct {
		value  int64
		shards int
	}{{-9, 1}, {}, {5, 4}, {2, 3}, {5, 4}, {}}
	rs, err := s.ReadCounters(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(ids) {
		t.Fatalf("ReadCounters returned %d readings for %d ids", len(rs), len(ids))
	}
	for i, r := range rs {
		if want[i].shards == 0 {
			if r != nil {
				t.Fatalf("reading %d of a missing counter = %+v, want nil", i, r)
			}
			continue
		}
		if r == nil {
			t.Fatalf("reading %d (%s) is nil", i, ids[i])
		}
		if r.ID != ids[i] || r.Value != want[i].value || r.Shards != want[i].shards || r.Consistency != shardcounter.Strong || r.AsOf.IsZero() {
			t.Fatalf("reading %d = %+v, want %s = %d over %d shards, strong, with as_of", i, r, ids[i], want[i].value, want[i].shards)
		}
	}
	if rs, err := s.ReadCounters(ctx, nil); err != nil || len(rs) != 0 {
		t.Fatalf("ReadCounters(nil) = %v, %v; want no readings, no error", rs, err)
	}
	if rs, err := s.ReadCounters(ctx, []string{p + "missing"}); err != nil || len(rs) != 1 || rs[0] != nil {
		t.Fatalf("ReadCounters of one missing counter = %v, %v; want [nil]", rs, err)
	}
	// The limit, the same on every store.
	many := make([]string, shardcounter.MaxReadBatch+1)
	for i := range many {
		many[i] = a
	}
	if rs, err := s.ReadCounters(ctx, many[:shardcounter.MaxReadBatch]); err != nil || len(rs) != shardcounter.MaxReadBatch || rs[0] == nil || rs[0].Value != 5 {
		t.Fatalf("ReadCounters of MaxReadBatch ids: %d readings, %v; want them all", len(rs), err)
	}
	if _, err := s.ReadCounters(ctx, many); shardcounter.ErrorCode(err) != shardcounter.ETOOLARGE {
		t.Fatalf("ReadCounters of MaxReadBatch+1 ids: %v; want payload_too_large", err)
	}
}

// testPlacement checks the shard-to-node map: one entry per shard, in
// order, each with its value and a node, summing to the strong reading.
func testPlacement(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "c"
	MustCreate(t, s, id, 4)
	for pick, d := range []int64{3, 0, -5, 11} {
		if d != 0 {
			if err := s.Add(ctx, id, d, uint64(pick)); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(wantShards []int64) {
		t.Helper()
		p, err := s.Placement(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if p.ID != id || p.Shards != len(wantShards) || len(p.Places) != len(wantShards) || p.AsOf.IsZero() {
			t.Fatalf("Placement = %+v, want %d shards of %s with as_of", p, len(wantShards), id)
		}
		var sum int64
		for i, pl := range p.Places {
			if pl.Shard != i || pl.Value != wantShards[i] || pl.Node == "" {
				t.Fatalf("placement of shard %d = %+v, want value %d and a node", i, pl, wantShards[i])
			}
			sum += pl.Value
		}
		if got := MustRead(t, s, id); got != sum {
			t.Fatalf("placement values sum to %d, the strong reading is %d", sum, got)
		}
	}
	check([]int64{3, 0, -5, 11})
	if _, err := s.ReshardCounter(ctx, id, 3); err != nil {
		t.Fatal(err)
	}
	check([]int64{3 + 11, 0, -5})
	_, err := s.Placement(ctx, prefix(t)+"missing")
	wantCode(t, "Placement of a missing counter", err, shardcounter.ENOTFOUND)
}

// progress is what a test knows of one counter's writes: how many were
// started and how many acknowledged. A linearizable reading taken between
// the calls lies between the acknowledged count loaded before the call and
// the started count loaded after it.
type progress struct{ started, acked atomic.Int64 }

// testBatchSnapshot runs writers that each write +1 to a counter A, wait
// for it, then +1 to a counter B, and so on, while readers read the pairs
// in a random order and resharders reshard them. Every reading must lie
// between the writes acknowledged before the read and those started
// before it returned. Where the store promises one snapshot across a
// batch read (not Options.NoBatchSnapshot), a reader must also never see
// B's write without the earlier-acknowledged write to A, nor A's next
// write without B's: B ≤ A ≤ B+1.
func testBatchSnapshot(t *testing.T, s shardcounter.CounterStore, opts Options) {
	ctx := context.Background()
	const pairs = 3
	n := scale(15, 40)
	var ids []string
	prog := make([]progress, 2*pairs)
	for i := range pairs {
		ids = append(ids, prefix(t)+"a"+string(rune('0'+i)), prefix(t)+"b"+string(rune('0'+i)))
		MustCreate(t, s, ids[2*i], 1+i)
		MustCreate(t, s, ids[2*i+1], 4)
	}
	var writers, others sync.WaitGroup
	var done atomic.Bool
	for i := range pairs {
		writers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for k := 1; k <= n && !t.Failed(); k++ {
				for j := 2 * i; j <= 2*i+1; j++ {
					prog[j].started.Store(int64(k))
					var err error
					if rng.IntN(2) == 0 {
						err = s.Add(ctx, ids[j], 1, rng.Uint64())
					} else {
						var out []shardcounter.Outcome
						if out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: ids[j], Delta: 1, Pick: rng.Uint64()}}); err == nil {
							err = out[0].Err
						}
					}
					if err != nil {
						t.Errorf("write %d to %s: %v", k, ids[j], err)
						return
					}
					prog[j].acked.Store(int64(k))
				}
			}
		})
	}
	for r := range 2 {
		others.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(100+r), uint64(time.Now().UnixNano())))
			for !done.Load() && !t.Failed() {
				order := rng.Perm(len(ids))
				batch := make([]string, len(ids))
				low := make([]int64, len(ids))
				for i, j := range order {
					batch[i] = ids[j]
					low[i] = prog[j].acked.Load()
				}
				rs, err := s.ReadCounters(ctx, batch)
				if err != nil {
					t.Errorf("ReadCounters: %v", err)
					return
				}
				got := make([]int64, len(ids))
				for i, j := range order {
					high := prog[j].started.Load()
					if rs[i] == nil {
						t.Errorf("ReadCounters: no reading of %s", ids[j])
						return
					}
					if v := rs[i].Value; v < low[i] || v > high {
						t.Errorf("%s read %d: %d writes were acknowledged before the read and %d started before it returned", ids[j], v, low[i], high)
					}
					got[j] = rs[i].Value
				}
				pause()
				if opts.NoBatchSnapshot {
					continue
				}
				for i := range pairs {
					if a, b := got[2*i], got[2*i+1]; b > a || a > b+1 {
						t.Errorf("one batch read saw A = %d and B = %d: not one snapshot (each write to A is acknowledged before the next to B, and the other way round)", a, b)
					}
				}
			}
		})
	}
	others.Go(func() {
		rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
		for !done.Load() && !t.Failed() {
			if _, err := s.ReshardCounter(ctx, ids[rng.IntN(len(ids))], 1+rng.IntN(8)); err != nil {
				t.Errorf("ReshardCounter: %v", err)
				return
			}
			time.Sleep(5 * time.Millisecond) // a reshard every few writes, not one between each
		}
	})
	writers.Wait()
	done.Store(true)
	others.Wait()
	for i, id := range ids {
		if got, want := MustRead(t, s, id), prog[i].acked.Load(); got != want {
			t.Errorf("%s = %d, want %d", id, got, want)
		}
	}
}
