package docstore

import (
	"math"

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
