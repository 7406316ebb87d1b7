package pebble

import (
	"context"
	"errors"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
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
// fail on their own are left out and reported. Package decide decides the
// batch on the totals in memory (view): an item on a sum counter is a
// merge operand, and reads nothing. An item with a request id reads that
// id (a bloom filter answers most), a member item its member, an item on
// a windowed counter its bucket.
func (s *CounterStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	out := make([]shardcounter.Outcome, len(incs))
	if err := s.apply(ctx, incs, out); err != nil {
		return nil, err
	}
	return out, nil
}

// apply decides incs and builds their batch under the write lock, commits
// it, and sets the outcomes in out.
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
	cutoff := now.UnixNano() - s.window.Load()
	v := &view{s: s}
	m, err := decide.Decide(v, decide.Batch{Incs: incs, Now: now, Cutoff: time.Unix(0, cutoff)}, out)
	pb := s.db.NewBatch()
	oldest := s.oldestID
	if err == nil {
		err = v.write(pb, m, now.UnixNano())
	}
	if err == nil {
		oldest, err = s.expire(pb, cutoff, m.Requests)
	}
	if err != nil {
		s.mu.Unlock()
		pb.Close()
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: write failed, nothing applied: %v", err)
	}
	if pb.Empty() {
		// Every item failed, was a duplicate or changed nothing: what
		// they saw may be of batches not yet durable, so wait for those.
		t := s.ticket.Load()
		s.mu.Unlock()
		pb.Close()
		return s.waitDurable(t)
	}
	if len(m.Requests) > 0 {
		oldest = min(oldest, now.UnixNano())
	}
	s.oldestID = oldest
	s.keepStates(v.state, m.Shards)
	updates := s.publish(m)
	var removed []*ctr
	for _, id := range m.Removes {
		// As DeleteCounter: gone from memory for the next batch, its
		// deletion published once durable, and then forgotten.
		c := s.counter(id)
		c.spec, c.pending = 0, 0
		delete(s.states, id)
		updates = append(updates, update{c: c})
		removed = append(removed, c)
	}
	if err := s.commit(pb, updates); err != nil || len(removed) == 0 {
		return err
	}
	s.forget(m.Removes, removed)
	return nil
}

// view is the store as package decide reads it (decide.View), under s.mu:
// counters and their totals, and approx counters' sketches, from memory,
// as the batches handed to Pebble leave them; request ids, members and
// buckets from Pebble. A batch's writes reach Pebble only once it is
// decided, so every read is of the store before the batch.
type view struct {
	s     *CounterStore
	fresh map[string]bool    // counters whose bucket of the commit time does not exist yet
	state map[string][]int64 // the shard values of limit keys' state read
}

func (v *view) Counter(id string) (decide.Counter, error) {
	c := v.s.counter(id)
	if c == nil || c.spec == 0 {
		return decide.Counter{}, nil
	}
	return decide.Counter{Exists: true, Spec: *v.s.specs[c.spec], Total: c.pending}, nil
}

// Shard is unknown, but for a limit key's state: the totals are in
// memory, the shard values in records a write does not read (a merge
// operand lands on its shard, and a fold moves what a shard cannot hold:
// record.go). A one-shard state's (GCRA, CL.THROTTLE's) value is the
// total, which is in memory; a state of more shards (fixed and sliding
// windows) is read from its record once, and kept in memory from then on
// as the batches leave it (s.states, limitstate.go). So a hot key's take
// reads nothing (a read of its record would fold every merge operand its
// commits left in the memtable, more of them the longer it stays hot).
func (v *view) Shard(counter string, k int) (int64, bool, error) {
	if !shardcounter.IsLimitKeyID(counter) {
		return 0, false, nil
	}
	if c := v.s.counter(counter); c != nil && c.spec != 0 && v.s.specs[c.spec].Shards == 1 {
		if k > 0 {
			return 0, false, nil
		}
		return c.pending, true, nil
	}
	vals, ok := v.state[counter]
	if !ok {
		if vals, ok = v.s.states[counter]; !ok {
			rec, err := getRecord(v.s.db, counter)
			if err != nil {
				return 0, false, err
			}
			vals = rec.shards
		}
		if v.state == nil {
			v.state = make(map[string][]int64)
		}
		v.state[counter] = vals
	}
	if k >= len(vals) {
		return 0, false, nil
	}
	return vals[k], true, nil
}

func (v *view) Request(counter, id string) (time.Time, bool, error) {
	b, ok, err := v.get(requestKey(counter, id))
	return time.Unix(0, decodeInt(b)), ok, err
}

func (v *view) Member(counter, member string) (bool, error) {
	v.s.key = appendMemberKey(v.s.key[:0], counter, member)
	_, ok, err := v.get(v.s.key)
	return ok, err
}

func (v *view) Bucket(counter string, start time.Time) (int64, bool, error) {
	b, ok, err := v.get(bucketKey(counter, start))
	if err == nil && !ok {
		if v.fresh == nil {
			v.fresh = make(map[string]bool)
		}
		v.fresh[counter] = true
	}
	return decodeInt(b), err == nil, err
}

func (v *view) Sketch(counter string, shard int) ([]byte, error) {
	if st := v.s.approx[counter]; st != nil && shard < len(st.pending) {
		return st.pending[shard], nil
	}
	return nil, nil
}

