package decide

import (
	"time"

	"github.com/shardcounter/shardcounter"
)

// A key's state is its state counter's shard values
// (shardcounter.LimitPolicy.StateShards), times in nanoseconds of the
// batch's commit time (Batch.Now: the store's clock, one for every server
// sharing the store), all of them 0 for a key never taken:
//
//   - fixed: [window, taken]: the window (Unix time over the period) the
//     cost taken counts in; a take in a later window starts at 0, and one
//     at a time in an earlier window counts in the state's, at its start.
//   - sliding: [slot 0 … slot k−1, taken 0 … taken k−1], k = period over
//     bucket: bucket j (Unix time over the bucket) lives in slot j mod k
//     with the cost taken in it; a bucket counts while j > now's − k, and
//     a take replaces a slot's older bucket, or adds to its own.
//   - gcra: [tat]: the theoretical arrival time. A take of cost c moves it
//     to max(tat, now) + c·T (T = period over limit), and is allowed when
//     that is at most now + burst·T.

// Limit decides a take of cost from a key of policy p whose state is
// state, at now: the decision, and the state after it (state itself when
// the take is refused or peek is set). p has its defaults and cost is at
// least 1.
func Limit(p shardcounter.LimitPolicy, state []int64, now time.Time, cost int64, peek bool) (shardcounter.LimitResult, []int64) {
	t := now.UnixNano()
	switch p.Kind {
	case shardcounter.LimitSliding:
		return sliding(p, state, t, cost, peek)
	case shardcounter.LimitGCRA:
		return gcra(p, state, t, cost, peek)
	default:
		return fixed(p, state, t, cost, peek)
	}
}

func fixed(p shardcounter.LimitPolicy, state []int64, t, cost int64, peek bool) (shardcounter.LimitResult, []int64) {
	period := int64(p.Period)
	w := floorDiv(t, period)
	if state[0] > w {
		// The key's last take counts in a later window than t's: a store
		// whose commit time is not in the order its takes lock the key
		// (PostgreSQL's now() is the transaction's start, and a take may
		// wait for the key's lock past the window's end) decided it at
		// a time past t. The take counts in that window, at its start:
		// going back a window would start the count again in each.
		w, t = state[0], state[0]*period
	}
	taken := int64(0)
	if state[0] == w {
		taken = state[1]
	}
	r := shardcounter.LimitResult{Allowed: cost <= p.Limit-taken}
	next := state
	if r.Allowed && !peek {
		taken += cost
		next = []int64{w, taken}
	}
	r.Remaining = max(p.Limit-taken, 0)
	end := (w+1)*period - t
	if taken > 0 {
		r.ResetAfterMS = ceilMS(end)
	}
	if !r.Allowed {
		r.RetryAfterMS = retry(cost, p.Limit, end)
	}
	return r, next
}

func sliding(p shardcounter.LimitPolicy, state []int64, t, cost int64, peek bool) (shardcounter.LimitResult, []int64) {
	b := int64(p.Bucket)
	k := int64(len(state) / 2)
	j := floorDiv(t, b)
	live := func(s int64) bool { return state[s] > j-k && state[k+s] != 0 }
	var count int64
	for s := range k {
		if live(s) {
			count += state[k+s]
		}
	}
	r := shardcounter.LimitResult{Allowed: cost <= p.Limit-count}
	next := state
	if r.Allowed && !peek {
		next = append([]int64(nil), state...)
		s := floorMod(j, k)
		if next[s] < j {
			next[s], next[k+s] = j, 0
		}
		next[k+s] += cost
		count += cost
	}
	r.Remaining = max(p.Limit-count, 0)
	newest := int64(-1) << 62
	for s := range k {
		if next[s] > j-k && next[k+s] != 0 {
			newest = max(newest, next[s])
		}
	}
	if count > 0 {
		r.ResetAfterMS = ceilMS((newest+k)*b - t)
	}
	if !r.Allowed {
		// The take fits once enough of the oldest buckets have left.
		r.RetryAfterMS = -1
		if cost <= p.Limit {
			for left := count; ; {
				oldest := int64(1) << 62
				for s := range k {
					if live(s) && state[s] < oldest && state[s] > j-k {
						oldest = state[s]
					}
				}
				for s := range k {
					if live(s) && state[s] == oldest {
						left -= state[k+s]
						state = withSlotGone(state, s)
					}
				}
				if left+cost <= p.Limit {
					r.RetryAfterMS = ceilMS((oldest+k)*b - t)
					break
				}
			}
		}
	}
	return r, next
}

