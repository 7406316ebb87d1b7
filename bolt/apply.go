package bolt

import (
	"context"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// Add adds delta to shard pick mod n in its own synced transaction: the
// seed algorithm, one store write per increment.
func (s *CounterStore) Add(ctx context.Context, id string, delta int64, pick uint64) error {
	var out [1]shardcounter.Outcome
	if err := s.apply(ctx, []shardcounter.Increment{{Counter: id, Delta: delta, Pick: pick}}, out[:]); err != nil {
		return err
	}
	return out[0].Err
}

// Apply applies the batch in one synced transaction; items that fail on
// their own are skipped and reported. Each counter's record and total are
// read once per batch, and each item costs a few key reads and writes, so
// a batch's work is proportional to its items and counters.
func (s *CounterStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	out := make([]shardcounter.Outcome, len(incs))
	if err := s.apply(ctx, incs, out); err != nil {
		return nil, err
	}
	return out, nil
}

// apply applies incs in one transaction and sets their outcomes in out.
func (s *CounterStore) apply(ctx context.Context, incs []shardcounter.Increment, out []shardcounter.Outcome) error {
	if len(incs) == 0 {
		return nil
	}
	now := s.now()
	return s.update(ctx, func(tx *bbolt.Tx) error {
		clear(out) // bbolt never retries fn, but keep the result tied to this run
		b := &batch{
			tx:       tx,
			shards:   tx.Bucket(bucketShards),
			members:  tx.Bucket(bucketMembers),
			window:   tx.Bucket(bucketWindow),
			requests: tx.Bucket(bucketRequests),
			byTime:   tx.Bucket(bucketByTime),
			now:      now,
			cutoff:   now.UnixNano() - s.window.Load(),
			counters: make(map[string]*target),
		}
		for i, inc := range incs {
			if err := b.apply(inc, &out[i]); err != nil {
				return err
			}
		}
		if err := b.flushSketches(); err != nil {
			return err
		}
		b.totals(incs, out)
		return expire(b.requests, b.byTime, b.cutoff, expireBatch+b.recorded)
	})
}

// batch is one Apply's transaction and what it has learnt of the counters
// it writes.
type batch struct {
	tx                                        *bbolt.Tx
	shards, members, window, requests, byTime *bbolt.Bucket
	now                                       time.Time // the commit time
	cutoff                                    int64     // request ids recorded at or before it (unix ns) have expired
	counters                                  map[string]*target
	recorded                                  int                       // request ids recorded
	sketches                                  map[string]*pendingSketch // by shard key
}

// target is one counter as the items of the batch so far have left it.
type target struct {
	m      meta
	exists bool  // in the file, or created by an earlier item of the batch
	total  int64 // the sum of its shards
	err    error // when set, every item on the counter fails with it
	swept  bool  // its window buckets past retention are deleted
}

// target returns the counter an increment writes. A missing counter
// becomes the increment's Create spec, to be recorded when an item on it
// first applies: a batch whose items on a new counter all fail creates
// nothing.
func (b *batch) target(inc shardcounter.Increment) *target {
	t := b.counters[inc.Counter]
	if t == nil {
		t = new(target)
		var err error
		if t.m, err = getMeta(b.tx, inc.Counter); err == nil {
			t.exists = true
			if t.m.spec.Kind != shardcounter.KindApprox { // its value is read on demand
				t.total, t.err = total(b.tx, inc.Counter, t.m)
			}
		} else if shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
			t.err = err
		}
		b.counters[inc.Counter] = t
	}
	if !t.exists && inc.Create != nil {
		t.m = newMeta(*inc.Create, b.now.UnixNano())
	}
	return t
}

