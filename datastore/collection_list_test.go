package datastore_test

import (
	"slices"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
)

// TestListCollections lists a namespace's collections by name, as
// export reads them, and none of another namespace's.
func TestListCollections(t *testing.T) {
	project := firestoretest.Project(t)
	a := mustOpenProject(t, project, datastore.Options{Namespace: "a"}).Collections()
	b := mustOpenProject(t, project, datastore.Options{Namespace: "b"}).Collections()
	now := time.Now().UTC().Truncate(time.Microsecond)
	for _, c := range []struct {
		cs   *datastore.CollectionStore
		name string
	}{{a, "posts"}, {a, "events"}, {b, "other"}} {
		err := c.cs.CreateCollection(t.Context(), &shardcounter.Collection{Name: c.name, Shards: 3, TimestampField: "ts", Indexes: []string{"user"}, ShardKey: shardcounter.ShardRandom, CreatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := a.ListCollections(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.Name)
		if c.Shards != 3 || c.TimestampField != "ts" || !slices.Equal(c.Indexes, []string{"user"}) || !c.CreatedAt.Equal(now) {
			t.Errorf("listed %+v, want it as created", c)
		}
	}
	if !slices.Equal(names, []string{"events", "posts"}) {
		t.Fatalf("ListCollections = %v, want [events posts]", names)
	}
}
