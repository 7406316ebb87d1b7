// Package expiry gives the names of any shardcounter.CounterStore
// deadlines, as Redis's EXPIRE gives keys: Wrap returns a store that
// reads an expired name as absent, starts a new counter on a write to
// one, and reclaims expired names' storage in work proportional to the
// writes it serves.
//
// # Records
//
// A name's deadline is a record in the store itself, so that every
// process sharing the store sees it: the counter
//
//	U+001E "t" name    (one shard, value and max the deadline in Unix ms)
//
// and an entry of the deadline index, which orders names by deadline
// because its ids sort so:
//
//	U+001E "q" %016x(deadline) name    (one shard, value 1)
//
// A deadline is replaced by deleting its record and creating it anew with
// the new value as its max, in one Apply with the new index entry: of two
// processes replacing one deadline at once, the second's create finds the
// first's record, is refused (its value would pass the max) and tries
// again, so the last one wins and the record never holds a sum of the
// two. A third record, U+001E "u", marks a store where deadlines were ever
// set: until it exists, Wrap's store reads no deadline at all.
//
// # Costs and staleness
//
// Reads and writes look a name's deadline up in a cache of this process,
// loading misses in one ReadCounters of their records. Changes made
// through this process are in the cache at once; those of another process
// sharing the store are seen within Options.Refresh (a second by
// default). A store where no deadline was ever set costs one read a
// Refresh.
//
// # Reclaiming
//
// A write to an expired name deletes it (its counter, or every field of
// its hash) and its record before the write applies, so the write starts a
// new counter. Names expired and never written again are reclaimed by the
// sweep: after a write, at most once a Refresh unless the index says a
// deadline is due, the store lists the first SweepBatch index entries and
// deletes the expired names among them. Idle, it does nothing; its work
// is bounded by the writes it serves, as request ids' is.
package expiry
