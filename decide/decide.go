package decide

import (
	"bytes"
	"fmt"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/internal/shard"
	"github.com/shardcounter/shardcounter/sketch"
)

// Batch is a batch of increments to decide, and the moment it commits at.
type Batch struct {
	Incs []shardcounter.Increment
	// Now is the commit time: the window bucket an item lands in, and
	// the time its request id is recorded at.
	Now time.Time
	// Cutoff is the end of the dedupe window's past: a request id
	// recorded at or before it has expired, and is recorded afresh. It is
	// Now minus the store's dedupe window.
	Cutoff time.Time
}

// Decide decides every item of b in order, as one atomic step applying
// them one at a time would, on the data v shows, and sets each item's
// outcome in out (len(out) == len(b.Incs)). It returns what the batch
// writes. Its error is v's, or a *NeedWhole: either way nothing is to be
// written and out is not to be used.
//
// An item is, in this order: invalid (Validate), on a missing counter
// without Create (not_found), of the wrong kind (CheckKind), a Duplicate
// (its request id recorded within the dedupe window, or by an earlier item
// of the batch), Unchanged (a present member added, an absent one removed;
// every approx item of a shard whose sketch did not change), refused
// out_of_range (the counter's total would leave int64, its Min or its
// Max; its window bucket would leave int64), or applied. An applied item
// (Unchanged included) creates its missing counter with its Create spec,
// records its request id, and is seen by the items after it; a bounded
// item skipped (Outcome.Skipped) on a missing counter creates nothing and
// records nothing, and its total is 0. Increment.Txn
// changes nothing: a batch decided here is applied in one atomic step. A
// conditional item (Increment.If) whose earlier item failed or was
// skipped is Skipped before anything else, and applies nothing.
func Decide(v View, b Batch, out []shardcounter.Outcome) (Mutations, error) {
	d := newDecider(v, b, out)
	for i := range b.Incs {
		if err := d.item(i); err != nil {
			return Mutations{}, err
		}
	}
	if len(d.whole) > 0 {
		return Mutations{}, &NeedWhole{Counters: d.whole}
	}
	if err := d.applySketches(); err != nil {
		return Mutations{}, err
	}
	d.totals()
	return d.mutations(), nil
}

// newDecider returns a decider on the heap rather than in Decide's frame,
// which a store's reads run below (see valid).
//
//go:noinline
func newDecider(v View, b Batch, out []shardcounter.Outcome) *decider {
	return &decider{v: v, b: b, out: out, idx: make(map[string]int32, len(b.Incs))}
}

// decider is one Decide call: the counters the batch touches as its items
// so far leave them, and the mutations so far.
type decider struct {
	v   View
	b   Batch
	out []shardcounter.Outcome

	idx    map[string]int32 // counter id → index in states
	states []state          // in the order the batch first touched them; never more than the items, so never moved
	nwrite int              // how many states an item applied on
	whole  []string

	shards   []ShardWrite // in the order written; linked by counter through next
	next     []int32      // next[i]: the index+1 of the counter's shard write after shards[i], 0 for none
	unsorted bool         // shards is not grouped by counter in order
	lastHead int32        // the state whose first shard write came last
	used     map[requestKey]bool
	requests []RequestWrite
	members  map[requestKey]int32
	memberWs []memberWrite
	buckets  []BucketWrite
	sk       Sketches
	sketches []SketchWrite
	removes  []string        // state counters removed (remove)
	touched  map[string]bool // counters of the batch's items other than removals (busy)
}

// state is one counter as the items so far leave it.
type state struct {
	id     string
	ix     int32
	spec   shardcounter.Spec // in force while exists
	exists bool              // for the items: in the view, or created by an applied item
	inView bool              // the view answers for its data: it existed before the batch
	create bool              // an applied item created it
	whole  bool              // NeedWhole names it
	err    error             // the view's Counter.Err
	sum    Sum
	total  int64
	write  bool  // an item applied on it
	head   int32 // index+1 of its first shard write, 0 for none
	tail   int32 // index+1 of its last
	bucket int32 // index+1 of its last bucket write, 0 for none
}

// requestKey keys a counter's request ids, and a counter's members.
type requestKey struct{ counter, id string }

type memberWrite struct {
	w   MemberWrite
	was bool // the member's presence before the batch
}

