package firestore_test

import (
	"reflect"
	"testing"
	"time"

	gfs "cloud.google.com/go/firestore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
)

// TestCounterLayout checks that a counter document keeps its layout both
// ways: what CreateCounter writes is num_shards and the spec in "shardcounter"
// with exactly the layout's fields and types, min, max and the window's
// only when set, and a document written in the layout reads back through
// the store with its spec.
func TestCounterLayout(t *testing.T) {
	ctx := t.Context()
	project := firestoretest.Project(t)
	s := mustOpenProject(t, project, firestore.Options{})
	client, err := gfs.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	lo, hi := int64(-5), int64(0)
	for _, tc := range []struct {
		spec shardcounter.Spec
		sc   map[string]any
	}{
		{shardcounter.Spec{Shards: 2, Min: &lo, Max: &hi, Window: &shardcounter.Window{Bucket: shardcounter.Duration(time.Minute), Retention: shardcounter.Duration(time.Hour)}},
			map[string]any{"kind": "sum", "min": int64(-5), "max": int64(0), "bucket_seconds": int64(60), "retention_seconds": int64(3600)}},
		{shardcounter.Spec{Shards: 1, Kind: shardcounter.KindDistinct}, map[string]any{"kind": "distinct"}},
	} {
		id := "layout-" + string(docKind(tc.spec))
		c, err := s.CreateCounter(ctx, id, tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := client.Collection("counters").Doc(id).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tc.sc["id"], tc.sc["created_at"] = id, c.CreatedAt
		got := snap.Data()
		if sc, ok := got["shardcounter"].(map[string]any); ok {
			sc["created_at"] = sc["created_at"].(time.Time).UTC()
		}
		if want := map[string]any{"num_shards": int64(tc.spec.Shards), "shardcounter": tc.sc}; !reflect.DeepEqual(got, want) {
			t.Fatalf("counters/%s = %#v, want %#v", id, got, want)
		}
	}

	created := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	if _, err := client.Collection("counters").Doc("layout-old").Create(ctx, map[string]any{
		"num_shards": int64(4), "shardcounter": map[string]any{"id": "layout-old", "kind": "distinct", "created_at": created, "max": int64(9)},
	}); err != nil {
		t.Fatal(err)
	}
	oc, err := s.GetCounter(ctx, "layout-old")
	if err != nil {
		t.Fatal(err)
	}
	if sp := oc.Spec; sp.Shards != 4 || sp.Kind != shardcounter.KindDistinct || sp.Min != nil || sp.Max == nil || *sp.Max != 9 || sp.Window != nil || !oc.CreatedAt.Equal(created) {
		t.Fatalf("GetCounter(layout-old) = %+v (min %v, max %v), want 4 distinct shards, no min, max 9, no window, created %v", oc, sp.Min, sp.Max, created)
	}
}

func docKind(s shardcounter.Spec) shardcounter.Kind {
	if s.Kind == "" {
		return shardcounter.KindSum
	}
	return s.Kind
}
