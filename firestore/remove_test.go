package firestore_test

import (
	"testing"
	"time"

	gfs "cloud.google.com/go/firestore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestRemovedStateLeavesNoDocuments checks that the removal of an idle
// limit state deletes its counter document and every shard document,
// one of them deleted behind the store's back (its cached version out of
// date: the commit fails its precondition, and the removal, decided again
// on the shard read missing, creates and deletes it), and that the
// request id it leaves for the expiry is not taken for one of the state
// made again by another take. The storetest suites cannot see a shard
// document left behind.
func TestRemovedStateLeavesNoDocuments(t *testing.T) {
	ctx := t.Context()
	project := firestoretest.Project(t)
	clk := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := mustOpenProject(t, project, firestore.Options{Now: clk.Now})
	client, err := gfs.NewClient(ctx, project)
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
	if o := apply(take); o.Err != nil || !o.Limit.Allowed {
		t.Fatalf("a take: %+v", o)
	}
	ref := client.Collection("counters").Doc(firestore.Escape(id))
	shards := ref.Collection("shards")
	if docs, err := shards.Documents(ctx).GetAll(); err != nil || len(docs) != p.StateShards() {
		t.Fatalf("after the take: %d shard documents (%v), want %d", len(docs), err, p.StateShards())
	}
	if _, err := shards.Doc("1").Delete(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	if o := apply(shardcounter.Increment{Counter: id, Take: &shardcounter.LimitTake{Policy: p, Remove: true}}); o.Err != nil || o.Skipped {
		t.Fatalf("a removal of an idle state: %+v; want removed", o)
	}
	if docs, err := shards.Documents(ctx).GetAll(); err != nil || len(docs) != 0 {
		t.Fatalf("after the removal: %d shard documents (%v), want none", len(docs), err)
	}
	if _, err := ref.Get(ctx); err == nil {
		t.Fatal("after the removal: the counter document is still there")
	}
	if _, err := ref.Collection("sc_requests").Doc("r1").Get(ctx); err != nil {
		t.Fatalf("after the removal: the request id, left for the expiry: %v", err)
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
