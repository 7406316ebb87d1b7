package decide

import (
	"time"

	"github.com/shardcounter/shardcounter"
)

// Mutations is what a decided batch writes, store-neutral: each store
// encodes it in its own records, in one atomic step. Every list is in a
// fixed order (the batch's), so the same batch on the same view always
// gives the same mutations.
type Mutations struct {
	// Counters lists every counter on which an item applied (changed or
	// not), in the order the batch first touched them.
	Counters []CounterWrite
	// Shards lists the shards' changes, grouped by counter in Counters'
	// order.
	Shards []ShardWrite
	// Members lists the members whose presence the batch changed, with
	// their presence after it.
	Members []MemberWrite
	// Requests lists the request ids the batch records, in batch order.
	Requests []RequestWrite
	// Buckets lists the window bucket of each windowed counter written,
	// one per counter (every item of a batch has one commit time).
	Buckets []BucketWrite
	// Sketches lists the shard sketches whose encoding changed.
	Sketches []SketchWrite
	// Removes lists the limit state counters the batch removes, idle
	// (shardcounter.LimitTake.Remove): the store deletes every record of
	// each (as DeleteCounter would) in the same atomic step as the rest,
	// under the reads the decision was made on. No other list names
	// them: no other item of the batch is on a removed counter.
	Removes []string
}

// CounterWrite is a counter on which an item of the batch applied.
type CounterWrite struct {
	ID string
	// Spec is the counter's spec, as stored or as created (the first
	// applied item's Create); it is Decide's, not to be changed.
	Spec *shardcounter.Spec
	// Create is set when the batch creates the counter, with Spec: it did
	// not exist before (or was Unborn).
	Create bool
	// Total is the counter's total after the batch, when TotalKnown (the
	// view's Sum was SumExact, or the batch created it). An approx
	// counter's is never known: its value is an estimate.
	Total      int64
	TotalKnown bool
}

// ShardWrite is what the batch adds to one shard. A shard appears more
// than once only when its deltas do not sum within int64; Value is then
// the value after that entry.
type ShardWrite struct {
	Counter string
	Shard   int
	Delta   int64
	// Value is the shard's value after the delta, when Known: the view
	// gave the shard's value (or the batch created the counter).
	Value int64
	Known bool
}

// MemberWrite is a member of a distinct counter whose presence the batch
// changed: Present after the batch, on its shard
// (shard.ForMember(Member) mod n).
type MemberWrite struct {
	Counter string
	Member  string
	Shard   int
	Present bool
}

// RequestWrite is a request id recorded at the batch's commit time.
type RequestWrite struct {
	Counter string
	ID      string
	// Shard is the shard the item picked (Increment.Pick mod n, or its
	// member's shard), for a store that keeps ids beside their shard.
	Shard int
	// Expired is set when the id was recorded before, at Was, and has
	// expired: the record is replaced (a store deletes Was's entry of its
	// time index).
	Expired bool
	Was     time.Time
}

// BucketWrite is what the batch adds to a windowed counter's bucket.
type BucketWrite struct {
	Counter string
	Start   time.Time // the bucket's start: Window.BucketOf(Batch.Now)
	Delta   int64
	// Value is the bucket's value after the batch, when Known: the view
	// gave the bucket's value.
	Value int64
	Known bool
	// Sweep is where retention ends: the counter's buckets that start
	// before it are past retention, and a store deletes them as it
	// writes, in work proportional to the batch.
	Sweep time.Time
}

// SketchWrite is an approx counter's shard sketch the batch changed: Old
// as the view gave it (nil for none), New as sketch.Apply made it.
type SketchWrite struct {
	Counter  string
	Shard    int
	Old, New []byte
}
