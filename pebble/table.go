package pebble

import (
	"encoding/binary"
	"unsafe"

	"github.com/shardcounter/shardcounter"
)

// The counters in memory are laid out for the garbage collector, since a
// store holds millions: a ctr holds no pointer (its spec is an index into
// the interned specs) and is cut from slabs of slabSize, and ids are cut
// from chunks of idChunk bytes, so the collector marks a few large objects
// it need not scan instead of millions of small ones. What is left to scan
// is the map. The fields below belong to s.mu (and to s.pub as well where
// the map changes).

const (
	slabSize = 4096
	idChunk  = 256 << 10
)

// ctr is a counter in memory: what a write checks (its spec, and the
// total every batch handed to Pebble leaves, durable or not) under mu, and
// what a strong read returns (the total and shard count once durable)
// under pub. 24 bytes.
type ctr struct {
	pending int64  // mu
	total   int64  // pub
	spec    uint32 // mu: index into s.specs; 0 while the counter does not exist
	shards  uint16 // pub; 0 while it does not exist
}

// newCtr returns a zero ctr, reusing one of a forgotten counter when there
// is one.
func (s *CounterStore) newCtr() *ctr {
	if n := len(s.freeCtrs); n > 0 {
		c := s.freeCtrs[n-1]
		s.freeCtrs = s.freeCtrs[:n-1]
		*c = ctr{}
		return c
	}
	if len(s.slab) == 0 {
		s.slab = make([]ctr, slabSize)
	}
	c := &s.slab[0]
	s.slab = s.slab[1:]
	return c
}

// idString returns b as a string whose bytes live in the current id chunk.
// A chunk is freed once every id cut from it is gone.
func (s *CounterStore) idString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > cap(s.ids)-len(s.ids) {
		s.ids = make([]byte, 0, max(idChunk, len(b)))
	}
	start := len(s.ids)
	s.ids = append(s.ids, b...)
	return unsafe.String(&s.ids[start], len(b))
}

// specOf returns the spec of c, nil when the counter does not exist.
func (s *CounterStore) specOf(c *ctr) *shardcounter.Spec {
	if c.spec == 0 {
		return nil
	}
	return s.specs[c.spec]
}

// intern returns the index of spec among the specs the store keeps:
// counters created alike share one.
func (s *CounterStore) intern(spec shardcounter.Spec) uint32 {
	m := newMeta(spec, 0)
	return s.internMeta(encodeMeta(m), &m)
}

// internMeta interns the spec of encoded metadata b, whose created-at
// bytes it ignores; m is b decoded, or nil to decode it on a miss.
func (s *CounterStore) internMeta(b []byte, m *meta) uint32 {
	key := append(s.specKey[:0], b...)
	if len(key) >= 10 {
		binary.BigEndian.PutUint64(key[2:], 0) // created at
	}
	s.specKey = key
	if i, ok := s.specIx[string(key)]; ok {
		return i
	}
	if m == nil {
		d, err := decodeMeta(b)
		if err != nil {
			return 0
		}
		m = &d
	}
	if len(s.specs) == 0 {
		s.specs = append(s.specs, nil) // index 0: none
	}
	spec := m.spec
	s.specs = append(s.specs, &spec)
	i := uint32(len(s.specs) - 1)
	s.specIx[string(key)] = i
	return i
}

// loadRecord reads what memory keeps of a record: its spec's index, its
// shard count and its total, without allocating anything that outlives
// it (beyond a spec seen for the first time).
func (s *CounterStore) loadRecord(b []byte) (spec uint32, shards int, total int64, err error) {
	if len(b) == 0 || b[0] != tagRecord {
		return 0, 0, 0, errCorruptRecord
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b)-1-k) {
		return 0, 0, 0, errCorruptRecord
	}
	mb, vals := b[1+k:1+k+int(n)], b[1+k+int(n):]
	if spec = s.internMeta(mb, nil); spec == 0 {
		return 0, 0, 0, errCorruptRecord
	}
	shards = s.specs[spec].Shards
	if len(vals) != 8*shards {
		return 0, 0, 0, errCorruptRecord
	}
	for i := 0; i < len(vals); i += 8 {
		total += int64(binary.BigEndian.Uint64(vals[i:]))
	}
	return spec, shards, total, nil
}
