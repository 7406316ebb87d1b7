package redis_test

import (
	"context"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestScriptFailsPartWay makes the write script fail after it applied the
// first item of its group: Redis does not roll a script back, so an error
// that arrives after the script ran may follow applied writes. Every item
// that got an error must say its outcome is unknown, or not be counted.
func TestScriptFailsPartWay(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := MustOpen(t, dsn)
		id := t.Name() + runID()
		storetest.MustCreate(t, s, id, 1)
		// The request-id set of shard 0 is not a sorted set: the second
		// item's duplicate check fails with WRONGTYPE.
		if err := redis.Client(s).Set(ctx, redis.ShardKey(t, s, id, 0)+":ids", "not a sorted set", 0).Err(); err != nil {
			t.Fatal(err)
		}
		incs := []shardcounter.Increment{{Counter: id, Delta: 5}, {Counter: id, Delta: 7, RequestID: "r"}}
		out, err := s.Apply(ctx, incs)
		got := storetest.MustRead(t, s, id)
		if err != nil {
			if !shardcounter.IsOutcomeUnknown(err) && got != 0 {
				t.Fatalf("Apply = %v, not outcome unknown, but the value is %d", err, got)
			}
			return
		}
		var counted int64
		for i, o := range out {
			if o.Err == nil {
				counted += incs[i].Delta
			} else if shardcounter.IsOutcomeUnknown(o.Err) {
				return // the caller knows to look
			}
		}
		if got != counted {
			t.Fatalf("outcomes %+v claim %d applied, value is %d", out, counted, got)
		}
	})
}
