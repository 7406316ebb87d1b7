package pebble_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/allocguard"
)

// TestMemberAllocs holds a batch of distinct adds to its allocations: a
// member's key, read to decide it and written once decided, is built in
// the store's one scratch buffer, not allocated twice for each member (a
// distinct add, SADD, or a deadline change's record members in package
// expiry). Half the batch's members are new, half there already.
func TestMemberAllocs(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	if _, err := s.CreateCounter(ctx, "set", shardcounter.Spec{Shards: 4, Kind: shardcounter.KindDistinct}); err != nil {
		t.Fatal(err)
	}
	const n = 64
	members := make([]string, 30*n) // made before: the rounds below are the store's allocations only
	for i := range members {
		members[i] = fmt.Sprintf("%032x", i) // as long as a deadline record's
	}
	incs := make([]shardcounter.Increment, n)
	round := 0
	next := func() {
		for i := range incs {
			// Each round re-adds the previous round's members and adds as
			// many new ones.
			incs[i] = shardcounter.Increment{Counter: "set", Member: members[round*n/2+i], Delta: 1}
		}
		round++
	}
	next()
	if _, err := s.Apply(ctx, incs); err != nil {
		t.Fatal(err)
	}
	// Today's count is 70: the decider's and the batch's own, a few a
	// member. Two keys a member would be 128 more.
	allocguard.Check(t, 20, n+16, func() {
		next()
		if _, err := s.Apply(ctx, incs); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHotTakeAllocs holds a take of a hot key to its allocations once
// its commits have left thousands of merge operands in the memtable, for
// a token bucket (GCRA, one shard of state: CL.THROTTLE's) and for fixed
// and sliding windows (two and more shards: the HTTP bench's): the take
// decides on the state the store holds in memory, and reads no record,
// whose read would fold every operand (allocating as it goes).
func TestHotTakeAllocs(t *testing.T) {
	for _, c := range []struct {
		p   shardcounter.LimitPolicy
		max float64
	}{
		// Today's count is 16; reading the record (and folding the
		// operands) was 26 more.
		{shardcounter.LimitPolicy{Kind: shardcounter.LimitGCRA, Limit: 1, Period: shardcounter.Duration(time.Second), Burst: 1 << 30}, 24},
		// Today's count is 19; reading the record (before the store kept
		// multi-shard states in memory) was 23 more.
		{shardcounter.LimitPolicy{Kind: shardcounter.LimitFixed, Limit: 1 << 40, Period: shardcounter.MaxLimitPeriod}, 22},
		{shardcounter.LimitPolicy{Kind: shardcounter.LimitSliding, Limit: 1 << 40, Period: shardcounter.Duration(time.Hour), Bucket: shardcounter.Duration(30 * time.Minute)}, 22},
	} {
		t.Run(string(c.p.Kind), func(t *testing.T) {
			ctx := context.Background()
			s := MustOpen(t)
			p := c.p.WithDefaults()
			id := shardcounter.LimitKeyID("hot", p, "key")
			incs := []shardcounter.Increment{{Counter: id, Take: &shardcounter.LimitTake{Policy: p, Cost: 1},
				Create: &shardcounter.Spec{Shards: p.StateShards(), Kind: shardcounter.KindSum}}}
			take := func() {
				out, err := s.Apply(ctx, incs)
				if err != nil || out[0].Err != nil || out[0].Limit == nil || !out[0].Limit.Allowed {
					t.Fatalf("take: %+v, %v", out, err)
				}
			}
			for range 2000 {
				take()
			}
			allocguard.Check(t, 20, c.max, take)
		})
	}
}
