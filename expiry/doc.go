// Package expiry gives the names of any shardcounter.CounterStore
// deadlines, as Redis's EXPIRE gives keys: Wrap returns a store that
// reads an expired name as absent, starts a new counter on a write to
// one, and reclaims expired names' storage in work proportional to the
// writes it serves.
//
// # Records
//
// A name's deadline is a record in the store itself, so that every
// process sharing the store sees it: the distinct counter
//
//	U+001E "d" name    (one shard; members %016x(MaxInt64-stamp) %016x(deadline))
//
// whose members are the deadlines set, the newest first (the stamp is the
// setting process's clock in nanoseconds, strictly increasing within a
// process); the newest member is the deadline, 0 for none (PERSIST).
// Beside it, an entry of the deadline index, which orders names by
// deadline because its ids sort so:
//
//	U+001E "q" %016x(deadline rounded up to a second) name    (one shard)
//
// A change (ApplyChanges) adds the new member and removes the one it
// replaces, with the index entry, as items of the same Apply as the
// batch's increments: a deadline change joins the engine's group commit
// and costs no commit of its own. Of two processes changing one deadline
// at once, each removes the member it knew and adds its own: the record
// may hold both, the newest counts, and the next read of the record
// removes the older (tidy). A third record, U+001E "u", marks a store
// where deadlines were ever set: until it exists, Wrap's store reads no
// deadline at all. It is written in a commit of its own before the first
// records (Store.mark), so that no record lands unannounced.
//
// # Costs and staleness
//
// Reads and writes look a name's deadline up in a cache of this process,
// loading misses in one ReadCounters of their records and a ListMembers
// of each record that holds a deadline. Changes made
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
// is bounded by the writes it serves, as request ids' is. Each of these
// deletions is a commit Options.Observer hears of: the engine's rankings
// must read such a counter again, and only this package knows it went.
//
// # Layering
//
// A Store embeds the store it wraps and forwards nothing beyond
// CounterStore: what the store does besides is found beneath it with
// shardcounter.As, through Unwrap.
package expiry
