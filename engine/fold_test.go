package engine

// An internal test file, as fold_bench_test.go: fold is unexported.

import (
	"slices"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// TestFoldTxn checks how fold treats a run of writes joined by JoinNext (a
// RESP transaction): for a store that applies transactions as units of
// their own (txns) each of its writes is an increment of its own, marked
// with the run's Txn, and no other write folds into them; for any other
// store it folds as plain writes do, unmarked.
func TestFoldTxn(t *testing.T) {
	ws := []shardcounter.Write{
		{Counter: "a", Delta: 1},
		{Counter: "a", Delta: 2, JoinNext: true}, // run 1: a, b, a
		{Counter: "b", Delta: 3, JoinNext: true},
		{Counter: "a", Delta: 4},
		{Counter: "a", Delta: 5},
		{Counter: "b", Delta: 6, JoinNext: true}, // run 2: b, b
		{Counter: "b", Delta: 7},
	}
	calls := make([]*call, len(ws))
	for i, w := range ws {
		calls[i] = &call{w: w, seq: i}
	}
	type inc struct {
		counter string
		delta   int64
		txn     uint64
	}
	got := func(txns bool) []inc {
		var out []inc
		for _, g := range fold(calls, nil, txns) {
			out = append(out, inc{g.inc.Counter, g.inc.Delta, g.inc.Txn})
		}
		return out
	}
	want := []inc{{"a", 6, 0}, {"a", 2, 2}, {"b", 3, 2}, {"a", 4, 2}, {"b", 6, 6}, {"b", 7, 6}} // the plain writes fold together
	if g := got(true); !slices.Equal(g, want) {
		t.Errorf("with txns: %v, want %v", g, want)
	}
	want = []inc{{"a", 12, 0}, {"b", 16, 0}}
	if g := got(false); !slices.Equal(g, want) {
		t.Errorf("without txns: %v, want %v", g, want)
	}
}
