package pebble

import (
	"context"
	"errors"

	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/shardcounter/shardcounter"
)

var _ shardcounter.MemoryReader = (*CounterStore)(nil)

// ReadsFromMemory is true: ReadCounters reads the totals in memory.
func (s *CounterStore) ReadsFromMemory() bool { return true }

// ReadCounter returns the counter's total from memory.
func (s *CounterStore) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	rs, err := s.ReadCounters(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	if rs[0] == nil {
		return nil, shardcounter.CounterNotFound(id)
	}
	return rs[0], nil
}

// ReadCounters returns the counters' totals from memory, as the durable
// batches left them, all under one lock: one consistent snapshot that
// holds every batch acknowledged before the call and none not yet durable.
// It touches no disk.
func (s *CounterStore) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	if err := shardcounter.CheckReadBatch(len(ids)); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: %v", err)
	}
	out := make([]*shardcounter.Reading, len(ids))
	readings := make([]shardcounter.Reading, len(ids))
	asOf := s.now().UTC()
	type approxRead struct {
		i   int
		st  *apxState
		sk  [][]byte
		gen uint64
	}
	var approx []approxRead
	s.pub.RLock()
	if s.index == nil { // closed
		s.pub.RUnlock()
		return nil, errClosed
	}
	for i, id := range ids {
		if c := s.counter(id); c != nil && c.shards != 0 {
			readings[i] = shardcounter.Reading{ID: id, Value: c.total, Shards: int(c.shards), Consistency: shardcounter.Strong, AsOf: asOf}
			out[i] = &readings[i]
			if st := s.approx[id]; st != nil && st.published != nil {
				approx = append(approx, approxRead{i, st, st.published, st.gen})
			}
		}
	}
	s.pub.RUnlock()
	// Estimates are computed outside the lock, on the sketches published
	// when the lock was held: the same snapshot as the totals.
	for _, a := range approx {
		v, err := a.st.estimate(a.sk, a.gen)
		if err != nil {
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "pebble: counter %q: %v", ids[a.i], err)
		}
		readings[a.i].Value = v
	}
	return out, nil
}

// getRecord reads a counter's record, folded with its deltas, or returns
// ErrNotFound.
func getRecord(r pdb.Reader, id string) (*record, error) {
	v, closer, err := r.Get(counterKey(id))
	if errors.Is(err, pdb.ErrNotFound) {
		return nil, shardcounter.CounterNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return decodeRecord(v)
}

// ReadShards returns the counter and its shard values, as its record
// holds them.
func (s *CounterStore) ReadShards(ctx context.Context, id string) (*shardcounter.Counter, []int64, error) {
	var rec *record
	var sk [][]byte
	err := s.durableRead(ctx, func(r pdb.Reader) error {
		var err error
		if rec, err = getRecord(r, id); err != nil || rec.meta.spec.Kind != shardcounter.KindApprox {
			return err
		}
		sk, err = readSketches(r, id, rec.meta.spec.Shards)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if sk != nil {
		vals, err := shardEstimates(id, sk)
		return rec.meta.counter(id), vals, err
	}
	return rec.meta.counter(id), rec.shards, nil
}

// Placement returns each shard's value; every shard is in the counter's
// one record, in the directory.
func (s *CounterStore) Placement(ctx context.Context, id string) (*shardcounter.Placement, error) {
	c, vals, err := s.ReadShards(ctx, id)
	if err != nil {
		return nil, err
	}
	p := &shardcounter.Placement{ID: id, Shards: c.Shards, AsOf: s.now().UTC()}
	for i, v := range vals {
		p.Places = append(p.Places, shardcounter.ShardPlacement{Shard: i, Value: v, Node: s.dir})
	}
	return p, nil
}

// Counters returns how many counters the store holds in memory.
func (s *CounterStore) Counters() int {
	s.pub.RLock()
	defer s.pub.RUnlock()
	n := 0
	s.eachCounter(func(c *ctr) {
		if c.shards != 0 {
			n++
		}
	})
	return n
}
