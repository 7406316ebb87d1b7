package decide

import (
	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
)

// Total returns the sum of a counter's shard values, as a View's Counter
// gives it: the total with SumExact, or SumOverflows when the shards sum
// outside int64 (data written before that was refused, or loaded). A
// store that reads every shard (bolt, PostgreSQL reading a counter whole)
// uses it.
func Total(vals []int64) (int64, Sum) {
	if t, ok := overflow.Sum(vals); ok {
		return t, SumExact
	}
	return 0, SumOverflows
}

// FoldShards returns a sum counter's shard values vals resharded to
// shards shards: kept shard j takes every shard i ≡ j (mod shards), as
// FoldSketches folds sketches, and growing adds shards of 0. A group may
// leave int64 although the total fits: its out_of_range error refuses the
// reshard.
func FoldShards(counter string, vals []int64, shards int) ([]int64, error) {
	out := make([]int64, shards)
	for j := range min(shards, len(vals)) {
		group := make([]int64, 0, len(vals)/shards+1)
		for i := j; i < len(vals); i += shards {
			group = append(group, vals[i])
		}
		var ok bool
		if out[j], ok = overflow.Sum(group); !ok {
			return nil, shardcounter.Errorf(shardcounter.EOUTOFRANGE,
				"reshard counter %q to %d shards: folding into shard %d would leave the int64 range: choose another count", counter, shards, j)
		}
	}
	return out, nil
}
