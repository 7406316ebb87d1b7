package bolt

import (
	"bytes"
	"context"

	bbolt "go.etcd.io/bbolt"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
)

// CreateCounter records a counter with spec.Shards zero-valued shards.
func (s *CounterStore) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateSpec(spec); err != nil {
		return nil, err
	}
	m := newMeta(spec, s.now().UnixNano())
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketCounters)
		if b.Get([]byte(id)) != nil {
			return shardcounter.Errorf(shardcounter.EEXISTS, "counter %q already exists", id)
		}
		return b.Put([]byte(id), encodeMeta(m))
	})
	if err != nil {
		return nil, err
	}
	return m.counter(id), nil
}

// GetCounter returns the counter's metadata.
func (s *CounterStore) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	var c *shardcounter.Counter
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		m, err := getMeta(tx, id)
		c = m.counter(id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// ListCounters returns up to limit counters in id order.
func (s *CounterStore) ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error) {
	var out []*shardcounter.Counter
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketCounters).Cursor()
		start := []byte(prefix)
		if after >= prefix {
			start = []byte(after)
		}
		for k, v := c.Seek(start); k != nil && len(out) < limit && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
			if string(k) == after {
				continue
			}
			m, err := decodeMeta(v)
			if err != nil {
				return err
			}
			out = append(out, m.counter(string(k)))
		}
		return nil
	})
	return out, err
}

// DeleteCounter removes the counter, its shards, members, window buckets
// and request ids.
func (s *CounterStore) DeleteCounter(ctx context.Context, id string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if _, err := getMeta(tx, id); err != nil {
			return err
		}
		return deleteCounter(tx, id)
	})
}

// deleteCounter deletes every record of counter id in tx: its record,
// shards, members, window buckets, sketches and request ids. Apply calls
// it too, for a limit state removed idle (decide.Mutations.Removes).
func deleteCounter(tx *bbolt.Tx, id string) error {
	if err := tx.Bucket(bucketCounters).Delete([]byte(id)); err != nil {
		return err
	}
	p := prefixKey(id)
	for _, b := range [][]byte{bucketShards, bucketMembers, bucketWindow, bucketSketches} {
		if err := deletePrefix(tx.Bucket(b), p); err != nil {
			return err
		}
	}
	byTime := tx.Bucket(bucketByTime)
	c := tx.Bucket(bucketRequests).Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if err := byTime.Delete(timeKey(decodeInt(v), k)); err != nil {
			return err
		}
	}
	return deletePrefix(tx.Bucket(bucketRequests), p)
}

// ReshardCounter changes the shard count in one transaction. Writes are
// serial in bbolt, so no write can interleave with it. A sum counter's
// removed shards fold into the kept ones; a distinct counter's members are
// recounted into the new shards, since a member's shard is its hash mod
// the shard count. Window buckets are per counter and stay as they are.
func (s *CounterStore) ReshardCounter(ctx context.Context, id string, shards int) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateShards(shards); err != nil {
		return nil, err
	}
	var c *shardcounter.Counter
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		m, err := getMeta(tx, id)
		if err != nil {
			return err
		}
		switch {
		case m.spec.Kind == shardcounter.KindApprox:
			if shards < m.spec.Shards {
				if err := foldSketches(tx, id, m.spec.Shards, shards); err != nil {
					return err
				}
			}
		case m.distinct():
			if err := recountMembers(tx, id, m.spec.Shards, shards); err != nil {
				return err
			}
		case shards < m.spec.Shards:
			if err := foldShards(tx, id, m.spec.Shards, shards); err != nil {
				return err
			}
		}
		m.spec.Shards = shards
		c = m.counter(id)
		return tx.Bucket(bucketCounters).Put([]byte(id), encodeMeta(m))
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// foldShards shrinks a sum counter from n to shards shards: kept shard j
// takes every shard i ≡ j (mod shards).
func foldShards(tx *bbolt.Tx, id string, n, shards int) error {
	b := tx.Bucket(bucketShards)
	vals := readShards(tx, id, n)
	for j := range shards {
		// The group's sum can leave int64 even when the total fits.
		var group []int64
		for i := j; i < n; i += shards {
			group = append(group, vals[i])
		}
		v, ok := overflow.Sum(group)
		if !ok {
			return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: folding into shard %d leaves the int64 range: reshard to another count", id, j)
		}
		if err := b.Put(shardKey(id, j), encodeInt(v)); err != nil {
			return err
		}
	}
	for i := shards; i < n; i++ {
		if err := b.Delete(shardKey(id, i)); err != nil {
			return err
		}
	}
	return nil
}
