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

// The cases in this file check bounded counters (DESIGN invariant 9,
// issue 15 item 1): Spec.Min and Spec.Max bound the counter's total, not
// its shards; a write that would take the total outside is refused with
// ErrOutOfRange and changes nothing; no strong read ever shows a value
// outside.

func testBounds(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "stock"
	if _, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: 2, Min: ptr(0), Max: ptr(10)}); err != nil {
		t.Fatal(err)
	}
	err := s.Add(ctx, id, -1, 0)
	wantCode(t, "Add -1 at min 0", err, shardcounter.EOUTOFRANGE)
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: -1, Pick: 1, RequestID: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "Apply -1 at min 0", out[0].Err, shardcounter.EOUTOFRANGE)
	if got := MustShards(t, s, id); !equalShards(got, []int64{0, 0}) {
		t.Fatalf("shards after refused writes = %v, want [0 0]", got)
	}

	// In one batch a refused item does not stop the others on the same
	// counter: each is checked against the total the items before it left.
	out, err = s.Apply(ctx, []shardcounter.Increment{
		{Counter: id, Delta: -1, Pick: 0}, // refused: -1
		{Counter: id, Delta: 3, Pick: 0},  // 3
		{Counter: id, Delta: -2, Pick: 1}, // 1
		{Counter: id, Delta: -2, Pick: 1}, // refused: -1
		{Counter: id, Delta: 9, Pick: 0},  // 10, the max itself
		{Counter: id, Delta: 1, Pick: 1},  // refused: 11
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, refused := range []bool{true, false, false, true, false, true} {
		if refused {
			wantCode(t, "item past a bound", out[i].Err, shardcounter.EOUTOFRANGE)
		} else if out[i].Err != nil || out[i].Duplicate {
			t.Fatalf("outcome %d = %+v, want applied", i, out[i])
		}
	}
	if got := MustShards(t, s, id); !equalShards(got, []int64{12, -2}) {
		t.Fatalf("shards = %v, want [12 -2]", got)
	}
	// The bound is on the total: a shard may go below min while the total
	// holds.
	if err := s.Add(ctx, id, -10, 1); err != nil {
		t.Fatalf("Add -10 to a shard, total 10 -> 0: %v", err)
	}
	// The refused write's request id was not recorded.
	out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 5, Pick: 1, RequestID: "r"}})
	if err != nil || out[0].Err != nil || out[0].Duplicate {
		t.Fatalf("a request id refused at a bound, used again when it fits: %v %+v, want applied", err, out)
	}
	if got := MustRead(t, s, id); got != 5 {
		t.Fatalf("value = %d, want 5", got)
	}

	t.Run("Reshard", func(t *testing.T) {
		for _, n := range []int{5, 1, 3} {
			if _, err := s.ReshardCounter(ctx, id, n); err != nil {
				t.Fatal(err)
			}
			if err := s.Add(ctx, id, 6, uint64(n)); shardcounter.ErrorCode(err) != shardcounter.EOUTOFRANGE {
				t.Fatalf("Add +6 at 5 (max 10) after a reshard to %d: %v, want out_of_range", n, err)
			}
			if err := s.Add(ctx, id, -6, uint64(n)); shardcounter.ErrorCode(err) != shardcounter.EOUTOFRANGE {
				t.Fatalf("Add -6 at 5 (min 0) after a reshard to %d: %v, want out_of_range", n, err)
			}
			if got := MustRead(t, s, id); got != 5 {
				t.Fatalf("value after a reshard to %d = %d, want 5", n, got)
			}
		}
	})

	t.Run("NegativeMin", func(t *testing.T) {
		id := prefix(t) + "c"
		if _, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: 1, Min: ptr(-3)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Add(ctx, id, -3, 0); err != nil {
			t.Fatal(err)
		}
		wantCode(t, "Add -1 at min -3", s.Add(ctx, id, -1, 0), shardcounter.EOUTOFRANGE)
		if err := s.Add(ctx, id, 1<<62, 0); err != nil { // no max
			t.Fatal(err)
		}
		if got := MustRead(t, s, id); got != 1<<62-3 {
			t.Fatalf("value = %d, want 2^62-3", got)
		}
	})
}

// testBoundsConcurrent has many goroutines hammer +1 and −1 (alone, and
// several to the counter in one batch) on a counter bounded to [0, 8]
// while readers check that no strong read leaves the bounds and, when
// reshard is set, a resharder changes the shard count. The applied writes
// must add up to the final value.
func testBoundsConcurrent(t *testing.T, s shardcounter.CounterStore, reshard bool) {
	ctx := context.Background()
	id := prefix(t) + "c"
	const lo, hi = 0, 8
	if _, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: 4, Min: ptr(lo), Max: ptr(hi)}); err != nil {
		t.Fatal(err)
	}
	const writers = 16
	n := scale(8, 25)
	var net, refused atomic.Int64
	done := make(chan struct{})
	var wg, others sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for range n {
				var incs []shardcounter.Increment
				for range 1 + rng.IntN(3) {
					d := int64(1)
					if rng.IntN(2) == 0 {
						d = -1
					}
					incs = append(incs, shardcounter.Increment{Counter: id, Delta: d, Pick: rng.Uint64()})
				}
				if len(incs) == 1 && rng.IntN(2) == 0 {
					err := s.Add(ctx, id, incs[0].Delta, incs[0].Pick)
					switch shardcounter.ErrorCode(err) {
					case "":
						net.Add(incs[0].Delta)
					case shardcounter.EOUTOFRANGE:
						refused.Add(1)
					default:
						t.Errorf("Add: %v", err)
						return
					}
					continue
				}
				out, err := s.Apply(ctx, incs)
				if err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				for j, o := range out {
					switch shardcounter.ErrorCode(o.Err) {
					case "":
						net.Add(incs[j].Delta)
					case shardcounter.EOUTOFRANGE:
						refused.Add(1)
					default:
						t.Errorf("outcome %+v", o)
						return
					}
				}
			}
		})
	}
	readUntil(t, &others, s, id, 2, done, monotonic{time.Now()}, func(_, _, v int64) {
		if v < lo || v > hi {
			t.Errorf("a strong read of a counter bounded to [%d, %d] returned %d", lo, hi, v)
		}
	})
	if reshard {
		others.Go(func() { reshardUntil(t, s, []string{id}, done) })
	}
	wg.Wait()
	close(done)
	others.Wait()
	if got := MustRead(t, s, id); got != net.Load() {
		t.Errorf("value = %d, but the applied writes add up to %d", got, net.Load())
	}
	t.Logf("%d writes refused at a bound", refused.Load())
}
