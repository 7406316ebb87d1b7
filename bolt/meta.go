package bolt

import (
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/specrec"
)

// meta is a counter's record in the counters bucket: its spec and when it
// was created.
type meta struct {
	spec      shardcounter.Spec // Kind is never "": KindSum, KindDistinct or KindApprox
	createdAt int64             // unix ns
}

// newMeta returns the record of a new counter; it copies what spec points
// to, so that the counters it returns share nothing with the caller's.
func newMeta(spec shardcounter.Spec, createdAt int64) meta {
	return meta{spec: specrec.Clone(spec), createdAt: createdAt}
}

func encodeMeta(m meta) []byte { return specrec.Encode(m.spec, m.createdAt) }

func decodeMeta(b []byte) (meta, error) {
	spec, createdAt, err := specrec.Decode(b)
	if err != nil {
		return meta{}, fmt.Errorf("bolt: %w", err)
	}
	return meta{spec: spec, createdAt: createdAt}, nil
}

func (m meta) counter(id string) *shardcounter.Counter {
	return &shardcounter.Counter{ID: id, Spec: m.spec, CreatedAt: time.Unix(0, m.createdAt).UTC()}
}

func (m meta) distinct() bool { return m.spec.Kind == shardcounter.KindDistinct }

// getMeta returns the counter's record, or ErrNotFound.
func getMeta(tx *bbolt.Tx, id string) (meta, error) {
	b := tx.Bucket(bucketCounters).Get([]byte(id))
	if b == nil {
		return meta{}, shardcounter.CounterNotFound(id)
	}
	return decodeMeta(b)
}