// state returns the counter's state, asking the view the first time.
func (d *decider) state(id string) (*state, error) {
	if j, ok := d.idx[id]; ok {
		return &d.states[j], nil
	}
	c, err := d.v.Counter(id)
	if err != nil {
		return nil, err
	}
	if d.states == nil {
		d.states = make([]state, 0, len(d.b.Incs))
	}
	n := len(d.states)
	d.states = d.states[:n+1] // within its capacity, and zero: never used before
	st := &d.states[n]
	st.id, st.ix, st.err = id, int32(n), c.Err
	d.idx[id] = st.ix
	if c.Exists && !c.Unborn {
		st.exists, st.inView, st.spec, st.sum, st.total = true, true, c.Spec, c.Sum, c.Total
	}
	return st, nil
}

// item decides item i. Its error is the view's.
func (d *decider) item(i int) error {
	inc := &d.b.Incs[i]
	o := &d.out[i]
	*o = shardcounter.Outcome{}
	if inc.If != 0 {
		switch j := inc.If - 1; {
		case j < 0 || j >= i:
			o.Err = shardcounter.Errorf(shardcounter.EINVALID, "item %d is conditional on item %d, which is not before it", i, j)
			return nil
		case d.out[j].Err != nil || d.out[j].Skipped:
			o.Skipped = true
			return nil
		}
	}
	if inc.Take != nil {
		if inc.Take.Remove {
			return d.remove(i)
		}
		return d.take(i)
	}
	if inc.Bound != nil {
		if o.Err = validBound(inc); o.Err != nil {
			return nil
		}
	} else if o.Err = valid(inc); o.Err != nil {
		return nil
	}
	st, spec, err := d.counterOf(inc, o)
	if st == nil || spec == nil {
		return err
	}
	if o.Err = kindOK(inc, spec.Kind); o.Err != nil {
		return nil
	}
	var rq RequestWrite
	if inc.RequestID != "" {
		dup, err := d.dedupe(st, inc, &rq)
		if err != nil {
			return err
		}
		if dup {
			o.Duplicate = true
			return nil
		}
	}
	k := shard.Of(pick(inc), spec.Shards)
	rq.Shard = k
	switch spec.Kind {
	case shardcounter.KindApprox:
		sh, err := d.sketch(st, k)
		if err != nil {
			return err
		}
		if sh.err != nil {
			o.Err = ErrSketch(inc.Counter, k, sh.err)
			return nil
		}
		d.apply(st, inc, &rq, i)
		sh.add(inc, i)
		return nil
	case shardcounter.KindDistinct:
		present, err := d.present(st, inc.Member)
		if err != nil {
			return err
		}
		if present == (inc.Delta > 0) {
			o.Unchanged = true
			d.apply(st, inc, &rq, i)
			return nil
		}
	}
	return d.delta(st, spec, inc, k, &rq, i)
}

// counterOf returns the item's counter and the spec it is judged on: the
// counter's, or until an item applies on a missing one, the item's own
// Create. A nil state or spec ends the item: with the view's error, or
// having set the item's (the counter cannot be read, or is missing and the
// item creates nothing), or because the counter is to be read whole.
func (d *decider) counterOf(inc *shardcounter.Increment, o *shardcounter.Outcome) (*state, *shardcounter.Spec, error) {
	st, err := d.state(inc.Counter)
	if err != nil || st.whole {
		return nil, nil, err
	}
	switch {
	case st.err != nil:
		o.Err = st.err
		return st, nil, nil
	case st.exists:
		return st, &st.spec, nil
	case inc.Create == nil:
		o.Err = shardcounter.CounterNotFound(inc.Counter)
		return st, nil, nil
	}
	return st, inc.Create, nil
}

// valid is Validate of *inc, and kindOK CheckKind. They take a pointer
// and are not inlined, so that the copies of the increment they pass on
// are not in item's frame: a store's reads run below item, on the stack
// of a flush's goroutine, which grows (and is copied) each time a flush
// goes deeper than the last.
//
//go:noinline
func valid(inc *shardcounter.Increment) error {
	c := *inc
	c.If = 0 // decided here (item)
	return shardcounter.ValidateIncrement(c)
}

//go:noinline
func validBound(inc *shardcounter.Increment) error {
	c := *inc
	c.If = 0 // decided here (item)
	return shardcounter.ValidateBoundIncrement(c)
}

//go:noinline
func kindOK(inc *shardcounter.Increment, kind shardcounter.Kind) error {
	return shardcounter.ValidateIncrementKind(*inc, kind)
}

