package pebble

import (
	"context"
	"errors"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// Add adds delta to shard pick mod n in a batch of its own: the seed
// algorithm, one commit per increment.
func (s *CounterStore) Add(ctx context.Context, id string, delta int64, pick uint64) error {
	var out [1]shardcounter.Outcome
	if err := s.apply(ctx, []shardcounter.Increment{{Counter: id, Delta: delta, Pick: pick}}, out[:]); err != nil {
		return err
	}
	return out[0].Err
}

// Apply applies the batch in one Pebble batch and one WAL sync; items that
// fail on their own are left out and reported. An item on a sum counter
// is a merge operand, checked against the total in memory: it reads
// nothing. An item with a request id reads that id (a bloom filter answers
// most), a member item its member, an item on a windowed counter its
// bucket.
func (s *CounterStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	out := make([]shardcounter.Outcome, len(incs))
	if err := s.apply(ctx, incs, out); err != nil {
		return nil, err
	}
	return out, nil
}

// apply builds the batch of incs under the write lock, commits it, and
// sets the outcomes in out.
func (s *CounterStore) apply(ctx context.Context, incs []shardcounter.Increment, out []shardcounter.Outcome) error {
	if len(incs) == 0 {
		return nil
	}
	s.mu.Lock()
	if err := s.check(ctx); err != nil {
		s.mu.Unlock()
		return err
	}
	now := s.now()
	b := &batch{
		s:       s,
		pb:      s.db.NewBatch(),
		now:     now,
		cutoff:  now.UnixNano() - s.window.Load(),
		targets: make(map[string]*target),
	}
	for i, inc := range incs {
		if err := b.apply(inc, &out[i]); err != nil {
			s.mu.Unlock()
			b.pb.Close()
			return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: write failed, nothing applied: %v", err)
		}
	}
	if err := b.flushSketches(); err != nil {
		s.mu.Unlock()
		b.pb.Close()
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: write failed, nothing applied: %v", err)
	}
	oldest, err := b.expire(expireBatch + b.recorded)
	if err != nil {
		s.mu.Unlock()
		b.pb.Close()
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: write failed, nothing applied: %v", err)
	}
	if b.pb.Empty() {
		// Every item failed, was a duplicate or changed nothing: what
		// they saw may be of batches not yet durable, so wait for those.
		t := s.ticket.Load()
		s.mu.Unlock()
		b.pb.Close()
		if err := s.waitDurable(t); err != nil {
			return err
		}
	} else {
		if b.recorded > 0 {
			oldest = min(oldest, now.UnixNano())
		}
		s.oldestID = oldest
		if err := s.commit(b.pb, b.publish()); err != nil {
			return err
		}
	}
	for i, inc := range incs {
		if inc.Total && out[i].Err == nil {
			if t := b.targets[inc.Counter]; t != nil && t.spec != nil && t.apx == nil {
				v := t.total
				out[i].Total = &v
			}
		}
	}
	return nil
}

// batch is one Apply's Pebble batch and what it has learnt of the
// counters, members, request ids and buckets it writes: a Pebble read
// does not see the batch's own writes.
type batch struct {
	s        *CounterStore
	pb       *pdb.Batch
	now      time.Time // the commit time
	cutoff   int64     // request ids recorded at or before it (unix ns) have expired
	targets  map[string]*target
	rids     map[string]bool  // request keys recorded by the batch
	members  map[string]bool  // member keys the batch wrote: present or not
	buckets  map[string]int64 // bucket keys the batch wrote: their values
	recorded int              // request ids recorded

	approxTargets []approxTarget // the approx counters it touches
}

// target is one counter as the items of the batch so far leave it. The
// counter in memory changes only once the whole batch is built.
type target struct {
	c       *ctr
	fresh   bool               // c is not in s.counters yet
	spec    *shardcounter.Spec // nil while the counter does not exist
	specIx  uint32             // spec's index in the store's specs
	want    *shardcounter.Spec // the spec to create it with (Increment.Create)
	total   int64
	changed bool
	swept   bool // its window buckets past retention are deleted

	// An approx counter's: its sketches in memory, the batch's new list
	// of them (nil until the batch changes one), and what the batch adds
	// to each shard (sketch.go).
	apx     *apxState
	sk      [][]byte
	touched map[int]*pendingSketch
}

// target returns the counter an increment writes.
func (b *batch) target(inc shardcounter.Increment) *target {
	t := b.targets[inc.Counter]
	if t == nil {
		t = new(target)
		if c := b.s.counters[inc.Counter]; c != nil {
			t.c, t.spec, t.specIx, t.total = c, b.s.specOf(c), c.spec, c.pending
			if t.spec != nil && t.spec.Kind == shardcounter.KindApprox {
				t.apx = b.s.apxOf(inc.Counter)
			}
		} else {
			t.c, t.fresh = b.s.newCtr(), true
		}
		b.targets[inc.Counter] = t
	}
	if t.spec == nil && inc.Create != nil {
		spec := newMeta(*inc.Create, 0).spec
		t.want = &spec
	}
	return t
}

// get reads key as the batch would see it, from Pebble: ok false when it is
// absent.
func (b *batch) get(key []byte) (v []byte, ok bool, err error) {
	v, closer, err := b.s.db.Get(key)
	if errors.Is(err, pdb.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v = append([]byte(nil), v...)
	closer.Close()
	return v, true, nil
}

// apply applies one increment, or records why it failed in o. Its error
// is a failed read: nothing of the batch is applied.
func (b *batch) apply(inc shardcounter.Increment, o *shardcounter.Outcome) error {
	if err := shardcounter.ValidateIncrement(inc); err != nil {
		o.Err = err
		return nil
	}
	t := b.target(inc)
	spec := t.spec
	if spec == nil {
		if inc.Create == nil {
			o.Err = shardcounter.CounterNotFound(inc.Counter)
			return nil
		}
		spec = t.want
	}
	if o.Err = shardcounter.ValidateIncrementKind(inc, spec.Kind); o.Err != nil {
		return nil
	}

	rkey, old, dup, err := b.requestID(inc)
	if err != nil || dup {
		o.Duplicate = dup
		return err
	}

	if spec.Kind == shardcounter.KindApprox {
		return b.approx(t, inc, o, rkey, old)
	}
	var mkey []byte
	pick := inc.Pick
	if inc.Member != "" {
		mkey = memberKey(inc.Counter, inc.Member)
		present, ok := b.members[string(mkey)]
		if !ok {
			var err error
			if _, present, err = b.get(mkey); err != nil {
				return err
			}
		}
		if present == (inc.Delta > 0) {
			o.Unchanged = true
			return b.record(t, inc, rkey, old)
		}
		pick = shard.ForMember(inc.Member)
	}

	sum, ok := overflow.Add(t.total, inc.Delta)
	if !ok {
		o.Err = shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it outside the int64 range", inc.Counter, inc.Delta)
		return nil
	}
	if err := bounds(inc.Counter, *spec, inc.Delta, sum); err != nil {
		o.Err = err
		return nil
	}
	var bkey []byte
	var bval int64
	fresh := false
	if w := spec.Window; w != nil {
		bkey = bucketKey(inc.Counter, w.BucketOf(b.now))
		if bval, fresh, o.Err, err = b.bucket(bkey, inc); err != nil || o.Err != nil {
			return err
		}
	}

	if err := b.record(t, inc, rkey, old); err != nil {
		return err
	}
	if err := b.pb.Merge(counterKey(inc.Counter), appendDelta(nil, shard.Of(pick, spec.Shards), inc.Delta), nil); err != nil {
		return err
	}
	t.total, t.changed = sum, true
	if mkey != nil {
		if b.members == nil {
			b.members = make(map[string]bool)
		}
		b.members[string(mkey)] = inc.Delta > 0
		var err error
		if inc.Delta > 0 {
			err = b.pb.Set(mkey, nil, nil)
		} else {
			err = b.pb.Delete(mkey, nil)
		}
		if err != nil {
			return err
		}
	}
	if bkey != nil {
		return b.setBucket(t, inc.Counter, *spec.Window, bkey, bval, fresh)
	}
	return nil
}

// requestID looks up the item's request id: its key (nil without one),
// when it was recorded before and has expired (-1 when it was not), and
// whether the item is a duplicate.
func (b *batch) requestID(inc shardcounter.Increment) (rkey []byte, old int64, dup bool, err error) {
	if inc.RequestID == "" {
		return nil, -1, false, nil
	}
	rkey = requestKey(inc.Counter, inc.RequestID)
	if b.rids[string(rkey)] {
		return rkey, -1, true, nil
	}
	v, ok, err := b.get(rkey)
	if err != nil || !ok {
		return rkey, -1, false, err
	}
	old = decodeInt(v)
	return rkey, old, old > b.cutoff, nil
}

// bucket returns the value of window bucket bkey after inc, whether the
// bucket is new, and the item's error when it would leave int64.
func (b *batch) bucket(bkey []byte, inc shardcounter.Increment) (v int64, fresh bool, oerr, err error) {
	v, seen := b.buckets[string(bkey)]
	if !seen {
		raw, found, err := b.get(bkey)
		if err != nil {
			return 0, false, nil, err
		}
		v, fresh = decodeInt(raw), !found
	}
	sum, ok := overflow.Add(v, inc.Delta)
	if !ok {
		return 0, false, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take its window bucket outside the int64 range", inc.Counter, inc.Delta), nil
	}
	return sum, fresh, nil, nil
}

// setBucket sets a window bucket; when the bucket is new, it first deletes
// the counter's buckets past retention, once per batch.
func (b *batch) setBucket(t *target, id string, w shardcounter.Window, bkey []byte, v int64, fresh bool) error {
	if fresh && !t.swept {
		t.swept = true
		end := bucketKey(id, w.BucketOf(b.now.Add(-time.Duration(w.Retention))))
		if err := b.pb.DeleteRange(prefixKey(prefixWindow, id), end, nil); err != nil {
			return err
		}
	}
	if b.buckets == nil {
		b.buckets = make(map[string]int64)
	}
	b.buckets[string(bkey)] = v
	return b.pb.Set(bkey, encodeInt(v), nil)
}

// record marks an item applied: it creates the item's counter when it is
// the first to apply on a new one, and records its request id (old is when
// the id was recorded before, expired, or -1).
func (b *batch) record(t *target, inc shardcounter.Increment, rkey []byte, old int64) error {
	if t.spec == nil {
		r := &record{meta: newMeta(*t.want, b.now.UnixNano()), shards: make([]int64, t.want.Shards)}
		if err := b.pb.Set(counterKey(inc.Counter), encodeRecord(r), nil); err != nil {
			return err
		}
		t.specIx = b.s.intern(*t.want)
		t.spec, t.total, t.changed = b.s.specs[t.specIx], 0, true
		if t.spec.Kind == shardcounter.KindApprox {
			t.apx, t.sk = b.s.apxOf(inc.Counter), make([][]byte, t.spec.Shards)
		}
	}
	if rkey == nil {
		return nil
	}
	if old >= 0 { // expired, not yet deleted: record it afresh
		if err := b.pb.Delete(timeKey(old, rkey), nil); err != nil {
			return err
		}
	}
	ns := b.now.UnixNano()
	if err := b.pb.Set(rkey, encodeInt(ns), nil); err != nil {
		return err
	}
	if b.rids == nil {
		b.rids = make(map[string]bool)
	}
	b.rids[string(rkey)] = true
	b.recorded++
	return b.pb.Set(timeKey(ns, rkey), nil, nil)
}

// publish moves what the batch did to the counters in memory (the view
// writes check) and returns the updates to publish once it is durable.
// s.mu is held.
func (b *batch) publish() []update {
	var updates []update
	for id, t := range b.targets {
		if !t.changed {
			continue
		}
		if t.fresh {
			b.s.pub.Lock()
			b.s.addCounter([]byte(id), t.c)
			b.s.pub.Unlock()
		}
		t.c.spec, t.c.pending = t.specIx, t.total
		u := update{c: t.c, total: t.total, shards: uint16(t.spec.Shards)}
		if t.sk != nil {
			t.apx.pending = t.sk
			u.apx, u.sketches = t.apx, t.sk
		}
		updates = append(updates, u)
	}
	return updates
}

// bounds refuses a write that would take a bounded counter's total to sum,
// outside its Min and Max.
func bounds(id string, spec shardcounter.Spec, delta, sum int64) error {
	if spec.Min != nil && sum < *spec.Min {
		return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it to %d, below its min %d", id, delta, sum, *spec.Min)
	}
	if spec.Max != nil && sum > *spec.Max {
		return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it to %d, above its max %d", id, delta, sum, *spec.Max)
	}
	return nil
}

// expire deletes up to limit request ids recorded at or before the
// cutoff, oldest first, and returns when the oldest id left was recorded.
// It reads nothing when no id has expired (s.oldestID says so).
func (b *batch) expire(limit int) (int64, error) {
	if b.s.oldestID > b.cutoff {
		return b.s.oldestID, nil
	}
	it, err := b.s.db.NewIter(&pdb.IterOptions{LowerBound: []byte{prefixByTime}, UpperBound: []byte{prefixByTime + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		ns := decodeInt(k[1:9])
		if ns > b.cutoff || limit == 0 {
			return ns, nil
		}
		rkey := append([]byte{prefixRequest}, k[9:]...)
		if b.rids[string(rkey)] {
			continue // recorded afresh by this batch, which deletes this entry
		}
		if err := b.pb.Delete(rkey, nil); err != nil {
			return 0, err
		}
		if err := b.pb.Delete(k, nil); err != nil {
			return 0, err
		}
		limit--
	}
	return 1<<63 - 1, it.Error()
}
