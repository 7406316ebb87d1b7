package engine

import (
	"math"

	"github.com/shardcounter/shardcounter"
)

// ShardPolicy chooses a new counter's shard count from the audience of
// what it counts: the poster's followers and whether the post is public or
// protected (seed 003). Replace it with Config.Policy.
type ShardPolicy func(followers int64, visibility string) (int, error)

// Assumptions of DefaultPolicy. They are deliberately round numbers: the
// point is the shape (shards grow with the expected peak write rate), and
// a deployment that knows its traffic sets its own policy.
const (
	// PeakWritesPerFollower is the expected peak write rate per follower of
	// a public post, in writes a second: 1% of followers act within the
	// first minute, 0.01/60.
	PeakWritesPerFollower = 0.01 / 60
	// ProtectedFactor scales the rate for protected posts, which only
	// followers see and nobody reshares.
	ProtectedFactor = 0.25
	// WritesPerShard is the rate one shard is planned to absorb: well under
	// what one PostgreSQL row or Redis key takes, so a shard is never the
	// bottleneck even without group commit.
	WritesPerShard = 100
)

// DefaultPolicy returns the shard count for a post seen by followers
// people:
//
//	peak   = followers × PeakWritesPerFollower × (ProtectedFactor if protected)
//	shards = the power of two ≥ peak / WritesPerShard, within 1..1024
//
// So 10,000 followers get 1 shard, 1 million public get 2, 10 million
// public get 32, 100 million public get 256.
func DefaultPolicy(followers int64, visibility string) (int, error) {
	if followers < 0 {
		return 0, shardcounter.Errorf(shardcounter.EINVALID, "followers_count %d is negative", followers)
	}
	peak := float64(followers) * PeakWritesPerFollower
	switch visibility {
	case "", "public":
	case "protected":
		peak *= ProtectedFactor
	default:
		return 0, shardcounter.Errorf(shardcounter.EINVALID, "visibility %q is unknown: use public or protected", visibility)
	}
	need := math.Ceil(peak / WritesPerShard)
	n := 1
	for float64(n) < need && n < shardcounter.MaxShards {
		n *= 2
	}
	return n, nil
}