// dedupe reports whether the item's request id is a duplicate; when it is
// not, it fills rq with the record the item makes if it applies.
func (d *decider) dedupe(st *state, inc *shardcounter.Increment, rq *RequestWrite) (bool, error) {
	return d.seen(st, inc.RequestID, rq)
}

// seen reports whether the counter's request id id is a duplicate; when
// it is not, it fills rq with the record of id.
func (d *decider) seen(st *state, id string, rq *RequestWrite) (bool, error) {
	if d.used[requestKey{st.id, id}] {
		return true, nil
	}
	if st.inView {
		at, seen, err := d.v.Request(st.id, id)
		if err != nil {
			return false, err
		}
		if seen {
			if at.After(d.b.Cutoff) {
				return true, nil
			}
			rq.Expired, rq.Was = true, at
		}
	}
	rq.Counter, rq.ID = st.id, id
	return false, nil
}

// apply marks an item applied: it creates its counter when it is the
// first to apply on a missing one, and records its request id. It is not
// inlined, to keep its callers' frames small (see valid).
//
//go:noinline
func (d *decider) apply(st *state, inc *shardcounter.Increment, rq *RequestWrite, i int) {
	if !st.exists {
		st.exists, st.create, st.spec = true, true, *inc.Create
	}
	if !st.write {
		st.write = true
		d.nwrite++
	}
	if rq.ID != "" {
		if d.used == nil {
			d.used = make(map[requestKey]bool)
		}
		d.used[requestKey{rq.Counter, rq.ID}] = true
		d.requests = append(d.requests, *rq)
	}
}

func (d *decider) needWhole(st *state) {
	if !st.whole {
		st.whole = true
		d.whole = append(d.whole, st.id)
	}
}

// lastShard returns the counter's last shard write to shard k, or nil.
func (d *decider) lastShard(st *state, k int) *ShardWrite {
	var w *ShardWrite
	for j := st.head; j != 0; j = d.next[j-1] {
		if d.shards[j-1].Shard == k {
			w = &d.shards[j-1]
		}
	}
	return w
}

// shard returns shard k's value as the items so far leave it.
func (d *decider) shard(st *state, k int) (int64, bool, error) {
	if w := d.lastShard(st, k); w != nil {
		return w.Value, w.Known, nil
	}
	if !st.inView {
		return 0, true, nil // a new counter's shards are 0
	}
	return d.v.Shard(st.id, k)
}

// writeShard adds delta to shard k, whose value becomes v (when known).
func (d *decider) writeShard(st *state, k int, delta, v int64, known bool) {
	if w := d.lastShard(st, k); w != nil {
		if sum, ok := overflow.Add(w.Delta, delta); ok {
			w.Delta, w.Value, w.Known = sum, v, known
			return
		}
	}
	if d.shards == nil {
		d.shards = make([]ShardWrite, 0, len(d.b.Incs))
		d.next = make([]int32, 0, len(d.b.Incs))
	}
	d.shards = append(d.shards, ShardWrite{Counter: st.id, Shard: k, Delta: delta, Value: v, Known: known})
	d.next = append(d.next, 0)
	j := int32(len(d.shards))
	if st.tail != 0 {
		d.next[st.tail-1] = j
		d.unsorted = d.unsorted || st.tail != j-1
	} else {
		st.head = j
		d.unsorted = d.unsorted || st.ix < d.lastHead
		d.lastHead = st.ix
	}
	st.tail = j
}

// present reports whether a distinct counter's member is present, as the
// items so far leave it.
func (d *decider) present(st *state, member string) (bool, error) {
	if j, ok := d.members[requestKey{st.id, member}]; ok {
		return d.memberWs[j].w.Present, nil
	}
	if !st.inView {
		return false, nil
	}
	return d.v.Member(st.id, member)
}

// setMember records that the batch made member present or absent. It is
// not inlined, to keep delta's frame small (see valid).
//
//go:noinline
func (d *decider) setMember(st *state, member string, k int, present bool) {
	key := requestKey{st.id, member}
	if j, ok := d.members[key]; ok {
		d.memberWs[j].w.Present = present
		return
	}
	if d.members == nil {
		d.members = make(map[requestKey]int32)
	}
	d.members[key] = int32(len(d.memberWs))
	d.memberWs = append(d.memberWs, memberWrite{w: MemberWrite{Counter: st.id, Member: member, Shard: k, Present: present}, was: !present})
}

