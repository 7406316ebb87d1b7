package firestore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	gfs "cloud.google.com/go/firestore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/storetest"
)

// seedCounter is seed 000's distributed counter, written as its samples
// write it, with Google's Go client: createCounter (a batch setting
// num_shards and each shard's count to 0), incrementCounter (an Increment
// on a random shard) and getCount (the sum of the shards' counts).
type seedCounter struct {
	db    *gfs.Client
	ref   *gfs.DocumentRef
	n     int
	field string // "count", or "Count" in the Go and C# samples
}

func (c seedCounter) create(ctx context.Context) error {
	b := c.db.Batch() //nolint:staticcheck // the seed's own createCounter uses a batch
	b.Set(c.ref, map[string]any{"num_shards": c.n})
	for i := range c.n {
		b.Set(c.ref.Collection("shards").Doc(fmt.Sprint(i)), map[string]any{c.field: 0})
	}
	_, err := b.Commit(ctx)
	return err
}

func (c seedCounter) increment(ctx context.Context) error {
	shard := c.ref.Collection("shards").Doc(fmt.Sprint(rand.IntN(c.n)))
	_, err := shard.Update(ctx, []gfs.Update{{Path: c.field, Value: gfs.Increment(1)}})
	return err
}

func (c seedCounter) getCount(ctx context.Context) (int64, error) {
	docs, err := c.ref.Collection("shards").Documents(ctx).GetAll()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, d := range docs {
		v, ok := d.Data()[c.field].(int64)
		if !ok {
			return 0, fmt.Errorf("shard %s has %s = %v", d.Ref.ID, c.field, d.Data()[c.field])
		}
		total += v
	}
	return total, nil
}

// TestSeedLayout makes counters the seed's way and checks that
// shardcounter serves them, and that the seed's getCount sees what
// shardcounter writes: both ways, one counter.
func TestSeedLayout(t *testing.T) {
	ctx := context.Background()
	for _, field := range []string{"count", "Count"} {
		t.Run(field, func(t *testing.T) {
			s := MustOpen(t, firestore.Options{CountField: field})
			seed := seedCounter{db: s.Client(), ref: s.Client().Collection("counters").Doc("likes"), n: 10, field: field}
			if err := seed.create(ctx); err != nil {
				t.Fatal(err)
			}
			for range 25 {
				if err := seed.increment(ctx); err != nil {
					t.Fatal(err)
				}
			}
			c, err := s.GetCounter(ctx, "likes")
			if err != nil || c.Shards != 10 || c.Kind != shardcounter.KindSum {
				t.Fatalf("GetCounter of the seed's counter = %+v, %v; want 10 shards, sum", c, err)
			}
			if got := storetest.MustRead(t, s, "likes"); got != 25 {
				t.Fatalf("shardcounter reads the seed's counter as %d, want 25", got)
			}
			// Writes both ways, interleaved: each sees the other's.
			for i := range 20 {
				if err := s.Add(ctx, "likes", 2, uint64(i)); err != nil {
					t.Fatal(err)
				}
				if err := seed.increment(ctx); err != nil {
					t.Fatal(err)
				}
			}
			out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "likes", Delta: 5, Pick: 3, RequestID: "r"}})
			if err != nil || out[0].Err != nil {
				t.Fatalf("Apply: %v %+v", err, out)
			}
			want := int64(25 + 20*2 + 20 + 5)
			if got, err := seed.getCount(ctx); err != nil || got != want {
				t.Fatalf("the seed's getCount = %d, %v; want %d", got, err, want)
			}
			if got := storetest.MustRead(t, s, "likes"); got != want {
				t.Fatalf("shardcounter reads %d, want %d", got, want)
			}
			cs, err := s.ListCounters(ctx, "", "", 10)
			if err != nil || len(cs) != 1 || cs[0].ID != "likes" {
				t.Fatalf("ListCounters = %v, %v; want the seed's counter", cs, err)
			}

			// A counter shardcounter makes is the seed's: num_shards and
			// a count per shard, which getCount sums.
			storetest.MustCreate(t, s, "views", 4)
			if err := s.Add(ctx, "views", 7, 2); err != nil {
				t.Fatal(err)
			}
			views := seedCounter{db: s.Client(), ref: s.Client().Collection("counters").Doc("views"), n: 4, field: field}
			snap, err := views.ref.Get(ctx)
			if err != nil || snap.Data()["num_shards"] != int64(4) {
				t.Fatalf("counters/views = %v, %v; want num_shards 4", snap.Data(), err)
			}
			if got, err := views.getCount(ctx); err != nil || got != 7 {
				t.Fatalf("the seed's getCount of a shardcounter counter = %d, %v; want 7", got, err)
			}
		})
	}
}

// TestEscapedIDs checks where ids Firestore cannot hold as they are go.
func TestEscapedIDs(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t, firestore.Options{})
	for id, doc := range map[string]string{"post/42": "post.~42", "..": "._._", "__meta__": "__meta_^_"} {
		storetest.MustCreate(t, s, id, 2)
		if err := s.Add(ctx, id, 3, 1); err != nil {
			t.Fatal(err)
		}
		snap, err := s.Client().Collection("counters").Doc(doc).Get(ctx)
		if err != nil || snap.Data()["num_shards"] != int64(2) {
			t.Fatalf("counters/%s for id %q = %v, %v", doc, id, snap, err)
		}
		if got := storetest.MustRead(t, s, id); got != 3 {
			t.Fatalf("%q = %d, want 3", id, got)
		}
	}
}
