package pebble

import pdb "github.com/cockroachdb/pebble/v2"

// ExpireBatch is how many expired request ids a write deletes beyond those
// it records.
const ExpireBatch = expireBatch

// RequestIDs returns how many request ids the store keeps, and how many
// entries its index by age has, for tests of expiry.
func (s *CounterStore) RequestIDs() (ids, indexed int) {
	count := func(p byte) int {
		it, err := s.db.NewIter(&pdb.IterOptions{LowerBound: []byte{p}, UpperBound: []byte{p + 1}})
		if err != nil {
			panic(err)
		}
		defer it.Close()
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		return n
	}
	return count(prefixRequest), count(prefixByTime)
}

// SetIDChunkSize sets the size of the chunks ids are copied into, and
// returns a func that restores it.
func SetIDChunkSize(n int) (restore func()) {
	old := idChunkSize
	idChunkSize = n
	return func() { idChunkSize = old }
}

// IDChunks returns how many chunks of ids the store has mapped.
func (s *CounterStore) IDChunks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ch := range s.chunks {
		if ch != nil {
			n++
		}
	}
	return n
}

// KeptState returns the shard values the store keeps in memory for limit
// key state id (limitstate.go), and whether it keeps them.
func (s *CounterStore) KeptState(id string) ([]int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.states[id]
	return append([]int64(nil), v...), ok
}
