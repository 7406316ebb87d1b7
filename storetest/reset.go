package storetest

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/expiry"
)

// testReset checks resets (expiry.Store.ResetCounter) over the store: a
// reset returns the value before it and leaves the new one, creates a
// missing counter, deletes with Delete, refuses a distinct counter; and,
// with increments and resets running at once, every increment is counted
// exactly once: in the value one reset returned, or in the final value.
func testReset(t *testing.T, s shardcounter.CounterStore, opts Options) {
	ctx := context.Background()
	p := prefix(t)
	x := expiry.Wrap(s, expiry.Options{})
	spec := shardcounter.Spec{Shards: 4, Kind: shardcounter.KindSum}
	reset := func(id string, r shardcounter.Reset) *shardcounter.ResetResult {
		t.Helper()
		res, err := x.ResetCounter(ctx, id, r, spec)
		if err != nil {
			t.Fatalf("ResetCounter(%q, %+v): %v", id, r, err)
		}
		return res
	}
	a := p + "a"
	if res := reset(a, shardcounter.Reset{Value: 7}); res.Existed || res.Old != 0 || MustRead(t, x, a) != 7 {
		t.Fatalf("reset of a missing counter: %+v, value %d; want a new counter at 7", res, MustRead(t, x, a))
	}
	expiryApply(t, x, a, 5, 12)
	if res := reset(a, shardcounter.Reset{Value: -3}); !res.Existed || res.Old != 12 || MustRead(t, x, a) != -3 {
		t.Fatalf("reset to -3: %+v, value %d; want old 12", res, MustRead(t, x, a))
	}
	if res := reset(a, shardcounter.Reset{}); res.Old != -3 || MustRead(t, x, a) != 0 {
		t.Fatalf("reset to 0: %+v", res)
	}
	if res := reset(p+"zero", shardcounter.Reset{}); res.Existed || MustRead(t, x, p+"zero") != 0 {
		t.Fatalf("reset of a missing counter to 0: %+v; want it created", res)
	}
	expiryApply(t, x, a, 4, 4)
	if res := reset(a, shardcounter.Reset{Delete: true}); !res.Deleted || res.Old != 4 {
		t.Fatalf("reset with delete: %+v", res)
	}
	if _, err := x.GetCounter(ctx, a); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("counter after a reset with delete: %v", err)
	}
	d := p + "d"
	if _, err := x.CreateCounter(ctx, d, shardcounter.Spec{Shards: 2, Kind: shardcounter.KindDistinct}); err != nil {
		t.Fatal(err)
	}
	_, err := x.ResetCounter(ctx, d, shardcounter.Reset{Value: 1}, spec)
	wantCode(t, "reset of a distinct counter", err, shardcounter.EINVALID)
	testResetConcurrent(t, x, p+"c", opts)
}

// testResetConcurrent runs writers adding 1 and resetters taking the
// counter to 0 at once (read-and-reset, as a flush to a database does),
// and checks that every increment counts once: the values the resets
// returned plus the final value are the increments, and no reset, write
// or read ever sees a negative value, which a reset that took an
// increment that another reset had also taken would leave.
func testResetConcurrent(t *testing.T, x *expiry.Store, id string, opts Options) {
	ctx := context.Background()
	spec := shardcounter.Spec{Shards: 4, Kind: shardcounter.KindSum}
	writers, per := 8, opts.scaled(200)
	var wg sync.WaitGroup
	var added, got, set atomic.Int64
	done := make(chan struct{})
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				out, err := x.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 1, Pick: rand.Uint64(), Create: &spec, Total: true}})
				if err != nil || out[0].Err != nil {
					t.Errorf("Apply: %v %+v", err, out)
					return
				}
				if v := out[0].Total; v != nil && *v < 1 {
					t.Errorf("an increment left the counter at %d: a reset took what another had", *v)
				}
				added.Add(1)
			}
		}()
	}
	var rwg sync.WaitGroup
	for range 2 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				v := int64(0)
				res, err := x.ResetCounter(ctx, id, shardcounter.Reset{Value: v}, spec)
				if err != nil {
					t.Errorf("ResetCounter: %v", err)
					return
				}
				if res.Old < 0 {
					t.Errorf("a reset returned %d: it took what another had", res.Old)
				}
				got.Add(res.Old)
				set.Add(v)
			}
		}()
	}
	wg.Wait()
	close(done)
	rwg.Wait()
	final := MustRead(t, x, id)
	if final < 0 {
		t.Errorf("final value %d: a reset took what another had", final)
	}
	if got.Load()-set.Load()+final != added.Load() {
		t.Fatalf("resets returned %d and set %d, final value %d: %d increments counted, %d applied",
			got.Load(), set.Load(), final, got.Load()-set.Load()+final, added.Load())
	}
}
