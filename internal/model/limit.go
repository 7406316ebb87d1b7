package model

import (
	"cmp"
	"slices"

	"github.com/shardcounter/shardcounter"
)

// keyState is a rate limit key's history, kept as the contract states a
// limit (shardcounter.LimitKind's docs), not as any store keeps it: the
// takes allowed (fixed and sliding windows count them), or the moment
// the bucket is empty again (gcra).
type keyState struct {
	takes    []took          // allowed takes, oldest first
	full     int64           // gcra: unix ns from which the bucket is full again
	decision map[string]bool // request id → allowed, beside counter.requests
}

type took struct {
	at   int64 // unix ns
	cost int64
}

// take decides a take (Increment.Take) in the contract's order: the item,
// its key's state counter (or the one it creates), the counter's shape,
// the request id (whose first decision a retry gets), then the policy.
func (b *batch) take(inc shardcounter.Increment, o *shardcounter.Outcome) {
	if o.Err = shardcounter.ValidateTakeIncrement(inc); o.Err != nil {
		return
	}
	c, fresh := b.counter(inc, o)
	if c == nil {
		return
	}
	p := inc.Take.Policy
	if c.c.Kind != shardcounter.KindSum || c.c.Shards != p.StateShards() || c.c.Bounded() || c.c.Window != nil {
		o.Err = shardcounter.Errorf(shardcounter.EINVALID, "counter %q is not a key's state", inc.Counter)
		return
	}
	if c.limit == nil {
		c.limit = &keyState{decision: map[string]bool{}}
	}
	ks := c.limit
	now := b.now.UnixNano()
	id := inc.RequestID
	if inc.Take.Peek {
		id = ""
	}
	if at, seen := c.requests[id]; id != "" && seen && now-at < int64(b.s.dedupe) {
		r := ks.decide(p, ks.clock(p, now), inc.Take.Cost)
		r.Duplicate, r.Allowed = true, ks.decision[id]
		if r.Allowed {
			r.RetryAfterMS = 0
		}
		o.Duplicate, o.Limit = true, &r
		return
	}
	r := ks.decide(p, ks.clock(p, now), inc.Take.Cost)
	o.Limit = &r
	if inc.Take.Peek || (!r.Allowed && id == "") {
		return
	}
	if r.Allowed {
		ks.record(p, ks.clock(p, now), inc.Take.Cost)
		r = ks.after(p, ks.clock(p, now), r)
	}
	if fresh {
		b.s.counters[inc.Counter] = c
	}
	if id != "" {
		c.requests[id] = now
		ks.decision[id] = r.Allowed
	}
}

// remove decides a removal of an idle key's state (LimitTake.Remove): the
// state is forgotten, with its request ids, when no take of it counts any
// more at the batch's time (gcra: its bucket is full again), so that a
// take sees what it would on a fresh key; kept (Skipped) when another item
// of the batch is on the counter, or it is missing, or not idle.
func (b *batch) remove(inc shardcounter.Increment, o *shardcounter.Outcome) {
	if o.Err = shardcounter.ValidateRemoveIncrement(inc); o.Err != nil {
		return
	}
	c := b.s.counters[inc.Counter]
	if b.isBusy(inc.Counter) || c == nil {
		o.Skipped = true
		return
	}
	p := inc.Take.Policy
	if c.c.Kind != shardcounter.KindSum || c.c.Shards != p.StateShards() || c.c.Bounded() || c.c.Window != nil {
		o.Err = shardcounter.Errorf(shardcounter.EINVALID, "counter %q is not a key's state", inc.Counter)
		return
	}
	if ks, now := c.limit, b.now.UnixNano(); ks != nil {
		if p.Kind == shardcounter.LimitGCRA && ks.full > now || p.Kind != shardcounter.LimitGCRA && ks.window(p, ks.clock(p, now)) > 0 {
			o.Skipped = true
			return
		}
	}
	delete(b.s.counters, inc.Counter)
}

// isBusy reports whether an item of the batch other than a removal is on
// counter id.
func (b *batch) isBusy(id string) bool {
	if b.busy == nil {
		b.busy = map[string]bool{}
		for _, inc := range b.incs {
			if inc.Take == nil || !inc.Take.Remove {
				b.busy[inc.Counter] = true
			}
		}
	}
	return b.busy[id]
}

// clock returns the time a take at now is decided at: now, except that a
// fixed window's key never goes back a window: a take at a time before
// the window of the key's latest take counts at that window's start (the
// time of a store's batch need not follow the order its takes reach a
// key).
func (ks *keyState) clock(p shardcounter.LimitPolicy, now int64) int64 {
	if p.Kind != shardcounter.LimitFixed {
		return now
	}
	for _, t := range ks.takes {
		now = max(now, t.at/int64(p.Period)*int64(p.Period))
	}
	return now
}

