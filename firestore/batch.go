package firestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/internal/docstore"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// batchState is one attempt: the view package decide decided the batch
// on, and what the commit writes.
type batchState struct {
	s           *CounterStore
	now, cutoff time.Time
	targets     map[string]*target
	reqs        map[requestKey]*firestore.DocumentSnapshot
	recorded    int
	records     []record
	sweeps      []*firestore.DocumentRef
	writesList  []string // what the commit writes, for its results
	size        *docstore.Sizes
}

// record is a request id the commit records.
type record struct {
	t    *target
	ref  *firestore.DocumentRef
	snap *firestore.DocumentSnapshot
}

// decide decides the batch with package decide on what the attempt read
// (the batch's view) and takes its mutations into the targets. A counter
// the view knows only in part that must be checked whole ends the attempt
// (errFull), to be read again in full.
func (b *batchState) decide(incs []shardcounter.Increment, out []shardcounter.Outcome, order []string) error {
	m, err := decide.Decide(b, decide.Batch{Incs: incs, Now: b.now, Cutoff: b.cutoff}, out)
	var whole *decide.NeedWhole
	if errors.As(err, &whole) {
		for _, id := range whole.Counters {
			b.s.fullHint.Store(id, true)
			b.s.cache.Remove(id)
		}
		return errFull
	}
	if err != nil {
		return err
	}
	for _, c := range m.Counters {
		t := b.targets[c.ID]
		t.touched = true
		if c.Create {
			t.st, t.create = newState(*c.Spec, b.now), true
		}
	}
	for _, w := range m.Shards {
		t := b.targets[w.Counter]
		if !w.Known { // the view gives every shard decide asks for
			return fmt.Errorf("firestore: counter %q, shard %d: decided without its value", w.Counter, w.Shard)
		}
		t.st.shards[w.Shard].value = w.Value
		t.written[w.Shard] = true
	}
	for _, w := range m.Members {
		t := b.targets[w.Counter]
		md := t.members[w.Member]
		if md == nil { // a counter the batch creates: no document of this incarnation
			md = &memberDoc{}
			if t.members == nil {
				t.members = make(map[string]*memberDoc)
			}
			t.members[w.Member] = md
		}
		md.present = w.Present
	}
	for _, w := range m.Buckets {
		t := b.targets[w.Counter]
		t.buckets = append(t.buckets, w)
	}
	for _, w := range m.Sketches {
		t := b.targets[w.Counter]
		if t.newSketch == nil {
			t.newSketch = make(map[int][]byte)
		}
		t.newSketch[w.Shard] = w.New
	}
	for _, r := range m.Requests {
		t := b.targets[r.Counter]
		b.recorded++
		ref := t.ref.Collection(requestsCollection).Doc(Escape(r.ID))
		b.records = append(b.records, record{t: t, ref: ref, snap: b.reqs[requestKey{r.Counter, r.ID}]})
	}
	return nil
}

// The batch's view (decide.View) answers from the attempt's reads and
// the cache; every shard decide asks about is one the commit checks, when
// it writes the counter, so that what was decided on holds at the commit.

func (b *batchState) Counter(id string) (decide.Counter, error) {
	t := b.targets[id]
	switch {
	case t.err != nil:
		return decide.Counter{Exists: true, Err: t.err}, nil
	case t.st == nil:
		return decide.Counter{}, nil
	}
	c := decide.Counter{Exists: true, Spec: t.st.meta.spec, Sum: decide.SumInZone}
	if t.st.full {
		vals := make([]int64, len(t.st.shards))
		for i, sh := range t.st.shards {
			vals[i] = sh.value
		}
		c.Total, c.Sum = decide.Total(vals)
	}
	return c, nil
}

func (b *batchState) Shard(counter string, k int) (int64, bool, error) {
	t := b.targets[counter]
	t.verify[k] = true
	sh := t.st.shards[k]
	return sh.value, sh.known, nil
}

func (b *batchState) Request(counter, id string) (time.Time, bool, error) {
	snap := b.reqs[requestKey{counter, id}]
	if snap == nil || !snap.Exists() {
		return time.Time{}, false, nil
	}
	d := snap.Data()
	at, ok := d[fieldAt].(time.Time)
	return at, ok && sameTime(d[fieldOf], b.targets[counter].st.meta.created), nil
}

func (b *batchState) Member(counter, member string) (bool, error) {
	t := b.targets[counter]
	t.verify[shard.Of(shard.ForMember(member), t.st.meta.spec.Shards)] = true // two batches never decide one member at once
	md := t.members[member]
	if md == nil { // not known absent: deciding on it could add a present member again
		return false, fmt.Errorf("firestore: counter %q: member %q decided without reading it", counter, member)
	}
	return md.present, nil
}

func (b *batchState) Bucket(string, time.Time) (int64, bool, error) { return 0, false, nil }

func (b *batchState) Sketch(counter string, k int) ([]byte, error) {
	t := b.targets[counter]
	t.verify[k] = true
	return t.sketches[k], nil
}

// newState is a counter an item creates: every shard new and 0.
func newState(spec shardcounter.Spec, now time.Time) *counterState {
	st := &counterState{meta: meta{spec: spec, created: now.UTC().Truncate(time.Microsecond)}, shards: make([]shardState, spec.Shards), full: spec.Bounded()}
	for i := range st.shards {
		st.shards[i].known = true
	}
	return st
}

