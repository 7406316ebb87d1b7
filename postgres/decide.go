package postgres

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// batch is a batch of increments as Apply prepares it once for all its
// attempts, with what attempts have learnt.
type batch struct {
	incs  []shardcounter.Increment
	errs  []error  // ValidateIncrement's verdict: such an item fails on its own
	picks []uint64 // the pick each item's shard follows
	// full lists counters whose every shard an attempt locks, to check
	// their totals (besides bounded ones, which lockSQL knows).
	full []string
	// specs is the spec to create a missing counter with: the first
	// Create among its items, unless an attempt found that another one is
	// the first to apply.
	specs map[string]shardcounter.Spec
	// marker is written in the commit of the batch (markSQL), when the
	// batch runs in a transaction of its own.
	marker []byte
	// fill is set once an attempt found a wanted shard row stale: the
	// next ones insert missing rows before locking (fillSQL).
	fill bool
}

// newBatch validates incs; full lists counters known to need their totals
// checked.
func newBatch(incs []shardcounter.Increment, full []string) *batch {
	b := &batch{incs: incs, errs: make([]error, len(incs)), picks: make([]uint64, len(incs)), full: full, specs: make(map[string]shardcounter.Spec)}
	for i, inc := range incs {
		if err := shardcounter.ValidateIncrement(inc); err != nil {
			b.errs[i] = err
			continue
		}
		b.picks[i] = inc.Pick
		if inc.Member != "" {
			b.picks[i] = shard.ForMember(inc.Member)
		}
		if inc.Create != nil {
			if _, ok := b.specs[inc.Counter]; !ok {
				b.specs[inc.Counter] = *inc.Create
			}
		}
	}
	return b
}

// restart is the error of an attempt that rolled back because it locked
// too little or created a counter with the wrong spec: the next attempt
// knows better.
type restart struct {
	full  []string                     // counters whose totals must be checked (see zone)
	specs map[string]shardcounter.Spec // counters to create with another spec
}

func (r *restart) Error() string {
	return fmt.Sprintf("batch must start again: totals of %q, specs of %d counters", r.full, len(r.specs))
}

// learn takes in what an attempt found.
func (b *batch) learn(r *restart) {
	for _, id := range r.full {
		if !slices.Contains(b.full, id) {
			b.full = append(b.full, id)
		}
	}
	for id, spec := range r.specs {
		b.specs[id] = spec
	}
}

// locks returns lockSQL's $1 and $2: each valid item's counter and pick.
func (b *batch) locks() (counters []string, picks []uint64) {
	for i, inc := range b.incs {
		if b.errs[i] == nil {
			counters, picks = append(counters, inc.Counter), append(picks, b.picks[i])
		}
	}
	return counters, picks
}

