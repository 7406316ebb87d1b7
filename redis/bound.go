package redis

import (
	"strconv"
	"strings"

	"github.com/shardcounter/shardcounter"
)

// Bounded increments (Increment.Bound, RESP's INCREX) on a single
// server. The rule is package decide's (shardcounter.Bound.Apply), judged
// on the counter's exact total, and addScript carries it: a bounded
// counter's total is its bounds key's (as its floors are checked), an
// unbounded sum's is the sum of its shards, which the script reads with
// the write (every shard is on the one server), and the delta the bound
// lets apply then goes the way of any other delta, allowances, floors and
// window included. A Redis Cluster refuses bounds
// (shardcounter.ErrBoundsUnsupported): a counter's shards lie on several
// masters, and no one script there reads its total with the write.
//
// An item conditional on another (Increment.If, INCREX's deadline
// records) is refused on Redis as on a cluster (ErrBoundsUnsupported):
// the script would have to decide it with the item it depends on.

// validBound checks a bounded item as decide does; it cannot be part of
// a transaction, whose script reserves each delta before it applies any.
func validBound(inc shardcounter.Increment) error {
	if err := shardcounter.ValidateBoundIncrement(inc); err != nil {
		return err
	}
	if inc.Txn != 0 {
		return shardcounter.Errorf(shardcounter.EINVALID, "redis: a bounded increment (counter %q) cannot be part of a transaction: send it alone", inc.Counter)
	}
	return nil
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
