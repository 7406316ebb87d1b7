package pebble

import (
	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/shardcounter/shardcounter"
)

// Checkpoint writes a consistent copy of the store into dir, which must
// not exist, while the store goes on serving: Pebble's checkpoint, which
// hard-links the immutable sstables and copies the rest, with the WAL
// flushed first so that every acknowledged write is in it. A store opened
// on dir holds what the store held at the checkpoint.
func (s *CounterStore) Checkpoint(dir string) error {
	if err := s.db.Checkpoint(dir, pdb.WithFlushedWAL()); err != nil {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "pebble: checkpoint into %s: %v", dir, err)
	}
	return nil
}
