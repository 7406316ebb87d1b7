package docstore

import (
	"fmt"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/sketch"
)

// Approx counters (shardcounter.KindApprox) keep each shard's HyperLogLog
// sketch beside its count (which stays 0), in the shard document's
// property sc_sketch (package sketch's encoding, at most
// sketch.MaxEncoded bytes).
const PropSketch = "sc_sketch"

// KindOf is a spec's kind, a sum counter's when it names none.
func KindOf(s shardcounter.Spec) shardcounter.Kind {
	if s.Kind == "" {
		return shardcounter.KindSum
	}
	return s.Kind
}

// IsApprox reports whether kind is the approx counters'.
func IsApprox(kind shardcounter.Kind) bool { return kind == shardcounter.KindApprox }

// ApproxValue is an approx counter's value: the estimate of the union of
// its shards' sketches.
func ApproxValue(store, id string, sketches [][]byte) (int64, error) {
	v, err := sketch.Count(sketches)
	if err != nil {
		return 0, fmt.Errorf("%s: counter %q: %w", store, id, err)
	}
	return v, nil
}

// ShardEstimates returns each shard's own estimate, an approx counter's
// shard values (ReadShards, Placement).
func ShardEstimates(store, id string, sketches [][]byte) ([]int64, error) {
	vals := make([]int64, len(sketches))
	for i, b := range sketches {
		v, err := ApproxValue(store, id, [][]byte{b})
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	return vals, nil
}

// ReshardSketches returns the sketches of an approx counter's n shards
// after a reshard from the old ones: shard i keeps its own and takes the
// removed shards j with j mod n = i. A shard with none stays nil.
func ReshardSketches(store, id string, old [][]byte, n int) ([][]byte, error) {
	out := make([][]byte, n)
	for i := range min(len(old), n) {
		out[i] = old[i]
	}
	for j := n; j < len(old); j++ {
		if len(old[j]) == 0 {
			continue
		}
		b, _, err := sketch.Apply(out[j%n], nil, [][]byte{old[j]})
		if err != nil {
			return nil, fmt.Errorf("%s: counter %q, shard %d: %w", store, id, j, err)
		}
		out[j%n] = b
	}
	return out, nil
}

// HasNoMembers is the ErrInvalid of a member read of a counter of kind
// that keeps no members.
func HasNoMembers(id string, kind shardcounter.Kind) error {
	if IsApprox(kind) {
		return shardcounter.Errorf(shardcounter.EINVALID, "counter %q is an approx counter: it keeps a sketch of its members, not the members; use a distinct counter to list them or test one", id)
	}
	return shardcounter.CounterHasNoMembers(id)
}
