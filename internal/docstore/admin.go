package docstore

import (
	"math"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// CheckCreate validates a create of counter id with spec, and returns the
// spec with its kind filled in (sum when it names none): what both stores
// record.
func CheckCreate(id string, spec shardcounter.Spec) (shardcounter.Spec, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return spec, err
	}
	if err := shardcounter.ValidateSpec(spec); err != nil {
		return spec, err
	}
	if spec.Kind == "" {
		spec.Kind = shardcounter.KindSum
	}
	return spec, nil
}

// Reshard decides what a reshard of counter id of kind to n shards
// writes, from its old shards' values and, for an approx counter,
// sketches: the n shards' values (shard i takes the old shards j with
// j mod n = i, decide.FoldShards; new shards 0; a distinct counter's are
// its members, which members lists, counted again per shard of n), an
// approx counter's n sketches (ReshardSketches; nil for another kind),
// and whether some value is past ±MaxInt64/n (wide: writes to the counter
// then read every shard and check its total).
func Reshard(store, id string, kind shardcounter.Kind, vals []int64, sketches [][]byte, n int, members func() ([]string, error)) (_ []int64, _ [][]byte, wide bool, err error) {
	if vals, err = decide.FoldShards(id, vals, n); err != nil {
		return nil, nil, false, err
	}
	if kind == shardcounter.KindDistinct {
		ms, err := members()
		if err != nil {
			return nil, nil, false, err
		}
		vals = make([]int64, n)
		for _, m := range ms {
			vals[shard.Of(shard.ForMember(m), n)]++
		}
	}
	var sks [][]byte
	if IsApprox(kind) {
		if sks, err = ReshardSketches(store, id, sketches, n); err != nil {
			return nil, nil, false, err
		}
	}
	zone := math.MaxInt64 / int64(n)
	for _, v := range vals {
		wide = wide || v > zone || v < -zone
	}
	return vals, sks, wide, nil
}

// SpecRecord is what a counter's record keeps beside the seed's shard
// count, written once for both stores' layouts (Firestore nests it in
// "shardcounter"; Datastore's entity adds has_min and has_max).
func SpecRecord(id string, spec shardcounter.Spec, created time.Time) Record {
	rec := Record{"id": id, "kind": string(KindOf(spec)), "created_at": created}
	if spec.Min != nil {
		rec["min"] = *spec.Min
	}
	if spec.Max != nil {
		rec["max"] = *spec.Max
	}
	if w := spec.Window; w != nil {
		rec["bucket_seconds"] = int64(time.Duration(w.Bucket) / time.Second)
		rec["retention_seconds"] = int64(time.Duration(w.Retention) / time.Second)
	}
	return rec
}

// SpecOf reads SpecRecord's rec of a counter of n shards (nil: the
// seed's, a sum counter), and its created_at (zero when none).
func SpecOf(n int64, rec Record) (shardcounter.Spec, time.Time) {
	spec := shardcounter.Spec{Shards: int(n), Kind: shardcounter.KindSum}
	if k, _ := rec["kind"].(string); k != "" {
		spec.Kind = shardcounter.Kind(k)
	}
	if v, ok := rec["min"].(int64); ok && rec["has_min"] != false {
		spec.Min = &v
	}
	if v, ok := rec["max"].(int64); ok && rec["has_max"] != false {
		spec.Max = &v
	}
	if b, _ := rec["bucket_seconds"].(int64); b > 0 {
		r, _ := rec["retention_seconds"].(int64)
		spec.Window = &shardcounter.Window{Bucket: shardcounter.Duration(time.Duration(b) * time.Second), Retention: shardcounter.Duration(time.Duration(r) * time.Second)}
	}
	created, _ := rec["created_at"].(time.Time)
	return spec, created
}
