package datastore

import (
	"fmt"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// Escape returns the key name of the store's own entities for id (the
// counter entity, members, request ids): docstore.Escape, as Firestore's
// document ids, which keeps byte order, so that listings in key order are
// in id order, and keeps names clear of the reserved __…__. Shard entities are keyed by the raw
// id, as the seed keys them (TARGET_N never ends in "__").
func Escape(id string) string { return docstore.Escape(id) }

// Unescape reverses Escape.
func Unescape(name string) (string, error) { return docstore.Unescape(name) }

// counterEntity is the store's entity beside a counter's shards: the shard
// count the seed keeps in code, and the rest of the spec.
type counterEntity struct {
	NumShards int64     `datastore:"num_shards"`
	ID        string    `datastore:"id,noindex"`
	Kind      string    `datastore:"kind,noindex"`
	CreatedAt time.Time `datastore:"created_at,noindex"`
	HasMin    bool      `datastore:"has_min,noindex"`
	Min       int64     `datastore:"min,noindex"`
	HasMax    bool      `datastore:"has_max,noindex"`
	Max       int64     `datastore:"max,noindex"`
	Bucket    int64     `datastore:"bucket_seconds,noindex"`
	Retention int64     `datastore:"retention_seconds,noindex"`
	// Wide: some shard may be outside ±MaxInt64/n, so writes read every
	// shard and check the total (see the package doc).
	Wide bool `datastore:"wide,noindex"`
}

func newCounterEntity(id string, spec shardcounter.Spec, created time.Time) *counterEntity {
	e := &counterEntity{NumShards: int64(spec.Shards), ID: id, Kind: string(docstore.KindOf(spec)), CreatedAt: created}
	if spec.Min != nil {
		e.HasMin, e.Min = true, *spec.Min
	}
	if spec.Max != nil {
		e.HasMax, e.Max = true, *spec.Max
	}
	if w := spec.Window; w != nil {
		e.Bucket = int64(time.Duration(w.Bucket) / time.Second)
		e.Retention = int64(time.Duration(w.Retention) / time.Second)
	}
	return e
}

func (e *counterEntity) check(k *datastore.Key) error {
	if shardcounter.ValidateShards(int(e.NumShards)) != nil {
		return fmt.Errorf("datastore: %s has no num_shards from 1 to %d (%d)", k, shardcounter.MaxShards, e.NumShards)
	}
	return nil
}

func (e *counterEntity) spec() shardcounter.Spec {
	s := shardcounter.Spec{Shards: int(e.NumShards), Kind: shardcounter.Kind(e.Kind)}
	if s.Kind == "" {
		s.Kind = shardcounter.KindSum
	}
	if e.HasMin {
		v := e.Min
		s.Min = &v
	}
	if e.HasMax {
		v := e.Max
		s.Max = &v
	}
	if e.Bucket > 0 {
		s.Window = &shardcounter.Window{Bucket: shardcounter.Duration(time.Duration(e.Bucket) * time.Second), Retention: shardcounter.Duration(time.Duration(e.Retention) * time.Second)}
	}
	return s
}

func (e *counterEntity) counter(id string) *shardcounter.Counter {
	return &shardcounter.Counter{ID: id, Spec: e.spec(), CreatedAt: e.CreatedAt.UTC()}
}

// full reports whether writes to the counter read every shard.
func (e *counterEntity) full() bool { return e.Wide || e.HasMin || e.HasMax }

// shardEntity is one of the seed's shard entities: target and count, and
// whatever else an app keeps on it, written back as it was read.
type shardEntity struct {
	Target string
	Count  int64
	Sketch []byte // an approx counter's (propSketch); nil for none
	other  []datastore.Property
	exists bool
}

func (e *shardEntity) Load(ps []datastore.Property) error {
	e.exists = true
	for _, p := range ps {
		switch p.Name {
		case "target":
			e.Target, _ = p.Value.(string)
		case "count":
			e.Count, _ = p.Value.(int64)
		case propSketch:
			e.Sketch, _ = p.Value.([]byte)
		default:
			e.other = append(e.other, p)
		}
	}
	return nil
}

func (e *shardEntity) Save() ([]datastore.Property, error) {
	ps := []datastore.Property{{Name: "target", Value: e.Target}, {Name: "count", Value: e.Count, NoIndex: true}}
	if len(e.Sketch) > 0 {
		ps = append(ps, datastore.Property{Name: propSketch, Value: e.Sketch, NoIndex: true})
	}
	return append(ps, e.other...), nil
}

// ownEntity is a member or request id: of is its counter's created_at,
// so that one left by a deleted counter is not taken for one of a counter
// made again under the id; at is when a request id was recorded.
type ownEntity struct {
	Of time.Time `datastore:"of,noindex"`
	At time.Time `datastore:"at"`
	// Attempt is set on batch markers alone: the attempt that wrote it.
	Attempt int64 `datastore:"attempt,noindex,omitempty"`
}

// bucketEntity is a window bucket.
type bucketEntity struct {
	Start time.Time `datastore:"start,noindex"`
	Count int64     `datastore:"count,noindex"`
}

// bucketName is the key name of the bucket that starts at unix second
// start: fixed width, so that key order is time order.
func bucketName(start int64) string { return fmt.Sprintf("%020d", uint64(start)^(1<<63)) }
