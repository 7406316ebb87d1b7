package firestore

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// batchState is one attempt: the view package decide decided the batch
// on (docstore.View), and what the commit writes.
type batchState struct {
	docstore.View
	s          *CounterStore
	now        time.Time
	targets    map[string]*target
	reqs       map[docstore.Key]*docstore.Own // nil: none
	members    map[docstore.Key]*docstore.Own
	sweeps     []*firestore.DocumentRef
	writesList []string // what the commit writes, for its results
	size       *docstore.Sizes
}

// decide decides the batch on what the attempt read and the cache (the
// view) and takes the decided shard values into the counters' states. A
// counter the view knows only in part that must be checked whole ends the
// attempt (errFull), to be read again in full.
func (b *batchState) decide(incs []shardcounter.Increment, out []shardcounter.Outcome, order []string) error {
	b.View = docstore.NewView("firestore")
	for _, id := range order {
		t := b.targets[id]
		b.Targets[id] = &t.Target
		if t.st == nil {
			continue
		}
		spec := t.st.meta.spec
		t.Spec, t.Full, t.Vals = &spec, t.st.full, map[int]int64{}
		for i, sh := range t.st.shards {
			if sh.known {
				t.Vals[i] = sh.value
			}
		}
		if bs := t.st.bucket; spec.Window != nil && bs.start.Equal(spec.Window.BucketOf(b.now)) {
			t.Bucket = &shardcounter.Bucket{Start: bs.start, Value: bs.value}
		}
	}
	b.TakeOwn(b.reqs, b.members, func(id string) time.Time { return b.targets[id].st.meta.created })
	whole, err := b.View.Decide(incs, b.now, b.now.Add(-b.s.Window()), out)
	if len(whole) > 0 {
		for _, id := range whole {
			b.s.fullHint.Store(id, true)
			b.s.cache.Remove(id)
		}
		return errFull
	}
	if err != nil {
		return err
	}
	for _, id := range order {
		t := b.targets[id]
		if t.Create {
			t.st = newState(*t.Spec, b.now)
		}
		for k := range t.Written {
			t.st.shards[k].value = t.Vals[k]
		}
		for _, w := range t.Buckets {
			if !w.Known {
				return fmt.Errorf("firestore: counter %q: its bucket decided without its value", id)
			}
		}
	}
	return nil
}

// newState is a counter an item creates: every shard new and 0.
func newState(spec shardcounter.Spec, now time.Time) *counterState {
	st := &counterState{meta: meta{spec: spec, created: now.UTC().Truncate(time.Microsecond)}, shards: make([]shardState, spec.Shards), full: spec.Bounded()}
	for i := range st.shards {
		st.shards[i].known = true
	}
	return st
}

