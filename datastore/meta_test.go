package datastore_test

import (
	"testing"
	"time"

	gds "cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
)

// counterLayout is the SC_Counter entity as the store has always written
// it: reading one into it fails on any property it does not name.
type counterLayout struct {
	NumShards int64     `datastore:"num_shards"`
	ID        string    `datastore:"id,noindex"`
	Kind      string    `datastore:"kind,noindex"`
	CreatedAt time.Time `datastore:"created_at,noindex"`
	HasMin    bool      `datastore:"has_min,noindex"`
	Min       int64     `datastore:"min,noindex"`
	HasMax    bool      `datastore:"has_max,noindex"`
	Max       int64     `datastore:"max,noindex"`
	Bucket    int64     `datastore:"bucket_seconds,noindex"`
	Retention int64     `datastore:"retention_seconds,noindex"`
	Wide      bool      `datastore:"wide,noindex"`
}

// TestCounterLayout checks that the SC_Counter entity keeps its layout
// both ways: what CreateCounter and ReshardCounter write reads as the
// layout, num_shards alone indexed, and an entity written in the layout
// reads back through the store with its spec.
func TestCounterLayout(t *testing.T) {
	ctx := t.Context()
	project := firestoretest.Project(t)
	s := mustOpenProject(t, project, datastore.Options{Namespace: "counterlayout"})
	client, err := gds.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	key := func(name string) *gds.Key {
		k := gds.NameKey("SC_Counter", name, nil)
		k.Namespace = "counterlayout"
		return k
	}
	lo, hi := int64(-5), int64(0)
	spec := shardcounter.Spec{Shards: 2, Min: &lo, Max: &hi, Window: &shardcounter.Window{Bucket: shardcounter.Duration(time.Minute), Retention: shardcounter.Duration(time.Hour)}}
	c, err := s.CreateCounter(ctx, "bounded", spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReshardCounter(ctx, "bounded", 3); err != nil {
		t.Fatal(err)
	}
	var got counterLayout
	if err := client.Get(ctx, key("bounded"), &got); err != nil {
		t.Fatal(err)
	}
	want := counterLayout{NumShards: 3, ID: "bounded", Kind: "sum", CreatedAt: c.CreatedAt, HasMin: true, Min: -5, HasMax: true, Max: 0, Bucket: 60, Retention: 3600}
	if got.CreatedAt = got.CreatedAt.UTC(); got != want {
		t.Fatalf("SC_Counter entity = %+v, want %+v", got, want)
	}
	var ps gds.PropertyList
	if err := client.Get(ctx, key("bounded"), &ps); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.NoIndex != (p.Name != "num_shards") {
			t.Errorf("property %q: NoIndex %v, want only num_shards indexed", p.Name, p.NoIndex)
		}
	}

	created := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	old := counterLayout{NumShards: 4, ID: "old", Kind: "distinct", CreatedAt: created, Min: 7, HasMax: true, Max: 9}
	if _, err := client.Put(ctx, key("old"), &old); err != nil {
		t.Fatal(err)
	}
	oc, err := s.GetCounter(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if sp := oc.Spec; sp.Shards != 4 || sp.Kind != shardcounter.KindDistinct || sp.Min != nil || sp.Max == nil || *sp.Max != 9 || sp.Window != nil || !oc.CreatedAt.Equal(created) {
		t.Fatalf("GetCounter(old) = %+v (min %v, max %v), want 4 distinct shards, no min, max 9, no window, created %v", oc, sp.Min, sp.Max, created)
	}
}
