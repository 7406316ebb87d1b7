package decide

import (
	"math"
	"time"

	"github.com/shardcounter/shardcounter"
)

// View is what a store knows of the data a batch touches, as its atomic
// step (a transaction, a lock, a write lock over memory) sees it before
// the batch: Decide remembers what the batch's own items change, so a
// view never answers with them. Decide asks only what it needs, in batch
// order, and nothing about a counter that does not exist before the batch
// (or that the store made for the batch: Counter.Unborn); a store that
// reads up front (PostgreSQL) learns what to read from Reads. An error
// from a view fails the whole batch: Decide returns it.
type View interface {
	// Counter returns the counter as it is before the batch.
	Counter(id string) (Counter, error)
	// Shard returns a shard's value; known is false when the view does
	// not have it (Pebble keeps totals, not shard values; a partial view
	// has the shards its items pick).
	Shard(counter string, shard int) (value int64, known bool, err error)
	// Request reports whether the counter's request id was recorded, and
	// when. Decide compares the time with Batch.Cutoff.
	Request(counter, requestID string) (at time.Time, seen bool, err error)
	// Member reports whether member is present in a distinct counter.
	Member(counter, member string) (present bool, err error)
	// Bucket returns the value of a windowed counter's bucket starting at
	// start; known is false when the view does not have it (a store that
	// adds to buckets blindly).
	Bucket(counter string, start time.Time) (value int64, known bool, err error)
	// Sketch returns the encoded sketch of an approx counter's shard, nil
	// for none.
	Sketch(counter string, shard int) ([]byte, error)
}

// Counter is a counter as a View sees it before the batch.
type Counter struct {
	// Exists is set when the counter exists.
	Exists bool
	// Unborn is set, with Exists, on a counter the store made for this
	// batch before deciding it (PostgreSQL's create statement, in the
	// batch's first round trip): for the items it does not exist until an
	// item that creates it applies, with that item's spec. The store then
	// compares Mutations' creations with what it made, and drops or
	// remakes what does not match.
	Unborn bool
	// Spec is the counter's spec, when it exists.
	Spec shardcounter.Spec
	// Total is the sum of the counter's shards, when Sum is SumExact. An
	// approx counter's is not asked for.
	Total int64
	// Sum says what the view knows of the total: SumExact (the zero
	// value) for a view that has it.
	Sum Sum
	// Err, when set, is why the counter cannot be read (a record that
	// does not decode): every item on it fails with Err, and the rest of
	// the batch is decided as usual.
	Err error
}

// Sum is what a view knows of a counter's total.
type Sum uint8

const (
	// SumExact: Counter.Total is the sum of every shard. Floors,
	// ceilings and int64 are checked on it (bolt, Pebble, and PostgreSQL
	// and Firestore once they read a counter whole).
	SumExact Sum = iota
	// SumInZone: the total is unknown, and the store vouches that every
	// shard whose value Shard does not return is within the zone (see
	// InZone), so that a write that keeps its own shard in the zone leaves
	// the total in int64 without the total. Any other write, and any
	// write to a bounded counter, makes Decide answer NeedWhole
	// (PostgreSQL and Firestore, which read only the shards a batch
	// picks).
	SumInZone
	// SumUnknown: the total is unknown and no shard is vouched for: a
	// write makes Decide answer NeedWhole.
	SumUnknown
	// SumOverflows: the shards already sum outside int64 (data written
	// before that was refused, or loaded): every write that would change
	// the sum is refused with out_of_range.
	SumOverflows
)

// InZone reports whether a shard value v of a counter with n shards is
// within ±MaxInt64/n. While every shard of a counter is, no sum of them
// leaves int64, so a write that keeps its own shard in the zone needs no
// total.
func InZone(v int64, n int) bool {
	lim := math.MaxInt64 / int64(n)
	return -lim <= v && v <= lim
}