// get reads key from Pebble: ok false when it is absent.
func (v *view) get(key []byte) (val []byte, ok bool, err error) {
	b, closer, err := v.s.db.Get(key)
	if errors.Is(err, pdb.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	val = append(val, b...)
	closer.Close()
	return val, true, nil
}

// write adds the batch's mutations to pb: a new counter's record, one
// merge operand of shard deltas per counter, members, request ids with
// their entries by age, buckets (deleting those past retention when the
// batch starts a bucket), and sketches. ns is the commit time.
func (v *view) write(pb *pdb.Batch, m decide.Mutations, ns int64) error {
	for _, c := range m.Counters {
		if c.Create {
			r := &record{meta: newMeta(*c.Spec, ns), shards: make([]int64, c.Spec.Shards)}
			if err := pb.Set(counterKey(c.ID), encodeRecord(r), nil); err != nil {
				return err
			}
		}
	}
	var op []byte
	for i, w := range m.Shards {
		if w.Delta != 0 {
			op = appendDelta(op, w.Shard, w.Delta)
		}
		if last := i == len(m.Shards)-1; (last || m.Shards[i+1].Counter != w.Counter) && op != nil {
			if err := pb.Merge(counterKey(w.Counter), op, nil); err != nil {
				return err
			}
			op = nil
		}
	}
	for _, w := range m.Members {
		var err error
		v.s.key = appendMemberKey(v.s.key[:0], w.Counter, w.Member)
		if w.Present {
			err = pb.Set(v.s.key, nil, nil)
		} else {
			err = pb.Delete(v.s.key, nil)
		}
		if err != nil {
			return err
		}
	}
	for _, r := range m.Requests {
		rkey := requestKey(r.Counter, r.ID)
		if r.Expired { // not yet deleted: its entry by age goes
			if err := pb.Delete(timeKey(r.Was.UnixNano(), rkey), nil); err != nil {
				return err
			}
		}
		if err := pb.Set(rkey, encodeInt(ns), nil); err != nil {
			return err
		}
		if err := pb.Set(timeKey(ns, rkey), nil, nil); err != nil {
			return err
		}
	}
	for _, b := range m.Buckets {
		if v.fresh[b.Counter] {
			delete(v.fresh, b.Counter)
			if err := pb.DeleteRange(prefixKey(prefixWindow, b.Counter), bucketKey(b.Counter, b.Sweep), nil); err != nil {
				return err
			}
		}
		if err := pb.Set(bucketKey(b.Counter, b.Start), encodeInt(b.Value), nil); err != nil {
			return err
		}
	}
	for _, id := range m.Removes {
		if err := deleteCounter(v.s.db, pb, id); err != nil {
			return err
		}
	}
	for _, w := range m.Sketches {
		val, merge := sketchValue(w.Old, w.New)
		var err error
		if merge {
			err = pb.Merge(sketchKey(w.Counter, w.Shard), val, nil)
		} else {
			err = pb.Set(sketchKey(w.Counter, w.Shard), val, nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// publish moves what the batch did to the counters in memory (which the
// view of the next batch reads) and returns the updates to publish once
// it is durable: those of the counters it created or changed. s.mu is
// held.
func (s *CounterStore) publish(m decide.Mutations) []update {
	var updates []update
	next := 0 // m.Shards is grouped by counter, in m.Counters' order
	for _, cw := range m.Counters {
		changed := cw.Create
		for ; next < len(m.Shards) && m.Shards[next].Counter == cw.ID; next++ {
			changed = true
		}
		var sk [][]byte // an approx counter's new list of sketches
		if cw.Spec.Kind == shardcounter.KindApprox {
			sk = make([][]byte, cw.Spec.Shards)
			if st := s.approx[cw.ID]; st != nil && !cw.Create {
				copy(sk, st.pending)
			}
			for _, w := range m.Sketches {
				if w.Counter == cw.ID {
					sk[w.Shard], changed = w.New, true
				}
			}
		}
		if !changed {
			continue
		}
		c := s.counter(cw.ID)
		if c == nil {
			s.pub.Lock()
			c = s.addCounter([]byte(cw.ID))
			s.pub.Unlock()
		}
		if cw.Create {
			c.spec = s.intern(*cw.Spec)
		}
		if cw.TotalKnown {
			c.pending = cw.Total
		}
		u := update{c: c, total: c.pending, shards: uint16(cw.Spec.Shards)}
		if sk != nil {
			st := s.apxOf(cw.ID)
			st.pending, u.apx, u.sketches = sk, st, sk
		}
		updates = append(updates, u)
	}
	return updates
}

// expire adds to pb the deletion of up to expireBatch plus len(recorded)
// request ids recorded at or before the cutoff, oldest first, and returns
// when the oldest id left was recorded. It reads nothing when no id has
// expired (s.oldestID says so). An id the batch records afresh is left to
// the batch, which deletes its entry by age itself.
func (s *CounterStore) expire(pb *pdb.Batch, cutoff int64, recorded []decide.RequestWrite) (int64, error) {
	if s.oldestID > cutoff {
		return s.oldestID, nil
	}
	it, err := s.db.NewIter(&pdb.IterOptions{LowerBound: []byte{prefixByTime}, UpperBound: []byte{prefixByTime + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	limit := expireBatch + len(recorded)
	var afresh map[string]bool // the request keys the batch records
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		ns := decodeInt(k[1:9])
		if ns > cutoff || limit == 0 {
			return ns, nil
		}
		if afresh == nil {
			afresh = make(map[string]bool, len(recorded))
			for _, r := range recorded {
				afresh[string(requestKey(r.Counter, r.ID))] = true
			}
		}
		rkey := append([]byte{prefixRequest}, k[9:]...)
		if afresh[string(rkey)] {
			continue
		}
		if err := pb.Delete(rkey, nil); err != nil {
			return 0, err
		}
		if err := pb.Delete(k, nil); err != nil {
			return 0, err
		}
		limit--
	}
	return 1<<63 - 1, it.Error()
}
