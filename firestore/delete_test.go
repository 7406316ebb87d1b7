package firestore_test

import (
	"testing"

	gfs "cloud.google.com/go/firestore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
)

// TestDeleteLeavesNoShards checks that DeleteCounter removes every shard
// document it wrote. The storetest suites cannot see one left behind: a
// counter made again under the id overwrites its shards as it writes them.
func TestDeleteLeavesNoShards(t *testing.T) {
	ctx := t.Context()
	project := firestoretest.Project(t)
	s := mustOpenProject(t, project, firestore.Options{})
	client, err := gfs.NewClient(ctx, project)
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
	shards := client.Collection("counters").Doc(id).Collection("shards")
	if docs, err := shards.Documents(ctx).GetAll(); err != nil || len(docs) != 8 {
		t.Fatalf("before the delete: %d shard documents (%v), want 8", len(docs), err)
	}
	if err := s.DeleteCounter(ctx, id); err != nil {
		t.Fatal(err)
	}
	if docs, err := shards.Documents(ctx).GetAll(); err != nil || len(docs) != 0 {
		t.Fatalf("after the delete: %d shard documents (%v), want none", len(docs), err)
	}
}
