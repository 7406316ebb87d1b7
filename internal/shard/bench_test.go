package shard_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shardcounter/shardcounter/internal/shard"
)

// BenchmarkPick is the shard choice of every write: a random pick mapped
// to a shard (a write without a request id), or the pick derived from the
// request id (a write with one), per shard count.
func BenchmarkPick(b *testing.B) {
	for _, shards := range []int{1, 16, 1024} {
		b.Run(fmt.Sprintf("Random/shards=%d", shards), func(b *testing.B) {
			b.ReportAllocs()
			sum := 0
			for b.Loop() {
				sum += shard.Of(rand.Uint64(), shards)
			}
			_ = sum
		})
		b.Run(fmt.Sprintf("RequestID/shards=%d", shards), func(b *testing.B) {
			b.ReportAllocs()
			sum := 0
			for b.Loop() {
				sum += shard.Of(shard.PickFor("likes/post/8812", "req-0c9f2a7e1b"), shards)
			}
			_ = sum
		})
	}
}
