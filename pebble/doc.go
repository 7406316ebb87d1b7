// Package pebble is the embedded store on a log-structured engine,
// github.com/cockroachdb/pebble: counters and collections in one
// directory, every counter's total held in memory. It is the default of
// `shardcounter serve`.
//
// # Writes
//
// An Apply is one Pebble batch committed with one WAL sync, whatever the
// number of counters in it. A write to a counter is a merge operand on
// the counter's one record (record.go): Pebble folds operands into the
// record when it reads or compacts the key, so a write never reads or
// rewrites the record. Batches are built and handed to Pebble one at a
// time under the store's write lock, and wait for their sync outside it,
// so that the next batch is built while one syncs and Pebble's commit
// pipeline gives the batches queued behind one fsync the next one
// together (commit.go).
//
// # Totals in memory
//
// The store is the only writer of its directory (Pebble locks it), so it
// keeps every counter's total in memory, exact: loaded at Open from the
// records, changed by each batch as it is built (the view a write's bound
// and overflow checks use) and published for reads once the batch is
// durable, in the order the batches went to Pebble. So a strong read, a
// batch read and INCR's total read memory alone and are linearizable: a
// read sees a write only once it is durable, and every write acknowledged
// before it began. Out of range is judged on a counter's total: int64,
// and the counter's Min and Max.
//
// An approx counter's value is no sum: its shards' HyperLogLog sketches
// are held in memory as well and published with the batch that changed
// them, and a strong read is the estimate of their union, computed on the
// first read after a change and kept until the next (sketch.go).
//
// # Shards
//
// A counter is one record holding its shards' values, and a write adds to
// shard Pick mod n within it, so ReadShards and Placement say what is
// stored, and a reshard folds the values in the record exactly. Sharding
// buys no throughput here: writes are blind merges built under one lock,
// so a counter of one shard costs least. Shard values add in two's
// complement: the total is exact even in the pathological case where one
// shard, alone, would pass int64.
//
// # What is read from disk
//
// A write with a request id looks the id up; a member write its member; a
// write to a windowed counter its bucket. A write without these reads
// nothing. Metadata, shards, members, windows and documents are read from
// a snapshot, returned once every batch the snapshot may hold is durable.
//
// # Request ids
//
// Request ids live in Pebble, written in the batch of their write, with an
// index by age ('t' keys). A write deletes up to expireBatch expired ids
// beyond those it records, oldest first; the store remembers when the
// oldest id was recorded, so a write reads the index only when some id
// has expired. An expired id not yet deleted is treated as absent.
//
// # Durability and failures
//
// A write is acknowledged once its batch's WAL sync returned. A crash at
// any point leaves the batches whose sync completed, and of the others a
// prefix of the log, each batch whole or not at all. A failed sync leaves
// the store failed: the writes of that batch and those queued behind it
// get outcome unknown, every later write is refused as unavailable, and
// reopening the directory replays the log.
package pebble
