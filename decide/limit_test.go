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

// TestIdle checks each kind's idle state at the edge: a fixed window's
// key is idle from its window's end, a sliding window's once its newest
// bucket leaves the window, gcra's once its arrival time is reached.
func TestIdle(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		policy string
		at     time.Duration // the take, after base
		busy   time.Duration // the last moment not idle, after base
	}{
		{"fixed 3/10s", 4 * time.Second, 10*time.Second - 1},
		{"sliding 3/10s bucket 2s", 5 * time.Second, 14*time.Second - 1},
		{"gcra 2/10s burst 2", 0, 5*time.Second - 1},
	} {
		p := mustPolicy(t, c.policy).WithDefaults()
		state := make([]int64, p.StateShards())
		if !decide.Idle(p, state, base) {
			t.Errorf("%s: a fresh key is not idle", c.policy)
		}
		_, state = decide.Limit(p, state, base.Add(c.at), 1, false)
		if decide.Idle(p, state, base.Add(c.busy)) || !decide.Idle(p, state, base.Add(c.busy+1)) {
			t.Errorf("%s: idle at +%v %v, at +%v %v; want false, true", c.policy, c.busy, decide.Idle(p, state, base.Add(c.busy)),
				c.busy+1, decide.Idle(p, state, base.Add(c.busy+1)))
		}
	}
}

// TestRemove decides removals beside takes: an idle state is removed
// (Mutations.Removes), a state not idle is kept, a removal of a key
// another item of the batch is on is kept whatever its state, a missing
// state is kept, and a second removal of one removed finds it missing.
func TestRemove(t *testing.T) {
	p := mustPolicy(t, "fixed 3/10s").WithDefaults()
	now := time.Unix(1_800_000_000, 0)
	v := newView()
	spec := shardcounter.Spec{Shards: 2, Kind: shardcounter.KindSum}
	idle, busy, taken := "\x1elidle", "\x1elbusy", "\x1eltaken"
	w := now.Unix() / 10
	for _, id := range []string{idle, busy, taken} {
		v.counters[id] = decide.Counter{Exists: true, Spec: spec}
	}
	v.setShards(idle, w-1, 3) // its window is past
	v.setShards(busy, w, 1)   // a take of this window counts
	v.setShards(taken, w-1, 3)
	remove := func(id string) shardcounter.Increment {
		return shardcounter.Increment{Counter: id, Take: &shardcounter.LimitTake{Policy: p, Remove: true}}
	}
	incs := []shardcounter.Increment{
		remove(idle), remove(busy), remove(taken), remove("\x1elmissing"), remove(idle),
		{Counter: taken, Take: &shardcounter.LimitTake{Policy: p, Cost: 1}, Create: &spec},
	}
	out := make([]shardcounter.Outcome, len(incs))
	m, err := decide.Decide(v, decide.Batch{Incs: incs, Now: now}, out)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true, true, true, true} {
		if out[i].Err != nil || out[i].Skipped != want {
			t.Errorf("removal %d: %+v; want kept %v", i, out[i], want)
		}
	}
	if len(m.Removes) != 1 || m.Removes[0] != idle {
		t.Errorf("Removes = %q; want only %q", m.Removes, idle)
	}
	if out[5].Err != nil || out[5].Limit == nil || !out[5].Limit.Allowed || out[5].Limit.Remaining != 2 {
		t.Errorf("the take beside a removal of its key: %+v", out[5])
	}
}