// bucket returns the value of the counter's bucket of the commit time, as
// the items so far leave it.
func (d *decider) bucket(st *state, w *shardcounter.Window) (int64, bool, error) {
	if st.bucket != 0 {
		b := &d.buckets[st.bucket-1]
		return b.Value, b.Known, nil
	}
	if !st.inView {
		return 0, true, nil
	}
	return d.v.Bucket(st.id, w.BucketOf(d.b.Now))
}

// addBucket adds delta to the counter's bucket of the commit time, whose
// value was v (when known).
func (d *decider) addBucket(st *state, w *shardcounter.Window, delta, v int64, known bool) {
	if st.bucket != 0 {
		b := &d.buckets[st.bucket-1]
		if sum, ok := overflow.Add(b.Delta, delta); ok {
			b.Delta, b.Value = sum, v+delta
			return
		}
	}
	d.buckets = append(d.buckets, BucketWrite{
		Counter: st.id, Start: w.BucketOf(d.b.Now), Delta: delta, Value: v + delta, Known: known,
		Sweep: w.BucketOf(d.b.Now.Add(-time.Duration(w.Retention))),
	})
	st.bucket = int32(len(d.buckets))
}

// sketch returns the counter's shard k of the batch's approx items; the
// first time, with its sketch as the view has it, decoded, so that a
// sketch that does not decode fails each item on it as it comes.
func (d *decider) sketch(st *state, k int) (*SketchShard, error) {
	sh, fresh := d.sk.find(st.id, k)
	if !fresh {
		return sh, nil
	}
	if st.inView {
		var err error
		if sh.old, err = d.v.Sketch(st.id, k); err != nil {
			return nil, err
		}
	}
	sh.dec, sh.err = sketch.Decode(sh.old)
	return sh, nil
}

// applySketches changes each shard sketch the batch's approx items
// touched, once, and sets their outcomes. Its error, a merge that fails
// although every sketch decoded, fails the batch.
func (d *decider) applySketches() error {
	for j := range d.sk.Shards {
		sh := &d.sk.Shards[j]
		if len(sh.Items) == 0 {
			continue // its sketch does not decode: every item on it failed
		}
		next, changed, err := sh.dec.Apply(sh.old, sh.Members, sh.Merges)
		if err != nil {
			return fmt.Errorf("decide: counter %q shard %d: %w", sh.Counter, sh.Shard, err)
		}
		sh.mark(d.out, changed, nil)
		if !bytes.Equal(sh.old, next) {
			d.sketches = append(d.sketches, SketchWrite{Counter: sh.Counter, Shard: sh.Shard, Old: sh.old, New: next})
		}
	}
	return nil
}

// totals gives each item that asked (Increment.Total) and did not fail
// its counter's total after the batch, where it is known.
func (d *decider) totals() {
	for i := range d.b.Incs {
		inc := &d.b.Incs[i]
		if !inc.Total || d.out[i].Err != nil || (inc.If != 0 && d.out[i].Skipped) {
			continue // a conditional item skipped did nothing, and gives no total
		}
		if st := &d.states[d.idx[inc.Counter]]; st.exists && st.sum == SumExact && st.spec.Kind != shardcounter.KindApprox {
			v := st.total
			d.out[i].Total = &v
		} else if !st.exists && st.err == nil && d.out[i].Skipped {
			d.out[i].Total = new(int64) // a bounded item skipped on a counter still missing: 0
		}
	}
}

// mutations returns what the decided batch writes.
func (d *decider) mutations() Mutations {
	m := Mutations{Requests: d.requests, Buckets: d.buckets, Sketches: d.sketches, Removes: d.removes}
	if d.nwrite > 0 {
		m.Counters = make([]CounterWrite, 0, d.nwrite)
		for i := range d.states {
			if st := &d.states[i]; st.write {
				m.Counters = append(m.Counters, CounterWrite{
					ID: st.id, Spec: &st.spec, Create: st.create,
					Total: st.total, TotalKnown: st.sum == SumExact && st.spec.Kind != shardcounter.KindApprox,
				})
			}
		}
	}
	m.Shards = d.shards
	if d.unsorted {
		m.Shards = make([]ShardWrite, 0, len(d.shards))
		for i := range d.states {
			for j := d.states[i].head; j != 0; j = d.next[j-1] {
				m.Shards = append(m.Shards, d.shards[j-1])
			}
		}
	}
	for _, mw := range d.memberWs {
		if mw.w.Present != mw.was {
			m.Members = append(m.Members, mw.w)
		}
	}
	return m
}