// sweepBuckets finds the buckets past retention of the windowed counters
// the batch writes, for the commit to delete: a few per counter and
// batch, so the work follows the writes.
func (s *CounterStore) sweepBuckets(ctx context.Context, b *batchState, order []string) error {
	for _, id := range order {
		t := b.targets[id]
		if t.create || len(t.buckets) == 0 {
			continue
		}
		docs, err := t.ref.Collection(bucketsCollection).Where(fieldStart, "<", t.buckets[0].Sweep).Limit(sweepBatch).Documents(ctx).GetAll()
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
	b.size = docstore.NewSizes()
	for _, id := range order {
		t := b.targets[id]
		if t.st == nil || !t.touched {
			continue
		}
		b.size.For(id)
		st := t.st
		n := st.meta.spec.Shards
		if t.create {
			fields := metaFields(id, st.meta)
			wb.Create(t.ref, fields)
			b.count(t.ref, fields, nil)
			add("counter")
			for i := range n {
				fields := map[string]any{b.s.field: st.shards[i].value, fieldNumShards: int64(n), fieldBy: b.s.writer}
				if sk, ok := t.newSketch[i]; ok {
					fields[fieldSketch] = sk
				}
				wb.Create(shardRef(t.ref, i), fields)
				b.count(shardRef(t.ref, i), fields, nil)
				sw = append(sw, shardWrite{t: t, shard: i, result: add("shard")})
			}
		} else {
			sw = append(sw, b.writeShards(wb, t, add)...)
		}
		for m, md := range t.members {
			if md.present == md.was {
				continue
			}
			ref := t.ref.Collection(membersCollection).Doc(Escape(m))
			b.count(ref, map[string]any{fieldOf: st.meta.created}, nil)
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
		for _, w := range t.buckets { // more than one only when the batch's deltas leave int64
			ref := t.ref.Collection(bucketsCollection).Doc(strconv.FormatInt(w.Start.Unix(), 10))
			fields := map[string]any{fieldStart: w.Start.UTC(), b.s.field: firestore.Increment(w.Delta)}
			wb.Set(ref, fields, firestore.MergeAll)
			b.count(ref, fields, nil)
			add("bucket")
		}
	}
	for _, r := range b.records {
		fields := map[string]any{fieldAt: b.now, fieldOf: r.t.st.meta.created}
		b.size.For(r.t.id)
		b.count(r.ref, fields, nil)
		if r.snap != nil && r.snap.Exists() {
			wb.Update(r.ref, []firestore.Update{{Path: fieldAt, Value: b.now}, {Path: fieldOf, Value: r.t.st.meta.created}}, firestore.LastUpdateTime(r.snap.UpdateTime))
		} else {
			wb.Create(r.ref, fields)
		}
		add("request")
	}
	for _, ref := range b.sweeps {
		id, _ := Unescape(ref.Parent.Parent.ID) // a bucket of the counter
		b.size.For(id)
		b.count(ref, nil, nil)
		wb.Delete(ref)
		add("sweep")
	}
	b.size.For("")
	return sw
}

// count adds a write of ref, its fields or updates, to the commit's
// estimated size.
func (b *batchState) count(ref *firestore.DocumentRef, fields map[string]any, ups []firestore.Update) {
	b.size.Write(ref.Path)
	for k, v := range fields {
		b.size.Field(k, v)
	}
	for _, u := range ups {
		b.size.Field(u.Path, u.Value)
	}
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
		if !t.written[i] && !t.verify[i] && !st.full {
			continue
		}
		sh := st.shards[i]
		ref := shardRef(t.ref, i)
		// The shard's value as the batch decided it, not an Increment of
		// the batch's deltas: the update-time precondition makes the two
		// the same, but the deltas' sum may leave int64 where the value
		// does not, and Firestore clamps an Increment at the int64 edges.
		ups := []firestore.Update{{Path: b.s.field, Value: sh.value}}
		if !sh.mine {
			ups = append(ups, firestore.Update{Path: fieldBy, Value: b.s.writer})
		}
		if st.full && sh.wide != wide {
			ups = append(ups, firestore.Update{Path: fieldWide, Value: wide})
		}
		sk, newSketch := t.newSketch[i]
		if newSketch {
			ups = append(ups, firestore.Update{Path: fieldSketch, Value: sk})
		}
		if sh.exists {
			wb.Update(ref, ups, firestore.LastUpdateTime(sh.ut))
			b.count(ref, nil, ups)
		} else {
			checkCounter = true
			fields := map[string]any{b.s.field: sh.value, fieldBy: b.s.writer}
			if wide {
				fields[fieldWide] = true
			}
			if newSketch {
				fields[fieldSketch] = sk
			}
			wb.Create(ref, fields)
			b.count(ref, fields, nil)
		}
		sw = append(sw, shardWrite{t: t, shard: i, result: add("shard"), wide: st.full && wide})
	}
	if checkCounter {
		ups := []firestore.Update{{Path: fieldNumShards, Value: int64(n)}}
		wb.Update(t.ref, ups, firestore.LastUpdateTime(st.meta.ut))
		b.count(t.ref, nil, ups)
		add("counter")
	}
	return sw
}

// committed takes in a committed batch: the shard versions it wrote and
// the per-document commit counts.
func (b *batchState) committed(results []*firestore.WriteResult, sw []shardWrite, order []string) {
	for _, w := range sw {
		sh := &w.t.st.shards[w.shard]
		sh.ut, sh.exists, sh.known, sh.wide, sh.mine = results[w.result].UpdateTime, true, true, w.wide, true
		b.s.Stats().Committed(w.t.id, w.shard)
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
