package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// TestLimitSweep takes from keys of a defined limit and of CL.THROTTLE's
// implicit one, and runs the sweeper's passes (SweepLimits) on a clock the
// test sets: a pass removes the states whose takes no longer count and
// keeps the others, a key taken again after its removal starts afresh,
// and Stats counts the states removed.
func TestLimitSweep(t *testing.T) {
	ctx := context.Background()
	clk := &clock{}
	eachStore(t, clk.Now, func(t *testing.T, store shardcounter.CounterStore) {
		clk.set(time.Unix(1_800_000_000, 0))                                               // a window's start
		e := MustNew(t, store, engine.Config{Now: clk.Now, LimitSweepInterval: time.Hour}) // passes only when the test runs them
		p, _ := shardcounter.ParseLimitPolicy("fixed 3/10s")
		if _, _, err := e.CreateLimit(ctx, "api", p); err != nil {
			t.Fatal(err)
		}
		gp, _ := shardcounter.ParseLimitPolicy("gcra 1/10s burst 2")
		gp = gp.WithDefaults()
		sweep := func(want int) {
			t.Helper()
			if n, err := e.SweepLimits(ctx); err != nil || n != want {
				t.Fatalf("SweepLimits = %d, %v; want %d removed", n, err, want)
			}
		}
		exists := func(id string) bool {
			t.Helper()
			r, err := store.ReadCounters(ctx, []string{id})
			if err != nil {
				t.Fatal(err)
			}
			return r[0] != nil
		}
		for _, key := range []string{"u1", "u2"} {
			if r, err := e.Take(ctx, "api", key, 2, ""); err != nil || !r.Allowed {
				t.Fatalf("Take(%s) = %+v, %v", key, r, err)
			}
		}
		if r, err := e.Throttle(ctx, "t1", gp, 1, false); err != nil || !r.Allowed {
			t.Fatalf("Throttle = %+v, %v", r, err)
		}
		sweep(0)                      // nothing idle yet
		clk.advance(10 * time.Second) // the window of the takes is past, and t1's bucket full again
		if r, err := e.Take(ctx, "api", "u2", 1, ""); err != nil || !r.Allowed || r.Remaining != 2 {
			t.Fatalf("Take(u2) in the next window = %+v, %v", r, err)
		}
		sweep(2)
		u1, u2 := shardcounter.LimitKeyID("api", p, "u1"), shardcounter.LimitKeyID("api", p, "u2")
		if exists(u1) || exists(engine.ThrottleKeyID(gp, "t1")) {
			t.Errorf("an idle state is still there after the sweep")
		}
		if !exists(u2) {
			t.Errorf("u2's state, taken in this window, was removed")
		}
		clk.advance(10 * time.Second)
		sweep(1)
		if exists(u2) {
			t.Errorf("u2's idle state is still there")
		}
		if r, err := e.Take(ctx, "api", "u1", 3, ""); err != nil || !r.Allowed || r.Remaining != 0 {
			t.Errorf("a take after the removal = %+v, %v; want a fresh key's", r, err)
		}
		if n := e.Stats().LimitStatesRemoved.Load(); n != 3 {
			t.Errorf("Stats.LimitStatesRemoved = %d, want 3", n)
		}
	})
}

// TestLimitSweepKeepsRequestIDs checks that a state taken from with a
// request id stays while the id is remembered: the removal would take the
// id with it, and a retry of the take would be charged again.
func TestLimitSweepKeepsRequestIDs(t *testing.T) {
	ctx := context.Background()
	clk := &clock{}
	eachStore(t, clk.Now, func(t *testing.T, store shardcounter.CounterStore) {
		clk.set(time.Unix(1_800_000_000, 0))
		e := MustNew(t, store, engine.Config{Now: clk.Now, LimitSweepInterval: time.Hour, DedupeWindow: time.Minute})
		p, _ := shardcounter.ParseLimitPolicy("fixed 3/10s")
		if _, _, err := e.CreateLimit(ctx, "api", p); err != nil {
			t.Fatal(err)
		}
		if r, err := e.Take(ctx, "api", "u", 2, "r1"); err != nil || !r.Allowed {
			t.Fatalf("Take = %+v, %v", r, err)
		}
		clk.advance(30 * time.Second) // the window is past; the id is not
		if n, err := e.SweepLimits(ctx); err != nil || n != 0 {
			t.Fatalf("SweepLimits within the dedupe window = %d, %v; want 0", n, err)
		}
		if r, err := e.Take(ctx, "api", "u", 2, "r1"); err != nil || !r.Duplicate {
			t.Fatalf("the retry = %+v, %v; want the duplicate", r, err)
		}
		clk.advance(31 * time.Second)
		if n, err := e.SweepLimits(ctx); err != nil || n != 1 {
			t.Fatalf("SweepLimits past the dedupe window = %d, %v; want 1", n, err)
		}
	})
}
