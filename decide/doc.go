// Package decide holds the rules of a write, written once: given a batch
// of increments and a read-only View of the data it touches, Decide
// decides every item in order, as one atomic step applying them one at a
// time would, sets each item's shardcounter.Outcome, and returns
// store-neutral Mutations. A store fetches the view, calls Decide, and
// encodes the mutations in its own records; it decides nothing itself.
// The package imports no store.
//
// # The rules
//
// Each item of a batch, in batch order, sees what the items before it did:
//
//   - Validation: Validate (shardcounter.ValidateIncrement) fails an item
//     on its own.
//   - Create on write: a missing counter with Increment.Create is created
//     when the first item on it applies, with that item's spec; until
//     then each item is judged on its own Create, an item that fails
//     creates nothing, nor does a bounded item skipped (Bound.Skips; a
//     saturated one is never skipped), and later items see the counter. A store that
//     makes missing counters before deciding says so (Counter.Unborn) and
//     compares Mutations.Counters' creations with what it made.
//   - Kind: CheckKind (shardcounter.ValidateIncrementKind) fails an item
//     meant for another kind of counter.
//   - Request-id dedupe: an id the view recorded after Batch.Cutoff, or
//     that an earlier item of the batch recorded, is a Duplicate; an item
//     that fails records nothing; an id recorded at or before the cutoff
//     has expired and is recorded afresh (RequestWrite.Expired).
//   - Member presence (distinct counters): an add of a present member or
//     a removal of an absent one is applied, Unchanged, and records its
//     request id; a member lives on shard shard.ForMember(member) mod n
//     (Pick).
//   - int64, floors and ceilings, on the total: a delta that would take
//     the counter's total outside int64, Spec.Min or Spec.Max is refused
//     out_of_range; a full shard sends a delta to the next shard with room
//     when the total has room (a member's shard is its own).
//   - Partial views: a view that reads only the shards its items pick
//     (SumInZone) lets Decide take a write that keeps its shard within
//     ±MaxInt64/n (InZone); any other write, and any write to a bounded
//     counter, makes Decide return *NeedWhole, and the store reads those
//     counters whole and decides again.
//   - Windows: an applied delta on a windowed counter adds to the bucket
//     Window.BucketOf(Batch.Now); leaving int64 there refuses the item
//     where the view knows the bucket; each windowed counter written comes
//     with where its retention ends (BucketWrite.Sweep).
//   - Sketches (approx counters): each touched shard's members and merged
//     sketches are gathered in batch order and applied once
//     (sketch.Apply), and the shard's items are Unchanged together when
//     its sketch did not change (Sketches). FoldSketches is the reshard's
//     rule.
//   - Removals of idle limit states (LimitTake.Remove): the key's state is
//     read as a take reads it, and its counter removed, every record,
//     when it is idle at Batch.Now (Idle: a take would see a fresh key);
//     kept (Skipped) when missing, not idle, or when another item of the
//     batch is on the same counter, so that no write of the batch meets
//     the removal (Mutations.Removes).
//   - Totals: an item that asked (Increment.Total) and did not fail gets
//     its counter's total after the batch, where the view knows it.
//   - Transactions (Increment.Txn) change nothing here: a batch decided
//     here is applied in one atomic step, which holds every transaction
//     in it. A store whose commit is atomic only in parts (Redis Cluster)
//     keeps deciding in its scripts.
//
// # Views
//
// A View answers as of before the batch, and Decide asks only what it
// needs, so a store's view is its own reads: bolt's are lookups in its
// transaction, Pebble's its totals in memory and point reads. A store that
// reads up front, in one round trip (PostgreSQL), learns what a batch may
// read from Reads and answers from what it read. What a view does not have
// it says it does not know (a shard's value, a bucket's), and Decide
// decides without it where the rules allow.
//
// # Mutations
//
// Mutations are plain lists in batch order: counters written and created,
// shard deltas (with the new value where the view gave the old),
// members put and deleted, request ids recorded, window buckets, sketches
// changed. A store with a commit that may fail after Decide (every one)
// writes nothing of the mutations until it commits them all.
//
// Decide is a function of its arguments: it keeps nothing between calls,
// and calls on different views may run at once.
package decide
