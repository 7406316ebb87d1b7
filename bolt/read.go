package bolt

import (
	"bytes"
	"context"
	"encoding/binary"

	bbolt "go.etcd.io/bbolt"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
)

// ReadCounter sums the counter's shards in one read transaction.
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

// ReadCounters reads every counter from one snapshot: one read
// transaction, so the readings are consistent with each other.
func (s *CounterStore) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	if err := shardcounter.CheckReadBatch(len(ids)); err != nil {
		return nil, err
	}
	out := make([]*shardcounter.Reading, len(ids))
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		asOf := s.now().UTC()
		for i, id := range ids {
			m, err := getMeta(tx, id)
			if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
				continue
			}
			if err != nil {
				return err
			}
			sum, err := total(tx, id, m)
			if err != nil {
				return err
			}
			out[i] = &shardcounter.Reading{ID: id, Value: sum, Shards: m.spec.Shards, Consistency: shardcounter.Strong, AsOf: asOf}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadShards returns the counter and its shard values from one snapshot.
func (s *CounterStore) ReadShards(ctx context.Context, id string) (*shardcounter.Counter, []int64, error) {
	var (
		c    *shardcounter.Counter
		vals []int64
	)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		m, err := getMeta(tx, id)
		if err != nil {
			return err
		}
		c = m.counter(id)
		vals, err = shardValues(tx, id, m)
		return err
	})
	return c, vals, err
}

// Placement returns each shard's value; every shard lives in the file.
func (s *CounterStore) Placement(ctx context.Context, id string) (*shardcounter.Placement, error) {
	var p *shardcounter.Placement
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		m, err := getMeta(tx, id)
		if err != nil {
			return err
		}
		p = &shardcounter.Placement{ID: id, Shards: m.spec.Shards, AsOf: s.now().UTC()}
		vals, err := shardValues(tx, id, m)
		if err != nil {
			return err
		}
		for i, v := range vals {
			p.Places = append(p.Places, shardcounter.ShardPlacement{Shard: i, Value: v, Node: s.Path()})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// readShards returns the counter's n shard values, missing keys as 0.
func readShards(tx *bbolt.Tx, id string, n int) []int64 {
	vals := make([]int64, n)
	p := prefixKey(id)
	c := tx.Bucket(bucketShards).Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if i := int(binary.BigEndian.Uint16(k[len(p):])); i < n {
			vals[i] = decodeInt(v)
		}
	}
	return vals
}

// shardValues returns the counter's shard values: an approx counter's
// are each shard's own estimate.
func shardValues(tx *bbolt.Tx, id string, m meta) ([]int64, error) {
	if m.spec.Kind == shardcounter.KindApprox {
		_, vals, err := approxValues(tx, id, m.spec.Shards)
		return vals, err
	}
	return readShards(tx, id, m.spec.Shards), nil
}

// total returns the sum of the counter's shards, or ErrOutOfRange when it
// does not fit in int64 (which this store's writes never allow, but a file
// written before they checked the total might hold).
func total(tx *bbolt.Tx, id string, m meta) (int64, error) {
	if m.spec.Kind == shardcounter.KindApprox {
		v, _, err := approxValues(tx, id, m.spec.Shards)
		return v, err
	}
	sum, ok := overflow.Sum(readShards(tx, id, m.spec.Shards))
	if !ok {
		return 0, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: the sum of its shards is outside the int64 range", id)
	}
	return sum, nil
}
