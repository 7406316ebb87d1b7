// Package collection implements shardcounter.CollectionService over any
// shardcounter.CollectionStore: the store-agnostic half of sharded
// timestamps (seed 001).
//
// # Writes
//
// A document gets an id when it has none (20 random letters and digits), a
// timestamp from its data's timestamp field (RFC 3339, kept to the
// microsecond) or else the service's clock, and a shard: random, as the
// seed does, or fnv64a(id) mod n. The store writes it with one index entry
// per declared index and one for the timestamp alone, each keyed by
// (index, value, shard, timestamp, id), so consecutive timestamps land on n
// index ranges instead of one.
//
// # Queries
//
// A query becomes one ordered index range per shard, or per chunk of
// shards for stores that take `shard IN (...)` (Config.ChunkSize, default
// 30 as Firestore's IN limit). A streaming k-way merge (container/heap)
// takes the next document from whichever source is first in (timestamp,
// id) order, and asks a source for more only when its buffer runs dry and
// the merge still needs documents: the first read asks each source for
// about (limit+1)/k, later reads double. A query therefore reads close to
// limit + n entries, not n × limit.
//
// # Paging
//
// A page token holds the position (timestamp, id) of the page's last
// document, the shard count the page covered, and a fingerprint of the
// collection and query. The next page starts strictly after that position
// on every shard, and covers every shard the collection has now. Since
// (timestamp, id) is a total order and a shard count only grows, paging
// returns each document at most once, and every document that exists
// through the paging exactly once, in order. Tokens carry no secret: a
// forged one can only move a cursor within the query it was made for, and
// a damaged or foreign one is refused as invalid_argument.
package collection
