package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/sketch"
)

// An approx counter keeps one HyperLogLog sketch per shard in the
// sketches bucket (id 0x00 shard → the encoding of package sketch; a
// missing key is an empty sketch). A batch changes each shard it touches
// once (package decide), in its transaction: bbolt's writes are serial, so
// the read-modify-write cannot lose another writer's registers.

var _ shardcounter.SketchStore = (*CounterStore)(nil)

// readSketches returns the counter's n shard sketches, nil for none.
func readSketches(tx *bbolt.Tx, id string, n int) [][]byte {
	out := make([][]byte, n)
	p := prefixKey(id)
	c := tx.Bucket(bucketSketches).Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if i := int(binary.BigEndian.Uint16(k[len(p):])); i < n {
			out[i] = bytes.Clone(v)
		}
	}
	return out
}

// approxValues returns an approx counter's value (the union's estimate)
// and each shard's own estimate.
func approxValues(tx *bbolt.Tx, id string, n int) (int64, []int64, error) {
	sk := readSketches(tx, id, n)
	vals := make([]int64, n)
	for i, b := range sk {
		if b == nil {
			continue
		}
		v, err := sketch.Count([][]byte{b})
		if err != nil {
			return 0, nil, fmt.Errorf("bolt: counter %q shard %d: %w", id, i, err)
		}
		vals[i] = v
	}
	v, err := sketch.Count(sk)
	if err != nil {
		return 0, nil, fmt.Errorf("bolt: counter %q: %w", id, err)
	}
	return v, vals, nil
}

// ReadSketches returns an approx counter and its shards' sketches from
// one read transaction.
func (s *CounterStore) ReadSketches(ctx context.Context, id string) (*shardcounter.Counter, [][]byte, error) {
	var (
		c  *shardcounter.Counter
		sk [][]byte
	)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		m, err := getMeta(tx, id)
		if err != nil {
			return err
		}
		if m.spec.Kind != shardcounter.KindApprox {
			return notApprox(id, m.spec.Kind)
		}
		c, sk = m.counter(id), readSketches(tx, id, m.spec.Shards)
		return nil
	})
	return c, sk, err
}

// notApprox is the ErrInvalid of a sketch read of a counter of another
// kind.
func notApprox(id string, kind shardcounter.Kind) error {
	return shardcounter.Errorf(shardcounter.EINVALID, "counter %q is a %s counter: only an approx counter keeps sketches", id, kind)
}

// approxHasNoMembers is the ErrInvalid of a member read of an approx
// counter: its sketches count members without keeping them.
func approxHasNoMembers(id string) error {
	return shardcounter.Errorf(shardcounter.EINVALID, "counter %q is an approx counter: it keeps a sketch of its members, not the members, so it cannot list them or say whether it holds one", id)
}

// foldSketches shrinks an approx counter from n to shards shards
// (decide.FoldSketches): the sketch of each removed shard i is merged into
// that of shard i mod shards, so the union, and the value, are the same
// registers.
func foldSketches(tx *bbolt.Tx, id string, n, shards int) error {
	bk := tx.Bucket(bucketSketches)
	sk, folded, err := decide.FoldSketches(readSketches(tx, id, n), shards)
	if err != nil {
		return fmt.Errorf("bolt: counter %q: %w", id, err)
	}
	for _, j := range folded {
		if err := bk.Put(shardKey(id, j), sk[j]); err != nil {
			return err
		}
	}
	for i := shards; i < n; i++ {
		if err := bk.Delete(shardKey(id, i)); err != nil {
			return err
		}
	}
	return nil
}
