package decide

import (
	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// Validate checks an increment as a store receives it: the first rule of
// every item, which fails it on its own (shardcounter.ValidateIncrement).
func Validate(inc shardcounter.Increment) error {
	return shardcounter.ValidateIncrement(inc)
}

// CheckKind fails an item meant for another kind of counter than spec's:
// a member on a sum counter, a delta on a distinct or approx one, an item
// whose Kind names another kind (shardcounter.ValidateIncrementKind).
func CheckKind(inc shardcounter.Increment, spec shardcounter.Spec) error {
	return shardcounter.ValidateIncrementKind(inc, spec.Kind)
}

// Pick returns the pick an item's shard follows: shard Pick(inc) mod n. A
// member's is its own (shard.ForMember), so that a member always lives on
// one shard; any other item's is Increment.Pick.
func Pick(inc shardcounter.Increment) uint64 { return pick(&inc) }

func pick(inc *shardcounter.Increment) uint64 {
	if inc.Member != "" {
		return shard.ForMember(inc.Member)
	}
	return inc.Pick
}

// Read is what deciding one valid item may ask a View, for a store that
// reads up front, in one round trip (PostgreSQL): its counter, the shard
// Pick mod n (and, if the counter is to be read whole, every shard), its
// request id, its member's presence when the counter is distinct, the
// counter's window bucket of the commit time when it is windowed, and the
// shard's sketch when it is approx.
type Read struct {
	Item      int    // the item's position in the batch
	Counter   string // the counter
	Pick      uint64 // the shard read is Pick mod n
	RequestID string // "" for none
	Member    string // "" for none
	// Create is the item's Increment.Create: a store that makes missing
	// counters before deciding (Counter.Unborn) makes them with the first
	// item's spec.
	Create *shardcounter.Spec
	// Whole is set when the counter is read whole: a take reads its
	// key's whole state, a bounded increment its counter's total.
	Whole bool
}

// Reads returns what deciding incs may read, one Read per valid item, in
// batch order; a take with a request id has two, the second for the id it
// records when refused (shardcounter.RefusedRequestID). Invalid items
// read nothing: Decide fails them on their own.
func Reads(incs []shardcounter.Increment) []Read {
	reads := make([]Read, 0, len(incs))
	for i, inc := range incs {
		inc.If = 0 // a condition reads nothing more: an earlier item's outcome decides it
		if inc.Take != nil && inc.Take.Remove {
			// A removal reads the key's whole state, as a take does.
			if shardcounter.ValidateRemoveIncrement(inc) == nil {
				reads = append(reads, Read{Item: i, Counter: inc.Counter, Whole: true})
			}
			continue
		}
		if inc.Take != nil {
			if shardcounter.ValidateTakeIncrement(inc) != nil {
				continue
			}
			r := Read{Item: i, Counter: inc.Counter, RequestID: inc.RequestID, Create: inc.Create, Whole: true}
			reads = append(reads, r)
			if inc.RequestID != "" {
				r.RequestID = shardcounter.RefusedRequestID(inc.RequestID)
				reads = append(reads, r)
			}
			continue
		}
		if inc.Bound != nil {
			// A bound is judged on the counter's exact total.
			if shardcounter.ValidateBoundIncrement(inc) == nil {
				reads = append(reads, Read{Item: i, Counter: inc.Counter, Pick: Pick(inc), RequestID: inc.RequestID, Create: inc.Create, Whole: true})
			}
			continue
		}
		if Validate(inc) != nil {
			continue
		}
		reads = append(reads, Read{Item: i, Counter: inc.Counter, Pick: Pick(inc), RequestID: inc.RequestID, Member: inc.Member, Create: inc.Create})
	}
	return reads
}
