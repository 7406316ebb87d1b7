// Package transfer moves counters in and out of stores and checks them:
// the export format (docs/EXPORT.md), export, import, a migration from
// Redis keys, verify, and the admin endpoints that serve them, with
// online backup, from a running server.
//
// # Export and import
//
// Export writes a store's counters, and its collections with their
// documents, as JSON Lines, one record a line,
// between a versioned header and an end line that counts what came
// before; Decoder reads them back, checking every line and naming the one
// that is wrong. Import makes each counter of an export hold what the
// export says, through the store's Apply (the engine's batch path), so
// that importing twice leaves the state of importing once, and an import
// cut short is resumed by running it again. An approx counter travels as
// its shards' sketches (SketchStore.ReadSketches), which import merges
// back shard by shard: a merge of registers already there changes
// nothing.
//
// # Window buckets and the store's clock
//
// A store puts a windowed counter's write in the bucket of its commit
// time by its own clock. To give each imported bucket its start, import
// opens the store on a Clock (OpenStore) and holds it at each bucket's
// start while it writes that bucket. Only the importer writes through
// such a store, one batch at a time.
//
// # Consistency
//
// Export reads PostgreSQL through one REPEATABLE READ transaction
// (postgres.Snapshot); the admin endpoint exports bolt and Pebble from an
// online copy (Tx.WriteTo, a checkpoint). Other stores are read a page of
// counters at a time.
//
// # Redis
//
// ImportRedis reads a live Redis with SCAN, pipelines of 100 keys, SSCAN
// and HSCAN, and imports integer strings as sum counters, sets as
// distinct counters and hashes of integers as hashes of counters. It
// skips HyperLogLogs: their registers come from Redis's hash of the
// members, which approx counters' sketches do not use.
package transfer
