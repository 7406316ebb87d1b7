// Package postgres is the PostgreSQL store of shardcounter: a
// shardcounter.CounterStore on pgx v5 (pgxpool), for users who already run
// PostgreSQL or a server that speaks its protocol.
//
// # Schema
//
// Open creates and migrates the schema "shardcounter" in the database it
// connects to (it needs the CREATE privilege there the first time):
//
//	shardcounter.counters (id, shards, created_at)           one row per counter
//	shardcounter.shards   (counter, shard, value, shards, wide) one row per shard, created eagerly
//	shardcounter.requests (counter, request_id, created_at)  request ids already applied
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
// cannot deadlock. A write is acknowledged once PostgreSQL has committed
// it; with synchronous_commit on (the default) that means its WAL record
// was flushed to disk.
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
// mark), locks all of the counter's shards in order and checks the total;
// it marks the rows wide, or clears the marks, as the shards then stand. A
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
// or the server ended the session), the error is EINTERNAL with
// OutcomeUnknown set, never ErrUnavailable, and a write with a request id
// can be retried safely. A bigint overflow is refused by PostgreSQL and
// returned as shardcounter.ErrOutOfRange.
package postgres
