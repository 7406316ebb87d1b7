package redis_test

import (
	"context"
	"fmt"
	"testing"

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
