package redis_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/collection"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

func TestCollectionStore(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		s := MustOpen(t, dsn).Collections()
		storetest.RunCollectionStore(t, func(tb testing.TB) shardcounter.CollectionStore { return s })
	})
}

// TestCollectionSpread checks that the shards of one index value, the hot
// range of a monotonically increasing timestamp, fall in every third of
// the slot space, and so on every master of a 3-master cluster, and that
// documents written there read back from each.
func TestCollectionSpread(t *testing.T) {
	cl := sharedCluster(t)
	ctx := context.Background()
	svc := storetest.MustService(t, MustOpen(t, clusterDSN(cl)).Collections(), collection.Config{})
	name := t.Name() + runID()
	storetest.MustCreateCollection(t, svc, name, shardcounter.CollectionOptions{Shards: 6, ShardKey: shardcounter.ShardIDHash})
	for i := range 60 {
		storetest.MustPut(t, svc, name, shardcounter.DocumentInput{ID: fmt.Sprint(i)})
	}
	c, err := svc.GetCollection(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	slots := make(map[int]bool)
	for shard := range c.Shards {
		slots[redis.KeySlot(redis.CollectionIndexKey(MustOpen(t, clusterDSN(cl)).Collections(), c, "", "", shard))*3/redis.NumSlots] = true
	}
	if got := storetest.MustQueryAll(t, svc, name, shardcounter.Query{Limit: 7}); len(got) != 60 {
		t.Fatalf("query over the cluster returned %d documents, want 60", len(got))
	}
	if len(slots) != 3 {
		t.Fatalf("the 6 shards of the timestamp index fall in %d thirds of the slot space, want 3", len(slots))
	}
}

// TestDeleteCollectionCrash stops a collection's deletion after its first
// step, as if the process had died there: the collection must be gone and
// its documents with it once another process touches the name, and the
// name free for a new collection.
func TestDeleteCollectionCrash(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		crashing := MustOpen(t, dsn)
		name := t.Name() + runID()
		c := &shardcounter.Collection{Name: name, Shards: 3, TimestampField: "ts", ShardKey: shardcounter.ShardRandom, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
		if err := crashing.Collections().CreateCollection(ctx, c); err != nil {
			t.Fatal(err)
		}
		var docs []*shardcounter.Document
		for i := range 10 {
			docs = append(docs, &shardcounter.Document{ID: fmt.Sprint(i), Shard: i % 3, Timestamp: c.CreatedAt.Add(time.Duration(i) * time.Second), Data: map[string]any{"i": i}})
		}
		if err := crashing.Collections().PutDocuments(ctx, c, docs); err != nil {
			t.Fatal(err)
		}
		redis.SetStepHook(crashing, func(step string) error {
			if step == "collection-delete" {
				return errCrash
			}
			return nil
		})
		if err := crashing.Collections().DeleteCollection(ctx, name); !errors.Is(err, errCrash) {
			t.Fatalf("DeleteCollection = %v, want the injected crash", err)
		}

		other := MustOpen(t, dsn).Collections()
		if _, err := other.GetCollection(ctx, name); !errors.Is(err, shardcounter.ErrNotFound) {
			t.Fatalf("GetCollection after the crash = %v, want ErrNotFound", err)
		}
		for _, d := range docs {
			if _, err := other.GetDocument(ctx, c, d.ID); !errors.Is(err, shardcounter.ErrNotFound) {
				t.Fatalf("document %s of the deleted collection: %v, want ErrNotFound", d.ID, err)
			}
		}
		again := *c
		again.CreatedAt = c.CreatedAt.Add(time.Microsecond)
		if err := other.CreateCollection(ctx, &again); err != nil {
			t.Fatalf("CreateCollection of the name again: %v", err)
		}
	})
}
