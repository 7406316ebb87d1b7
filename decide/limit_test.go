package decide_test

import (
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
)

func mustPolicy(t *testing.T, s string) shardcounter.LimitPolicy {
	t.Helper()
	p, err := shardcounter.ParseLimitPolicy(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// step is a take at a moment (seconds after a window's start) and what it
// answers.
type step struct {
	at   time.Duration
	cost int64
	want shardcounter.LimitResult
}

func runSteps(t *testing.T, policy string, steps []step) {
	t.Helper()
	p := mustPolicy(t, policy)
	base := time.Unix(1_800_000_000, 0) // a multiple of every period below
	state := make([]int64, p.StateShards())
	for i, s := range steps {
		got, next := decide.Limit(p, state, base.Add(s.at), s.cost, false)
		if got != s.want {
			t.Errorf("%s: take %d (cost %d at +%v) = %+v; want %+v", policy, i, s.cost, s.at, got, s.want)
		}
		if peek, same := decide.Limit(p, state, base.Add(s.at), s.cost, true); peek.Allowed != got.Allowed || &same[0] != &state[0] {
			t.Errorf("%s: peek %d = %+v, or changed the state", policy, i, peek)
		}
		state = next
	}
}

func TestLimitFixed(t *testing.T) {
	runSteps(t, "fixed 3/10s", []step{
		{0, 1, shardcounter.LimitResult{Allowed: true, Remaining: 2, ResetAfterMS: 10000}},
		{4 * time.Second, 2, shardcounter.LimitResult{Allowed: true, Remaining: 0, ResetAfterMS: 6000}},
		{5 * time.Second, 1, shardcounter.LimitResult{Allowed: false, Remaining: 0, ResetAfterMS: 5000, RetryAfterMS: 5000}},
		{5 * time.Second, 4, shardcounter.LimitResult{Allowed: false, Remaining: 0, ResetAfterMS: 5000, RetryAfterMS: -1}},
		{10 * time.Second, 3, shardcounter.LimitResult{Allowed: true, Remaining: 0, ResetAfterMS: 10000}}, // a new window
	})
}

// TestLimitFixedBehind takes at times before the window of the key's
// state, as PostgreSQL decides a take that waited for the key's lock past
// a window's end (its time is its transaction's start): they count in the
// state's window, so going back and forth between two windows never
// starts the count again.
func TestLimitFixedBehind(t *testing.T) {
	runSteps(t, "fixed 3/10s", []step{
		{9 * time.Second, 1, shardcounter.LimitResult{Allowed: true, Remaining: 2, ResetAfterMS: 1000}},
		{10 * time.Second, 2, shardcounter.LimitResult{Allowed: true, Remaining: 1, ResetAfterMS: 10000}},        // the next window
		{9900 * time.Millisecond, 1, shardcounter.LimitResult{Allowed: true, Remaining: 0, ResetAfterMS: 10000}}, // behind: counts in the next
		{9900 * time.Millisecond, 1, shardcounter.LimitResult{Allowed: false, Remaining: 0, ResetAfterMS: 10000, RetryAfterMS: 10000}},
		{10500 * time.Millisecond, 1, shardcounter.LimitResult{Allowed: false, Remaining: 0, ResetAfterMS: 9500, RetryAfterMS: 9500}},
	})
}

func TestLimitSliding(t *testing.T) {
	runSteps(t, "sliding 3/10s bucket 5s", []step{
		{0, 2, shardcounter.LimitResult{Allowed: true, Remaining: 1, ResetAfterMS: 10000}},
		{6 * time.Second, 1, shardcounter.LimitResult{Allowed: true, Remaining: 0, ResetAfterMS: 9000}},
		{7 * time.Second, 2, shardcounter.LimitResult{Allowed: false, Remaining: 0, ResetAfterMS: 8000, RetryAfterMS: 3000}},
		// At 10s the first bucket has left: 2 more fit.
		{10 * time.Second, 2, shardcounter.LimitResult{Allowed: true, Remaining: 0, ResetAfterMS: 10000}},
		{11 * time.Second, 1, shardcounter.LimitResult{Allowed: false, Remaining: 0, ResetAfterMS: 9000, RetryAfterMS: 4000}},
	})
}

func TestLimitGCRA(t *testing.T) {
	// One token a second, up to 3 at once: redis-cell's CL.THROTTLE k 2 1 1.
	runSteps(t, "gcra 1/1s burst 3", []step{
		{0, 1, shardcounter.LimitResult{Allowed: true, Remaining: 2, ResetAfterMS: 1000}},
		{0, 2, shardcounter.LimitResult{Allowed: true, Remaining: 0, ResetAfterMS: 3000}},
		{0, 1, shardcounter.LimitResult{Allowed: false, Remaining: 0, ResetAfterMS: 3000, RetryAfterMS: 1000}},
		{0, 4, shardcounter.LimitResult{Allowed: false, Remaining: 0, ResetAfterMS: 3000, RetryAfterMS: -1}},
		{1500 * time.Millisecond, 1, shardcounter.LimitResult{Allowed: true, Remaining: 0, ResetAfterMS: 2500}},
		{10 * time.Second, 1, shardcounter.LimitResult{Allowed: true, Remaining: 2, ResetAfterMS: 1000}},
	})
}
