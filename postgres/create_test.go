package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// TestCreateOnWriteOneTransaction checks that a batch of first writes to
// many new counters creates them all inside its own transaction, not one
// create each: they share the transaction's start time as created_at, and
// a retry of the batch finds them all.
func TestCreateOnWriteOneTransaction(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	const n = 1000
	spec := shardcounter.Spec{Shards: 4, Kind: shardcounter.KindDistinct}
	incs := make([]shardcounter.Increment, n)
	for i := range incs {
		incs[i] = shardcounter.Increment{Counter: fmt.Sprintf("post/%d/likes", i), Member: "alice", Delta: 1, Create: &spec}
	}
	out, err := s.Apply(ctx, incs)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil || o.Duplicate || o.Unchanged {
			t.Fatalf("first like %d: %+v, want applied", i, o)
		}
	}
	var counters, times int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*), count(DISTINCT created_at) FROM shardcounter.counters WHERE id LIKE 'post/%'").Scan(&counters, &times); err != nil {
		t.Fatal(err)
	}
	if counters != n || times != 1 {
		t.Fatalf("%d counters created at %d distinct times, want %d created in one transaction", counters, times, n)
	}
	out, err = s.Apply(ctx, incs)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil || !o.Unchanged {
			t.Fatalf("second like of the same member %d: %+v, want unchanged", i, o)
		}
	}
}
