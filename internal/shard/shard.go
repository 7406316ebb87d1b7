// Package shard chooses shards: which shard a write's pick lands on, and
// the pick of a write that must land where its retries will look. Every
// store and the engine use it, so they agree on the mapping.
package shard

import "hash/fnv"

// Of maps a pick to a shard index for a counter with n shards.
func Of(pick uint64, n int) int {
	return int(pick % uint64(n))
}

// PickFor derives the pick of a write with a request id from the counter
// and the id, so a retry of the write goes to the same shard as the first
// try while the shard count is unchanged.
func PickFor(counter, requestID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(counter))
	h.Write([]byte{0})
	h.Write([]byte(requestID))
	return h.Sum64()
}

// ForMember derives the pick of a distinct counter's member, so that one
// member always lands on one shard (Of(ForMember(m), n)) and its presence
// is checked there.
func ForMember(member string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	return h.Sum64()
}
