package server_test

import (
	"context"
	"math"
	"reflect"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter/resp/server"
)

func TestIncrGet(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		steps := []struct {
			name string
			cmd  *redis.IntCmd
			want int64
		}{
			{"INCR creates", rdb.Incr(ctx, "likes"), 1},
			{"INCR", rdb.Incr(ctx, "likes"), 2},
			{"INCRBY", rdb.IncrBy(ctx, "likes", 10), 12},
			{"DECR", rdb.Decr(ctx, "likes"), 11},
			{"DECRBY", rdb.DecrBy(ctx, "likes", 5), 6},
			{"INCRBY negative", rdb.IncrBy(ctx, "likes", -2), 4},
			{"INCRBY 0", rdb.IncrBy(ctx, "likes", 0), 4},
			{"INCRBY 0 missing", rdb.IncrBy(ctx, "none", 0), 0},
			{"DECR creates", rdb.Decr(ctx, "down"), -1},
		}
		for _, s := range steps {
			if got, err := s.cmd.Result(); err != nil || got != s.want {
				t.Errorf("%s: got %d, %v; want %d", s.name, got, err, s.want)
			}
		}
		if got, err := rdb.Get(ctx, "likes").Result(); err != nil || got != "4" {
			t.Errorf("GET: got %q, %v; want \"4\"", got, err)
		}
		if _, err := rdb.Get(ctx, "missing").Result(); err != redis.Nil {
			t.Errorf("GET missing: err = %v, want redis.Nil", err)
		}
		if n, err := rdb.Exists(ctx, "none").Result(); err != nil || n != 0 {
			t.Errorf("INCRBY 0 created the counter: EXISTS = %d, %v", n, err)
		}
		wantErr(t, "INCRBY not a number", rdb.Do(ctx, "INCRBY", "likes", "1.5").Err(), "ERR value is not an integer or out of range")
		wantErr(t, "INCRBY +1", rdb.Do(ctx, "INCRBY", "likes", "+1").Err(), "ERR value is not an integer or out of range")
		wantErr(t, "DECRBY min int64", rdb.DecrBy(ctx, "likes", math.MinInt64).Err(), "ERR decrement would overflow")
		wantErr(t, "INCR arity", rdb.Do(ctx, "INCR").Err(), "ERR wrong number of arguments for 'incr' command")
		wantPrefix(t, "INCR bad id", rdb.Incr(ctx, string(make([]byte, 300))).Err(), "ERR counter id is 300 bytes long")
		// An increment past int64 changes nothing.
		if err := rdb.IncrBy(ctx, "big", math.MaxInt64-1).Err(); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "INCRBY overflow", rdb.IncrBy(ctx, "big", 2).Err(), "ERR increment or decrement would overflow")
		if got, err := rdb.Get(ctx, "big").Result(); err != nil || got != strconv.FormatInt(math.MaxInt64-1, 10) {
			t.Errorf("after the overflow: GET = %q, %v; want it unchanged", got, err)
		}
	})
}

func TestMGetExistsDel(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		rdb.IncrBy(ctx, "a", 3)
		rdb.IncrBy(ctx, "b", 5)
		got, err := rdb.MGet(ctx, "a", "missing", "b").Result()
		if want := []any{"3", nil, "5"}; err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("MGET: got %#v, %v; want %#v", got, err, want)
		}
		if got, err := rdb.MGet(ctx, "b").Result(); err != nil || !reflect.DeepEqual(got, []any{"5"}) {
			t.Errorf("MGET of one: got %#v, %v", got, err)
		}
		if n, err := rdb.Exists(ctx, "a", "missing", "a", "b").Result(); err != nil || n != 3 {
			t.Errorf("EXISTS: got %d, %v; want 3 (a key named twice counts twice)", n, err)
		}
		if n, err := rdb.Del(ctx, "a", "missing").Result(); err != nil || n != 1 {
			t.Errorf("DEL: got %d, %v; want 1", n, err)
		}
		if _, err := rdb.Get(ctx, "a").Result(); err != redis.Nil {
			t.Errorf("GET after DEL: err = %v, want redis.Nil", err)
		}
		if n, err := rdb.Incr(ctx, "a").Result(); err != nil || n != 1 {
			t.Errorf("INCR after DEL: got %d, %v; want 1 (a new counter)", n, err)
		}
		wantPrefix(t, "MGET bad id", rdb.MGet(ctx, "a", "").Err(), "ERR counter id is empty")
	})
}

