// Package postgres is the PostgreSQL store of shardcounter: a
// shardcounter.CounterStore on pgx v5 (pgxpool), for users who already run
// PostgreSQL or a server that speaks its protocol.
//
// # Schema
//
// Open creates and migrates the schema "shardcounter" in the database it
// connects to (it needs the CREATE privilege there the first time):
//
//	shardcounter.counters (id, shards, kind, min, max, bucket, retention, created_at)
//	                                                one row per counter: its spec
//	shardcounter.shards   (counter, shard, value, shards, wide, sketch)
//	                                                one row per shard, created with the counter
//	                                                (or, loaded in bulk, on its first write)
//	shardcounter.members  (counter, member, hash)   the members of distinct counters
//	shardcounter.buckets  (counter, start, shard, value)
//	                                                window buckets, per shard
//	shardcounter.requests (counter, request_id, created_at)
//	                                                request ids already applied
//	shardcounter.schema_migrations (version, applied_at)
//
// Migrations are versioned and run in one transaction under an advisory
// lock, so several processes may open one database at the same time.
//
// # Writes
//
// Add is the seed algorithm: one UPDATE of one shard row, one round trip,
// committed on its own. AddTx runs the same statement in the caller's
// transaction, so a count commits or rolls back with the caller's own
// write. Apply applies a batch in one transaction with two round trips,
// locking shard rows in (counter, shard) order so that concurrent batches
// cannot deadlock. The first round trip creates the counters that items
// would create (Increment.Create), locks, records request ids and reads
// what package decide may ask (view.go); decide.Decide then decides every
// item in batch order on what was read, as every store's batches are
// decided; the second round trip writes the mutations (encode.go) and
// commits. A write is acknowledged once PostgreSQL has
// committed it; with synchronous_commit on (the default) that means its WAL
// record was flushed to disk.
//
// # Bulk loads
//
// LoadCounters (shardcounter.Loader, for imports) creates counters with
// their values and members in one statement and writes only the shard
// rows that hold something; a missing row reads as 0. A write that wants
// a missing row inserts it first (fillSQL) in its next attempt.
//
// # Distinct counters
//
// A member lives on shard ForMember(member) mod n, and its row keeps that
// hash, so a reshard counts the members per shard again in SQL. A batch
// locks the shard row of each member it writes before the statement that
// reads whether the member is present, and holds it until it commits the
// change, so membership and the shard's count change together and two
// batches never decide one member at once.
//
// # Approx counters
//
// A shard's HyperLogLog sketch is its row's sketch column. A batch reads
// it with the row lock it takes anyway (lockSQL), decide runs sketch.Apply
// once per shard for all of its items there, and the batch writes the
// sketches that changed in its second round trip: the read-modify-write is under
// the row lock, so concurrent batches wait for each other, never lose
// each other's registers and never retry. Reads estimate the union of
// the sketches read in the statement that reads the counter; a reshard
// merges removed shards' sketches into shard i mod n.
//
// # Windows
//
// A batch adds what it applied to a windowed counter to the bucket of its
// commit time on the shard it wrote, and in the same statement deletes
// that counter's buckets past retention: each once, by a write, so the
// work is proportional to writes.
//
// A bucket's value is the sum of its rows, and an item that would take it
// out of int64 is refused (out_of_range), as in every store. As with the
// total, a batch holds only the rows of the shards it locked, so the rows
// are kept in the zone ±MaxInt64/n: while every row of a bucket is in it,
// no sum of them leaves int64, whatever batches on other shards do. A
// batch that reads a counter shard by shard adds to its rows blindly when
// every row of the bucket is in the zone and its own stay there after its
// positive deltas and after its negative ones (plainSQL; checkBuckets,
// on the rows bucketRowsSQL reads in round trip 1); otherwise the counter
// is read whole: with every shard locked, bucketRowsSQL's rows are all of
// the bucket, exact, decide judges each item on their sum, and the batch
// writes the bucket levelled over the shards (levelSQL), back in the zone
// unless the sum is within n of int64's ends.
//
// # Reads
//
// ReadCounter and ReadCounters sum shards in one statement: one snapshot
// and one round trip for any number of counters. Placement names the
// database, host:port/db, as the node of every shard.
//
// # Dedupe window
//
// A request id is a duplicate while it is younger than the dedupe window
// (DefaultDedupeWindow, or SetDedupeWindow). Each Apply deletes up to 64
// plus as many expired ids as it records, oldest first, through the index
// on created_at: expiry keeps pace with the ids written, costs work
// proportional to recent writes, and an idle store does nothing. An
// expired id not yet deleted counts as new; recording it again takes its
// row over in the same atomic step as the duplicate check. Ages are
// measured on the database's clock unless Options.Now is set.
//
// # Overflow
//
// A write that would take a shard or the counter's total out of int64 is
// refused with ErrOutOfRange, as in every store, so no acknowledged write
// is followed by reads that fail. Checking the total needs it exact, which
// would mean reading and locking every shard on every write; instead a
// write checks only its own shard against the zone ±MaxInt64/n (n shards):
// while every shard of a counter is in it, no total of them can leave
// int64. A write that would take its shard out of the zone, and every
// write to a counter already out ("wide": every shard row carries the
// mark), is decided again on the counter read whole (decide.NeedWhole):
// all of its shards locked in order, and the total checked; the batch
// marks the rows wide, or clears the marks, as the shards then stand. A
// reshard marks the rows for the new zone. So a counter pays for the total
// only within 1/n of the int64 limits.
//
// # Resharding under writes
//
// Every shard row carries the shard count it was placed under. A writer
// reads the counter's shard count in its statement's snapshot, picks shard
// pick mod n, and updates that row only if the row still says n. A reshard
// locks the counter's metadata row and then every shard row in shard order,
// rewrites them with the new count and commits. A writer that raced with it
// either locked its shard row first (the reshard waits and folds its delta
// in) or finds the row rewritten or deleted, updates nothing and tries
// again under the new count. So a write never lands on a removed shard, and
// writers never lock the metadata row, which would make it the hot record
// that sharding exists to avoid.
//
// # Errors
//
// Failures to reach the server, deadlines and shutdowns before a commit
// was sent return shardcounter.ErrUnavailable: nothing was applied. When a
// commit was sent and its success was not reported (the connection broke,
// or the server ended the session), the error is EOUTCOMEUNKNOWN, never
// ErrUnavailable, and a write with a request id
// can be retried safely. A bigint overflow is refused by PostgreSQL and
// returned as shardcounter.ErrOutOfRange.
package postgres
