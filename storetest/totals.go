package storetest

import (
	"context"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// testTotals checks Outcome.Total: an item that asks for its counter's
// total (Increment.Total) and does not fail gets the counter's value after
// its batch, the batch's other items on the counter included, as a strong
// read right after returns it; an item that does not ask, or fails, gets
// none. A store with opts.Totals must give every total asked for; the
// others may leave any out (the engine then reads the counter), but a
// total they give must be right. Linearizable checks totals under
// concurrent writes and reshards.
func testTotals(t *testing.T, s shardcounter.CounterStore, opts Options) {
	ctx := context.Background()
	p := prefix(t)
	a, b, floor, missing, made := p+"a", p+"b", p+"floor", p+"missing", p+"made"
	MustCreate(t, s, a, 4)
	MustCreate(t, s, b, 1)
	if _, err := s.CreateCounter(ctx, floor, shardcounter.Spec{Shards: 2, Min: ptr(0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, a, 10, 0); err != nil {
		t.Fatal(err)
	}

	type want struct {
		code  string // the item's error code, "" when it applies
		dup   bool   // it is a duplicate
		total *int64 // nil: no total
	}
	check := func(what string, incs []shardcounter.Increment, wants []want) {
		t.Helper()
		out, err := s.Apply(ctx, incs)
		if err != nil {
			t.Fatalf("%s: Apply: %v", what, err)
		}
		for i, w := range wants {
			o := out[i]
			if got := shardcounter.ErrorCode(o.Err); got != w.code {
				t.Fatalf("%s: item %d: error %v, want code %q", what, i, o.Err, w.code)
			}
			if o.Duplicate != w.dup {
				t.Fatalf("%s: item %d: duplicate %v, want %v", what, i, o.Duplicate, w.dup)
			}
			switch {
			case w.total == nil && o.Total != nil:
				t.Errorf("%s: item %d (%s %+d, Total %v): total %d, want none", what, i, incs[i].Counter, incs[i].Delta, incs[i].Total, *o.Total)
			case w.total != nil && o.Total == nil && opts.Totals:
				t.Errorf("%s: item %d (%s %+d): no total, want %d", what, i, incs[i].Counter, incs[i].Delta, *w.total)
			case w.total != nil && o.Total != nil && *o.Total != *w.total:
				t.Errorf("%s: item %d (%s %+d): total %d, want %d", what, i, incs[i].Counter, incs[i].Delta, *o.Total, *w.total)
			}
		}
	}

	// Plain deltas, as one hot counter's batch is: both items on a get the
	// total after both.
	check("plain", []shardcounter.Increment{
		{Counter: a, Delta: 5, Pick: 1, Total: true},
		{Counter: b, Delta: 2, Pick: 0},
		{Counter: a, Delta: -3, Pick: 2, Total: true},
	}, []want{{total: ptr(12)}, {}, {total: ptr(12)}})

	// Items that fail get none; one that creates its counter gets its own
	// delta; a bounded counter's refused item none, its applied one the
	// total; a request id's item the total, and so does its retry, which
	// applies nothing.
	check("general", []shardcounter.Increment{
		{Counter: missing, Delta: 1, Total: true},
		{Counter: made, Delta: 7, Pick: 3, Total: true, Create: &shardcounter.Spec{Shards: 2}},
		{Counter: floor, Delta: -1, Pick: 0, Total: true},
		{Counter: floor, Delta: 4, Pick: 1, Total: true},
		{Counter: b, Delta: 1, RequestID: "r1", Total: true},
	}, []want{{code: shardcounter.ENOTFOUND}, {total: ptr(7)}, {code: shardcounter.EOUTOFRANGE}, {total: ptr(4)}, {total: ptr(3)}})
	check("retry", []shardcounter.Increment{
		{Counter: b, Delta: 1, RequestID: "r1", Total: true},
	}, []want{{dup: true, total: ptr(3)}})

	for id, v := range map[string]int64{a: 12, b: 3, floor: 4, made: 7} {
		if got := MustRead(t, s, id); got != v {
			t.Errorf("%s reads %d, want %d", id, got, v)
		}
	}
}
