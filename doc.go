// Package shardcounter is the domain of shardcounter: counters that take
// more writes than one database record can, by splitting each counter into
// shards whose sum is its value.
//
// # The technique
//
// A record in a database can absorb only so many writes a second: Cloud
// Firestore sustains about one write a second per document, App Engine's
// Datastore about five per entity group, and a PostgreSQL row serialises
// every UPDATE behind its row lock. A sharded counter is N records (shards);
// a write adds to one shard chosen at random; a read sums every shard. Write
// throughput grows with N, read cost grows with N too.
//
// # The layout
//
// This package holds the types (Counter, Reading, Write, Increment), the
// error type and codes, and two interfaces: CounterStore, which every store
// package implements (bolt, postgres, redis), and CounterService, which the
// engine implements over a store and the HTTP client implements over the
// network. It imports no store and no net/http.
//
// # Getting started
//
// The package's examples (example_test.go; `go doc -http` shows them) are
// programs that go test runs and checks: each opens the embedded store in
// a temporary directory with dsn.Open, starts the engine (package engine)
// over it, and creates, writes and reads a counter, a distinct counter, a
// counter with a floor, one with a time window, and a collection. Another
// DSN on the dsn.Open line runs an example against another store.
//
// # Collections
//
// The same hotspot hits an index on a timestamp: every new entry lands at
// its end. Collection, Document and Query describe time-ordered
// collections with sharded timestamps (seed 001): a document goes to one
// of n shards, every index that holds the timestamp holds the shard first,
// and a query is merged from per-shard reads. CollectionStore is the
// storage primitive every store implements (an ordered, limited index
// range read over a set of shards); package collection implements
// CollectionService over it, once for every store. docs/COLLECTIONS.md has
// the full account.
//
// # Invariants
//
// A strong read equals the sum of every acknowledged write. A write with a
// request id is applied at most once. A write that gets an error was not
// applied, or the error says its outcome is unknown (IsOutcomeUnknown).
// Resharding keeps the value exactly. Values never wrap: a write that would
// leave the int64 range is refused with ErrOutOfRange.
package shardcounter
