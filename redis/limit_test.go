package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/model"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestTakesAtExtremes holds the take script to the model where the
// differential test's policies do not reach: a token bucket whose times
// pass 2^53 nanoseconds (a year's period, a burst that takes a century to
// refill, a period the limit does not divide), the largest quota, the
// most buckets, costs far above any quota, and clock steps of odd
// nanoseconds, which the script's milliseconds must round as the core's
// nanoseconds do; and removals of idle states among them, which the
// script decides by the same times.
func TestTakesAtExtremes(t *testing.T) {
	policies := []string{"gcra 1/366d burst 99", "gcra 3/1s burst 5", "gcra 7/10s burst 1", "gcra 1000000/1s burst 100000000", "gcra 1099511627776/366d", "fixed 1099511627776/366d", "fixed 2/1s", "sliding 512/512s", "sliding 10/366d", "sliding 5/7s"}
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, 36))
		clk := storetest.NewClock(time.Unix(1_800_000_000, 0).Add(time.Duration(rng.Int64N(int64(time.Hour)))))
		s, err := redis.Open(ctx, dsn, redis.Options{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		m := model.New(model.Options{Now: clk.Now, DedupeWindow: 30 * 24 * time.Hour})
		s.SetDedupeWindow(30 * 24 * time.Hour)
		run := runID()
		var moved time.Duration
		removed := 0
		for round := range 60 {
			var incs []shardcounter.Increment
			for range 1 + rng.IntN(12) {
				p, _ := shardcounter.ParseLimitPolicy(policies[rng.IntN(len(policies))])
				cost := int64(1)
				switch rng.IntN(6) {
				case 0:
					cost = 1 + rng.Int64N(p.Quota())
				case 1:
					cost = p.Quota() + 1
				case 2:
					cost = 1 << 62
				}
				inc := shardcounter.Increment{
					Counter: shardcounter.LimitKeyID("x"+run, p, "k"),
					Take:    &shardcounter.LimitTake{Policy: p, Cost: cost, Peek: rng.IntN(8) == 0},
					Create:  &shardcounter.Spec{Shards: p.StateShards(), Kind: shardcounter.KindSum},
				}
				if rng.IntN(3) == 0 {
					inc.RequestID = fmt.Sprintf("r%d", rng.IntN(20))
				}
				if rng.IntN(5) == 0 {
					inc = shardcounter.Increment{Counter: inc.Counter, Take: &shardcounter.LimitTake{Policy: p, Remove: true}}
				}
				incs = append(incs, inc)
			}
			mo, merr := m.Apply(ctx, incs)
			so, serr := s.Apply(ctx, incs)
			if merr != nil || serr != nil {
				t.Fatalf("round %d: Apply: model %v, redis %v", round, merr, serr)
			}
			for i := range incs {
				a, b := mo[i], so[i]
				if shardcounter.ErrorCode(a.Err) != shardcounter.ErrorCode(b.Err) || a.Duplicate != b.Duplicate || a.Skipped != b.Skipped || (a.Limit == nil) != (b.Limit == nil) || a.Limit != nil && *a.Limit != *b.Limit {
					t.Fatalf("round %d, item %d (%s, cost %d, peek %v, remove %v, id %q) at %v: model %+v %v skipped %v, redis %+v %v skipped %v", round, i, incs[i].Take.Policy, incs[i].Take.Cost, incs[i].Take.Peek, incs[i].Take.Remove, incs[i].RequestID,
						clk.Now().UnixNano(), a.Limit, a.Err, a.Skipped, b.Limit, b.Err, b.Skipped)
				}
				if incs[i].Take.Remove && b.Err == nil && !b.Skipped {
					removed++
				}
			}
			var d time.Duration
			switch rng.IntN(4) {
			case 0:
				d = time.Duration(rng.Int64N(int64(time.Second)))
			case 1:
				d = time.Duration(rng.Int64N(int64(time.Minute)))
			case 2:
				d = time.Duration(rng.Int64N(int64(time.Millisecond)))
			default:
				if moved < 20*24*time.Hour {
					d = time.Duration(rng.Int64N(int64(24 * time.Hour)))
				}
			}
			moved += d
			clk.Advance(d)
		}
		t.Logf("%d states removed", removed)
	})
}

