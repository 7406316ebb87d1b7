package datastore_test

import (
	"testing"
	"time"

	gds "cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestRemovedStateLeavesNoEntities checks that the removal of an idle
// limit state deletes every shard entity of it, and that the request id
// it leaves for the expiry is not taken for one of the state made again
// by another take. The storetest suites cannot see a shard entity left
// behind.
func TestRemovedStateLeavesNoEntities(t *testing.T) {
	ctx := t.Context()
	project := firestoretest.Project(t)
	const ns = "removedstate"
	clk := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := mustOpenProject(t, project, datastore.Options{Namespace: ns, Now: clk.Now})
	client, err := gds.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p, err := shardcounter.ParseLimitPolicy("sliding 4/1m bucket 20s")
	if err != nil {
		t.Fatal(err)
	}
	p = p.WithDefaults()
	id := shardcounter.LimitKeyID("removed", p, "k")
	take := shardcounter.Increment{Counter: id, RequestID: "r1", Take: &shardcounter.LimitTake{Policy: p, Cost: 1},
		Create: &shardcounter.Spec{Shards: p.StateShards(), Kind: shardcounter.KindSum}}
	apply := func(inc shardcounter.Increment) shardcounter.Outcome {
		t.Helper()
		out, err := s.Apply(ctx, []shardcounter.Increment{inc})
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	count := func() int {
		t.Helper()
		keys, err := client.GetAll(ctx, gds.NewQuery(datastore.DefaultKind).Namespace(ns).FilterField("target", "=", id).KeysOnly(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	if o := apply(take); o.Err != nil || !o.Limit.Allowed {
		t.Fatalf("a take: %+v", o)
	}
	if n := count(); n != p.StateShards() {
		t.Fatalf("after the take: %d shard entities, want %d", n, p.StateShards())
	}
	clk.Advance(2 * time.Minute)
	if o := apply(shardcounter.Increment{Counter: id, Take: &shardcounter.LimitTake{Policy: p, Remove: true}}); o.Err != nil || o.Skipped {
		t.Fatalf("a removal of an idle state: %+v; want removed", o)
	}
	if n := count(); n != 0 {
		t.Fatalf("after the removal: %d shard entities, want none", n)
	}
	if r, err := s.ReadCounters(ctx, []string{id}); err != nil || r[0] != nil {
		t.Fatalf("after the removal: the state reads %+v (%v), want none", r[0], err)
	}
	again := take
	again.RequestID = "r2"
	if o := apply(again); o.Err != nil || !o.Limit.Allowed || o.Limit.Remaining != p.Quota()-1 {
		t.Fatalf("a take after the removal: %+v; want a fresh key's", o)
	}
	if o := apply(take); o.Err != nil || o.Duplicate || !o.Limit.Allowed || o.Limit.Remaining != p.Quota()-2 {
		t.Fatalf("the first take's request id again, on the state made again: %+v; want a take of its own", o)
	}
}
