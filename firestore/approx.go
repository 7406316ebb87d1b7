package firestore

import (
	"cloud.google.com/go/firestore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// Approx counters (shardcounter.KindApprox) keep each shard's HyperLogLog
// sketch in the shard document's fieldSketch, beside its count (which
// stays 0). A batch reads the sketch of every shard it adds to in the
// same round trip as the rest of its reads (never from the cache: a
// sketch is up to 16 KiB, and the cache holds 100,000 counters), merges
// the batch's members and sketches into it with sketch.Apply, and writes
// it back under the shard's update-time precondition, as every shard
// write is: a writer that came first fails the commit, and the batch is
// decided again on the sketch that writer left, so no writer's registers
// are lost.

// fieldSketch is the shard documents' field of an approx counter's
// sketch (package sketch's encoding, at most sketch.MaxEncoded bytes).
const fieldSketch = docstore.PropSketch

var _ shardcounter.SketchStore = (*CounterStore)(nil)

func isApprox(spec shardcounter.Spec) bool { return docstore.IsApprox(spec.Kind) }

// sketchOf returns the sketch a shard document holds, nil for none.
func sketchOf(snap *firestore.DocumentSnapshot) []byte {
	if snap == nil || !snap.Exists() {
		return nil
	}
	b, _ := snap.Data()[fieldSketch].([]byte)
	return b
}
