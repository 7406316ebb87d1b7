// Package redis is the shardcounter store on Redis: one server, or a Redis
// Cluster over which each counter's shards spread. docs/REDIS.md has the
// full account; this is the summary a reader of the code needs.
//
// # Keys
//
// With the default prefix "shardcounter:":
//
//	shardcounter:{B}c:ID                hash: metadata (shards n, created c,
//	                                    incarnation i, epoch e, state st,
//	                                    reshard target to, history h, mx, nk, nd)
//	shardcounter:{B}ids                 sorted set: index bucket B of counter ids
//	shardcounter:{TAG}INCARNATION:K     hash: shard K (value v, epoch e, version w,
//	                                    allowance up/dn/ae, fence version fw, f:*,
//	                                    an approx counter's sketch x)
//	shardcounter:{TAG}INCARNATION:K:ids sorted set: request ids recorded on shard K
//
// The index of counter ids is spread over 16 buckets in 16 slots, and a
// counter's metadata shares its bucket's slot, so one script creates (or
// deletes) both and no master holds every counter: with one down, counters
// whose keys live on the others are still created, written and read.
// ListCounters merges the buckets. TAG puts shard K in slot base + K·10127
// (mod 16384), base from a hash of the id, so consecutive shards spread
// evenly over the slots and so over the masters; a shard and its request
// ids share the tag, and so a slot. INCARNATION is random per
// CreateCounter, so a re-created counter shares no key with the one
// deleted before it.
//
// # Writes
//
// The rules of a write are package decide's. Go applies those that need
// no atomic step with the core's functions (validation, kind, the pick,
// sketches); the script decides the rest for each item, atomically with
// its write, in the core's order, and outcome (resolve.go) maps its codes
// onto the core's outcomes.
//
// A writer caches each counter's layout (n, epoch) and sends one script to
// shard pick mod n carrying the epoch; the shard applies the delta only
// when its own epoch matches, and records the request id in the same step.
// A refused write changed nothing: the writer re-reads the metadata and
// tries again. Apply groups items by slot and pipelines the groups; the
// items of one transaction (Increment.Txn) form a group of their own,
// placed on one master that holds a shard of each of their counters and
// applied all or none by one script there, or refused with CROSSSLOT
// (txn.go). Items of one counter keep batch order across groups (order in
// write.go). The client runs with retries off: the store retries only what
// the server provably did not execute, and reports a lost reply as
// OutcomeUnknown.
//
// # Rate limits
//
// A take of a rate limit's key (Increment.Take) is decided by takeScript
// (limit.go) on all the shards of the key's state counter, which live in
// one slot: package decide's rules, on the server's clock, with exact
// int64 arithmetic in Lua for a token bucket's nanoseconds. The removal
// of an idle state (LimitTake.Remove) is decided by the same script on
// the same read, which deletes the state's shards and request ids; its
// metadata and index entry, in another slot, go after (remove.go).
//
// # Approx counters
//
// A shard's HyperLogLog sketch is field x of its hash. A write reads the
// shards' sketches and versions (or takes them from the store's cache),
// has package decide compute each new sketch in Go, and the add script
// sets each sketch only if the shard's version is unchanged
// (compare-and-set), with the request ids and the marker; a conflict is
// retried. See approx.go.
//
// # Strong reads
//
// On one server a read is one MULTI/EXEC. On a cluster it is a double
// collect: every write bumps its shard's version, and a read collects
// every shard twice (a counter of one shard once), accepting when no
// version changed in between; a counter written too fast for that is
// frozen (a reshard to its own shard count) and read while frozen. Either
// way the read is linearizable. See read.go.
//
// # Resharding
//
// A reshard records an intent in the metadata, fences every old shard to
// the next epoch (freezing the counter), creates or folds shards with
// idempotent, marker-guarded scripts, and commits the new count and epoch.
// Any client that meets an intent finishes it, so a process that dies mid
// reshard loses and doubles nothing. See finishReshard.
//
// # Request ids across reshards
//
// An item with a request id goes to shard PickFor(counter, id) mod n. After
// a reshard a retry may map to another shard than its first try, so the
// metadata keeps the earlier shard counts still inside the dedupe window
// (up to 32) and a write with a request id also checks the id's shard under
// each; those layouts are closed, so the check is exact.
package redis
