package pebble

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/shardcounter/shardcounter"
)

// meta is the metadata part of a counter's record: its spec and when it
// was created.
type meta struct {
	spec      shardcounter.Spec // Kind is never "": KindSum or KindDistinct
	createdAt int64             // unix ns
}

// The metadata is
//
//	shards (uint16) | created_at (int64) | kind (byte) | flags (byte) | [min] [max] [bucket retention]
//
// each optional field an int64 (the window's as nanoseconds) present when
// its flag is set. A record of the first 10 bytes alone is a sum counter
// written before counters had kinds.
const (
	kindSum      = 0
	kindDistinct = 1

	flagMin    = 1 << 0
	flagMax    = 1 << 1
	flagWindow = 1 << 2
)

// newMeta returns the record of a new counter. It copies what spec points
// to, so that the counters it returns share nothing with the caller's.
func newMeta(spec shardcounter.Spec, createdAt int64) meta {
	if spec.Kind == "" {
		spec.Kind = shardcounter.KindSum
	}
	if spec.Min != nil {
		v := *spec.Min
		spec.Min = &v
	}
	if spec.Max != nil {
		v := *spec.Max
		spec.Max = &v
	}
	if spec.Window != nil {
		w := *spec.Window
		spec.Window = &w
	}
	return meta{spec: spec, createdAt: createdAt}
}

func encodeMeta(m meta) []byte {
	b := make([]byte, 12, 12+4*8)
	binary.BigEndian.PutUint16(b, uint16(m.spec.Shards))
	binary.BigEndian.PutUint64(b[2:], uint64(m.createdAt))
	if m.spec.Kind == shardcounter.KindDistinct {
		b[10] = kindDistinct
	}
	if m.spec.Min != nil {
		b[11] |= flagMin
		b = binary.BigEndian.AppendUint64(b, uint64(*m.spec.Min))
	}
	if m.spec.Max != nil {
		b[11] |= flagMax
		b = binary.BigEndian.AppendUint64(b, uint64(*m.spec.Max))
	}
	if w := m.spec.Window; w != nil {
		b[11] |= flagWindow
		b = binary.BigEndian.AppendUint64(b, uint64(w.Bucket))
		b = binary.BigEndian.AppendUint64(b, uint64(w.Retention))
	}
	return b
}

func decodeMeta(b []byte) (meta, error) {
	corrupt := func() (meta, error) {
		return meta{}, fmt.Errorf("pebble: corrupt counter record of %d bytes", len(b))
	}
	if len(b) != 10 && len(b) < 12 {
		return corrupt()
	}
	m := meta{
		spec:      shardcounter.Spec{Shards: int(binary.BigEndian.Uint16(b)), Kind: shardcounter.KindSum},
		createdAt: int64(binary.BigEndian.Uint64(b[2:])),
	}
	if len(b) == 10 {
		if shardcounter.ValidateShards(m.spec.Shards) != nil {
			return corrupt()
		}
		return m, nil
	}
	switch b[10] {
	case kindSum:
	case kindDistinct:
		m.spec.Kind = shardcounter.KindDistinct
	default:
		return corrupt()
	}
	flags, rest := b[11], b[12:]
	next := func() int64 {
		v := int64(binary.BigEndian.Uint64(rest))
		rest = rest[8:]
		return v
	}
	want := 0
	if flags&flagMin != 0 {
		want += 8
	}
	if flags&flagMax != 0 {
		want += 8
	}
	if flags&flagWindow != 0 {
		want += 16
	}
	if len(rest) != want || flags&^(flagMin|flagMax|flagWindow) != 0 {
		return corrupt()
	}
	if flags&flagMin != 0 {
		v := next()
		m.spec.Min = &v
	}
	if flags&flagMax != 0 {
		v := next()
		m.spec.Max = &v
	}
	if flags&flagWindow != 0 {
		m.spec.Window = &shardcounter.Window{Bucket: shardcounter.Duration(next()), Retention: shardcounter.Duration(next())}
	}
	if shardcounter.ValidateSpec(m.spec) != nil {
		return corrupt() // say, 0 shards: every write would divide by it
	}
	return m, nil
}

func (m meta) counter(id string) *shardcounter.Counter {
	return &shardcounter.Counter{ID: id, Spec: m.spec, CreatedAt: time.Unix(0, m.createdAt).UTC()}
}

func (m meta) distinct() bool { return m.spec.Kind == shardcounter.KindDistinct }
