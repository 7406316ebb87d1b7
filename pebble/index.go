package pebble

import (
	"hash/maphash"
	"syscall"
	"unsafe"
)

// The index finds a counter's ctr by its id, outside the Go heap: open
// addressing with linear probing over slots of 8 bytes, each the ctr's ref
// (its place in the slabs, plus one; 0 is an empty slot) and 32 bits of
// its id's hash, which place it and, on a match, send the probe to the id
// in its chunk. A Go map of a million string keys to pointers held some
// 57 MiB that every collection scanned and that GOGC's headroom let the
// heap grow by as much again; these slots hold 16 MiB for a million
// counters (2^21 slots, at most three quarters full), mapped like the
// slabs. Growing doubles the slots and places each afresh from the hash it
// keeps, without reading an id. The fields belong to s.mu, and to s.pub as
// well when they change, as the map's did.

// minIndex is the index's initial number of slots, a power of two.
const minIndex = 1 << 10

// indexSize is the number of slots that hold n counters.
func indexSize(n int) int {
	size := minIndex
	for n*4 > size*3 {
		size *= 2
	}
	return size
}

// ctrOf returns the ctr of ref.
func (s *CounterStore) ctrOf(ref uint32) *ctr {
	r := ref - 1
	return &s.slabs[r/slabSize][r%slabSize]
}

// idOf returns the id of a counter in the index, in its chunk.
func (s *CounterStore) idOf(c *ctr) string {
	if c.idLen == 0 {
		return ""
	}
	return unsafe.String(&s.chunks[c.chunk].mem[c.off], int(c.idLen))
}

// hashID is the 32 bits of id's hash the index keeps.
func (s *CounterStore) hashID(id string) uint32 { return uint32(maphash.String(s.seed, id)) }

// find returns the slot of id, with hash h, and whether it holds id; when
// it does not, it is the empty slot where id would go.
func (s *CounterStore) find(id string, h uint32) (int, bool) {
	mask := len(s.index) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		v := s.index[i]
		if v == 0 {
			return i, false
		}
		if uint32(v>>32) == h && s.idOf(s.ctrOf(uint32(v))) == id {
			return i, true
		}
	}
}

// counter returns the ctr of id, nil when the index has none (or the
// store is closed).
func (s *CounterStore) counter(id string) *ctr {
	if len(s.index) == 0 {
		return nil
	}
	i, ok := s.find(id, s.hashID(id))
	if !ok {
		return nil
	}
	return s.ctrOf(uint32(s.index[i]))
}

// indexPut puts ref, the ctr of id (which the index does not hold), in
// the index, growing it first when it is three quarters full.
func (s *CounterStore) indexPut(id string, ref uint32) {
	if len(s.index) < indexSize(s.indexed+1) {
		s.growIndex(indexSize(s.indexed + 1))
	}
	h := s.hashID(id)
	i, _ := s.find(id, h)
	s.index[i] = uint64(h)<<32 | uint64(ref)
	s.indexed++
}

// growIndex moves the index to n slots, n a power of two that holds it.
func (s *CounterStore) growIndex(n int) {
	old := s.index
	s.index = unsafe.Slice((*uint64)(unsafe.Pointer(&mmap(8 * n)[0])), n)
	mask := n - 1
	for _, v := range old {
		if v == 0 {
			continue
		}
		i := int(uint32(v>>32)) & mask
		for s.index[i] != 0 {
			i = (i + 1) & mask
		}
		s.index[i] = v
	}
	unmapIndex(old)
}

// indexDelete empties slot i, moving back the entries after it that
// would no longer be found past the hole, and returns the ref it held.
func (s *CounterStore) indexDelete(i int) uint32 {
	ref := uint32(s.index[i])
	mask := len(s.index) - 1
	for j := (i + 1) & mask; s.index[j] != 0; j = (j + 1) & mask {
		home := int(uint32(s.index[j]>>32)) & mask
		// The entry at j stays unless its home is outside (i, j]: then
		// a probe from its home would stop at the hole at i.
		var stays bool
		if i <= j {
			stays = i < home && home <= j
		} else {
			stays = i < home || home <= j
		}
		if !stays {
			s.index[i], i = s.index[j], j
		}
	}
	s.index[i] = 0
	s.indexed--
	return ref
}

// eachCounter calls fn with every ctr in the index.
func (s *CounterStore) eachCounter(fn func(*ctr)) {
	for _, v := range s.index {
		if v != 0 {
			fn(s.ctrOf(uint32(v)))
		}
	}
}

// unmapIndex releases slots the index no longer uses.
func unmapIndex(slots []uint64) {
	if len(slots) > 0 {
		syscall.Munmap(unsafe.Slice((*byte)(unsafe.Pointer(&slots[0])), 8*len(slots)))
	}
}
