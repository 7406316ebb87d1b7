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
// Go heap, ids are copied into chunks of idChunkSize bytes mapped the same
// way, and the index that finds a ctr by its id (index.go) is mapped the
// same way too. So the collector neither scans nor counts them, and a
// collection's headroom does not double them. The ctr of a deleted counter
// is reused; a chunk of ids is unmapped once every counter whose id it
// holds is deleted. The ids in the chunks never leave the store (readings
// carry the caller's ids), so nothing refers to a chunk after that. The
// fields below belong to s.mu (and to s.pub as well where the index
// changes).

const slabSize = 4096

// idChunkSize is the size of a chunk of ids (a variable for tests).
var idChunkSize = 256 << 10

// ctr is a counter in memory: what a write checks (its spec, and the
// total every batch handed to Pebble leaves, durable or not) under mu, and
// what a strong read returns (the total and shard count once durable)
// under pub; and where its id is, for the index. 32 bytes.
type ctr struct {
	pending int64  // mu
	total   int64  // pub
	spec    uint32 // mu: index into s.specs; 0 while the counter does not exist
	chunk   uint32 // index into s.chunks of the chunk holding its id
	off     uint32 // where its id starts in the chunk
	idLen   uint16 // the id's length (at most shardcounter.MaxIDLen)
	shards  uint16 // pub; 0 while it does not exist
}

// idChunk is a mapping that holds ids, and how many counters in the index
// have their id in it.
type idChunk struct {
	mem  []byte
	live int
}

// addCounter puts a zero ctr in the index under id, with id's bytes
// copied into the current chunk, and returns it. It reuses the ctr of a
// forgotten counter when there is one. The caller holds s.mu and s.pub,
// and the index holds no id.
func (s *CounterStore) addCounter(id []byte) *ctr {
	var ref uint32
	if n := len(s.freeRefs); n > 0 {
		ref = s.freeRefs[n-1]
		s.freeRefs = s.freeRefs[:n-1]
	} else {
		if s.cut == len(s.slabs)*slabSize {
			mem := s.offHeap(slabSize * int(unsafe.Sizeof(ctr{})))
			s.slabs = append(s.slabs, (*[slabSize]ctr)(unsafe.Pointer(&mem[0])))
		}
		s.cut++
		ref = uint32(s.cut)
	}
	n := len(s.chunks) - 1
	if n < 1 || len(id) > cap(s.ids)-len(s.ids) {
		if len(s.chunks) == 0 {
			s.chunks = append(s.chunks, nil) // index 0: none
		}
		if ch := s.chunks[len(s.chunks)-1]; ch != nil && ch.live == 0 {
			syscall.Munmap(ch.mem) // every id in it was deleted while it was current
			s.chunks[len(s.chunks)-1] = nil
		}
		s.ids = mmap(max(idChunkSize, len(id)))[:0]
		s.chunks = append(s.chunks, &idChunk{mem: s.ids[:cap(s.ids)]})
		n = len(s.chunks) - 1
	}
	c := s.ctrOf(ref)
	*c = ctr{chunk: uint32(n), off: uint32(len(s.ids)), idLen: uint16(len(id))}
	s.ids = append(s.ids, id...)
	s.chunks[n].live++
	s.indexPut(s.idOf(c), ref)
	return c
}

// removeCounter takes c, the counter of id, out of the index, for reuse,
// and unmaps its id's chunk when no other counter's id is in it (and it is
// not the chunk ids are added to). The caller holds s.mu and s.pub.
func (s *CounterStore) removeCounter(id string, c *ctr) {
	i, ok := s.find(id, s.hashID(id))
	if !ok {
		return
	}
	s.freeRefs = append(s.freeRefs, s.indexDelete(i))
	if ch := s.chunks[c.chunk]; ch != nil {
		if ch.live--; ch.live == 0 && int(c.chunk) != len(s.chunks)-1 {
			syscall.Munmap(ch.mem)
			s.chunks[c.chunk] = nil
		}
	}
}

// offHeap returns n zeroed bytes mapped outside the Go heap, unmapped by
// Close.
func (s *CounterStore) offHeap(n int) []byte {
	b := mmap(n)
	s.mapped = append(s.mapped, b)
	return b
}

// mmap returns n zeroed bytes mapped outside the Go heap; on a platform
// that refuses the mapping, n bytes of the heap (which munmap then leaves
// to the collector).
func mmap(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n)
	}
	return b
}

// unmap releases what offHeap mapped and the chunks of ids. Nothing may
// use a counter after it: Close calls it once the map is gone.
func (s *CounterStore) unmap() {
	for _, b := range s.mapped {
		syscall.Munmap(b)
	}
	for _, ch := range s.chunks {
		if ch != nil {
			syscall.Munmap(ch.mem)
		}
	}
	unmapIndex(s.index)
	unmapIndex(s.retired)
	s.mapped, s.slabs, s.freeRefs, s.ids, s.chunks, s.index, s.retired = nil, nil, nil, nil, nil, nil, nil
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
