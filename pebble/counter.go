package pebble

import (
	"bytes"
	"context"

	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// locked takes the write lock and checks that a write may start; on an
// error the lock is not held.
func (s *CounterStore) locked(ctx context.Context) error {
	s.mu.Lock()
	if err := s.check(ctx); err != nil {
		s.mu.Unlock()
		return err
	}
	return nil
}

// refuse returns err, a refusal decided on the counters as the batches
// handed to Pebble leave them, once those batches are durable: so a
// refusal never rests on a write a crash could still undo. s.mu is held
// on entry and released.
func (s *CounterStore) refuse(err error) error {
	t := s.ticket.Load()
	s.mu.Unlock()
	if werr := s.waitDurable(t); werr != nil {
		return werr
	}
	return err
}

// CreateCounter records a counter with spec.Shards zero-valued shards.
func (s *CounterStore) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateSpec(spec); err != nil {
		return nil, err
	}
	if err := s.locked(ctx); err != nil {
		return nil, err
	}
	c := s.counter(id)
	if c != nil && c.spec != 0 {
		return nil, s.refuse(shardcounter.Errorf(shardcounter.EEXISTS, "counter %q already exists", id))
	}
	r := &record{meta: newMeta(spec, s.now().UnixNano()), shards: make([]int64, spec.Shards)}
	b := s.db.NewBatch()
	if err := b.Set(counterKey(id), encodeRecord(r), nil); err != nil {
		s.mu.Unlock()
		b.Close()
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: write failed, nothing applied: %v", err)
	}
	if c == nil {
		s.pub.Lock()
		c = s.addCounter([]byte(id))
		s.pub.Unlock()
	}
	c.spec, c.pending = s.intern(r.meta.spec), 0
	delete(s.states, id)
	u := update{c: c, shards: uint16(spec.Shards)}
	if spec.Kind == shardcounter.KindApprox {
		st := s.apxOf(id)
		st.pending = make([][]byte, spec.Shards)
		u.apx, u.sketches = st, st.pending
	}
	if err := s.commit(b, []update{u}); err != nil {
		return nil, err
	}
	return r.meta.counter(id), nil
}

// GetCounter returns the counter's metadata from its record.
func (s *CounterStore) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	var c *shardcounter.Counter
	err := s.durableRead(ctx, func(r pdb.Reader) error {
		rec, err := getRecord(r, id)
		if err == nil {
			c = rec.meta.counter(id)
		}
		return err
	})
	return c, err
}

