package engine

import (
	"math/rand/v2"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// group is the writes folded into one Increment: calls, or (from a
// batch's sums) writes that nobody waits for.
type group struct {
	inc    shardcounter.Increment
	calls  []*call
	writes int64
}

// fold turns calls into increments: writes with a request id stay alone
// (each id is recorded with its own delta); the others fold into one
// increment per counter and sign, on a random shard. Folding by sign keeps
// every partial sum on one side of zero, so a folded delta overflows only
// if its writes would have overflowed the shard in any order.
//
// It allocates per flush, not per write: groups are carved out of arrays
// of 4 doubling to 64 (a full array is replaced, never grown, so pointers
// into it stay valid), and a group of one call shares calls' own backing
// array.
func fold(calls []*call) []*group {
	type key struct {
		counter string
		neg     bool
	}
	var store []group
	var groups []*group
	var folded map[key]*group
	size := 4 // of the next array: 4, 8, ... 64, so a small flush allocates little
	for i, c := range calls {
		one := calls[i : i+1 : i+1] // a later append copies, leaving calls intact
		if len(store) == cap(store) {
			store = make([]group, 0, min(size, len(calls)-i))
			size = min(2*size, 64)
		}
		if c.w.RequestID != "" {
			store = append(store, group{
				inc:   shardcounter.Increment{Counter: c.w.Counter, Delta: c.w.Delta, Pick: shard.PickFor(c.w.Counter, c.w.RequestID), RequestID: c.w.RequestID},
				calls: one,
			})
			groups = append(groups, &store[len(store)-1])
			continue
		}
		k := key{c.w.Counter, c.w.Delta < 0}
		if g := folded[k]; g != nil {
			if sum, ok := overflow.Add(g.inc.Delta, c.w.Delta); ok {
				g.inc.Delta = sum
				g.calls = append(g.calls, c)
				continue
			}
		}
		store = append(store, group{inc: shardcounter.Increment{Counter: c.w.Counter, Delta: c.w.Delta, Pick: rand.Uint64()}, calls: one})
		g := &store[len(store)-1]
		if folded == nil {
			folded = make(map[key]*group)
		}
		folded[k] = g
		groups = append(groups, g)
	}
	return groups
}

// foldSums adds a group per running sum of an async batch to groups.
func foldSums(groups []*group, sums map[sumKey]*sum) []*group {
	for k, sm := range sums {
		groups = append(groups, &group{inc: shardcounter.Increment{Counter: k.counter, Delta: sm.delta, Pick: rand.Uint64()}, writes: sm.writes})
	}
	return groups
}