// TestFixedBehind takes from a fixed window's key on a clock that goes
// back across a window's edge (Options.Now; a server's clock stepped
// back): the script answers as the model, where a take behind the key's
// window counts in it, so the count never starts again.
func TestFixedBehind(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		base := time.Unix(1_800_000_000, 0)
		clk := storetest.NewClock(base)
		s, err := redis.Open(ctx, dsn, redis.Options{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		m := model.New(model.Options{Now: clk.Now})
		p, _ := shardcounter.ParseLimitPolicy("fixed 3/10s")
		id := shardcounter.LimitKeyID("behind"+runID(), p, "k")
		allowed := 0
		for i, at := range []time.Duration{9 * time.Second, 10 * time.Second, 9900 * time.Millisecond, 10 * time.Second, 9900 * time.Millisecond, 10500 * time.Millisecond, 9950 * time.Millisecond} {
			clk.Set(base.Add(at))
			incs := []shardcounter.Increment{{Counter: id, Take: &shardcounter.LimitTake{Policy: p, Cost: 1},
				Create: &shardcounter.Spec{Shards: p.StateShards(), Kind: shardcounter.KindSum}}}
			mo, merr := m.Apply(ctx, incs)
			so, serr := s.Apply(ctx, incs)
			if merr != nil || serr != nil || mo[0].Err != nil || so[0].Err != nil {
				t.Fatalf("take %d: model %v %v, redis %v %v", i, merr, mo[0].Err, serr, so[0].Err)
			}
			if *mo[0].Limit != *so[0].Limit {
				t.Errorf("take %d at +%v: model %+v, redis %+v", i, at, *mo[0].Limit, *so[0].Limit)
			}
			if so[0].Limit.Allowed {
				allowed++
			}
		}
		if allowed != 4 { // 1 in the first window, 3 in the second
			t.Errorf("%d takes allowed, want 4", allowed)
		}
	})
}

// TestLimitsOnServerClock runs limits through the engine on Redis's own
// clock (no Options.Now), as servers sharing a Redis run them: a token
// bucket whose refill is days long, so that the test's own time changes
// no decision. Takes up to the burst are allowed, the next refused with
// its retry after; retried request ids answer their first decisions,
// charged once; a peek changes nothing; concurrent takes from many
// clients are admitted exactly up to the burst.
func TestLimitsOnServerClock(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		e := MustEngine(t, MustOpen(t, dsn))
		name := "l" + runID()
		p, _ := shardcounter.ParseLimitPolicy("gcra 4/366d")
		if _, _, err := e.CreateLimit(ctx, name, p); err != nil {
			t.Fatal(err)
		}
		take := func(key string, cost int64, rid string) shardcounter.LimitResult {
			t.Helper()
			r, err := e.Take(ctx, name, key, cost, rid)
			if err != nil {
				t.Fatalf("Take(%s, %d, %q): %v", key, cost, rid, err)
			}
			return *r
		}
		const day = int64(24 * time.Hour / time.Millisecond)
		if r := take("u", 3, "a"); !r.Allowed || r.Remaining != 1 || r.Duplicate {
			t.Errorf("first take = %+v", r)
		}
		if r := take("u", 3, "a"); !r.Allowed || !r.Duplicate || r.Remaining != 1 {
			t.Errorf("retried take = %+v; want its first decision, charged once", r)
		}
		if r, err := e.Peek(ctx, name, "u", 1); err != nil || !r.Allowed || r.Remaining != 1 {
			t.Errorf("Peek = %+v, %v", r, err)
		}
		r := take("u", 3, "b")
		if r.Allowed || r.Remaining != 1 || r.RetryAfterMS <= 182*day || r.RetryAfterMS > 183*day {
			t.Errorf("take past the burst = %+v; want refused, retry after about 183 days (2 of 4 tokens, 91.5 days each)", r)
		}
		if r := take("u", 1, "b"); r.Allowed || !r.Duplicate {
			t.Errorf("retry of a refused take = %+v; want its first decision, refused", r)
		}
		if r := take("u", 5, ""); r.Allowed || r.RetryAfterMS != -1 {
			t.Errorf("take above the burst = %+v; want refused for ever", r)
		}
		if r := take("u", 1, "c"); !r.Allowed || r.Remaining != 0 {
			t.Errorf("last take = %+v", r)
		}
		if err := e.ResetLimitKey(ctx, name, "u"); err != nil {
			t.Fatal(err)
		}
		if r := take("u", 4, ""); !r.Allowed || r.Remaining != 0 {
			t.Errorf("take after reset = %+v", r)
		}

		var mu sync.Mutex
		allowed := 0
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 3 {
					r, err := e.Take(ctx, name, "hot", 1, "")
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					allowed += map[bool]int{true: 1}[r.Allowed]
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if allowed != 4 {
			t.Errorf("%d of 24 concurrent takes allowed; want the burst, 4", allowed)
		}
	})
}

// MustEngine returns an engine over s, closed at the end of the test.
func MustEngine(tb testing.TB, s shardcounter.CounterStore) *engine.Engine {
	tb.Helper()
	e, err := engine.New(s, engine.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close(context.Background()) })
	return e
}