func TestPipelineJoinsBatches(t *testing.T) {
	eng := MustEngine(t)
	_, addr := MustServe(t, eng, server.Options{})
	rdb := MustClient(t, addr, 3, "")
	ctx := context.Background()
	if err := rdb.Incr(ctx, "hot").Err(); err != nil { // created outside the measurement
		t.Fatal(err)
	}
	before := eng.Stats().Flushes.Load()
	const n = 200
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range n {
			p.Incr(ctx, "hot")
		}
		p.Get(ctx, "hot")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	flushes := eng.Stats().Flushes.Load() - before
	prev := int64(1)
	for i, c := range cmds[:n] {
		v := c.(*redis.IntCmd).Val()
		if v < prev || v > n+1 {
			t.Fatalf("INCR %d replied %d: replies must not decrease and lie in 2..%d", i, v, n+1)
		}
		prev = v
	}
	if prev != n+1 {
		t.Errorf("the last INCR replied %d, want %d", prev, n+1)
	}
	if got := cmds[n].(*redis.StringCmd).Val(); got != strconv.Itoa(n+1) {
		t.Errorf("GET after the pipelined INCRs = %q, want %d: a read sees the writes sent before it", got, n+1)
	}
	// One round trip through the engine a write would be n commits.
	if flushes >= n {
		t.Errorf("%d pipelined INCRs took %d commits: they should share them", n, flushes)
	}
	t.Logf("%d pipelined INCRs in %d commits", n, flushes)
}

// TestPipelinedGets checks that GETs pipelined together (one batch read)
// each get their own reply, errors included.
func TestPipelinedGets(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		rdb.IncrBy(ctx, "x", 7)
		cmds, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Get(ctx, "x")
			p.Get(ctx, "missing")
			p.Get(ctx, "")
			p.Get(ctx, "x")
			return nil
		})
		if v, err := cmds[0].(*redis.StringCmd).Result(); v != "7" || err != nil {
			t.Errorf("GET x: %q, %v", v, err)
		}
		if err := cmds[1].Err(); err != redis.Nil {
			t.Errorf("GET missing: %v, want redis.Nil", err)
		}
		wantPrefix(t, "GET empty id", cmds[2].Err(), "ERR counter id is empty")
		if v, err := cmds[3].(*redis.StringCmd).Result(); v != "7" || err != nil {
			t.Errorf("GET x again: %q, %v", v, err)
		}
	})
}

