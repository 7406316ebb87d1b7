// Package specrec holds the records the embedded stores (bolt, Pebble)
// keep of a counter's spec (binary), a collection and a document (JSON):
// one format each, so that a file of either store reads the same way.
package specrec

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/shardcounter/shardcounter"
)

// ErrCorrupt is a record Decode cannot read.
var ErrCorrupt = errors.New("corrupt counter record")

// A counter record is
//
//	shards (uint16) | created_at (int64) | kind (byte) | flags (byte) | [min] [max] [bucket retention]
//
// each optional field an int64 (the window's as nanoseconds) present when
// its flag is set. A record of the first 10 bytes alone is a sum counter
// written before counters had kinds.
const (
	kindSum      = 0
	kindDistinct = 1
	kindApprox   = 2

	flagMin    = 1 << 0
	flagMax    = 1 << 1
	flagWindow = 1 << 2
)

// Clone returns spec with its own copies of what it points to, so that
// what a store returns shares nothing with its caller's; a spec without a
// kind is a sum counter's.
func Clone(spec shardcounter.Spec) shardcounter.Spec {
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
	return spec
}

// Encode returns the record of a counter of spec created at createdAt
// (Unix ns).
func Encode(spec shardcounter.Spec, createdAt int64) []byte {
	b := make([]byte, 12, 12+4*8)
	binary.BigEndian.PutUint16(b, uint16(spec.Shards))
	binary.BigEndian.PutUint64(b[2:], uint64(createdAt))
	switch spec.Kind {
	case shardcounter.KindDistinct:
		b[10] = kindDistinct
	case shardcounter.KindApprox:
		b[10] = kindApprox
	}
	if spec.Min != nil {
		b[11] |= flagMin
		b = binary.BigEndian.AppendUint64(b, uint64(*spec.Min))
	}
	if spec.Max != nil {
		b[11] |= flagMax
		b = binary.BigEndian.AppendUint64(b, uint64(*spec.Max))
	}
	if w := spec.Window; w != nil {
		b[11] |= flagWindow
		b = binary.BigEndian.AppendUint64(b, uint64(w.Bucket))
		b = binary.BigEndian.AppendUint64(b, uint64(w.Retention))
	}
	return b
}

// Decode reads a record: the spec (Kind never "") and its creation time
// (Unix ns). A record it cannot read, or whose spec is invalid, is
// ErrCorrupt.
func Decode(b []byte) (shardcounter.Spec, int64, error) {
	corrupt := func() (shardcounter.Spec, int64, error) {
		return shardcounter.Spec{}, 0, fmt.Errorf("%w of %d bytes", ErrCorrupt, len(b))
	}
	if len(b) != 10 && len(b) < 12 {
		return corrupt()
	}
	spec := shardcounter.Spec{Shards: int(binary.BigEndian.Uint16(b)), Kind: shardcounter.KindSum}
	createdAt := int64(binary.BigEndian.Uint64(b[2:]))
	if len(b) == 10 {
		if shardcounter.ValidateShards(spec.Shards) != nil {
			return corrupt()
		}
		return spec, createdAt, nil
	}
	switch b[10] {
	case kindSum:
	case kindDistinct:
		spec.Kind = shardcounter.KindDistinct
	case kindApprox:
		spec.Kind = shardcounter.KindApprox
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
		spec.Min = &v
	}
	if flags&flagMax != 0 {
		v := next()
		spec.Max = &v
	}
	if flags&flagWindow != 0 {
		spec.Window = &shardcounter.Window{Bucket: shardcounter.Duration(next()), Retention: shardcounter.Duration(next())}
	}
	if shardcounter.ValidateSpec(spec) != nil {
		return corrupt() // say, 0 shards: every write would divide by it
	}
	return spec, createdAt, nil
}

// Collection is a collection's record.
type Collection struct {
	Shards         int      `json:"n"`
	TimestampField string   `json:"t"`
	Indexes        []string `json:"i"`
	ShardKey       string   `json:"k"`
	CreatedAt      int64    `json:"c"` // Unix ns
}

// Collection returns the collection the record describes.
func (r Collection) Collection(name string) *shardcounter.Collection {
	return &shardcounter.Collection{
		Name: name, Shards: r.Shards, TimestampField: r.TimestampField, Indexes: r.Indexes,
		ShardKey: shardcounter.ShardKey(r.ShardKey), CreatedAt: time.Unix(0, r.CreatedAt).UTC(),
	}
}

// Document is a document's record.
type Document struct {
	Shard int             `json:"s"`
	TS    int64           `json:"t"` // Unix µs
	Data  json.RawMessage `json:"d"`
}
