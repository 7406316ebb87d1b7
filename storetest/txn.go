package storetest

import (
	"context"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// testTxn checks increments that belong to transactions
// (Increment.Txn): two transactions and a plain increment in one batch all
// apply, each with its own outcome, on every store; a transaction sent
// again finds its request id a duplicate and its member unchanged, and
// its other items apply again. The counters are placed so that a Redis
// Cluster store finds a master for each transaction: at most one pinned
// counter in each (the request id's, the member's), the others of 16
// shards, which have a shard on every master of three.
func testTxn(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	a, c, e, d := prefix(t)+"a", prefix(t)+"c", prefix(t)+"e", prefix(t)+"d"
	for _, id := range []string{a, c, e} {
		MustCreate(t, s, id, 16)
	}
	MustCreateDistinct(t, s, d, 4)
	batch := func() []shardcounter.Increment {
		return []shardcounter.Increment{
			{Counter: a, Delta: 2, Pick: 1, Txn: 1},
			{Counter: e, Delta: 1, Pick: 7},
			{Counter: c, Delta: -1, RequestID: "t-1", Txn: 1},
			{Counter: d, Member: "m", Delta: 1, Txn: 2},
			{Counter: e, Delta: 3, Pick: 2, Txn: 1},
			{Counter: a, Delta: 5, Pick: 9, Txn: 2},
		}
	}
	check := func(round int, dupAt int) {
		t.Helper()
		out, err := s.Apply(ctx, batch())
		if err != nil {
			t.Fatalf("round %d: Apply: %v", round, err)
		}
		for i, o := range out {
			if o.Err != nil || o.Duplicate != (i == dupAt) || o.Unchanged != (i == 3 && round == 2) {
				t.Fatalf("round %d: outcome %d = %+v", round, i, o)
			}
		}
	}
	check(1, -1)
	check(2, 2)
	for id, want := range map[string]int64{a: 14, e: 8, c: -1, d: 1} {
		if got := MustRead(t, s, id); got != want {
			t.Errorf("%s = %d, want %d", id, got, want)
		}
	}
}