// ListCounters returns up to limit counters in id order: one walk of the
// records.
func (s *CounterStore) ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error) {
	var out []*shardcounter.Counter
	err := s.durableRead(ctx, func(r pdb.Reader) error {
		lower := counterKey(prefix)
		upper := prefixEnd(lower)
		it, err := r.NewIter(&pdb.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			return err
		}
		defer it.Close()
		start := lower
		if after >= prefix {
			start = counterKey(after)
		}
		for ok := it.SeekGE(start); ok && len(out) < limit; ok = it.Next() {
			id := string(it.Key()[1:])
			if id == after {
				continue
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			rec, err := decodeRecord(v)
			if err != nil {
				return err
			}
			out = append(out, rec.meta.counter(id))
		}
		return it.Error()
	})
	return out, err
}

// DeleteCounter removes the counter's record, members, window buckets and
// request ids in one batch.
func (s *CounterStore) DeleteCounter(ctx context.Context, id string) error {
	if err := s.locked(ctx); err != nil {
		return err
	}
	c := s.counter(id)
	if c == nil || c.spec == 0 {
		return s.refuse(shardcounter.CounterNotFound(id))
	}
	b := s.db.NewBatch()
	if err := deleteCounter(s.db, b, id); err != nil {
		s.mu.Unlock()
		b.Close()
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: delete failed, nothing applied: %v", err)
	}
	c.spec, c.pending = 0, 0
	delete(s.states, id)
	u := update{c: c}
	if st := s.approx[id]; st != nil {
		st.pending, u.apx = nil, st
	}
	if err := s.commit(b, []update{u}); err != nil {
		return err
	}
	s.forget([]string{id}, []*ctr{c})
	return nil
}

// forget drops from memory the counters ids, cs, deleted by a batch now
// durable, unless a write made one again meanwhile. s.mu is not held.
func (s *CounterStore) forget(ids []string, cs []*ctr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.pub.Lock()
	defer s.pub.Unlock()
	for i, id := range ids {
		if c := cs[i]; c.spec == 0 && c.shards == 0 && s.counter(id) == c {
			s.removeCounter(id, c)
			if st := s.approx[id]; st != nil && st.pending == nil {
				delete(s.approx, id)
			}
		}
	}
}

// deleteCounter adds to b the deletion of every key of counter id.
func deleteCounter(r pdb.Reader, b *pdb.Batch, id string) error {
	if err := b.Delete(counterKey(id), nil); err != nil {
		return err
	}
	for _, kind := range []byte{prefixMember, prefixWindow, prefixSketch} {
		p := prefixKey(kind, id)
		if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
			return err
		}
	}
	p := prefixKey(prefixRequest, id)
	it, err := r.NewIter(&pdb.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := b.Delete(it.Key(), nil); err != nil {
			return err
		}
		if err := b.Delete(timeKey(decodeInt(v), it.Key()), nil); err != nil {
			return err
		}
	}
	return it.Error()
}

// ReshardCounter sets the counter's record to the new shard count in one
// batch, under the write lock, so no write interleaves. A sum counter's
// removed shards fold into the kept ones (shard i into i mod shards); a
// distinct counter's members are recounted into the new shards. The total
// is unchanged, in memory and on disk.
func (s *CounterStore) ReshardCounter(ctx context.Context, id string, shards int) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateShards(shards); err != nil {
		return nil, err
	}
	if err := s.locked(ctx); err != nil {
		return nil, err
	}
	c := s.counter(id)
	if c == nil || c.spec == 0 {
		return nil, s.refuse(shardcounter.CounterNotFound(id))
	}
	fail := func(err error) (*shardcounter.Counter, error) {
		s.mu.Unlock()
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: reshard failed, nothing applied: %v", err)
	}
	rec, err := getRecord(s.db, id)
	if err != nil {
		return fail(err)
	}
	vals := make([]int64, shards)
	if rec.meta.distinct() {
		if vals, err = countMembers(s.db, id, shards); err != nil {
			return fail(err)
		}
	} else {
		for i, v := range rec.shards {
			vals[i%shards] += v
		}
	}
	rec.meta.spec.Shards, rec.shards = shards, vals
	b := s.db.NewBatch()
	if err := b.Set(counterKey(id), encodeRecord(rec), nil); err != nil {
		b.Close()
		return fail(err)
	}
	u := update{c: c, total: c.pending, shards: uint16(shards)}
	if rec.meta.spec.Kind == shardcounter.KindApprox {
		st := s.apxOf(id)
		sk, err := reshardSketches(b, id, st.pending, shards)
		if err != nil {
			b.Close()
			return fail(err)
		}
		st.pending, u.apx, u.sketches = sk, st, sk
	}
	c.spec = s.intern(rec.meta.spec)
	delete(s.states, id)
	if err := s.commit(b, []update{u}); err != nil {
		return nil, err
	}
	return rec.meta.counter(id), nil
}

// countMembers counts a distinct counter's members on each of shards
// shards: member m on shard.Of(shard.ForMember(m), shards).
func countMembers(r pdb.Reader, id string, shards int) ([]int64, error) {
	counts := make([]int64, shards)
	p := prefixKey(prefixMember, id)
	it, err := r.NewIter(&pdb.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		counts[shard.Of(shard.ForMember(string(bytes.TrimPrefix(it.Key(), p))), shards)]++
	}
	return counts, it.Error()
}