// apply applies one increment, or records why it failed in o. Its error
// is the transaction's: bbolt could not write.
func (b *batch) apply(inc shardcounter.Increment, o *shardcounter.Outcome) error {
	if err := shardcounter.ValidateIncrement(inc); err != nil {
		o.Err = err
		return nil
	}
	t := b.target(inc)
	switch {
	case t.err != nil:
		o.Err = t.err
		return nil
	case !t.exists && inc.Create == nil:
		o.Err = shardcounter.CounterNotFound(inc.Counter)
		return nil
	}
	if o.Err = shardcounter.ValidateIncrementKind(inc, t.m.spec.Kind); o.Err != nil {
		return nil
	}

	var rkey, old []byte
	if inc.RequestID != "" {
		rkey = requestKey(inc.Counter, inc.RequestID)
		if old = b.requests.Get(rkey); old != nil && decodeInt(old) > b.cutoff {
			o.Duplicate = true
			return nil
		}
	}

	if t.m.spec.Kind == shardcounter.KindApprox {
		return b.approx(t, inc, o, rkey, old)
	}
	var mkey []byte
	pick := inc.Pick
	if inc.Member != "" {
		mkey = memberKey(inc.Counter, inc.Member)
		if present := has(b.members, mkey); present == (inc.Delta > 0) {
			o.Unchanged = true
			return b.record(t, inc, rkey, old)
		}
		pick = shard.ForMember(inc.Member)
	}

	key := shardKey(inc.Counter, shard.Of(pick, t.m.spec.Shards))
	v, ok1 := overflow.Add(decodeInt(b.shards.Get(key)), inc.Delta)
	sum, ok2 := overflow.Add(t.total, inc.Delta)
	if ok2 && !ok1 && mkey == nil {
		// Out of range is judged on the total: the shard picked is full,
		// but then another has room (see roomFor).
		key, v, ok1 = b.roomFor(inc.Counter, t.m.spec.Shards, shard.Of(pick, t.m.spec.Shards), inc.Delta)
	}
	if !ok1 || !ok2 {
		o.Err = shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take it outside the int64 range", inc.Counter, inc.Delta)
		return nil
	}
	if err := bounds(inc.Counter, t.m.spec, inc.Delta, sum); err != nil {
		o.Err = err
		return nil
	}
	var bkey []byte
	var bval int64
	if w := t.m.spec.Window; w != nil {
		bkey = bucketKey(inc.Counter, w.BucketOf(b.now))
		var ok bool
		if bval, ok = overflow.Add(decodeInt(b.window.Get(bkey)), inc.Delta); !ok {
			o.Err = shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: adding %d would take its window bucket outside the int64 range", inc.Counter, inc.Delta)
			return nil
		}
	}

	if err := b.record(t, inc, rkey, old); err != nil {
		return err
	}
	if err := b.shards.Put(key, encodeInt(v)); err != nil {
		return err
	}
	t.total = sum
	switch {
	case mkey != nil && inc.Delta > 0:
		if err := b.members.Put(mkey, nil); err != nil {
			return err
		}
	case mkey != nil:
		if err := b.members.Delete(mkey); err != nil {
			return err
		}
	}
	if bkey != nil {
		if err := b.sweep(inc.Counter, t); err != nil {
			return err
		}
		if err := b.window.Put(bkey, encodeInt(bval)); err != nil {
			return err
		}
	}
	return nil
}

// roomFor returns the first shard after shard k (of n) that can take
// delta, and its value with it. When the total plus delta is an int64,
// one can: if every shard v_i had v_i + delta past MaxInt64 (delta > 0),
// the total would exceed n·(MaxInt64 − delta) ≥ MaxInt64 − delta, and so
// the total plus delta would too; the same holds below. A shard's value
// is where its writes happened to land, and only the sum is the counter's
// value, so any shard will do; the request id, if any, is recorded by
// counter, not by shard.
func (b *batch) roomFor(id string, n, k int, delta int64) ([]byte, int64, bool) {
	for i := 1; i < n; i++ {
		key := shardKey(id, (k+i)%n)
		if v, ok := overflow.Add(decodeInt(b.shards.Get(key)), delta); ok {
			return key, v, true
		}
	}
	return nil, 0, false
}

// totals gives each item that asked for it (Increment.Total) and did not
// fail its counter's total as the whole batch leaves it: its value at the
// commit, since bbolt has one writer at a time.
func (b *batch) totals(incs []shardcounter.Increment, out []shardcounter.Outcome) {
	for i, inc := range incs {
		if !inc.Total || out[i].Err != nil {
			continue
		}
		if t := b.counters[inc.Counter]; t != nil && t.exists && t.m.spec.Kind != shardcounter.KindApprox {
			v := t.total
			out[i].Total = &v
		}
	}
}

// record marks an item applied: it creates the item's counter when it is
// the first to apply on a new one, and records its request id.
func (b *batch) record(t *target, inc shardcounter.Increment, rkey, old []byte) error {
	if !t.exists {
		if err := b.tx.Bucket(bucketCounters).Put([]byte(inc.Counter), encodeMeta(t.m)); err != nil {
			return err
		}
		t.exists = true
	}
	if rkey == nil {
		return nil
	}
	if old != nil { // expired, not yet deleted: record it afresh
		if err := b.byTime.Delete(timeKey(decodeInt(old), rkey)); err != nil {
			return err
		}
	}
	ns := b.now.UnixNano()
	if err := b.requests.Put(rkey, encodeInt(ns)); err != nil {
		return err
	}
	b.recorded++
	return b.byTime.Put(timeKey(ns, rkey), nil)
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

// expire deletes up to limit request ids recorded at or before cutoff,
// oldest first.
func expire(requests, byTime *bbolt.Bucket, cutoff int64, limit int) error {
	c := byTime.Cursor()
	for k, _ := c.First(); k != nil && limit > 0 && decodeInt(k[:8]) <= cutoff; k, _ = c.First() {
		if err := requests.Delete(k[8:]); err != nil {
			return err
		}
		if err := c.Delete(); err != nil {
			return err
		}
		limit--
	}
	return nil
}
