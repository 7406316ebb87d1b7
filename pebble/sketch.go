package pebble

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/sketch"
)

// An approx counter keeps one HyperLogLog sketch per shard under 's' id
// 0x00 shard (uint16): set whole, or, once dense, changed by merge
// operands of the registers a batch raised (sketchrec.go), so a batch
// writes a few bytes a member rather than 16 KiB a shard. The store keeps the shards'
// sketches in memory too, as it keeps sums' totals: a batch changes each
// shard it touches once, from the sketch in memory as the batches handed
// to Pebble leave it (apxState.pending, under s.mu, so no two batches
// race on a shard), and sets the new one in the batch; once the batch is
// durable the sketches are published for reads (apxState.published,
// under s.pub), in batch order. A strong read is then the estimate of the
// union of the published sketches, computed on the first read after a
// change and kept until the next: reads stay memory reads, and the half
// millisecond of an estimate is paid once per change, off the write path
// and outside the store's locks. Memory: a shard's sketch is at most
// sketch.MaxEncoded bytes, shared by pending and published while they
// agree (a batch copies the list, never a sketch, to change it).

var _ shardcounter.SketchStore = (*CounterStore)(nil)

const prefixSketch = 's'

func sketchKey(id string, i int) []byte {
	return binary.BigEndian.AppendUint16(prefixKey(prefixSketch, id), uint16(i))
}

// apxState is an approx counter's sketches in memory.
type apxState struct {
	pending   [][]byte // s.mu: as the batches handed to Pebble leave them; nil once deleted
	published [][]byte // s.pub: as the durable batches leave them; nil while not an approx counter
	gen       uint64   // s.pub: bumped at each publication

	cache struct { // the estimate of published at gen
		sync.Mutex
		gen uint64
		ok  bool
		v   int64
	}
}

// apxOf returns id's sketch state, making one. s.mu is held.
func (s *CounterStore) apxOf(id string) *apxState {
	st := s.approx[id]
	if st == nil {
		st = new(apxState)
		s.pub.Lock()
		if s.approx == nil {
			s.approx = make(map[string]*apxState)
		}
		s.approx[id] = st
		s.pub.Unlock()
	}
	return st
}

// estimate returns the estimate of sk, published at gen, from the cache
// when nothing was published since it was computed.
func (st *apxState) estimate(sk [][]byte, gen uint64) (int64, error) {
	st.cache.Lock()
	defer st.cache.Unlock()
	if st.cache.ok && st.cache.gen == gen {
		return st.cache.v, nil
	}
	v, err := sketch.Count(sk)
	if err != nil {
		return 0, err
	}
	if !st.cache.ok || st.cache.gen <= gen {
		st.cache.gen, st.cache.ok, st.cache.v = gen, true, v
	}
	return v, nil
}

// readSketches returns the counter's n shard sketches from r, nil for
// none.
func readSketches(r pdb.Reader, id string, n int) ([][]byte, error) {
	out := make([][]byte, n)
	p := prefixKey(prefixSketch, id)
	it, err := r.NewIter(&pdb.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(p)+2 {
			continue
		}
		if i := int(binary.BigEndian.Uint16(k[len(p):])); i < n {
			v, err := it.ValueAndErr()
			if err != nil {
				return nil, err
			}
			if out[i], err = decodeSketchRecord(v); err != nil {
				return nil, err
			}
		}
	}
	return out, it.Error()
}

// ReadSketches returns an approx counter and its shards' sketches from
// one snapshot.
func (s *CounterStore) ReadSketches(ctx context.Context, id string) (*shardcounter.Counter, [][]byte, error) {
	var (
		rec *record
		sk  [][]byte
	)
	err := s.durableRead(ctx, func(r pdb.Reader) error {
		var err error
		if rec, err = getRecord(r, id); err != nil {
			return err
		}
		if rec.meta.spec.Kind != shardcounter.KindApprox {
			return shardcounter.Errorf(shardcounter.EINVALID, "counter %q is a %s counter: only an approx counter keeps sketches", id, rec.meta.spec.Kind)
		}
		sk, err = readSketches(r, id, rec.meta.spec.Shards)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return rec.meta.counter(id), sk, nil
}

// shardEstimates returns each sketch's own estimate: an approx counter's
// shard values.
func shardEstimates(id string, sk [][]byte) ([]int64, error) {
	vals := make([]int64, len(sk))
	for i, b := range sk {
		if b == nil {
			continue
		}
		v, err := sketch.Count([][]byte{b})
		if err != nil {
			return nil, fmt.Errorf("pebble: counter %q shard %d: %w", id, i, err)
		}
		vals[i] = v
	}
	return vals, nil
}

// reshardSketches adds to b an approx counter's sketches for shards
// shards and returns them (decide.FoldSketches): a removed shard i's
// sketch is merged into shard i mod shards, so the union is the same
// registers. s.mu is held.
func reshardSketches(b *pdb.Batch, id string, old [][]byte, shards int) ([][]byte, error) {
	sk, folded, err := decide.FoldSketches(old, shards)
	if err != nil {
		return nil, fmt.Errorf("sketch of counter %q: %w", id, err)
	}
	for _, j := range folded {
		if err := b.Set(sketchKey(id, j), append([]byte{tagSketch}, sk[j]...), nil); err != nil {
			return nil, err
		}
	}
	for i := shards; i < len(old); i++ {
		if err := b.Delete(sketchKey(id, i), nil); err != nil {
			return nil, err
		}
	}
	return sk, nil
}

// loadSketches puts every approx counter's sketches in memory, at Open.
func (s *CounterStore) loadSketches() error {
	for id, st := range s.approx {
		c := s.counter(id)
		n := int(c.shards)
		st.pending = make([][]byte, n)
		st.published = make([][]byte, n)
	}
	it, err := s.db.NewIter(&pdb.IterOptions{LowerBound: []byte{prefixSketch}, UpperBound: []byte{prefixSketch + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		z := slices.Index(k, 0)
		if z < 0 || len(k) != z+3 {
			return fmt.Errorf("pebble: corrupt sketch key %q", k)
		}
		st := s.approx[string(k[1:z])]
		i := int(binary.BigEndian.Uint16(k[z+1:]))
		if st == nil || i >= len(st.pending) {
			continue // a leftover of a counter gone or shrunk: never read
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		b, err := decodeSketchRecord(v)
		if err != nil {
			return fmt.Errorf("counter %q shard %d: %w", k[1:z], i, err)
		}
		st.pending[i], st.published[i] = b, b
	}
	return it.Error()
}
