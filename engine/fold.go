package engine

import (
	"math/rand/v2"
	"slices"
	"strings"

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

	created bool // auto-create was tried for its counter by this flush
	single  bool // made from one write of a group refused as out of range
}

// autoCreate holds the specs of the counters a write creates: a sum
// counter for a delta write, a distinct counter for a member write, or
// the kind the write names (Write.Kind); a hash's marker
// (shardcounter.HashMarkerID), which the RESP front end writes with a
// hash's first field, is a sum counter of one shard: it is only ever
// looked for, never counted on. A nil *autoCreate creates nothing.
type autoCreate struct {
	sum, distinct, approx, marker *shardcounter.Spec
}

func newAutoCreate(shards, approxShards int) *autoCreate {
	return &autoCreate{
		sum:      &shardcounter.Spec{Shards: shards, Kind: shardcounter.KindSum},
		distinct: &shardcounter.Spec{Shards: shards, Kind: shardcounter.KindDistinct},
		approx:   &shardcounter.Spec{Shards: approxShards, Kind: shardcounter.KindApprox},
		marker:   &shardcounter.Spec{Shards: 1, Kind: shardcounter.KindSum},
	}
}

// isMarker reports whether id is a hash's marker: the only id that ends
// with the separator (a field is not empty, and no name holds it).
func isMarker(id string) bool { return strings.HasSuffix(id, shardcounter.HashSeparator) }

// increment is w as one store increment: on a random shard, or for a
// request id on the shard every retry of it picks (shard.PickFor); a
// member write is +1 (add) or −1 (remove).
func (ac *autoCreate) increment(w shardcounter.Write) shardcounter.Increment {
	inc := shardcounter.Increment{Counter: w.Counter, Delta: w.Delta, RequestID: w.RequestID, Total: w.WantValue || w.Bound != nil, Kind: w.Kind, Bound: w.Bound}
	if w.Take != nil {
		// A take creates its key's state whatever the configuration.
		inc.Take = w.Take
		if !w.Take.Remove { // a removal creates nothing
			inc.Create = &shardcounter.Spec{Shards: w.Take.Policy.StateShards(), Kind: shardcounter.KindSum}
		}
		return inc
	}
	if w.RequestID != "" {
		inc.Pick = shard.PickFor(w.Counter, w.RequestID)
	} else {
		inc.Pick = rand.Uint64()
	}
	if w.Present != nil {
		inc.Member, inc.Delta = w.Member, -1
		if *w.Present {
			inc.Delta = 1
		}
	}
	if ac != nil {
		switch {
		case w.Kind == shardcounter.KindApprox:
			inc.Create = ac.approx
		case w.Kind == shardcounter.KindDistinct, w.Kind == "" && w.Present != nil:
			inc.Create = ac.distinct
		case isMarker(w.Counter):
			inc.Create = ac.marker
		default:
			inc.Create = ac.sum
		}
	}
	return inc
}

// fold turns calls into increments: writes with a request id stay alone
// (each id is recorded with its own delta), and so do member writes (a
// member's add or removal is decided on its own shard); the others fold
// into one increment per counter and sign, on a random shard. Folding by
// sign keeps every partial sum on one side of zero, so a folded delta
// overflows only if its writes would have overflowed the shard in any
// order.
//
// When txns (the store is a TxnApplier), a run of calls joined by
// Write.JoinNext (a RESP transaction; its calls are consecutive,
// queue.addAll keeps them so) gets a Txn of its own on each of its
// increments, its first call's place in the batch plus one (or the Txn
// markChangeTxns gave it, which its deadline changes carry too), and its
// calls stay alone, so that the store sees the transaction's increments
// and only them.
//
// It allocates per flush, not per write: groups are carved out of arrays
// of 4 doubling to 64 (a full array is replaced, never grown, so pointers
// into it stay valid), and a group of one call shares calls' own backing
// array.
func fold(calls []*call, ac *autoCreate, txns bool) []*group {
	type key struct {
		counter string
		neg     bool
		kind    shardcounter.Kind // a write meant for another kind fails alone
	}
	var store []group
	var groups []*group
	var folded map[key]*group
	size := 4      // of the next array: 4, 8, ... 64, so a small flush allocates little
	var txn uint64 // of the run calls[i] is in, 0 for none
	for i, c := range calls {
		one := calls[i : i+1 : i+1] // a later append copies, leaving calls intact
		if len(store) == cap(store) {
			store = make([]group, 0, min(size, len(calls)-i))
			size = min(2*size, 64)
		}
		if i == 0 || !calls[i-1].w.JoinNext {
			txn = c.txn // marked with its deadline changes
			if txn == 0 && txns && c.w.JoinNext {
				txn = uint64(c.seq) + 1
			}
		}
		alone := c.w.RequestID != "" || c.w.Present != nil || c.w.Take != nil || c.w.Bound != nil || txn != 0
		k := key{c.w.Counter, c.w.Delta < 0, c.w.Kind}
		if g := folded[k]; g != nil && !alone {
			if sum, ok := overflow.Add(g.inc.Delta, c.w.Delta); ok {
				g.inc.Delta = sum
				g.inc.Total = g.inc.Total || c.w.WantValue
				g.calls = append(g.calls, c)
				continue
			}
		}
		store = append(store, group{inc: ac.increment(c.w), calls: one})
		g := &store[len(store)-1]
		g.inc.Txn = txn
		groups = append(groups, g)
		if !alone {
			if folded == nil {
				folded = make(map[key]*group)
			}
			folded[k] = g
		}
	}
	return groups
}

// foldSums adds a group per running sum of an async batch to groups.
func foldSums(groups []*group, sums map[sumKey]*sum, ac *autoCreate) []*group {
	for k, sm := range sums {
		groups = append(groups, &group{inc: ac.increment(shardcounter.Write{Counter: k.counter, Delta: sm.delta}), writes: sm.writes})
	}
	return groups
}

// increasesFirst orders groups so that, on every counter, the increments
// that add (and member writes, which keep their order) reach the store
// before the ones that subtract. The writes of one batch are concurrent,
// so any order is a valid one; this one never makes a floor refuse a
// decrease that the same batch's increases make room for (a +1/−1 burst
// on a counter with min 0). A counter with a ceiling may then refuse a
// folded increase that the batch's decreases would have let in: flush
// retries it write by write after them.
func increasesFirst(groups []*group) []*group {
	slices.SortStableFunc(groups, func(a, b *group) int {
		return sign(a) - sign(b)
	})
	return groups
}

func sign(g *group) int {
	if g.inc.Member == "" && g.inc.Delta < 0 {
		return 1
	}
	return 0
}
