package firestore

import (
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// meta is a counter document: the shard count the seed keeps in
// num_shards, and the spec shardcounter keeps beside it.
type meta struct {
	spec    shardcounter.Spec
	created time.Time
	ut      time.Time // the counter document's update time
}

// metaFields returns the fields of a new counter document.
func metaFields(id string, m meta) map[string]any {
	return map[string]any{fieldNumShards: int64(m.spec.Shards), fieldMeta: docstore.SpecRecord(id, m.spec, m.created)}
}

// decodeMeta reads a counter document. One made the seed's way has only
// num_shards: it is a sum counter created when its document was.
func decodeMeta(snap *firestore.DocumentSnapshot) (meta, error) {
	return metaOf(snap.Ref.Path, snap.Data(), snap.CreateTime, snap.UpdateTime)
}

// metaOf is decodeMeta on a document's path, fields, and create and
// update times (a strong read's documents are not DocumentSnapshots).
func metaOf(path string, d map[string]any, created, updated time.Time) (meta, error) {
	n, ok := d[fieldNumShards].(int64)
	if !ok || shardcounter.ValidateShards(int(n)) != nil {
		return meta{}, fmt.Errorf("firestore: %s has no num_shards from 1 to %d (%v)", path, shardcounter.MaxShards, d[fieldNumShards])
	}
	sc, _ := d[fieldMeta].(map[string]any)
	m := meta{ut: updated}
	if m.spec, m.created = docstore.SpecOf(n, sc); m.created.IsZero() {
		m.created = created
	}
	return m, nil
}

func (m meta) counter(id string) *shardcounter.Counter {
	return &shardcounter.Counter{ID: id, Spec: m.spec, CreatedAt: m.created}
}

// shardState is what the store knows of one shard document: its value and
// the update time of the version that holds it, which a commit states as
// its precondition, so that a write based on it applies only if nobody
// wrote the shard since.
type shardState struct {
	value  int64
	ut     time.Time
	exists bool // a document exists (a seed-made counter may lack some)
	known  bool
	wide   bool  // the document has the wide mark
	n      int64 // the num_shards it was written with; 0 on a seed-made document
	mine   bool  // ut is this store's own commit's (see pace)
}

// counterState is what the store knows of a counter between batches: its
// metadata and the shard versions it last read or wrote. It is immutable
// once cached; a batch copies what it changes.
type counterState struct {
	meta   meta
	shards []shardState
	// full: writes to it check its total over every shard, not only their
	// own shard's zone (bounded counters, and counters near the limits).
	full bool
	// bucket is a windowed counter's bucket document last read or written.
	bucket bucketState
}

// bucketState is a window bucket's document as a batch read or committed
// it: its value and update time (the precondition of the commit that
// writes it), or read missing. A zero start is none known.
type bucketState struct {
	start  time.Time
	value  int64
	ut     time.Time
	exists bool
}

func (c *counterState) clone() *counterState {
	d := *c
	d.shards = slices.Clone(c.shards)
	return &d
}
