// Package engine implements shardcounter.CounterService over any
// shardcounter.CounterStore, adding what a store alone does not give.
//
// # Group commit
//
// Concurrent writes are queued (queue.go) and one loop cuts them into
// batches; each batch is folded (fold.go) into one Increment per counter
// and sign and applied with a single store.Apply (flush.go). A flush starts
// as soon as the previous one has committed (or, with Config.MaxInFlight
// above 1, as soon as fewer than that many run), so batches grow with load
// and a lone write waits for no timer. One hot counter thus takes many
// writes per store commit.
//
// # Acknowledgement
//
// Durable (the default): a write is answered only after the batch holding
// it has committed; a failed flush returns its error to exactly the
// writers of that batch. Async: a write is answered once queued and
// committed within Config.FlushInterval; a crash loses what was queued.
//
// # Retry-safe writes
//
// A write with a request id is applied at most once within
// Config.DedupeWindow, which the engine hands to stores that expire ids
// (shardcounter.RequestIDExpirer).
//
// # Rankings
//
// The engine keeps each ranking's top list in memory (ranking.go,
// ranked.go, rankwindow.go): a commit marks the counters it changed, and a
// refresh, in the background or on a read older than the ranking's
// staleness bound, reads those again and merges them into the list. The
// definitions are the store's (shardcounter.RankingStore), so the lists
// are rebuilt from the store after a restart. docs/RANKINGS.md.
//
// # The rest
//
// Auto-create, validation, the shard-count policy (policy.go) and cached
// reads (read.go). In durable mode the engine keeps no state a crash could
// lose beyond the writes not yet acknowledged. docs/DESIGN.md ("The write
// path", "Reads") explains each part.
package engine
