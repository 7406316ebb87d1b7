package storetest

import (
	"context"
	"math"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// testBoundCreate checks create on write with bounded items (package
// decide's rule, Redis 8.8's INCREX): a bounded item skipped on a missing
// counter creates nothing and records nothing, its total 0; a saturated
// one is never skipped and creates it. The specs are ones whose shards a
// Redis Cluster reads in one step (one shard, or Min and Max).
func testBoundCreate(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	p := prefix(t)
	upTo := func(hi int64, sat bool) *shardcounter.Bound {
		return &shardcounter.Bound{Lower: math.MinInt64, Upper: hi, Saturate: sat}
	}
	missing := func(id string) {
		t.Helper()
		_, err := s.GetCounter(ctx, id)
		wantCode(t, "GetCounter after a skipped item", err, shardcounter.ENOTFOUND)
		_, err = s.ReadCounter(ctx, id)
		wantCode(t, "ReadCounter after a skipped item", err, shardcounter.ENOTFOUND)
	}
	applied := func(what string, o shardcounter.Outcome, want int64, skipped bool) {
		t.Helper()
		if o.Err != nil || o.Duplicate || o.Applied == nil || *o.Applied != want || o.Skipped != skipped {
			t.Fatalf("%s: outcome %+v (applied %v), want applied %d, skipped %v", what, o, deref(o.Applied), want, skipped)
		}
	}
	for _, spec := range []shardcounter.Spec{{Shards: 1}, {Shards: 3, Min: ptr(-100), Max: ptr(100)}} {
		id := p + specString(spec)
		// INCREX id BYINT 5 UBOUND 3, alone, asking for its total.
		out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 5, Bound: upTo(3, false), Create: &spec, Total: true, RequestID: "r"}})
		if err != nil {
			t.Fatal(err)
		}
		applied("a skipped item on a missing counter", out[0], 0, true)
		if o := out[0]; o.Total != nil && *o.Total != 0 {
			t.Fatalf("a skipped item on a missing counter: total %d, want 0 (or none)", *o.Total)
		}
		missing(id)

		// Skipped, then created by a later item of the batch: the skipped
		// item recorded no request id, so it applies when sent again.
		out, err = s.Apply(ctx, []shardcounter.Increment{
			{Counter: id, Delta: 5, Bound: upTo(3, false), Create: &spec, RequestID: "r"},
			{Counter: id, Delta: 2, Create: &spec, Pick: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		applied("a skipped item before a creating one", out[0], 0, true)
		if out[1].Err != nil || out[1].Duplicate {
			t.Fatalf("a plain item after a skipped one: %+v, want applied", out[1])
		}
		if got := MustRead(t, s, id); got != 2 {
			t.Fatalf("value = %d, want 2", got)
		}
		out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 5, Bound: upTo(10, false), Create: &spec, RequestID: "r"}})
		if err != nil {
			t.Fatal(err)
		}
		applied("the skipped item's request id sent again", out[0], 5, false)
		if got := MustRead(t, s, id); got != 7 {
			t.Fatalf("value = %d, want 7", got)
		}
		// On the counter now present, a skipped item leaves it as it was.
		out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 5, Bound: upTo(10, false), Create: &spec, Total: true}})
		if err != nil {
			t.Fatal(err)
		}
		applied("a skipped item on a present counter", out[0], 0, true)
		if got := MustRead(t, s, id); got != 7 {
			t.Fatalf("value = %d, want 7", got)
		}
	}

	// SATURATE is never skipped: it creates its counter, even applying 0.
	spec := shardcounter.Spec{Shards: 1}
	for _, c := range []struct {
		name                string
		delta, lo, hi, want int64 // the value is want: the counter was 0
	}{
		{name: "saturated", delta: 5, lo: math.MinInt64, hi: 3, want: 3},
		{name: "saturated at 0", delta: -5, lo: 0, hi: 10, want: 0},
	} {
		id := p + c.name
		out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: c.delta, Bound: &shardcounter.Bound{Lower: c.lo, Upper: c.hi, Saturate: true}, Create: &spec}})
		if err != nil {
			t.Fatal(err)
		}
		applied(c.name+" on a missing counter", out[0], c.want, false)
		if got := MustRead(t, s, id); got != c.want {
			t.Fatalf("%s: value = %d, want %d", c.name, got, c.want)
		}
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
