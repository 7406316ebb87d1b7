package datastore_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	gds "cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
)

// collectionEntity and rankingEntity are the layouts of seed 002's
// metadata entities, as the store has always written them: reading one
// into them fails on any property they do not name.
type collectionEntity struct {
	Name           string    `datastore:"name,noindex"`
	Shards         int64     `datastore:"shards,noindex"`
	TimestampField string    `datastore:"timestamp_field,noindex"`
	Indexes        string    `datastore:"indexes,noindex"` // JSON array
	ShardKey       string    `datastore:"shard_key,noindex"`
	CreatedAt      time.Time `datastore:"created_at,noindex"`
}

type rankingEntity struct {
	Name       string `datastore:"name,noindex"`
	Definition string `datastore:"definition,noindex"`
}

// TestRecordLayout checks that the SC_Collection and SC_Ranking entities
// keep their layout both ways: what the store writes (also after a grow)
// reads as the layout, every property unindexed, and an entity written in
// the layout reads back through the store.
func TestRecordLayout(t *testing.T) {
	ctx := t.Context()
	project := firestoretest.Project(t)
	s := mustOpenProject(t, project, datastore.Options{Namespace: "layout"})
	client, err := gds.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	key := func(kind, name string) *gds.Key {
		k := gds.NameKey(kind, name, nil)
		k.Namespace = "layout"
		return k
	}
	created := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	cs := s.Collections()
	if err := cs.CreateCollection(ctx, &shardcounter.Collection{Name: "posts", Shards: 3, TimestampField: "ts", Indexes: []string{"user", "a.b"}, ShardKey: shardcounter.ShardRandom, CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.GrowCollection(ctx, "posts", 5); err != nil {
		t.Fatal(err)
	}
	var ce collectionEntity
	if err := client.Get(ctx, key("SC_Collection", "posts"), &ce); err != nil {
		t.Fatal(err)
	}
	want := collectionEntity{Name: "posts", Shards: 5, TimestampField: "ts", Indexes: `["user","a.b"]`, ShardKey: string(shardcounter.ShardRandom), CreatedAt: created}
	if ce.CreatedAt = ce.CreatedAt.UTC(); ce != want {
		t.Fatalf("SC_Collection entity = %+v, want %+v", ce, want)
	}
	var ps gds.PropertyList
	if err := client.Get(ctx, key("SC_Collection", "posts"), &ps); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if !p.NoIndex {
			t.Errorf("property %q is indexed, want unindexed", p.Name)
		}
	}

	old := collectionEntity{Name: "events", Shards: 2, TimestampField: "at", Indexes: `["kind"]`, ShardKey: "", CreatedAt: created}
	if _, err := client.Put(ctx, key("SC_Collection", "events"), &old); err != nil {
		t.Fatal(err)
	}
	c, err := cs.GetCollection(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "events" || c.Shards != 2 || c.TimestampField != "at" || !slices.Equal(c.Indexes, []string{"kind"}) || !c.CreatedAt.Equal(created) {
		t.Fatalf("GetCollection(events) = %+v, want the entity's fields", c)
	}

	r := &shardcounter.Ranking{Name: "top", RankingOptions: shardcounter.RankingOptions{Prefix: "p:"}.WithDefaults()}
	if _, _, err := s.CreateRanking(ctx, r); err != nil {
		t.Fatal(err)
	}
	var re rankingEntity
	if err := client.Get(ctx, key("SC_Ranking", "top"), &re); err != nil {
		t.Fatal(err)
	}
	if re.Name != "top" || re.Definition != string(shardcounter.EncodeRanking(r)) {
		t.Fatalf("SC_Ranking entity = %+v, want name top and the definition's JSON", re)
	}
	if _, err := client.Put(ctx, key("SC_Ranking", "old"), &rankingEntity{Name: "old", Definition: string(shardcounter.EncodeRanking(&shardcounter.Ranking{Name: "old", RankingOptions: shardcounter.RankingOptions{Prefix: "o:"}.WithDefaults()}))}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetRanking(ctx, "old")
	if err != nil || got.Prefix != "o:" {
		t.Fatalf("GetRanking(old) = %+v, %v, want prefix o:", got, err)
	}
	if err := s.DeleteRanking(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if err := client.Get(ctx, key("SC_Ranking", "old"), &re); !errors.Is(err, gds.ErrNoSuchEntity) {
		t.Fatalf("SC_Ranking old after DeleteRanking: %v, want ErrNoSuchEntity", err)
	}
}
