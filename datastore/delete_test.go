package datastore_test

import (
	"testing"

	gds "cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
)

// TestDeleteLeavesNoShards checks that DeleteCounter removes every shard
// entity it wrote. The storetest suites cannot see one left behind: a
// counter made again under the id overwrites its shards as it writes them.
func TestDeleteLeavesNoShards(t *testing.T) {
	ctx := t.Context()
	project := firestoretest.Project(t)
	const ns = "deleteshards"
	s := mustOpenProject(t, project, datastore.Options{Namespace: ns})
	client, err := gds.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	const id = "deleted"
	if _, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: 8}); err != nil {
		t.Fatal(err)
	}
	for k := range uint64(8) {
		if err := s.Add(ctx, id, 1, k); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		t.Helper()
		keys, err := client.GetAll(ctx, gds.NewQuery(datastore.DefaultKind).Namespace(ns).FilterField("target", "=", id).KeysOnly(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	if n := count(); n != 8 {
		t.Fatalf("before the delete: %d shard entities, want 8", n)
	}
	if err := s.DeleteCounter(ctx, id); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("after the delete: %d shard entities, want none", n)
	}
}
