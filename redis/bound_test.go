package redis_test

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// TestBounds checks INCREX's rule (Increment.Bound) on one server, as
// resp/server's TestIncrEx does on an engine: in bounds it adds, out of
// bounds it skips (0 applied), with Saturate it clamps, on a counter of
// four shards (whose total the script sums) and on a bounded one (whose
// floors then judge what the bound applies). A saturated move to int64's
// end needs a rebalance of the sharded counter. A transaction is
// refused; a cluster decides bounds only on a counter whose shards share
// one slot.
func TestBounds(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t, serverDSN(sharedServer(t)))
	id := "bounds" + runID()
	b := func(lo, hi int64, sat bool) *shardcounter.Bound {
		return &shardcounter.Bound{Lower: lo, Upper: hi, Saturate: sat}
	}
	const lo, hi = math.MinInt64, math.MaxInt64
	steps := []struct {
		name           string
		delta          int64
		bound          *shardcounter.Bound
		applied, total int64
		skipped        bool
	}{
		{"creates", 1, b(lo, hi, false), 1, 1, false},
		{"within", 4, b(lo, 5, false), 4, 5, false},
		{"above upper: skipped", 1, b(lo, 5, false), 0, 5, true},
		{"saturate clamps", 10, b(lo, 8, true), 3, 8, false},
		{"below lower: skipped", -9, b(0, hi, false), 0, 8, true},
		{"lower, saturate", -9, b(0, hi, true), -8, 0, false},
		{"outside, saturate moves toward the range", 1, b(5, 7, true), 5, 5, false},
		{"0 reads", 0, b(lo, hi, false), 0, 5, false},
		{"past int64: skipped", math.MaxInt64, b(lo, hi, false), 0, 5, true},
		{"past int64, saturate", math.MaxInt64, b(lo, hi, true), math.MaxInt64 - 5, math.MaxInt64, false},
		{"back down", math.MinInt64, b(lo, hi, true), math.MinInt64, -1, false},
	}
	for i, st := range steps {
		out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: st.delta, Bound: st.bound, Pick: uint64(i), Create: &shardcounter.Spec{Shards: 4}, Total: true}})
		if err != nil || out[0].Err != nil || out[0].Applied == nil || *out[0].Applied != st.applied || out[0].Skipped != st.skipped || out[0].Total == nil || *out[0].Total != st.total {
			t.Fatalf("%s: %v, %+v; want applied %d, skipped %v, total %d", st.name, err, out, st.applied, st.skipped, st.total)
		}
	}
	if r, err := s.ReadCounter(ctx, id); err != nil || r.Value != -1 {
		t.Fatalf("read: %+v, %v; want -1", r, err)
	}

	bid := "boundsfloor" + runID()
	spec := &shardcounter.Spec{Shards: 2, Min: new(int64), Max: ptr(10)}
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: bid, Delta: 20, Bound: b(lo, 10, true), Create: spec, Total: true},
		{Counter: bid, Delta: 5, Bound: b(lo, hi, true), Total: true},
		{Counter: bid, Delta: -20, Bound: b(-3, hi, true), Total: true},
	})
	if err != nil || out[0].Err != nil || *out[0].Applied != 10 || *out[0].Total != 10 {
		t.Fatalf("saturate to the ceiling: %v, %+v; want 10 applied", err, out)
	}
	if shardcounter.ErrorCode(out[1].Err) != shardcounter.EOUTOFRANGE || out[1].Applied != nil {
		t.Fatalf("past the counter's ceiling: %+v; want out_of_range", out[1])
	}
	if shardcounter.ErrorCode(out[2].Err) != shardcounter.EOUTOFRANGE {
		t.Fatalf("past the counter's floor: %+v; want out_of_range", out[2])
	}

	out, err = s.Apply(ctx, []shardcounter.Increment{
		{Counter: id, Delta: 1, Bound: b(lo, hi, false), Txn: 1},
		{Counter: id, Delta: 1},
		{Counter: id, Delta: 1, If: 2},
	})
	if err != nil || shardcounter.ErrorCode(out[0].Err) != shardcounter.EINVALID || out[1].Err != nil || out[2].Err != nil || out[2].Skipped {
		t.Fatalf("in a transaction, conditional: %v, %+v; want the first refused, the others applied", err, out)
	}

	// A cluster decides bounds on counters whose shards share one slot:
	// of one shard, or with Min or Max; refuses them on others, and on a
	// counter of one shard once it is resharded to more.
	c := MustOpen(t, clusterDSN(sharedCluster(t)))
	one, four, floor := "boundsone"+runID(), "boundsfour"+runID(), "boundsfloors"+runID()
	for _, st := range []struct {
		id      string
		spec    shardcounter.Spec
		applied int64
	}{
		{one, shardcounter.Spec{Shards: 1}, 5},
		{floor, shardcounter.Spec{Shards: 4, Min: new(int64)}, 5},
		{one, shardcounter.Spec{Shards: 1}, 0},
	} {
		out, err = c.Apply(ctx, []shardcounter.Increment{{Counter: st.id, Delta: 7, Bound: b(lo, 5, true), Create: &st.spec, Total: true}})
		if err != nil || out[0].Err != nil || *out[0].Applied != st.applied {
			t.Fatalf("on a cluster, %s: %v, %+v; want %d applied", st.id, err, out, st.applied)
		}
	}
	if _, err := c.ReshardCounter(ctx, one, 2); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{one, four} {
		out, err = c.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 1, Bound: b(lo, hi, false), Create: &shardcounter.Spec{Shards: 4}}})
		if err != nil || !shardcounter.IsBoundsUnsupported(out[0].Err) {
			t.Fatalf("on a cluster, %s of several slots: %v, %+v; want refused", id, err, out)
		}
	}
	if _, err := c.GetCounter(ctx, four); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("a refused bounded item created its counter: %v", err)
	}
}

func ptr(v int64) *int64 { return &v }

// TestBoundsReshardCluster races bounded increments on a cluster (under
// a ceiling the counter's total reaches) with reshards of their counter,
// whose shards share one slot (it has a Min): the bound is decided on the
// exact total whatever the layout, so the increments applied add up to
// the final total and no more than the ceiling is ever reached.
func TestBoundsReshardCluster(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t, clusterDSN(sharedCluster(t)))
	id := "boundsreshard" + runID()
	if _, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: 4, Min: new(int64)}); err != nil {
		t.Fatal(err)
	}
	const ceiling, writers, each = 60, 4, 25
	var applied atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range each {
				out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 1, Pick: uint64(w*each + k), Bound: &shardcounter.Bound{Lower: math.MinInt64, Upper: ceiling}}})
				if err != nil || out[0].Err != nil {
					t.Errorf("bounded increment: %v, %+v", err, out)
					return
				}
				applied.Add(*out[0].Applied)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 1; n <= 40 && applied.Load() < ceiling; n++ {
			if _, err := s.ReshardCounter(ctx, id, 1+n%6); err != nil {
				t.Errorf("reshard: %v", err)
				return
			}
		}
	}()
	wg.Wait()
	<-done
	r, err := s.ReadCounter(ctx, id)
	if err != nil || r.Value != applied.Load() || r.Value != ceiling {
		t.Fatalf("after the race: %+v, %v; want %d, the increments applied (%d)", r, err, ceiling, applied.Load())
	}
}