// withSlotGone returns a copy of state whose slot s holds nothing.
func withSlotGone(state []int64, s int64) []int64 {
	c := append([]int64(nil), state...)
	c[int64(len(c)/2)+s] = 0
	return c
}

func gcra(p shardcounter.LimitPolicy, state []int64, t, cost int64, peek bool) (shardcounter.LimitResult, []int64) {
	T := int64(p.Period) / p.Limit
	full := p.Burst * T // a full bucket's worth of time
	tat := max(state[0], t)
	r := shardcounter.LimitResult{Allowed: cost <= p.Burst && tat+cost*T-full <= t}
	next := state
	if r.Allowed && !peek {
		tat += cost * T
		next = []int64{tat}
	}
	r.Remaining = max((t+full-tat)/T, 0)
	r.ResetAfterMS = ceilMS(tat - t)
	if !r.Allowed {
		r.RetryAfterMS = -1
		if cost <= p.Burst {
			r.RetryAfterMS = ceilMS(tat + cost*T - full - t)
		}
	}
	return r, next
}

// retry is a refused window take's retry after: at the window's end,
// unless its cost is above the limit, and then never (-1).
func retry(cost, limit, end int64) int64 {
	if cost > limit {
		return -1
	}
	return ceilMS(end)
}

// ceilMS is ns in milliseconds, rounded up: a client that waits that long
// is not early.
func ceilMS(ns int64) int64 {
	if ns <= 0 {
		return 0
	}
	return (ns + int64(time.Millisecond) - 1) / int64(time.Millisecond)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// take decides item i, a take (Increment.Take) of its counter, the key's
// state: invalid, not found, a Duplicate (its request id recorded, as
// allowed or, under shardcounter.RefusedRequestID, as refused: the
// decision then is the one recorded), or decided, allowed or not. An
// allowed take changes the state and records its request id; a refused
// one records its id as refused and changes nothing else; a peek changes
// nothing. The state counter is created by the first take that records
// something.
func (d *decider) take(i int) error {
	inc := &d.b.Incs[i]
	o := &d.out[i]
	if o.Err = shardcounter.ValidateTakeIncrement(*inc); o.Err != nil {
		return nil
	}
	st, spec, err := d.counterOf(inc, o)
	if st == nil || spec == nil {
		return err
	}
	p := inc.Take.Policy
	n := p.StateShards()
	if !isState(spec, p) {
		o.Err = ErrNotLimitState(inc.Counter, p)
		return nil
	}
	var rq, refused RequestWrite
	dup, allowed := false, false
	if id := inc.RequestID; id != "" && !inc.Take.Peek {
		if allowed, err = d.seen(st, id, &rq); err != nil {
			return err
		}
		if dup = allowed; !dup {
			if dup, err = d.seen(st, shardcounter.RefusedRequestID(id), &refused); err != nil {
				return err
			}
		}
	}
	state, ok, err := d.readState(st, inc, o, n)
	if !ok {
		return err
	}
	peek := inc.Take.Peek || dup
	r, next := Limit(p, state, d.b.Now, inc.Take.Cost, peek)
	o.Limit = &r
	switch {
	case dup:
		o.Duplicate, r.Duplicate, r.Allowed = true, true, allowed
		if allowed {
			r.RetryAfterMS = 0
		}
	case peek:
	case r.Allowed:
		d.apply(st, inc, &rq, i)
		for k := range n {
			if delta := next[k] - state[k]; delta != 0 {
				d.writeShard(st, k, delta, next[k], true)
				st.total += delta
			}
		}
	case inc.RequestID != "":
		d.apply(st, inc, &refused, i)
	}
	return nil
}

// readState returns the key's state, the n shards of its counter st as
// the items so far leave them. ok false ends the item: with the view's
// error, or having set the item's, or because the counter is to be read
// whole.
func (d *decider) readState(st *state, inc *shardcounter.Increment, o *shardcounter.Outcome, n int) ([]int64, bool, error) {
	state := make([]int64, n)
	for k := range n {
		v, known, err := d.shard(st, k)
		if err != nil {
			return nil, false, err
		}
		if !known && n == 1 && st.sum == SumExact {
			v, known = st.total, true // one shard: its value is the total
		}
		if !known {
			if st.sum == SumExact {
				o.Err = ErrStateUnknown(inc.Counter)
				return nil, false, nil
			}
			d.needWhole(st)
			return nil, false, nil
		}
		state[k] = v
	}
	return state, true, nil
}

// isState reports whether a counter of spec can be the state of a key of
// policy p: a sum counter of p's state shards, unbounded, unwindowed.
func isState(spec *shardcounter.Spec, p shardcounter.LimitPolicy) bool {
	return (spec.Kind == "" || spec.Kind == shardcounter.KindSum) && spec.Shards == p.StateShards() && !spec.Bounded() && spec.Window == nil
}

// Idle reports whether a key of policy p whose state is state is idle at
// now: a take would see it as a fresh key (all of its state 0), so that
// removing it changes no decision. A fixed window's is when its window
// is past; a sliding window's when none of its buckets counts at now (a
// bucket after now's counts); gcra's when its theoretical arrival time is
// at most now. Like Limit, it reads state as the store's commit at now
// does.
func Idle(p shardcounter.LimitPolicy, state []int64, now time.Time) bool {
	t := now.UnixNano()
	switch p.Kind {
	case shardcounter.LimitSliding:
		k := int64(len(state) / 2)
		j := floorDiv(t, int64(p.Bucket))
		for s := range k {
			if state[s] > j-k && state[k+s] != 0 {
				return false
			}
		}
		return true
	case shardcounter.LimitGCRA:
		return state[0] <= t
	default:
		return state[0] < floorDiv(t, int64(p.Period))
	}
}

// remove decides item i, the removal of its key's state if idle
// (LimitTake.Remove): invalid; kept (Skipped) when another item of the
// batch is on the same counter (the batch is busy with the key: the
// removal never meets a write of its own batch), when the state is
// missing, or when it is not idle at the batch's time (Idle); a state
// counter of another shape fails it as a take (ErrNotLimitState);
// otherwise the counter is removed (Mutations.Removes), all of it: its
// shards and request ids. A later removal of it in the batch finds it
// missing.
func (d *decider) remove(i int) error {
	inc := &d.b.Incs[i]
	o := &d.out[i]
	if o.Err = shardcounter.ValidateRemoveIncrement(*inc); o.Err != nil {
		return nil
	}
	if d.busy(inc.Counter) {
		o.Skipped = true
		return nil
	}
	st, err := d.state(inc.Counter)
	if err != nil || st.whole {
		return err
	}
	switch p := inc.Take.Policy; {
	case st.err != nil:
		o.Err = st.err
	case !st.exists:
		o.Skipped = true
	case !isState(&st.spec, p):
		o.Err = ErrNotLimitState(inc.Counter, p)
	default:
		state, ok, err := d.readState(st, inc, o, p.StateShards())
		if !ok {
			return err
		}
		if !Idle(p, state, d.b.Now) {
			o.Skipped = true
			return nil
		}
		st.exists, st.inView = false, false
		d.removes = append(d.removes, st.id)
	}
	return nil
}

// busy reports whether an item of the batch other than a removal is on
// counter id.
func (d *decider) busy(id string) bool {
	if d.touched == nil {
		d.touched = make(map[string]bool, len(d.b.Incs))
		for j := range d.b.Incs {
			if inc := &d.b.Incs[j]; inc.Take == nil || !inc.Take.Remove {
				d.touched[inc.Counter] = true
			}
		}
	}
	return d.touched[id]
}