// decide answers a take of cost at now from the state before it.
func (ks *keyState) decide(p shardcounter.LimitPolicy, now, cost int64) shardcounter.LimitResult {
	switch p.Kind {
	case shardcounter.LimitGCRA:
		return ks.bucket(p, now, cost)
	default:
		used := ks.window(p, now)
		r := shardcounter.LimitResult{Allowed: used+cost <= p.Limit, Remaining: max(0, p.Limit-used)}
		r.ResetAfterMS = ks.resetAfter(p, now)
		if !r.Allowed {
			r.RetryAfterMS = ks.retryAfter(p, now, cost)
		}
		return r
	}
}

// after is r once the allowed take is recorded: what remains, and when
// the key is empty again.
func (ks *keyState) after(p shardcounter.LimitPolicy, now int64, r shardcounter.LimitResult) shardcounter.LimitResult {
	if p.Kind == shardcounter.LimitGCRA {
		t := int64(p.Period) / p.Limit
		r.Remaining = max(0, (now-(ks.full-p.Burst*t))/t)
		r.ResetAfterMS = ms(ks.full - now)
		return r
	}
	used := ks.window(p, now)
	r.Remaining = max(0, p.Limit-used)
	r.ResetAfterMS = ks.resetAfter(p, now)
	return r
}

func (ks *keyState) record(p shardcounter.LimitPolicy, now, cost int64) {
	if p.Kind == shardcounter.LimitGCRA {
		t := int64(p.Period) / p.Limit
		ks.full = max(ks.full, now) + cost*t
		return
	}
	ks.takes = append(ks.takes, took{now, cost})
}

// window returns the cost the takes still counting at now add up to: a
// fixed window's takes count while now is in their window, a sliding
// window's while their bucket is one of the last period's.
func (ks *keyState) window(p shardcounter.LimitPolicy, now int64) int64 {
	var used int64
	for _, t := range ks.takes {
		if ks.counts(p, t.at, now) {
			used += t.cost
		}
	}
	return used
}

// counts reports whether a take at at still counts at now.
func (ks *keyState) counts(p shardcounter.LimitPolicy, at, now int64) bool {
	if p.Kind == shardcounter.LimitFixed {
		return at/int64(p.Period) == now/int64(p.Period)
	}
	return now/int64(p.Bucket)-at/int64(p.Bucket) < int64(p.Period/p.Bucket)
}

// until returns when a take at at stops counting.
func until(p shardcounter.LimitPolicy, at int64) int64 {
	if p.Kind == shardcounter.LimitFixed {
		return (at/int64(p.Period) + 1) * int64(p.Period)
	}
	return (at/int64(p.Bucket))*int64(p.Bucket) + int64(p.Period)
}

// resetAfter is how long until no take counts any more.
func (ks *keyState) resetAfter(p shardcounter.LimitPolicy, now int64) int64 {
	var last int64
	for _, t := range ks.takes {
		if ks.counts(p, t.at, now) {
			last = max(last, until(p, t.at))
		}
	}
	return ms(last - now)
}

// retryAfter is how long until enough takes stop counting for one of
// cost to fit; -1 when none ever would.
func (ks *keyState) retryAfter(p shardcounter.LimitPolicy, now, cost int64) int64 {
	if cost > p.Limit {
		return -1
	}
	used := ks.window(p, now)
	var ends []took
	for _, t := range ks.takes {
		if ks.counts(p, t.at, now) {
			ends = append(ends, took{until(p, t.at), t.cost})
		}
	}
	slices.SortFunc(ends, func(a, b took) int { return cmp.Compare(a.at, b.at) })
	for _, e := range ends {
		used -= e.cost
		if used+cost <= p.Limit {
			return ms(e.at - now)
		}
	}
	return 0
}

// bucket answers a gcra take: the bucket holds burst tokens when full, a
// token flows in every period/limit, and ks.full is when it is full
// again, so it holds burst − (full − now)/T tokens now.
func (ks *keyState) bucket(p shardcounter.LimitPolicy, now, cost int64) shardcounter.LimitResult {
	t := int64(p.Period) / p.Limit
	owed := max(ks.full-now, 0) // time until full
	r := shardcounter.LimitResult{Allowed: cost <= p.Burst && owed+cost*t <= p.Burst*t}
	r.Remaining = max(0, (p.Burst*t-owed)/t)
	r.ResetAfterMS = ms(owed)
	if !r.Allowed {
		r.RetryAfterMS = -1
		if cost <= p.Burst {
			r.RetryAfterMS = ms(owed + cost*t - p.Burst*t)
		}
	}
	return r
}

// ms is ns in milliseconds, rounded up; nothing below 0.
func ms(ns int64) int64 {
	if ns <= 0 {
		return 0
	}
	return (ns + 999_999) / 1_000_000
}
