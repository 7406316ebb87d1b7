package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// TestThrottle runs CL.THROTTLE's takes (a gcra policy given with each
// take, no definition) through the engine on the model and on
// PostgreSQL, on a clock the test moves: a burst, a refusal with the
// wait for one token, a refill, a peek that takes nothing, a cost above
// the burst refused for ever, and another policy for the same key taking
// from a state of its own.
func TestThrottle(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	eachStore(t, clk.Now, func(t *testing.T, store shardcounter.CounterStore) {
		clk.set(time.Unix(1_800_000_000, 0))
		e := MustNew(t, store, engine.Config{Now: clk.Now})
		// CL.THROTTLE k 2 1 1: a token a second, 3 at once.
		p := shardcounter.LimitPolicy{Kind: shardcounter.LimitGCRA, Limit: 1, Period: shardcounter.Duration(time.Second), Burst: 3}
		take := func(p shardcounter.LimitPolicy, cost int64, peek bool) shardcounter.LimitResult {
			t.Helper()
			r, err := e.Throttle(ctx, "k", p, cost, peek)
			if err != nil {
				t.Fatalf("Throttle(%s, %d, %v): %v", p, cost, peek, err)
			}
			return *r
		}
		want := func(what string, got shardcounter.LimitResult, allowed bool, remaining, retry, reset int64) {
			t.Helper()
			if got.Allowed != allowed || got.Remaining != remaining || got.RetryAfterMS != retry || got.ResetAfterMS != reset {
				t.Errorf("%s = %+v; want allowed %v, remaining %d, retry after %d ms, reset after %d ms", what, got, allowed, remaining, retry, reset)
			}
		}
		for i := int64(1); i <= 3; i++ {
			want("take", take(p, 1, false), true, 3-i, 0, i*1000)
		}
		want("take past the burst", take(p, 1, false), false, 0, 1000, 3000)
		clk.advance(1500 * time.Millisecond)
		want("peek after 1.5s", take(p, 1, true), true, 1, 0, 1500)
		want("take after 1.5s", take(p, 1, false), true, 0, 0, 2500)
		want("take again", take(p, 1, false), false, 0, 500, 2500)
		want("cost above the burst", take(p, 4, false), false, 0, -1, 2500)

		// Another policy for the same key: a state of its own.
		q := p
		q.Burst = 5
		if engine.ThrottleKeyID(p, "k") == engine.ThrottleKeyID(q, "k") {
			t.Fatalf("two policies share the state counter %q", engine.ThrottleKeyID(p, "k"))
		}
		want("another policy", take(q, 2, false), true, 3, 0, 2000)
		want("the first policy, unchanged", take(p, 1, true), false, 0, 500, 2500)

		if _, err := e.Throttle(ctx, "k", p, 0, false); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Errorf("cost 0: %v, want invalid_argument", err)
		}
		if _, err := e.Throttle(ctx, "k", shardcounter.LimitPolicy{Kind: shardcounter.LimitGCRA, Limit: 1}, 1, false); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Errorf("no period: %v, want invalid_argument", err)
		}
		if ls, err := e.ListLimits(ctx); err != nil || len(ls) != 0 {
			t.Errorf("ListLimits = %v, %v; want none: a throttle has no definition", ls, err)
		}
	})
}
