package datastore

import (
	"fmt"
	"maps"
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

// counterEntity is the store's entity beside a counter's shards: the
// shard count the seed keeps in code (num_shards, indexed), and the rest
// of the spec (docstore.SpecRecord, unindexed, every property present:
// has_min and has_max say whether min and max are set, a zero
// bucket_seconds that the counter has no window).
type counterEntity struct {
	NumShards int64
	ID        string
	Kind      string
	CreatedAt time.Time
	Min, Max  *int64
	Window    *shardcounter.Window
	// Wide: some shard may be outside ±MaxInt64/n, so writes read every
	// shard and check the total (see the package doc).
	Wide bool
}

func newCounterEntity(id string, spec shardcounter.Spec, created time.Time) *counterEntity {
	return &counterEntity{NumShards: int64(spec.Shards), ID: id, Kind: string(docstore.KindOf(spec)), CreatedAt: created, Min: spec.Min, Max: spec.Max, Window: spec.Window}
}

func (e *counterEntity) Load(ps []datastore.Property) error {
	e.load(recordOf(ps))
	return nil
}

func (e *counterEntity) load(rec docstore.Record) {
	e.NumShards, _ = rec["num_shards"].(int64)
	e.ID, _ = rec["id"].(string)
	e.Wide, _ = rec["wide"].(bool)
	spec, created := docstore.SpecOf(e.NumShards, rec)
	e.Kind, e.CreatedAt, e.Min, e.Max, e.Window = string(spec.Kind), created, spec.Min, spec.Max, spec.Window
}

func (e *counterEntity) Save() ([]datastore.Property, error) {
	rec := docstore.Record{"min": int64(0), "max": int64(0), "bucket_seconds": int64(0), "retention_seconds": int64(0), "has_min": e.Min != nil, "has_max": e.Max != nil, "wide": e.Wide}
	maps.Copy(rec, docstore.SpecRecord(e.ID, e.spec(), e.CreatedAt))
	ps := []datastore.Property{{Name: "num_shards", Value: e.NumShards}}
	for name, v := range rec {
		ps = append(ps, datastore.Property{Name: name, Value: v, NoIndex: true})
	}
	return ps, nil
}

func (e *counterEntity) check(k *datastore.Key) error {
	if shardcounter.ValidateShards(int(e.NumShards)) != nil {
		return fmt.Errorf("datastore: %s has no num_shards from 1 to %d (%d)", k, shardcounter.MaxShards, e.NumShards)
	}
	return nil
}

func (e *counterEntity) spec() shardcounter.Spec {
	return shardcounter.Spec{Shards: int(e.NumShards), Kind: shardcounter.Kind(e.Kind), Min: e.Min, Max: e.Max, Window: e.Window}
}

func (e *counterEntity) counter(id string) *shardcounter.Counter {
	return &shardcounter.Counter{ID: id, Spec: e.spec(), CreatedAt: e.CreatedAt.UTC()}
}

// full reports whether writes to the counter read every shard.
func (e *counterEntity) full() bool { return e.Wide || e.Min != nil || e.Max != nil }

// shardEntity is one of the seed's shard entities: target and count, and
// whatever else an app keeps on it, written back as it was read; By and
// At are the pace stamp of the store that committed it last (see pace).
type shardEntity struct {
	Target string
	Count  int64
	Sketch []byte // an approx counter's (propSketch); nil for none
	By     string // propBy; "" when none (the seed's)
	At     int64  // propAt, Unix ns
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
		case propBy:
			e.By, _ = p.Value.(string)
		case propAt:
			e.At, _ = p.Value.(int64)
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
	if e.By != "" {
		ps = append(ps, datastore.Property{Name: propBy, Value: e.By, NoIndex: true}, datastore.Property{Name: propAt, Value: e.At, NoIndex: true})
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

// bucketEntity is a window bucket; of is its counter's created_at, as a
// member's (docstore.Owned).
type bucketEntity struct {
	Start time.Time `datastore:"start,noindex"`
	Count int64     `datastore:"count,noindex"`
	Of    time.Time `datastore:"of,noindex"`
}

// bucketName is the key name of the bucket that starts at unix second
// start: fixed width, so that key order is time order.
func bucketName(start int64) string { return fmt.Sprintf("%020d", uint64(start)^(1<<63)) }