// requests returns the (counter, request id) pairs of the valid items,
// each once, sorted so that concurrent batches record them in one order.
func (b *batch) requests() []requestKey {
	var reqs []requestKey
	for i, inc := range b.incs {
		if b.errs[i] == nil && inc.RequestID != "" {
			reqs = append(reqs, requestKey{inc.Counter, inc.RequestID})
		}
	}
	slices.SortFunc(reqs, func(a, b requestKey) int {
		if c := strings.Compare(a.counter, b.counter); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	return slices.Compact(reqs)
}

// creates returns createSQL's arguments: the counters items would create,
// with their specs.
func (b *batch) creates() (c createArgs) {
	ids := make([]string, 0, len(b.specs))
	for id := range b.specs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := rowOf(b.specs[id])
		c.ids = append(c.ids, id)
		c.shards, c.kinds = append(c.shards, r.shards), append(c.kinds, r.kind)
		c.mins, c.maxs = append(c.mins, r.min), append(c.maxs, r.max)
		c.buckets, c.retentions = append(c.buckets, r.bucket), append(c.retentions, r.retention)
	}
	return c
}

type createArgs struct {
	ids, kinds          []string
	shards              []int
	mins, maxs          []*int64
	buckets, retentions []*time.Duration
}

// attempt is what one attempt of a batch found in its first round trip.
type attempt struct {
	counters map[string]*counter // existing counters, with what was locked
	created  map[string]bool     // counters this attempt's createSQL inserted
	recorded map[requestKey]bool // request ids this attempt recorded
	stale    bool                // a wanted shard row was moved by a reshard
}

// counter is what an attempt knows of one counter and what the items
// decided so far do to it.
type counter struct {
	spec   shardcounter.Spec
	values map[int]int64 // the locked shards' values, as the items change them
	wides  int           // how many locked rows are marked wide
	full   bool          // every shard is locked (lockSQL), and total is their sum
	total  int64
	// overflowed is set on a full counter whose shards already sum outside
	// int64 (written before that was refused): it takes no writes.
	overflowed bool
	// born is set once an item that creates the counter applies, on a
	// counter this attempt created; before, the counter does not exist for
	// the items.
	born bool
	// sketches are the locked shards' sketches of an approx counter (a
	// shard without one is missing).
	sketches map[int][]byte
}

// plan is what the second round trip writes.
type plan struct {
	rows     writes       // shard rows of sum counters
	members  memberWrites // member items, for membersSQL
	sketches sketchWrites // approx counters' new shard sketches, for sketchSQL
	buckets  bucketWrites // deltas of windowed counters, for bucketsSQL
	drop     []string     // counters created by the attempt and not kept
	refused  []requestKey // recorded request ids of items not applied
}

// decide decides each item in batch order, as bolt applies them one at a
// time: on a missing counter (one created by this attempt is missing
// until an item that would create it applies), ErrNotFound; on a counter
// of another kind, ErrInvalid; a request id recorded before or by an
// earlier item, Duplicate; a delta that would take its shard or the
// counter's total out of int64, or the total out of [min, max],
// ErrOutOfRange. Member items are decided in the second round trip
// (membersSQL); approx items once all are decided, one sketch.Apply per
// shard (planSketches). It returns a *restart when the attempt locked too little or
// created a counter with another spec than the first item to apply would.
func (a *attempt) decide(b *batch, out []shardcounter.Outcome) (*plan, error) {
	a.sumFull()
	d := newDecision()
	for i := range b.incs {
		d.item(a, b, i, out)
	}
	if r := a.checkZone(d); r != nil {
		return nil, r
	}
	p := a.planWrites(d)
	a.planSketches(d, p, out)
	return p, nil
}

// decision is what deciding the items gathers for the plan: the shards
// and window deltas written, the request ids used, the members to write
// and the reasons, if any, for the attempt to start again.
type decision struct {
	members  memberWrites
	approx   map[shardKey]*shardAdds // approx items per shard, in batch order
	dirty    map[shardKey]bool
	windowed map[shardKey]int64 // the deltas of windowed counters' shards
	used     map[requestKey]bool
	r        restart
}

func newDecision() *decision {
	return &decision{dirty: make(map[shardKey]bool), windowed: make(map[shardKey]int64), used: make(map[requestKey]bool)}
}

// sumFull computes the total of each counter locked in full, which bounds
// and int64 overflow are checked against; a counter whose shards already
// overflow it is marked so that it takes no writes.
func (a *attempt) sumFull() {
	for _, c := range a.counters {
		if c.full {
			vals := make([]int64, 0, len(c.values))
			for _, v := range c.values {
				vals = append(vals, v)
			}
			var ok bool
			c.total, ok = overflow.Sum(vals)
			c.overflowed = !ok
		}
	}
}

// item decides item i into out[i] and d. Each item sees the effects of
// the earlier ones (values, born counters, used request ids), as it would
// if the batch were applied one item at a time.
func (d *decision) item(a *attempt, b *batch, i int, out []shardcounter.Outcome) {
	inc := b.incs[i]
	if out[i].Err = b.errs[i]; out[i].Err != nil {
		return
	}
	c := a.counters[inc.Counter]
	if c != nil && a.created[inc.Counter] && !c.born {
		if inc.Create == nil {
			c = nil // not created yet
		} else if !inc.Create.Equal(c.spec) {
			if d.r.specs == nil {
				d.r.specs = make(map[string]shardcounter.Spec)
			}
			d.r.specs[inc.Counter] = *inc.Create
			return
		}
	}
	if c == nil {
		out[i].Err = notFound(inc.Counter)
		return
	}
	distinct := c.spec.Kind == shardcounter.KindDistinct
	if out[i].Err = shardcounter.ValidateIncrementKind(inc, c.spec.Kind); out[i].Err != nil {
		return
	}
	rk := requestKey{inc.Counter, inc.RequestID}
	if inc.RequestID != "" && (!a.recorded[rk] || d.used[rk]) {
		out[i].Duplicate = true
		return
	}
	k := shardKey{inc.Counter, shard.Of(b.picks[i], c.spec.Shards)}
	if c.spec.Kind == shardcounter.KindApprox {
		d.addApprox(k, i, inc)
	} else if distinct {
		d.members.add(i, inc, b.picks[i], k.shard)
	} else if k, out[i].Err = c.decideDelta(k, inc.Delta, &d.r); out[i].Err != nil || k.counter == "" {
		return // refused, or the attempt starts again with every shard locked
	} else {
		d.dirty[k] = true
		if c.spec.Window != nil {
			d.windowed[k] += inc.Delta
		}
	}
	c.born = true
	if inc.RequestID != "" {
		d.used[rk] = true
	}
}

// checkZone returns the restart the decision calls for, or nil. A counter
// locked shard by shard may take its writes only if it is not wide and
// its written shards stay in the zone; otherwise the attempt starts
// again, locking all of its shards.
func (a *attempt) checkZone(d *decision) *restart {
	r := &d.r
	for k := range d.dirty {
		c := a.counters[k.counter]
		if !c.full && (c.wides > 0 || !zone(c.values[k.shard], c.spec.Shards)) && !slices.Contains(r.full, k.counter) {
			r.full = append(r.full, k.counter)
		}
	}
	if len(r.full) > 0 || len(r.specs) > 0 {
		return r
	}
	return nil
}

// planWrites turns a decision that needs no restart into the second round
// trip's writes.
func (a *attempt) planWrites(d *decision) *plan {
	p := &plan{members: d.members}
	for k := range d.dirty {
		if c := a.counters[k.counter]; !c.full {
			p.rows.add(k, c.values[k.shard], false)
		}
	}
	for id, c := range a.counters {
		if c.full && c.spec.Kind == shardcounter.KindSum {
			p.rows.addFull(id, c, d.dirty)
		}
		if a.created[id] && !c.born {
			p.drop = append(p.drop, id)
		}
	}
	for k, delta := range d.windowed {
		// A shard's items may cancel out; the bucket's row is written
		// anyway, as the retention sweep comes with it.
		p.buckets.counters, p.buckets.shards, p.buckets.deltas = append(p.buckets.counters, k.counter), append(p.buckets.shards, k.shard), append(p.buckets.deltas, delta)
	}
	for k := range a.recorded {
		if !d.used[k] {
			p.refused = append(p.refused, k)
		}
	}
	return p
}

// decideDelta decides a delta item on shard k: it returns the shard
// the delta goes to (add), or the item's own error, or a zero key when
// the counter must be locked in full to decide it (added to r.full).
func (c *counter) decideDelta(k shardKey, delta int64, r *restart) (shardKey, error) {
	sh, err := c.add(k.shard, delta)
	switch {
	case err == errNeedTotal:
		if !slices.Contains(r.full, k.counter) {
			r.full = append(r.full, k.counter)
		}
		return shardKey{}, nil
	case err != nil:
		return k, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: %s", k.counter, err)
	}
	k.shard = sh
	return k, nil
}

// errNeedTotal is add's answer when shard k cannot take the delta and the
// counter is not full: whether the write is out of range depends on the
// total, so the attempt starts again locking every shard.
var errNeedTotal = errors.New("the counter's total must be checked")

// add adds delta to shard k, or to another shard when k cannot hold it,
// and returns the shard it went to; or it says why it may not: the total
// would leave int64 or its bounds (errNeedTotal when the counter is not
// full, and that is to be found out). Out of range is judged on the
// total alone: when the total plus delta fits, some shard can take delta
// (see roomFor), and which shard holds a write changes no value.
func (c *counter) add(k int, delta int64) (int, error) {
	v, ok := overflow.Add(c.values[k], delta)
	if !ok && !c.full {
		return k, errNeedTotal
	}
	total := c.total
	if c.full {
		var fits bool
		if total, fits = overflow.Add(c.total, delta); !fits || c.overflowed {
			return k, fmt.Errorf("adding %d would take it outside the int64 range", delta)
		}
		if lo := c.spec.Min; lo != nil && total < *lo {
			return k, fmt.Errorf("adding %d would take it to %d, below its min %d", delta, total, *lo)
		}
		if hi := c.spec.Max; hi != nil && total > *hi {
			return k, fmt.Errorf("adding %d would take it to %d, above its max %d", delta, total, *hi)
		}
		if !ok {
			k, v, ok = c.roomFor(k, delta)
		}
	}
	if !ok {
		return k, fmt.Errorf("adding %d would take every shard outside the int64 range", delta)
	}
	c.values[k], c.total = v, total
	return k, nil
}

// roomFor returns the first shard after k, of a full counter (every shard
// locked), that can take delta, and its value with it. One can when the
// total plus delta is an int64: if every shard v_i had v_i + delta past
// MaxInt64 (delta > 0), the total would exceed n·(MaxInt64 − delta) ≥
// MaxInt64 − delta, and so would the total plus delta; the same holds
// below. Request ids are recorded by counter, not by shard, so a write
// with one may land anywhere.
func (c *counter) roomFor(k int, delta int64) (int, int64, bool) {
	for i := 1; i < c.spec.Shards; i++ {
		j := (k + i) % c.spec.Shards
		if v, ok := overflow.Add(c.values[j], delta); ok {
			return j, v, true
		}
	}
	return k, 0, false
}

type shardKey struct {
	counter string
	shard   int
}

// zone reports whether a shard value v of a counter with n shards is
// within ±MaxInt64/n. While every shard of a counter is, no total of them
// leaves int64, so a write that keeps its own shard in the zone needs no
// sum. A counter with a shard outside has every shard row marked wide,
// and its writes lock every shard and check the total.
func zone(v int64, n int) bool {
	lim := math.MaxInt64 / int64(n)
	return -lim <= v && v <= lim
}

// writes collects the rows writeSQL sets.
type writes struct {
	counters []string
	shards   []int
	values   []int64
	wide     []bool
}

func (w *writes) add(k shardKey, value int64, wide bool) {
	w.counters, w.shards = append(w.counters, k.counter), append(w.shards, k.shard)
	w.values, w.wide = append(w.values, value), append(w.wide, wide)
}

// addFull adds the rows of a full counter: those the batch changed, and,
// when whether the counter is wide changes, every row, to mark them all.
func (w *writes) addFull(id string, c *counter, dirty map[shardKey]bool) {
	wide := false
	for _, v := range c.values {
		wide = wide || !zone(v, c.spec.Shards)
	}
	// Rewrite every row when the mark changes (or was not on all rows).
	all := (wide && c.wides != len(c.values)) || (!wide && c.wides != 0)
	for shard, v := range c.values {
		k := shardKey{id, shard}
		if dirty[k] || all {
			w.add(k, v, wide)
		}
	}
}
