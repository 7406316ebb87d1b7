package datastore

import (
	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// Approx counters (shardcounter.KindApprox) keep each shard's HyperLogLog
// sketch in the shard entity's property sc_sketch (a []byte, unindexed),
// beside its count, which stays 0. A batch's transaction reads the shard
// entities its items add to, as it reads every shard it writes, merges
// the batch's members and sketches into each shard's sketch once with
// sketch.Apply, and writes the shards whose sketch changed: the
// transaction makes the read-modify-write serializable, so a concurrent
// writer's registers are never lost.

// propSketch is the shard entities' property of an approx counter's
// sketch (package sketch's encoding, at most sketch.MaxEncoded bytes:
// far under Datastore's 1 MiB for an unindexed blob).
const propSketch = docstore.PropSketch

var _ shardcounter.SketchStore = (*CounterStore)(nil)

func isApprox(kind string) bool { return docstore.IsApprox(shardcounter.Kind(kind)) }
