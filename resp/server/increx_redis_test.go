package server_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/redistest"
	sredis "github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/resp/server"
)

// TestIncrExRedis checks INCREX's deadline options on the Redis store,
// whose write script decides the deadline records conditional on the
// increment (shardcounter.Increment.If): on one server, and on a Redis
// Cluster on counters of one shard (the store decides bounds there only
// on counters whose shards share one slot). An applied increment sets or
// removes the deadline; a skipped one leaves it as it was.
func TestIncrExRedis(t *testing.T) {
	ctx := context.Background()
	engines := map[string]func(t *testing.T) *engine.Engine{
		"redis": func(t *testing.T) *engine.Engine {
			s, err := sredis.Open(ctx, "redis://"+redistest.MustStart(t).Addr, sredis.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			eng, err := engine.New(s, engine.Config{DefaultShards: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { eng.Close(ctx) })
			return eng
		},
		"redis-cluster": func(t *testing.T) *engine.Engine {
			eng, _ := clusterEngine(t, 1)
			return eng
		},
	}
	for _, name := range []string{"redis", "redis-cluster"} {
		t.Run(name, func(t *testing.T) {
			eng := engines[name](t)
			_, addr := MustServe(t, eng, server.Options{})
			rdb := MustClient(t, addr, 3, "")
			incrExDeadlines(t, rdb)
			incrExMissingKey(t, rdb, false) // a bounded item cannot be part of a transaction there
		})
	}
}

func incrExDeadlines(t *testing.T, rdb *redis.Client) {
	ctx := context.Background()
	ttl := func(key string) time.Duration {
		t.Helper()
		d, err := rdb.TTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	step := func(want []any, args ...any) {
		t.Helper()
		if got, err := rdb.Do(ctx, args...).Result(); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%v: %v, %v; want %v", args, got, err, want)
		}
	}
	step([]any{int64(1), int64(1)}, "INCREX", "e", "EX", 100)
	if d := ttl("e"); d <= 0 || d > 100*time.Second {
		t.Fatalf("after INCREX EX 100: TTL %v", d)
	}
	for _, opt := range [][]any{{"EX", 1000}, {"PXAT", time.Now().Add(time.Hour).UnixMilli()}, {"PERSIST"}} {
		step([]any{int64(1), int64(0)}, append([]any{"INCREX", "e", "BYINT", 10, "UBOUND", 5}, opt...)...)
		if d := ttl("e"); d <= 0 || d > 100*time.Second {
			t.Fatalf("after a skipped INCREX %v: TTL %v; want it left in (0, 100s]", opt, d)
		}
	}
	step([]any{int64(5), int64(4)}, "INCREX", "e", "BYINT", 10, "UBOUND", 5, "SATURATE", "PX", 1_000_000)
	if d := ttl("e"); d <= 100*time.Second {
		t.Fatalf("after a saturated INCREX PX 1000000: TTL %v; want it set above 100s", d)
	}
	step([]any{int64(5), int64(0)}, "INCREX", "e", "UBOUND", 5, "SATURATE", "PERSIST")
	if d := ttl("e"); d != -1 {
		t.Fatalf("after INCREX PERSIST saturated at its bound: TTL %v; want -1", d)
	}
}
