package shard_test

import (
	"math"
	"testing"

	"github.com/shardcounter/shardcounter/internal/shard"
)

func TestOf(t *testing.T) {
	if got := shard.Of(math.MaxUint64, 1024); got != 1023 {
		t.Errorf("Of(MaxUint64, 1024) = %d, want 1023", got)
	}
	if shard.PickFor("a", "bc") == shard.PickFor("ab", "c") {
		t.Error("PickFor does not separate the counter from the request id")
	}
}
