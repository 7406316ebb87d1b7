package redis

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/shardcounter/shardcounter"
)

// Bounded increments (Increment.Bound, RESP's INCREX). The rule is
// package decide's (shardcounter.Bound.Apply), judged on the counter's
// exact total, and addScript carries it: a bounded counter's total is its
// bounds key's (as its floors are checked), an unbounded sum's is the sum
// of its shards, which the script reads with the write, and the delta
// the bound lets apply then goes the way of any other delta, allowances,
// floors and window included. The script must read every shard of the
// counter in its one atomic step: on one server that is every counter.
//
// On a Redis Cluster it is a counter whose shards share one slot, so one
// master's script reads them all: a counter with Min or Max (keys.oneSlot
// puts all its shards and its bounds key in one slot) or of one shard.
// The decision is then as exact and linearizable as on one server. A
// reshard that runs meanwhile fences the shards to a new epoch, which the
// script checks on every shard it reads (resStale: the item is tried
// again on the new layout); a counter resharded to several shards has its
// bounded items refused from then on. A bounded item on any other
// counter is refused (ErrBoundsUnsupportedOn, boundHere), nothing
// applied: its shards lie on several masters, and no one script reads
// its total with the write. To use INCREX there, give the counter one
// shard (SC.CREATE ... SHARDS 1, the engine's DefaultShards 1, without
// resharding it up) or a Min or Max.
//
// An item conditional on a bounded one (Increment.If, INCREX's deadline
// records) is decided as cond.go says: on one server in the bounded
// item's script, atomically with it.
//
// A bounded item cannot be part of a transaction (validBound): the
// transaction's script reserves every item's delta, all or none, before
// it applies any, and a bounded item's delta is known only once the
// counter's total, which the transaction's earlier items move, is read.

// validBound checks a bounded item as decide does, outside a transaction
// (see above).
func validBound(inc shardcounter.Increment) error {
	if err := shardcounter.ValidateBoundIncrement(inc); err != nil {
		return err
	}
	if inc.Txn != 0 {
		return shardcounter.Errorf(shardcounter.EINVALID, "redis: a bounded increment (counter %q) cannot be part of a transaction: send it alone", inc.Counter)
	}
	return nil
}

// boundHere refuses a bounded item, on a cluster, on a counter of spec
// whose shards do not share one slot (see above).
func boundHere(id string, spec shardcounter.Spec) error {
	if spec.Shards <= 1 || oneSlot(id, spec) {
		return nil
	}
	return shardcounter.ErrBoundsUnsupportedOn(id, fmt.Sprintf("on a Redis Cluster a bounded increment needs a counter whose shards share one slot, one of 1 shard or with MIN or MAX, and this one has %d shards: reshard it to 1 shard, or create it so", spec.Shards))
}

// boundMode returns the mode and argument of a bounded item on a counter
// whose plain delta has mode and arg (see addScript): the bound, "SAT LO
// HI", and for an unbounded sum the keys of its shards, one a line.
func boundMode(mode string, arg any, b shardcounter.Bound, shards []string) (string, any) {
	sat := "0"
	if b.Saturate {
		sat = "1"
	}
	spec := sat + " " + strconv.FormatInt(b.Lower, 10) + " " + strconv.FormatInt(b.Upper, 10)
	switch mode {
	case modeBounded:
		return modeBoundedBound, spec
	case modeSum:
		return modeSumBound, spec + "\n" + strings.Join(shards, "\n")
	}
	return mode, arg // another kind: refused before it is sent
}
