package pebble_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// TestKeptLimitState checks that the shard values the store keeps in
// memory for a multi-shard limit state are those its record holds, after
// batches of several takes of the key from concurrent writers, and that a
// deletion, a reshard and a re-creation drop them, so that the next take
// reads the record again.
func TestKeptLimitState(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	for _, p := range []shardcounter.LimitPolicy{
		{Kind: shardcounter.LimitFixed, Limit: 1 << 40, Period: shardcounter.Duration(time.Hour)},
		{Kind: shardcounter.LimitSliding, Limit: 1 << 40, Period: shardcounter.Duration(time.Hour), Bucket: shardcounter.Duration(20 * time.Minute)},
	} {
		p = p.WithDefaults()
		id := shardcounter.LimitKeyID("kept", p, "key")
		take := shardcounter.Increment{Counter: id, Take: &shardcounter.LimitTake{Policy: p, Cost: 3},
			Create: &shardcounter.Spec{Shards: p.StateShards(), Kind: shardcounter.KindSum}}
		takes := func(writers, batches, each int) {
			var wg sync.WaitGroup
			for range writers {
				wg.Go(func() {
					for range batches {
						out, err := s.Apply(ctx, slices.Repeat([]shardcounter.Increment{take}, each))
						if err != nil {
							t.Error(err)
							return
						}
						for _, o := range out {
							if o.Err != nil || !o.Limit.Allowed {
								t.Errorf("take: %+v", o)
							}
						}
					}
				})
			}
			wg.Wait()
		}
		check := func(what string, wantKept bool) {
			t.Helper()
			_, rec, err := s.ReadShards(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			kept, ok := s.KeptState(id)
			if ok != wantKept || (ok && !slices.Equal(kept, rec)) {
				t.Fatalf("%s %s: kept %v (%v), want %v as the record holds %v", p.Kind, what, kept, ok, wantKept, rec)
			}
		}
		takes(4, 50, 3)
		check("after the takes", true)
		if _, err := s.ReshardCounter(ctx, id, p.StateShards()); err != nil {
			t.Fatal(err)
		}
		check("after a reshard", false)
		takes(1, 2, 1)
		check("after taking again", true)
		if err := s.DeleteCounter(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.KeptState(id); ok {
			t.Fatalf("%s: the state is kept after its deletion", p.Kind)
		}
		takes(2, 5, 2) // re-creates it: the first batch reads nothing
		check("after its re-creation", true)
		r, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Take: &shardcounter.LimitTake{Policy: p, Cost: 1, Peek: true}}})
		if err != nil || r[0].Limit.Remaining != p.Limit-3*(2*5*2) {
			t.Fatalf("%s: peek after re-creation: %+v, %v", p.Kind, r, err)
		}
		// A write of the state that is not a take: what is kept after it,
		// if anything, is what the record holds.
		if out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 5}}); err != nil || out[0].Err != nil {
			t.Fatalf("a plain write of the state: %+v, %v", out, err)
		}
		if kept, ok := s.KeptState(id); ok {
			if _, rec, err := s.ReadShards(ctx, id); err != nil || !slices.Equal(kept, rec) {
				t.Fatalf("%s after a plain write: kept %v, the record holds %v (%v)", p.Kind, kept, rec, err)
			}
		}
		takes(1, 1, 1)
		check("after a take again", true)
	}
}
