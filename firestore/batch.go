package firestore

import (
	"context"
	"strconv"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// batchState is one attempt's decisions: what each item does to its
// counter, in batch order, on the versions read.
type batchState struct {
	s           *CounterStore
	now, cutoff time.Time
	targets     map[string]*target
	reqs        map[requestKey]*firestore.DocumentSnapshot
	seen        map[requestKey]bool // request ids this batch applies
	recorded    int
	records     []record
	sweeps      []*firestore.DocumentRef
	writesList  []string // what the commit writes, for its results
}

// record is a request id the commit records.
type record struct {
	t    *target
	ref  *firestore.DocumentRef
	snap *firestore.DocumentSnapshot
}

// apply decides one item, or sets why it fails in o. Its error ends the
// attempt (errFull). It runs in phases: admit the item (counter, kind,
// request id), settle a member item that changes nothing, check bounds
// and pick the shard, then take the write into the batch's state, so
// that later items of the batch see it.
func (b *batchState) apply(inc shardcounter.Increment, o *shardcounter.Outcome) error {
	it, ok := b.admit(inc, o)
	if !ok {
		return nil
	}
	if isApprox(it.st.meta.spec) {
		b.takeApprox(&it, inc, o)
		return nil
	}
	if it.md != nil && it.md.present == (inc.Delta > 0) {
		o.Unchanged = true
		b.adopt(it.t, it.st, it.creating)
		it.t.verify[it.k] = true
		b.record(it.t, it.rk)
		return nil
	}
	v, bucket, err := b.check(&it, inc, o)
	if err != nil || o.Err != nil {
		return err
	}
	b.take(&it, inc, v, bucket)
	return nil
}

// item is an admitted increment: its target, the counter's state (new
// when the item creates it), its request key and member document, and
// the shard its pick maps to.
type item struct {
	t        *target
	st       *counterState
	creating bool
	rk       requestKey
	md       *memberDoc // nil for a delta item
	k        int
}

// admit finds the item's counter and checks that the item may apply to
// it at all; when it may not, it sets o and returns false.
func (b *batchState) admit(inc shardcounter.Increment, o *shardcounter.Outcome) (item, bool) {
	if err := shardcounter.ValidateIncrement(inc); err != nil {
		o.Err = err
		return item{}, false
	}
	it := item{t: b.targets[inc.Counter]}
	if it.t.err != nil {
		o.Err = it.t.err
		return item{}, false
	}
	it.st = it.t.st
	if it.st == nil {
		if inc.Create == nil {
			o.Err = shardcounter.CounterNotFound(inc.Counter)
			return item{}, false
		}
		it.st, it.creating = newState(*inc.Create, b.now), true
	}
	if o.Err = shardcounter.ValidateIncrementKind(inc, kindOf(it.st.meta.spec)); o.Err != nil {
		return item{}, false
	}
	if inc.RequestID != "" {
		it.rk = requestKey{inc.Counter, inc.RequestID}
		if b.seen[it.rk] || (!it.creating && b.duplicate(it.rk, it.st)) {
			o.Duplicate = true
			return item{}, false
		}
	}
	pick := inc.Pick
	if inc.Member != "" {
		pick = shard.ForMember(inc.Member)
		it.md = it.t.members[inc.Member]
		if it.md == nil { // a counter the batch creates: the read found no document of this incarnation
			it.md = &memberDoc{}
		}
	}
	it.k = shard.Of(pick, it.st.meta.spec.Shards)
	return it, true
}

// check returns the shard's value after the write and the window bucket
// it goes to, moving it.k to a shard with room when the picked one has
// none; it sets o.Err when the write would leave int64 or the counter's
// bounds. A counter read shard by shard whose shard would leave the zone
// ends the attempt (errFull), to be read again in full.
func (b *batchState) check(it *item, inc shardcounter.Increment, o *shardcounter.Outcome) (v, bucket int64, err error) {
	st, n := it.st, it.st.meta.spec.Shards
	v, ok := overflow.Add(st.shards[it.k].value, inc.Delta)
	if st.full {
		sum, sumOK := overflow.Add(it.t.totalOf(st), inc.Delta)
		if !sumOK {
			o.Err = outOfRange(inc)
			return 0, 0, nil
		}
		if err := bounds(inc.Counter, st.meta.spec, inc.Delta, sum); err != nil {
			o.Err = err
			return 0, 0, nil
		}
		if !ok && it.md == nil {
			// The picked shard cannot hold the write but the total can:
			// some other shard has room (were every shard within delta of
			// the edge, the total would be past it too).
			it.k = roomFor(st.shards, inc.Delta)
			v = st.shards[it.k].value + inc.Delta
			ok = true
		}
		if !ok {
			o.Err = outOfRange(inc)
			return 0, 0, nil
		}
		it.t.total = sum
	} else if !ok || v > zone(n) || v < -zone(n) {
		b.s.fullHint.Store(inc.Counter, true)
		b.s.cache.Remove(inc.Counter)
		return 0, 0, errFull
	}
	if w := st.meta.spec.Window; w != nil {
		bucket = w.BucketOf(b.now).Unix()
		if _, ok := overflow.Add(it.t.buckets[bucket], inc.Delta); !ok {
			o.Err = outOfRange(inc)
			return 0, 0, nil
		}
	}
	return v, bucket, nil
}

// take writes an item that passed check into the batch's state: the
// shard's value and delta, the member's presence, the window bucket and
// the request id, which the commit then writes.
func (b *batchState) take(it *item, inc shardcounter.Increment, v, bucket int64) {
	t, st := it.t, it.st
	b.adopt(t, st, it.creating)
	st.shards[it.k].value = v
	t.deltas[it.k] += inc.Delta
	if it.md != nil {
		it.md.present = inc.Delta > 0
		if t.members == nil {
			t.members = make(map[string]*memberDoc)
		}
		t.members[inc.Member] = it.md
	}
	if st.meta.spec.Window != nil {
		if t.buckets == nil {
			t.buckets = make(map[int64]int64)
		}
		t.buckets[bucket] += inc.Delta
	}
	b.record(t, it.rk)
}

// roomFor returns a shard that can take delta without leaving int64. The
// caller knows the counter's total can, so one exists.
func roomFor(shards []shardState, delta int64) int {
	for i, sh := range shards {
		if _, ok := overflow.Add(sh.value, delta); ok {
			return i
		}
	}
	panic("firestore: no shard has room for a write the total has room for")
}

// newState is a counter an item creates: every shard new and 0.
func newState(spec shardcounter.Spec, now time.Time) *counterState {
	st := &counterState{meta: meta{spec: spec, created: now.UTC().Truncate(time.Microsecond)}, shards: make([]shardState, spec.Shards), full: spec.Bounded()}
	for i := range st.shards {
		st.shards[i].known = true
	}
	return st
}

// adopt makes st the target's state once an item on it applies: for a
// counter the batch creates, its first applied item's spec.
func (b *batchState) adopt(t *target, st *counterState, creating bool) {
	if creating {
		t.st, t.create = st, true
	}
	t.touched = true
}

// totalOf returns the counter's total before the batch's first applied
// item: the sum of its shards, all read.
func (t *target) totalOf(st *counterState) int64 {
	if !t.summed {
		t.summed = true
		vals := make([]int64, len(st.shards))
		for i, sh := range st.shards {
			vals[i] = sh.value
		}
		t.total, _ = overflow.Sum(vals)
	}
	return t.total
}

// duplicate reports whether the request id was recorded for this
// counter (this incarnation of it) within the dedupe window.
func (b *batchState) duplicate(k requestKey, st *counterState) bool {
	snap := b.reqs[k]
	if snap == nil || !snap.Exists() {
		return false
	}
	d := snap.Data()
	at, ok := d[fieldAt].(time.Time)
	return ok && at.After(b.cutoff) && sameTime(d[fieldOf], st.meta.created)
}

// record marks the request id of an applied item, to be recorded by the
// commit.
func (b *batchState) record(t *target, k requestKey) {
	if k.id == "" {
		return
	}
	b.seen[k] = true
	b.recorded++
	ref := t.ref.Collection(requestsCollection).Doc(Escape(k.id))
	b.records = append(b.records, record{t: t, ref: ref, snap: b.reqs[k]})
}

func outOfRange(inc shardcounter.Increment) error {
	return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it outside the int64 range", inc.Counter, inc.Delta)
}

// bounds refuses a write that would take a bounded counter's total to
// sum, outside its Min and Max.
func bounds(id string, spec shardcounter.Spec, delta, sum int64) error {
	if spec.Min != nil && sum < *spec.Min {
		return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it to %d, below its min %d", id, delta, sum, *spec.Min)
	}
	if spec.Max != nil && sum > *spec.Max {
		return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it to %d, above its max %d", id, delta, sum, *spec.Max)
	}
	return nil
}

// sweepBuckets finds the buckets past retention of the windowed counters
// the batch writes, for the commit to delete: a few per counter and
// batch, so the work follows the writes.
func (s *CounterStore) sweepBuckets(ctx context.Context, b *batchState, order []string) error {
	for _, id := range order {
		t := b.targets[id]
		if t.st == nil || t.create || len(t.buckets) == 0 {
			continue
		}
		w := t.st.meta.spec.Window
		cut := w.BucketOf(b.now.Add(-time.Duration(w.Retention)))
		docs, err := t.ref.Collection(bucketsCollection).Where(fieldStart, "<", cut).Limit(sweepBatch).Documents(ctx).GetAll()
		if err != nil {
			return readError("read window buckets", err)
		}
		for _, d := range docs {
			b.sweeps = append(b.sweeps, d.Ref)
		}
	}
	return nil
}

// sweepBatch bounds the buckets one batch deletes per counter.
const sweepBatch = 64

// shardWrite is a shard document the commit writes, and where its result
// is.
type shardWrite struct {
	t      *target
	shard  int
	delta  int64
	result int
	wide   bool
}

// writes adds the batch's writes to wb and returns its shard writes.
func (b *batchState) writes(wb *firestore.WriteBatch, order []string) []shardWrite { //nolint:staticcheck // see applyOnce
	var sw []shardWrite
	add := func(what string) int {
		b.writesList = append(b.writesList, what)
		return len(b.writesList) - 1
	}
	for _, id := range order {
		t := b.targets[id]
		if t.st == nil || !t.touched {
			continue
		}
		st := t.st
		n := st.meta.spec.Shards
		if t.create {
			wb.Create(t.ref, metaFields(id, st.meta))
			add("counter")
			for i := range n {
				fields := map[string]any{b.s.field: t.deltas[i], fieldNumShards: int64(n)}
				if sk, ok := t.newSketch[i]; ok {
					fields[fieldSketch] = sk
				}
				wb.Create(shardRef(t.ref, i), fields)
				sw = append(sw, shardWrite{t: t, shard: i, delta: t.deltas[i], result: add("shard")})
			}
		} else {
			sw = append(sw, b.writeShards(wb, t, add)...)
		}
		for m, md := range t.members {
			if md.present == md.was {
				continue
			}
			ref := t.ref.Collection(membersCollection).Doc(Escape(m))
			switch {
			case md.present && md.snap != nil && md.snap.Exists():
				wb.Update(ref, []firestore.Update{{Path: fieldOf, Value: st.meta.created}}, firestore.LastUpdateTime(md.snap.UpdateTime))
			case md.present:
				wb.Create(ref, map[string]any{fieldOf: st.meta.created})
			default:
				wb.Delete(ref, firestore.LastUpdateTime(md.snap.UpdateTime))
			}
			add("member")
		}
		for start, d := range t.buckets {
			ref := t.ref.Collection(bucketsCollection).Doc(strconv.FormatInt(start, 10))
			wb.Set(ref, map[string]any{fieldStart: time.Unix(start, 0).UTC(), b.s.field: firestore.Increment(d)}, firestore.MergeAll)
			add("bucket")
		}
	}
	for _, r := range b.records {
		fields := map[string]any{fieldAt: b.now, fieldOf: r.t.st.meta.created}
		if r.snap != nil && r.snap.Exists() {
			wb.Update(r.ref, []firestore.Update{{Path: fieldAt, Value: b.now}, {Path: fieldOf, Value: r.t.st.meta.created}}, firestore.LastUpdateTime(r.snap.UpdateTime))
		} else {
			wb.Create(r.ref, fields)
		}
		add("request")
	}
	for _, ref := range b.sweeps {
		wb.Delete(ref)
		add("sweep")
	}
	return sw
}

// writeShards adds to wb the writes of an existing counter's shards the
// batch changes or checks, and returns them.
func (b *batchState) writeShards(wb *firestore.WriteBatch, t *target, add func(string) int) []shardWrite { //nolint:staticcheck // see applyOnce
	var sw []shardWrite
	st := t.st
	n := st.meta.spec.Shards
	// A shard document that is missing (a counter made by another
	// program, or a shard count read before a reshard) is created
	// only if the counter document still says it exists.
	checkCounter := false
	wide := false
	if st.full {
		for _, sh := range st.shards {
			if sh.value > zone(n) || sh.value < -zone(n) {
				wide = true
			}
		}
	}
	for i := range n {
		_, written := t.deltas[i]
		if !written && !t.verify[i] && !st.full {
			continue
		}
		sh := st.shards[i]
		ref := shardRef(t.ref, i)
		ups := []firestore.Update{{Path: b.s.field, Value: firestore.Increment(t.deltas[i])}}
		if st.full && sh.wide != wide {
			ups = append(ups, firestore.Update{Path: fieldWide, Value: wide})
		}
		sk, newSketch := t.newSketch[i]
		if newSketch {
			ups = append(ups, firestore.Update{Path: fieldSketch, Value: sk})
		}
		if sh.exists {
			wb.Update(ref, ups, firestore.LastUpdateTime(sh.ut))
		} else {
			checkCounter = true
			fields := map[string]any{b.s.field: t.deltas[i]}
			if wide {
				fields[fieldWide] = true
			}
			if newSketch {
				fields[fieldSketch] = sk
			}
			wb.Create(ref, fields)
		}
		sw = append(sw, shardWrite{t: t, shard: i, delta: t.deltas[i], result: add("shard"), wide: st.full && wide})
	}
	if checkCounter {
		wb.Update(t.ref, []firestore.Update{{Path: fieldNumShards, Value: int64(n)}}, firestore.LastUpdateTime(st.meta.ut))
		add("counter")
	}
	return sw
}

// committed takes in a committed batch: the shard versions it wrote and
// the per-document commit counts.
func (b *batchState) committed(results []*firestore.WriteResult, sw []shardWrite, order []string) {
	for _, w := range sw {
		sh := &w.t.st.shards[w.shard]
		sh.ut, sh.exists, sh.known, sh.wide = results[w.result].UpdateTime, true, true, w.wide
		b.s.stats.Commits.Add(1)
		if f := b.s.stats.onCommit.Load(); f != nil {
			(*f)(w.t.id, w.shard)
		}
	}
	for _, id := range order {
		if t := b.targets[id]; t.st != nil && t.touched {
			if t.create {
				b.s.fullHint.Delete(id)
			}
			b.s.cache.Add(id, t.st)
		}
	}
}

// totals gives the items that asked for it their counter's total, where
// the batch read every shard.
func (b *batchState) totals(order []string, out []shardcounter.Outcome, incs []shardcounter.Increment) {
	for i, inc := range incs {
		t := b.targets[inc.Counter]
		if !inc.Total || out[i].Err != nil || t == nil || t.st == nil || !t.st.full || !t.touched {
			continue
		}
		v := t.totalOf(t.st)
		out[i].Total = &v
	}
}
