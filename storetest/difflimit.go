package storetest

import (
	"fmt"

	"github.com/shardcounter/shardcounter"
)

// The differential test's takes of rate limits (Increment.Take): keys of
// a fixed window, two sliding windows and two token buckets, taken with
// costs below, at and above their quota, peeked, retried by request id
// (a retry gets the first decision), reset (their state counter deleted)
// between batches, and now and then sent with a wrong or no Create. The
// model keeps each key's takes as the contract states a limit; a store
// keeps its state counter as package decide does; their decisions are
// compared, and the state counters' existence.

// diffPolicies are the policies of the run's keys.
var diffPolicies = []string{"fixed 5/1m", "fixed 12/10m", "sliding 8/15m", "sliding 4/5m bucket 100s", "gcra 3/10m burst 4", "gcra 10/1h"}

// setupLimits makes the run's keys, unless the store refuses takes
// (shardcounter.ErrLimitsUnsupported): the run then sends none. A store
// that takes and refuses removals of idle states fails.
func (d *diff) setupLimits() {
	d.limits = map[string]shardcounter.LimitPolicy{}
	for _, s := range diffPolicies {
		p, err := shardcounter.ParseLimitPolicy(s)
		if err != nil {
			d.t.Fatal(err)
		}
		for k := range 2 {
			id := shardcounter.LimitKeyID(d.p, p, fmt.Sprintf("key%d", k))
			d.limits[id] = p
			d.keys = append(d.keys, id)
		}
	}
	probe := d.keys[0]
	out, err := d.store.Apply(ctx, []shardcounter.Increment{{Counter: probe, Take: &shardcounter.LimitTake{Policy: d.limits[probe], Cost: 1, Peek: true}}})
	if err != nil {
		d.t.Fatalf("a peek: %v", err)
	}
	if shardcounter.IsLimitsUnsupported(out[0].Err) {
		d.t.Logf("the store refuses takes of rate limits (%v): the run sends none", out[0].Err)
		d.keys, d.noLimits = nil, true
		return
	}
	out, err = d.store.Apply(ctx, []shardcounter.Increment{{Counter: probe, Take: &shardcounter.LimitTake{Policy: d.limits[probe], Remove: true}}})
	if err != nil {
		d.t.Fatalf("a removal: %v", err)
	}
	if shardcounter.IsRemoveUnsupported(out[0].Err) {
		d.t.Fatalf("the store refuses removals of idle limit states (%v): a store that takes removes them", out[0].Err)
	}
}

// removal returns a removal of a random key's state if idle
// (LimitTake.Remove), now and then under another policy's shape or
// invalid; half of them of the batch's hot key, which the batch's takes
// keep busy.
func (d *diff) removal() shardcounter.Increment {
	id := d.keys[d.rng.IntN(len(d.keys))]
	if d.rng.IntN(2) == 0 {
		id = d.keys[d.batches%len(d.keys)]
	}
	t := &shardcounter.LimitTake{Policy: d.limits[id], Remove: true}
	inc := shardcounter.Increment{Counter: id, Take: t}
	switch d.rng.IntN(20) {
	case 0:
		// A state of another shape fails it. (Under another policy of the
		// same shape a store reads the state as that policy's, as a take
		// would, and the model does not: neither is sent one.)
		if o := d.limits[d.keys[d.rng.IntN(len(d.keys))]]; o.StateShards() != t.Policy.StateShards() {
			t.Policy = o
		}
	case 1:
		t.Cost = 1
	case 2:
		inc.RequestID = "r"
	}
	return inc
}

// take returns a random take of a random key; half of them of the
// batch's hot key, so that a batch takes a key past its quota.
func (d *diff) take() shardcounter.Increment {
	id := d.keys[d.rng.IntN(len(d.keys))]
	if d.rng.IntN(2) == 0 {
		id = d.keys[d.batches%len(d.keys)]
	}
	p := d.limits[id]
	t := &shardcounter.LimitTake{Policy: p, Cost: 1}
	switch x := d.rng.IntN(20); {
	case x < 3:
		t.Cost = 2 + d.rng.Int64N(2)
	case x < 4:
		t.Cost = p.Quota() + d.rng.Int64N(2)
	}
	t.Peek = d.rng.IntN(10) == 0
	inc := shardcounter.Increment{Counter: id, Take: t, Create: &shardcounter.Spec{Shards: p.StateShards(), Kind: shardcounter.KindSum}}
	switch d.rng.IntN(40) {
	case 0:
		inc.Create = nil
	case 1:
		inc.Create = &shardcounter.Spec{Shards: p.StateShards() + 1}
	}
	if d.rng.IntN(3) == 0 {
		inc = d.withID(inc)
	}
	return inc
}

// invalidTake returns a take no store takes.
func (d *diff) invalidTake() shardcounter.Increment {
	id := d.keys[d.rng.IntN(len(d.keys))]
	p := d.limits[id]
	create := &shardcounter.Spec{Shards: p.StateShards()}
	bare := p
	bare.Burst, bare.Bucket = 0, 0
	return []shardcounter.Increment{
		{Counter: id, Take: &shardcounter.LimitTake{Policy: p, Cost: 0}, Create: create},
		{Counter: id, Take: &shardcounter.LimitTake{Policy: p, Cost: -1}, Create: create},
		{Counter: id, Delta: 1, Take: &shardcounter.LimitTake{Policy: p, Cost: 1}, Create: create},
		{Counter: id, Take: &shardcounter.LimitTake{Policy: shardcounter.LimitPolicy{Kind: "leaky", Limit: 1, Period: p.Period}, Cost: 1}, Create: create},
		{Counter: id, Take: &shardcounter.LimitTake{Policy: bare, Cost: 1}, Create: create},
	}[d.rng.IntN(5)]
}

// resetKey deletes a random key's state counter from both, now and then.
func (d *diff) resetKey() {
	if d.noLimits || d.rng.IntN(6) != 0 {
		return
	}
	id := d.keys[d.rng.IntN(len(d.keys))]
	merr, serr := d.model.DeleteCounter(ctx, id), d.store.DeleteCounter(ctx, id)
	if shardcounter.ErrorCode(merr) != shardcounter.ErrorCode(serr) {
		d.fail("before batch %d: DeleteCounter(%s): model %v, store %v", d.batches, id, merr, serr)
	}
}

// sameLimit compares two takes' decisions.
func sameLimit(m, s *shardcounter.LimitResult) bool {
	return (m == nil) == (s == nil) && (m == nil || *m == *s)
}

// checkKeys compares which keys have a state counter.
func (d *diff) checkKeys() {
	d.t.Helper()
	if len(d.keys) == 0 {
		return
	}
	mr, merr := d.model.ReadCounters(ctx, d.keys)
	sr, serr := d.store.ReadCounters(ctx, d.keys)
	if merr != nil || serr != nil {
		d.fail("after batch %d: ReadCounters of the keys: model %v, store %v", d.batches, merr, serr)
	}
	for i, id := range d.keys {
		if (mr[i] == nil) != (sr[i] == nil) {
			d.fail("after batch %d: key %q: model %s, store %s%s", d.batches, id, readingString(mr[i]), readingString(sr[i]), d.lastOn(id))
		}
	}
}
