package engine

// An internal test file: fold is the flusher's unexported hot path, and
// exporting it for a benchmark alone would widen the package's API.

import (
	"fmt"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// BenchmarkFold folds one flush's worth of durable writes into store
// increments: one hot counter, or writes spread over 100 counters, with
// one write in ten carrying a request id. ns/op and allocs/op are per
// flush of n writes.
func BenchmarkFold(b *testing.B) {
	for _, counters := range []int{1, 100} {
		for _, n := range []int{64, 4096} {
			b.Run(fmt.Sprintf("counters=%d/writes=%d", counters, n), func(b *testing.B) {
				calls := make([]*call, n)
				for i := range calls {
					w := shardcounter.Write{Counter: fmt.Sprintf("c%d", i%counters), Delta: 1}
					if i%10 == 0 {
						w.RequestID = fmt.Sprintf("r%d", i)
					}
					calls[i] = &call{w: w}
				}
				b.ReportAllocs()
				for b.Loop() {
					if gs := fold(calls, nil, false); len(gs) == 0 {
						b.Fatal("no groups")
					}
				}
			})
		}
	}
}
