package redis_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

// approxAdds returns items adding members prefix0 .. prefix(n-1) to an
// approx counter.
func approxAdds(id, prefix string, n int) []shardcounter.Increment {
	incs := make([]shardcounter.Increment, n)
	for i := range incs {
		incs[i] = shardcounter.Increment{Counter: id, Member: fmt.Sprintf("%s%d", prefix, i), Delta: 1}
	}
	return incs
}

func mustApplyAll(t *testing.T, s shardcounter.CounterStore, incs []shardcounter.Increment) {
	t.Helper()
	out, err := s.Apply(context.Background(), incs)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	for i, o := range out {
		if o.Err != nil || o.Duplicate {
			t.Fatalf("item %d: %+v", i, o)
		}
	}
}

// TestApproxTwoProcesses writes one approx counter from two stores, as
// two processes would: each caches the sketches it wrote last, so a write
// after the other store's must find its cached sketch out of date (the
// shard's version moved), read the shard again and keep the other's
// registers. Then both write at once, and no writer's members are lost.
func TestApproxTwoProcesses(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		a, b := MustOpen(t, dsn), MustOpen(t, dsn)
		id := t.Name() + runID()
		storetest.MustCreateApprox(t, a, id, 4)
		mustApplyAll(t, a, approxAdds(id, "a", 300))
		mustApplyAll(t, b, approxAdds(id, "b", 300))
		mustApplyAll(t, a, approxAdds(id, "c", 300)) // on a's cached sketches, which b moved on
		storetest.CheckApprox(t, a, id, 900)
		storetest.CheckApprox(t, b, id, 900)

		var wg sync.WaitGroup
		for w := range 8 {
			s := a
			if w%2 == 1 {
				s = b
			}
			wg.Go(func() {
				for k := range 25 {
					out, err := s.Apply(context.Background(), approxAdds(id, fmt.Sprintf("w%d-%d-", w, k), 20))
					if err != nil {
						t.Errorf("Apply: %v", err)
						return
					}
					for _, o := range out {
						if o.Err != nil {
							t.Errorf("outcome %+v", o)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		if !t.Failed() {
			storetest.CheckApprox(t, b, id, 900+8*25*20)
		}
	})
}

// TestReshardCrashApprox stops a reshard of an approx counter after each
// step, as a crash would, and lets other processes finish it while they
// add members: no shard's sketch is lost or folded twice into nothing,
// and no member added meanwhile is lost.
func TestReshardCrashApprox(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		for _, c := range []struct{ from, to int }{{5, 3}, {2, 7}} {
			for _, stop := range []string{"intent", "fence", "init", "fold", "commit"} {
				if (stop == "init" && c.to < c.from) || (stop == "fold" && c.to > c.from) {
					continue // no such step
				}
				t.Run(fmt.Sprintf("%dto%d/%s", c.from, c.to, stop), func(t *testing.T) {
					ctx := context.Background()
					id := t.Name() + runID()
					crashing := MustOpen(t, dsn)
					storetest.MustCreateApprox(t, crashing, id, c.from)
					mustApplyAll(t, crashing, approxAdds(id, "a", 600))
					redis.SetStepHook(crashing, func(step string) error {
						if step == stop {
							return errCrash
						}
						return nil
					})
					if _, err := crashing.ReshardCounter(ctx, id, c.to); !errors.Is(err, errCrash) {
						t.Fatalf("ReshardCounter = %v, want the injected crash", err)
					}
					var wg sync.WaitGroup
					for w := range 3 {
						wg.Go(func() {
							s := MustOpen(t, dsn)
							for k := range 5 {
								out, err := s.Apply(ctx, approxAdds(id, fmt.Sprintf("w%d-%d-", w, k), 20))
								if err != nil || out[0].Err != nil {
									t.Errorf("adding while recovering: %v %+v", err, out)
									return
								}
							}
						})
					}
					wg.Wait()
					s := MustOpen(t, dsn)
					if got := len(storetest.MustSketches(t, s, id)); got != c.to {
						t.Fatalf("%d shard sketches after the reshard to %d was finished", got, c.to)
					}
					storetest.CheckApprox(t, s, id, 600+3*5*20)
				})
			}
		}
	})
}

// TestApproxNoMembers checks that an approx counter, which keeps sketches
// and not its members, refuses member reads.
func TestApproxNoMembers(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		s := MustOpen(t, dsn)
		id := t.Name() + runID()
		storetest.MustCreateApprox(t, s, id, 2)
		mustApplyAll(t, s, approxAdds(id, "m", 3))
		if _, err := s.IsMember(context.Background(), id, "m1"); !errors.Is(err, shardcounter.ErrInvalid) {
			t.Fatalf("IsMember on an approx counter: %v, want ErrInvalid", err)
		}
		if _, err := s.ListMembers(context.Background(), id, "", 10); !errors.Is(err, shardcounter.ErrInvalid) {
			t.Fatalf("ListMembers on an approx counter: %v, want ErrInvalid", err)
		}
	})
}
