package server_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter/sketch"
)

const wrongTypeMsg = "WRONGTYPE Operation against a key holding the wrong kind of value"

func nearly(n, want int64) bool {
	return math.Abs(float64(n-want)) <= 3*sketch.StdError*float64(want)+2
}

func TestHyperLogLog(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		if n, err := rdb.PFAdd(ctx, "uv", "a", "b", "c", "a").Result(); err != nil || n != 1 {
			t.Errorf("PFADD a b c a: %d, %v; want 1", n, err)
		}
		if n, err := rdb.PFAdd(ctx, "uv", "a", "b").Result(); err != nil || n != 0 {
			t.Errorf("PFADD of counted members: %d, %v; want 0", n, err)
		}
		if n, err := rdb.PFCount(ctx, "uv").Result(); err != nil || n != 3 {
			t.Errorf("PFCOUNT: %d, %v; want 3", n, err)
		}
		if v, err := rdb.Type(ctx, "uv").Result(); err != nil || v != "string" {
			t.Errorf("TYPE of an approx counter: %q, %v; want string, as Redis says of a HyperLogLog", v, err)
		}
		keys, _, err := rdb.ScanType(ctx, 0, "*", 100, "string").Result()
		if err != nil || len(keys) != 1 || keys[0] != "uv" {
			t.Errorf("SCAN TYPE string: %v, %v; want [uv]", keys, err)
		}
		if n, err := rdb.PFCount(ctx, "missing").Result(); err != nil || n != 0 {
			t.Errorf("PFCOUNT of a missing key: %d, %v; want 0", n, err)
		}

		testHLLUnion(t, rdb)

		// PFADD key alone creates an empty one.
		if n, err := rdb.PFAdd(ctx, "empty").Result(); err != nil || n != 1 {
			t.Errorf("PFADD empty: %d, %v; want 1", n, err)
		}
		if n, err := rdb.PFAdd(ctx, "empty").Result(); err != nil || n != 0 {
			t.Errorf("PFADD empty again: %d, %v; want 0", n, err)
		}
		if n, err := rdb.Exists(ctx, "empty").Result(); err != nil || n != 1 {
			t.Errorf("EXISTS of an empty HyperLogLog: %d, %v; want 1", n, err)
		}

		// The types do not mix.
		rdb.Incr(ctx, "views")
		rdb.SAdd(ctx, "likes", "x")
		rdb.HIncrBy(ctx, "post", "likes", 1)
		for what, err := range map[string]error{
			"PFADD to a sum counter":       rdb.PFAdd(ctx, "views", "x").Err(),
			"PFADD to a distinct counter":  rdb.PFAdd(ctx, "likes", "y").Err(),
			"PFADD to a hash":              rdb.PFAdd(ctx, "post", "y").Err(),
			"PFCOUNT of a sum counter":     rdb.PFCount(ctx, "views").Err(),
			"PFCOUNT of a set and an HLL":  rdb.PFCount(ctx, "uv", "likes").Err(),
			"PFMERGE into a sum counter":   rdb.PFMerge(ctx, "views", "uv").Err(),
			"PFMERGE from a set":           rdb.PFMerge(ctx, "uv", "likes").Err(),
			"INCR of an approx counter":    rdb.Incr(ctx, "uv").Err(),
			"SADD to an approx counter":    rdb.SAdd(ctx, "uv", "z").Err(),
			"SREM from an approx counter":  rdb.SRem(ctx, "uv", "a").Err(),
			"SCARD of an approx counter":   rdb.SCard(ctx, "uv").Err(),
			"HINCRBY of an approx counter": rdb.HIncrBy(ctx, "uv", "f", 1).Err(),
		} {
			wantPrefix(t, what, err, wrongTypeMsg)
		}
		if n, err := rdb.PFCount(ctx, "uv").Result(); err != nil || n != 3 {
			t.Errorf("PFCOUNT after refused writes: %d, %v; want 3", n, err)
		}
		if n, err := rdb.SCard(ctx, "likes").Result(); err != nil || n != 1 {
			t.Errorf("SCARD likes after a refused PFADD: %d, %v; want 1", n, err)
		}
		// SET replaces it, as Redis's SET replaces any type.
		if err := rdb.Set(ctx, "uv", 5, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if v, err := rdb.Get(ctx, "uv").Int64(); err != nil || v != 5 {
			t.Errorf("GET after SET over an approx counter: %d, %v", v, err)
		}
		// In a transaction, PFADD is a write of the batch.
		tx, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.PFAdd(ctx, "tx", "a", "b")
			p.PFAdd(ctx, "tx", "a")
			return nil
		})
		if err != nil || tx[0].(*redis.IntCmd).Val() != 1 {
			t.Errorf("PFADD in MULTI/EXEC: %v, %v", tx, err)
		}
		wantErr(t, "PFADD arity", rdb.Do(ctx, "PFADD").Err(), "ERR wrong number of arguments for 'pfadd' command")
	})
}

// testHLLUnion adds many members to two counters, pipelined, and checks
// PFCOUNT of one and of both (their union's) and PFMERGE.
func testHLLUnion(t *testing.T, rdb *redis.Client) {
	ctx := context.Background()
	// Many members, pipelined: the estimate within three standard
	// errors; PFCOUNT of several keys is their union's.
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 200 {
			var a, b []any
			for j := range 25 {
				a = append(a, fmt.Sprintf("m%d", i*25+j))
				b = append(b, fmt.Sprintf("m%d", i*25+j+2500))
			}
			p.PFAdd(ctx, "hll:a", a...)
			p.PFAdd(ctx, "hll:b", b...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err, cmds[0])
	}
	a, _ := rdb.PFCount(ctx, "hll:a").Result()
	u, err := rdb.PFCount(ctx, "hll:a", "hll:b", "missing").Result()
	if !nearly(a, 5000) || err != nil || !nearly(u, 7500) {
		t.Errorf("PFCOUNT hll:a = %d (want about 5000); of hll:a hll:b missing = %d, %v (want about 7500)", a, u, err)
	}
	if err := rdb.PFMerge(ctx, "hll:ab", "hll:a", "hll:b").Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.PFCount(ctx, "hll:ab").Result(); err != nil || n != u {
		t.Errorf("PFCOUNT of the merge: %d, %v; want the union's %d", n, err, u)
	}
	if err := rdb.PFMerge(ctx, "hll:ab", "hll:a").Err(); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.PFCount(ctx, "hll:ab").Result(); n != u {
		t.Errorf("PFMERGE of a source merged already changed the count: %d, want %d", n, u)
	}
}
