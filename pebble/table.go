package pebble

import (
	"encoding/binary"
	"syscall"
	"unsafe"

	"github.com/shardcounter/shardcounter"
)

// The counters in memory are laid out for the garbage collector, since a
// store holds millions: a ctr holds no pointer (its spec is an index into
// the interned specs) and is cut from slabs of slabSize mapped outside the
// Go heap, as are the ids loaded at Open (chunks of idChunk bytes). So the
// collector neither scans nor counts them: what the Go heap holds, and
// what a collection's headroom doubles, is the map alone (and the ids of
// counters created since Open). The slabs of deleted counters are reused;
// the loaded ids of deleted counters stay mapped until Close. The fields
// below belong to s.mu (and to s.pub as well where the map changes).

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
		mem := s.offHeap(slabSize * int(unsafe.Sizeof(ctr{})))
		s.slab = unsafe.Slice((*ctr)(unsafe.Pointer(&mem[0])), slabSize)
	}
	c := &s.slab[0]
	s.slab = s.slab[1:]
	return c
}

// loadedID returns b, an id loaded at Open, as a string whose bytes live in
// the current id chunk.
func (s *CounterStore) loadedID(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > cap(s.ids)-len(s.ids) {
		s.ids = s.offHeap(max(idChunk, len(b)))[:0]
	}
	start := len(s.ids)
	s.ids = append(s.ids, b...)
	return unsafe.String(&s.ids[start], len(b))
}

// offHeap returns n zeroed bytes mapped outside the Go heap, unmapped by
// Close; on a platform that refuses the mapping, n bytes of the heap.
func (s *CounterStore) offHeap(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n)
	}
	s.mapped = append(s.mapped, b)
	return b
}

// unmap releases what offHeap mapped. Nothing may use a counter after it:
// Close calls it once the map is gone.
func (s *CounterStore) unmap() {
	for _, b := range s.mapped {
		syscall.Munmap(b)
	}
	s.mapped, s.slab, s.freeCtrs, s.ids = nil, nil, nil, nil
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
