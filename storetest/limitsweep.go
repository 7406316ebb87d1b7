package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// testLimitSweep checks removals of idle limit states
// (shardcounter.LimitTake.Remove) on a store whose clock the test sets:
// a state is kept while a take of it still counts and removed once it is
// idle, under each kind of policy; and a removal racing takes never loses
// an admitted one, so that a key admits exactly its quota a window
// however the removals fall. A store that refuses takes
// (shardcounter.IsLimitsUnsupported) skips it; one that takes and
// refuses removals (shardcounter.IsRemoveUnsupported) fails it.
func testLimitSweep(t *testing.T, opts Options) {
	s, clk := openWithClock(t, opts)
	name := prefix(t) + "sweep"
	for _, ps := range []string{"fixed 3/1m", "sliding 4/1m bucket 10s", "gcra 2/1m burst 3"} {
		p, err := shardcounter.ParseLimitPolicy(ps)
		if err != nil {
			t.Fatal(err)
		}
		p = p.WithDefaults()
		id := shardcounter.LimitKeyID(name, p, "idle")
		out := applyOne(t, s, removal(id, p))
		if shardcounter.IsLimitsUnsupported(out.Err) {
			t.Skipf("the store refuses takes of rate limits: %v", out.Err)
		}
		if out.Err != nil || !out.Skipped {
			t.Fatalf("%s: a removal of a missing state: %+v; want kept (skipped)", ps, out)
		}
		if o := applyOne(t, s, take(id, p)); o.Err != nil || !o.Limit.Allowed {
			t.Fatalf("%s: a take: %+v", ps, o)
		}
		clk.Advance(time.Second)
		if o := applyOne(t, s, removal(id, p)); o.Err != nil || !o.Skipped {
			t.Fatalf("%s: a removal while the take counts: %+v; want kept (skipped)", ps, o)
		}
		if !stateExists(t, s, id) {
			t.Fatalf("%s: a state not idle was removed", ps)
		}
		clk.Advance(2 * time.Minute)
		if o := applyOne(t, s, removal(id, p)); o.Err != nil || o.Skipped {
			t.Fatalf("%s: a removal of an idle state: %+v; want removed", ps, o)
		}
		if stateExists(t, s, id) {
			t.Fatalf("%s: an idle state removed is still there", ps)
		}
		if o := applyOne(t, s, take(id, p)); o.Err != nil || !o.Limit.Allowed || o.Limit.Remaining != p.Quota()-1 {
			t.Fatalf("%s: a take after the removal: %+v; want a fresh key's", ps, o)
		}
	}
	t.Run("RacingTakes", func(t *testing.T) { testSweepRace(t, s, clk, name) })
}

// testSweepRace takes from keys of each kind of policy, from several
// goroutines, while others send removals of their states as fast as they
// can; each round the clock moves on past the quota's time, so that every
// round starts on an idle state which the round's first takes race the
// removals for. A removal decided apart from the takes (a peek, then a
// delete) would erase an admitted take, and the key would admit more
// than its quota in the round: each round must admit exactly the quota.
func testSweepRace(t *testing.T, s shardcounter.CounterStore, clk *Clock, name string) {
	const takers, removers, rounds = 4, 2, 10
	for _, ps := range []string{"fixed 5/1m", "sliding 5/1m bucket 20s", "gcra 5/1m burst 5"} {
		p, _ := shardcounter.ParseLimitPolicy(ps)
		p = p.WithDefaults()
		id := shardcounter.LimitKeyID(name, p, "race")
		var removed atomic.Int64
		for r := range rounds {
			clk.Advance(2 * time.Minute)
			var admitted atomic.Int64
			done := make(chan struct{})
			var wg, rw sync.WaitGroup
			for range removers {
				rw.Go(func() {
					for {
						select {
						case <-done:
							return
						default:
						}
						o := applyOne(t, s, removal(id, p))
						if o.Err != nil {
							t.Errorf("%s: a removal: %v", ps, o.Err)
							return
						}
						if !o.Skipped {
							removed.Add(1)
						}
					}
				})
			}
			for range takers {
				wg.Go(func() {
					for range p.Quota() + 2 {
						o := applyOne(t, s, take(id, p))
						if o.Err != nil {
							t.Errorf("%s: a take: %v", ps, o.Err)
							return
						}
						if o.Limit.Allowed {
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			close(done)
			rw.Wait()
			if t.Failed() {
				return
			}
			if got := admitted.Load(); got != p.Quota() {
				t.Fatalf("%s, round %d: %d takes admitted in one window, racing removals; the quota is %d", ps, r, got, p.Quota())
			}
			if !stateExists(t, s, id) {
				t.Fatalf("%s, round %d: the state of a key taken to its quota was removed", ps, r)
			}
		}
		t.Logf("%s: %d states removed in %d rounds", ps, removed.Load(), rounds)
	}
}

func removal(id string, p shardcounter.LimitPolicy) shardcounter.Increment {
	return shardcounter.Increment{Counter: id, Take: &shardcounter.LimitTake{Policy: p, Remove: true}}
}

func take(id string, p shardcounter.LimitPolicy) shardcounter.Increment {
	return shardcounter.Increment{Counter: id, Take: &shardcounter.LimitTake{Policy: p, Cost: 1},
		Create: &shardcounter.Spec{Shards: p.StateShards(), Kind: shardcounter.KindSum}}
}

// applyOne applies one item and returns its outcome; an error of the
// whole call fails the test.
func applyOne(t *testing.T, s shardcounter.CounterStore, inc shardcounter.Increment) shardcounter.Outcome {
	t.Helper()
	out, err := s.Apply(context.Background(), []shardcounter.Increment{inc})
	if err != nil {
		t.Errorf("Apply: %v", err)
		return shardcounter.Outcome{Err: err}
	}
	return out[0]
}

// stateExists reports whether a key's state counter exists.
func stateExists(t *testing.T, s shardcounter.CounterStore, id string) bool {
	t.Helper()
	r, err := s.ReadCounters(context.Background(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	return r[0] != nil
}
