package pebble

import (
	"math"

	"github.com/shardcounter/shardcounter/decide"
)

// maxStates bounds s.states: past it, the states kept are dropped, and
// each key's next take reads its record again. A key is kept from its
// second batch on, so the hot keys are the ones kept.
const maxStates = 4096

// keepStates keeps in s.states, under s.mu, the shard values of the
// multi-shard limit states the batch read (read: view.state, which holds
// the values the batch started from), as its shard writes leave them.
//
// The values after the batch are decide's (ShardWrite.Value: a state's
// shards are always read, so every write of one is Known); the store adds
// nothing. They are what a read of the record after the batch gives: a
// read folds the record's operands in (record.go, fold), which gives each
// shard's exact sum of deltas whenever those sums are int64s, and
// otherwise leaves some shard at math.MaxInt64 or math.MinInt64, having
// moved the excess. So a state is kept only while no shard is at either
// bound, before the batch and after it. Every other write of a record (a
// counter's creation, deletion or reshard) drops its state, and so do a
// batch that wrote it without reading it and a batch that Pebble may not
// have applied (hand).
func (s *CounterStore) keepStates(read map[string][]int64, shards []decide.ShardWrite) {
	if len(s.states) > 0 {
		// A kept state the batch wrote without reading it (no take of it)
		// would be stale: drop it.
		for _, w := range shards {
			if _, ok := read[w.Counter]; !ok {
				delete(s.states, w.Counter)
			}
		}
	}
	if len(read) == 0 {
		return
	}
	if s.states == nil || len(s.states)+len(read) > maxStates {
		s.states = make(map[string][]int64, len(read))
	}
	for id, vals := range read {
		next, ok := afterBatch(id, vals, shards)
		if ok {
			s.states[id] = next
		} else {
			delete(s.states, id)
		}
	}
}

// afterBatch returns vals, counter id's shard values before the batch,
// with decide's values for the batch's shard writes of id, and whether
// they can be kept (keepStates). vals is not changed.
func afterBatch(id string, vals []int64, shards []decide.ShardWrite) ([]int64, bool) {
	if len(vals) == 0 || atBound(vals) {
		return nil, false
	}
	next := vals
	for _, w := range shards {
		if w.Counter != id {
			continue
		}
		if !w.Known || w.Shard >= len(vals) {
			return nil, false
		}
		if &next[0] == &vals[0] {
			next = append([]int64(nil), vals...)
		}
		next[w.Shard] = w.Value
	}
	return next, !atBound(next)
}

// atBound reports whether a shard of vals is at an end of int64, where a
// fold that moved an excess leaves one.
func atBound(vals []int64) bool {
	for _, v := range vals {
		if v == math.MaxInt64 || v == math.MinInt64 {
			return true
		}
	}
	return false
}
