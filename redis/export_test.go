package redis

import "github.com/shardcounter/shardcounter"

// SetReshardHook makes s call f after each step of a reshard ("intent",
// "fence", "init", each "fold", "commit") and stop the reshard there when
// f returns an error, as if the process had died.
func SetReshardHook(s *CounterStore, f func(step string) error) { s.hook = f }

// CollectionIndexKey returns the key of the sorted set of one shard of an
// index value.
func CollectionIndexKey(s *CollectionStore, c *shardcounter.Collection, index, value string, shard int) string {
	return s.indexKey(c, index, value, shard)
}
