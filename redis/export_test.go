package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
)

// SetStepHook makes s call f after each step of a reshard ("intent",
// "fence", "init", each "fold", "commit") and stop the reshard there when
// f returns an error, as if the process had died.
func SetStepHook(s *CounterStore, f func(step string) error) { s.hook = f }

// CollectionIndexKey returns the key of the sorted set of one shard of an
// index value.
func CollectionIndexKey(s *CollectionStore, c *shardcounter.Collection, index, value string, shard int) string {
	return s.indexKey(c, index, value, shard)
}

// Client returns the store's Redis client, for tests that reach under it.
func Client(s *CounterStore) goredis.UniversalClient { return s.client }

// ShardKey returns the key of shard i of the counter as it is now.
func ShardKey(tb interface{ Fatal(...any) }, s *CounterStore, id string, i int) string {
	l, err := s.layout(context.Background(), id, true)
	if err != nil {
		tb.Fatal(err)
	}
	return l.keys.shard(i)
}

// SetSingleCollect makes strong reads on a cluster take one collect, as
// they did before they were made linearizable, for benchmarks that
// measure what the second collect costs.
func SetSingleCollect(s *CounterStore, on bool) { s.singleCollect = on }

// MetaSlot returns the slot of a counter's metadata and index entry.
func MetaSlot(s *CounterStore, id string) int { return KeySlot(metaKey(s.prefix, id)) }

// ShardSlot returns the slot of shard i of a counter.
func ShardSlot(s *CounterStore, id string, i int) int {
	return newKeys(s.prefix, id, "", false).slot(i)
}

// LessScript returns 1 when ARGV[1] < ARGV[2] by the scripts' exact
// comparison of decimal int64 strings, else 0.
var LessScript = goredis.NewScript(luaLess + `return lt(ARGV[1], ARGV[2]) and 1 or 0`)

// SetNoMarkers makes the add script run without batch markers, for the
// benchmark that measures what markers cost: a lost reply is then not
// settled.
func SetNoMarkers(s *CounterStore, on bool) { s.noMarkers = on }

// MetaKey returns the key of a counter's metadata, and IndexKey that of
// the index bucket that lists it.
func MetaKey(s *CounterStore, id string) string { return metaKey(s.prefix, id) }

func IndexKey(s *CounterStore, id string) string { return bucketKey(s.prefix, bucketOf(id)) }