// sweepBuckets finds the buckets past retention the commit deletes
// (docstore.Sweep).
func (s *CounterStore) sweepBuckets(ctx context.Context, b *batchState, order []string) (err error) {
	b.sweeps, err = docstore.Sweep(&b.View, order, func(id string, cut time.Time) ([]*firestore.DocumentRef, error) {
		docs, err := b.targets[id].ref.Collection(bucketsCollection).Where(fieldStart, "<", cut).Limit(docstore.SweepBatch).Documents(ctx).GetAll()
		if err != nil {
			return nil, readError("read window buckets", err)
		}
		refs := make([]*firestore.DocumentRef, len(docs))
		for i, d := range docs {
			refs[i] = d.Ref
		}
		return refs, nil
	})
	return err
}

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
		if t.st == nil || !t.Touched {
			continue
		}
		b.size.For(id)
		st := t.st
		n := st.meta.spec.Shards
		if t.Create {
			fields := metaFields(id, st.meta)
			wb.Create(t.ref, fields)
			b.count(t.ref, fields, nil)
			add("counter")
			for i := range n {
				fields := map[string]any{b.s.field: st.shards[i].value, fieldNumShards: int64(n), fieldBy: b.s.writer}
				if sk, ok := t.Sketch[i]; ok {
					fields[fieldSketch] = sk
				}
				wb.Create(shardRef(t.ref, i), fields)
				b.count(shardRef(t.ref, i), fields, nil)
				sw = append(sw, shardWrite{t: t, shard: i, result: add("shard")})
			}
		} else {
			sw = append(sw, b.writeShards(wb, t, add)...)
		}
		for m, present := range t.Present {
			ref := t.ref.Collection(membersCollection).Doc(Escape(m))
			b.count(ref, map[string]any{fieldOf: st.meta.created}, nil)
			switch o := b.members[docstore.Key{Counter: id, ID: m}]; {
			case present && o == nil:
				wb.Create(ref, map[string]any{fieldOf: st.meta.created})
			case present:
				wb.Update(ref, []firestore.Update{{Path: fieldOf, Value: st.meta.created}}, firestore.LastUpdateTime(o.Version))
			default: // read present
				wb.Delete(ref, firestore.LastUpdateTime(o.Version))
			}
			add("member")
		}
		if n := len(t.Buckets); n > 0 { // the last: more than one only when the batch's deltas leave int64
			b.writeBucket(wb, t, t.Buckets[n-1], add)
		}
	}
	for _, r := range b.Records {
		t := b.targets[r.Counter]
		ref, o := t.ref.Collection(requestsCollection).Doc(Escape(r.ID)), b.reqs[docstore.Key{Counter: r.Counter, ID: r.ID}]
		fields := map[string]any{fieldAt: b.now, fieldOf: t.st.meta.created}
		b.size.For(r.Counter)
		b.count(ref, fields, nil)
		if o != nil {
			wb.Update(ref, []firestore.Update{{Path: fieldAt, Value: b.now}, {Path: fieldOf, Value: t.st.meta.created}}, firestore.LastUpdateTime(o.Version))
		} else {
			wb.Create(ref, fields)
		}
		add("request")
	}
	for _, id := range b.Removes {
		b.size.For(id)
		b.remove(wb, b.targets[id], add)
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

// writeBucket adds to wb the write of a windowed counter's bucket, w, as
// the batch decided it (docstore.View's Bucket gave its value): its new
// value and the counter's created_at (of), under the update time it was
// read or committed with, or created when read missing, so that a write
// committed to it since fails the commit and the batch is decided again.
// A bucket a deleted counter of the id left was read as 0 (bucketFromSnap)
// and is replaced; a counter the batch creates sets its bucket whole.
func (b *batchState) writeBucket(wb *firestore.WriteBatch, t *target, w decide.BucketWrite, add func(string) int) { //nolint:staticcheck // see applyOnce
	ref := bucketRef(t.ref, w.Start)
	fields := map[string]any{fieldStart: w.Start.UTC(), b.s.field: w.Value, fieldOf: t.st.meta.created}
	switch bs := t.st.bucket; {
	case t.Create:
		wb.Set(ref, fields)
	case bs.exists && bs.start.Equal(w.Start):
		wb.Update(ref, []firestore.Update{{Path: fieldStart, Value: w.Start.UTC()}, {Path: b.s.field, Value: w.Value}, {Path: fieldOf, Value: t.st.meta.created}}, firestore.LastUpdateTime(bs.ut))
	default:
		wb.Create(ref, fields)
	}
	b.count(ref, fields, nil)
	t.bucketWrite = &bucketWrite{state: bucketState{start: w.Start, value: w.Value, exists: true}, result: add("bucket")}
}

// bucketWrite is a bucket the commit writes, and where its result is.
type bucketWrite struct {
	state  bucketState
	result int
}

// remove adds to wb the deletion of an idle limit state the batch
// removes (docstore.View.Removes), under what the batch decided it on:
// each shard document under the update time read, so that a take
// committed since fails the commit and the batch is decided again; one
// read missing is created empty and deleted in the commit, so that the
// create fails if a take created it since; and the counter document under
// its update time (or its existence, when the cache has none: a counter
// this process created). Its request ids stay for the request-id expiry:
// they carry its created_at, which a state made again does not have
// (docstore.View.TakeOwn). The state has no members and no buckets.
func (b *batchState) remove(wb *firestore.WriteBatch, t *target, add func(string) int) { //nolint:staticcheck // see applyOnce
	st := t.st
	for i := range st.meta.spec.Shards {
		ref := shardRef(t.ref, i)
		if sh := st.shards[i]; sh.exists {
			wb.Delete(ref, firestore.LastUpdateTime(sh.ut))
		} else {
			wb.Create(ref, map[string]any{})
			b.count(ref, nil, nil)
			add("remove")
			wb.Delete(ref)
		}
		b.count(ref, nil, nil)
		add("remove")
	}
	pre := firestore.Exists
	if !st.meta.ut.IsZero() {
		pre = firestore.LastUpdateTime(st.meta.ut)
	}
	wb.Delete(t.ref, pre)
	b.count(t.ref, nil, nil)
	add("remove")
}

// forgetRemoved is the bookkeeping of the states a committed batch
// removed: a commit counted for each shard document deleted, and what the
// store caches of them dropped (as DeleteCounter's Forget).
func (b *batchState) forgetRemoved() {
	for _, id := range b.Removes {
		for i := range b.targets[id].st.meta.spec.Shards {
			b.s.Stats().Committed(id, i)
		}
		b.s.cache.Remove(id)
		b.s.shardsSeen.Remove(id)
		b.s.fullHint.Delete(id)
	}
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
		if !t.Written[i] && !t.Verify[i] && !st.full {
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
		sk, newSketch := t.Sketch[i]
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
		if t := b.targets[id]; t.st != nil && t.Touched {
			if w := t.bucketWrite; w != nil {
				t.st.bucket = w.state
				t.st.bucket.ut = results[w.result].UpdateTime
			}
			if t.Create {
				b.s.fullHint.Delete(id)
			}
			b.s.cache.Add(id, t.st)
		}
	}
	b.forgetRemoved()
}
