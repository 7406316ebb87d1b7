package pebble

import (
	"fmt"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/specrec"
)

// meta is the metadata part of a counter's record: its spec and when it
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
		return meta{}, fmt.Errorf("pebble: %w", err)
	}
	return meta{spec: spec, createdAt: createdAt}, nil
}

func (m meta) counter(id string) *shardcounter.Counter {
	return &shardcounter.Counter{ID: id, Spec: m.spec, CreatedAt: time.Unix(0, m.createdAt).UTC()}
}

func (m meta) distinct() bool { return m.spec.Kind == shardcounter.KindDistinct }
