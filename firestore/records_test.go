package firestore_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	gfs "cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
)

// TestRecordLayout checks that the sc_collections and sc_rankings
// documents keep seed 000's layout both ways: what the store writes (also
// after a grow) has exactly the layout's fields and types, and a document
// written in the layout reads back through the store.
func TestRecordLayout(t *testing.T) {
	ctx := t.Context()
	project := firestoretest.Project(t)
	s := mustOpenProject(t, project, firestore.Options{})
	client, err := gfs.NewClient(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	created := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	cs := s.Collections()
	if err := cs.CreateCollection(ctx, &shardcounter.Collection{Name: "posts", Shards: 3, TimestampField: "ts", Indexes: []string{"user", "a.b"}, ShardKey: shardcounter.ShardRandom, CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.GrowCollection(ctx, "posts", 5); err != nil {
		t.Fatal(err)
	}
	snap, err := client.Collection("sc_collections").Doc("posts").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := snap.Data()
	if ts, ok := got["created_at"].(time.Time); !ok || !ts.Equal(created) {
		t.Fatalf("created_at = %#v, want the timestamp %v", got["created_at"], created)
	}
	delete(got, "created_at")
	want := map[string]any{"name": "posts", "shards": int64(5), "timestamp_field": "ts", "indexes": []any{"user", "a.b"}, "shard_key": string(shardcounter.ShardRandom)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sc_collections/posts = %#v, want %#v", got, want)
	}

	if _, err := client.Collection("sc_collections").Doc("events").Create(ctx, map[string]any{
		"name": "events", "shards": int64(2), "timestamp_field": "at", "indexes": []string{"kind"}, "shard_key": "", "created_at": created,
	}); err != nil {
		t.Fatal(err)
	}
	c, err := cs.GetCollection(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "events" || c.Shards != 2 || c.TimestampField != "at" || !slices.Equal(c.Indexes, []string{"kind"}) || !c.CreatedAt.Equal(created) {
		t.Fatalf("GetCollection(events) = %+v, want the document's fields", c)
	}

	r := &shardcounter.Ranking{Name: "top", RankingOptions: shardcounter.RankingOptions{Prefix: "p:"}.WithDefaults()}
	if _, _, err := s.CreateRanking(ctx, r); err != nil {
		t.Fatal(err)
	}
	snap, err = client.Collection("sc_rankings").Doc("top").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := snap.Data(), map[string]any{"name": "top", "definition": string(shardcounter.EncodeRanking(r))}; !reflect.DeepEqual(got, want) {
		t.Fatalf("sc_rankings/top = %#v, want %#v", got, want)
	}
	old := &shardcounter.Ranking{Name: "old", RankingOptions: shardcounter.RankingOptions{Prefix: "o:"}.WithDefaults()}
	if _, err := client.Collection("sc_rankings").Doc("old").Create(ctx, map[string]any{"name": "old", "definition": string(shardcounter.EncodeRanking(old))}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetRanking(ctx, "old"); err != nil || got.Prefix != "o:" {
		t.Fatalf("GetRanking(old) = %+v, %v, want prefix o:", got, err)
	}
	if err := s.DeleteRanking(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Collection("sc_rankings").Doc("old").Get(ctx); status.Code(err) != codes.NotFound {
		t.Fatalf("sc_rankings/old after DeleteRanking: %v, want NotFound", err)
	}
}
