package decide_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
)

// counterView is a view whose every counter exists, a sum counter of 4
// shards of 3 each, with no request id, member or bucket: what Decide
// costs beside a store's own reads.
type counterView struct{}

var spec4 = shardcounter.Spec{Shards: 4, Kind: shardcounter.KindSum}

func (counterView) Counter(string) (decide.Counter, error) {
	return decide.Counter{Exists: true, Spec: spec4, Total: 12}, nil
}
func (counterView) Shard(string, int) (int64, bool, error)          { return 3, true, nil }
func (counterView) Request(string, string) (time.Time, bool, error) { return time.Time{}, false, nil }
func (counterView) Member(string, string) (bool, error)             { return false, nil }
func (counterView) Bucket(string, time.Time) (int64, bool, error)   { return 0, true, nil }
func (counterView) Sketch(string, int) ([]byte, error)              { return nil, nil }

// BenchmarkDecide decides a batch of 40 deltas on 40 counters, as an
// engine flush of 64 writes folds to on a skewed workload: the core's own
// cost per flush. In instructions:
//
//	scripts/bench-ab.sh -i -a REV ./decide 'BenchmarkDecide$'
func BenchmarkDecide(b *testing.B) {
	incs := make([]shardcounter.Increment, 40)
	for i := range incs {
		incs[i] = shardcounter.Increment{Counter: fmt.Sprint("z/", i*37), Delta: 1, Pick: uint64(i)}
	}
	out := make([]shardcounter.Outcome, len(incs))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decide.Decide(counterView{}, decide.Batch{Incs: incs, Now: now, Cutoff: cutoff}, out); err != nil {
			b.Fatal(err)
		}
	}
}