func TestSCCommands(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		if err := rdb.Do(ctx, "SC.CREATE", "c", "SHARDS", 4).Err(); err != nil {
			t.Fatalf("SC.CREATE: %v", err)
		}
		wantPrefix(t, "SC.CREATE again", rdb.Do(ctx, "SC.CREATE", "c", "SHARDS", 4).Err(), "EXISTS ")
		wantPrefix(t, "SC.CREATE other options", rdb.Do(ctx, "SC.CREATE", "c", "SHARDS", 8).Err(), "EXISTS ")
		wantPrefix(t, "SC.CREATE bad option", rdb.Do(ctx, "SC.CREATE", "d", "COLOR", "red").Err(), "ERR syntax error")
		wantPrefix(t, "SC.CREATE no value", rdb.Do(ctx, "SC.CREATE", "d", "SHARDS").Err(), "ERR syntax error")
		wantErr(t, "SC.CREATE bad shards", rdb.Do(ctx, "SC.CREATE", "d", "SHARDS", 0).Err(), "ERR SHARDS must be an integer from 1 to 1024")
		wantPrefix(t, "SC.CREATE bad kind", rdb.Do(ctx, "SC.CREATE", "d", "KIND", "max").Err(), "ERR KIND must be")
		if n, err := rdb.Do(ctx, "SC.INCRBY", "c", 5, "REQUEST-ID", "r1").Int(); err != nil || n != 1 {
			t.Errorf("SC.INCRBY new id: %d, %v; want 1 (applied)", n, err)
		}
		if n, err := rdb.Do(ctx, "SC.INCRBY", "c", 5, "REQUEST-ID", "r1").Int(); err != nil || n != 0 {
			t.Errorf("SC.INCRBY repeated id: %d, %v; want 0 (a duplicate)", n, err)
		}
		if n, err := rdb.Do(ctx, "SC.INCRBY", "c", -3).Int(); err != nil || n != 1 {
			t.Errorf("SC.INCRBY without id: %d, %v; want 1", n, err)
		}
		if n, err := rdb.Do(ctx, "SC.INCRBY", "c", 5, "REQUEST-ID", "r2").Int(); err != nil || n != 1 {
			t.Errorf("SC.INCRBY another id: %d, %v; want 1", n, err)
		}
		wantPrefix(t, "SC.INCRBY 0", rdb.Do(ctx, "SC.INCRBY", "c", 0).Err(), "ERR the amount is 0")
		wantPrefix(t, "SC.INCRBY bad option", rdb.Do(ctx, "SC.INCRBY", "c", 1, "ID", "x").Err(), "ERR syntax error")
		// Value 5 (r1, once) - 3 + 5 (r2) = 7.
		m := scGet(t, rdb, proto, "SC.GET", "c")
		if m["value"] != int64(7) || m["shards"] != int64(4) || m["consistency"] != "strong" || m["max_staleness_ms"] != int64(0) || m["as_of"] == "" {
			t.Errorf("SC.GET: %v", m)
		}
		m = scGet(t, rdb, proto, "SC.GET", "c", "CACHED")
		if m["value"] != int64(7) || m["consistency"] != "cached" || m["max_staleness_ms"].(int64) <= 0 {
			t.Errorf("SC.GET CACHED: %v", m)
		}
		if err := rdb.Do(ctx, "SC.GET", "missing").Err(); err != redis.Nil {
			t.Errorf("SC.GET missing: %v, want redis.Nil", err)
		}
		if err := rdb.Do(ctx, "SC.RESHARD", "c", 8).Err(); err != nil {
			t.Errorf("SC.RESHARD: %v", err)
		}
		wantErr(t, "SC.RESHARD bad", rdb.Do(ctx, "SC.RESHARD", "c", 2000).Err(), "ERR the shard count must be an integer from 1 to 1024")
		wantPrefix(t, "SC.RESHARD missing", rdb.Do(ctx, "SC.RESHARD", "missing", 2).Err(), "ERR ")
		if m := scGet(t, rdb, proto, "SC.GET", "c"); m["shards"] != int64(8) || m["value"] != int64(7) {
			t.Errorf("SC.GET after SC.RESHARD: %v", m)
		}
		p := scGet(t, rdb, proto, "SC.SHARDS", "c")
		places, _ := p["placement"].([]any)
		if p["id"] != "c" || p["shards"] != int64(8) || len(places) != 8 {
			t.Fatalf("SC.SHARDS: %v", p)
		}
		sum := int64(0)
		for _, pl := range places {
			m := toMap(t, pl, proto)
			sum += m["value"].(int64)
			if m["node"] == "" {
				t.Errorf("SC.SHARDS: a shard without a node: %v", m)
			}
		}
		if sum != 7 {
			t.Errorf("SC.SHARDS: the shards sum to %d, want 7", sum)
		}
	})
}

// TestBounds checks MIN and MAX: a write past a bound is refused and
// changes nothing.
func TestBounds(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		if err := rdb.Do(ctx, "SC.CREATE", "stock", "MIN", 0, "MAX", 2).Err(); err != nil {
			t.Fatal(err)
		}
		rdb.Incr(ctx, "stock")
		rdb.Incr(ctx, "stock")
		wantPrefix(t, "INCR past MAX", rdb.Incr(ctx, "stock").Err(), "ERR value would leave the counter's bounds")
		if v, err := rdb.Get(ctx, "stock").Result(); err != nil || v != "2" {
			t.Errorf("after the refused INCR: %q, %v; want 2", v, err)
		}
		wantPrefix(t, "DECRBY past MIN", rdb.DecrBy(ctx, "stock", 3).Err(), "ERR value would leave the counter's bounds")
	})
}

// scGet runs a command whose reply is a map (an array of names and values
// in RESP2) and returns it as a map.
func scGet(t *testing.T, rdb *redis.Client, proto int, args ...any) map[string]any {
	t.Helper()
	v, err := rdb.Do(context.Background(), args...).Result()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return toMap(t, v, proto)
}

func toMap(t *testing.T, v any, proto int) map[string]any {
	t.Helper()
	out := map[string]any{}
	switch v := v.(type) {
	case map[any]any:
		if proto != 3 {
			t.Fatalf("a map in RESP%d", proto)
		}
		for k, x := range v {
			out[k.(string)] = x
		}
	case []any:
		if proto != 2 {
			t.Fatalf("a flat array in RESP%d, want a map", proto)
		}
		for i := 0; i+1 < len(v); i += 2 {
			out[v[i].(string)] = v[i+1]
		}
	default:
		t.Fatalf("reply %T %v is not a map", v, v)
	}
	return out
}
