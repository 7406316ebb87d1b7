package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/internal/redistest"
	"github.com/shardcounter/shardcounter/postgres"
	sredis "github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/resp/server"
)

// hashScenario runs the hash commands as an application keeping
// per-object counters would, and checks every reply: counters per field,
// the injective mapping (HINCRBY a:b c, HINCRBY a b:c and INCR a:b:c are
// three counters), one type per name, and DEL, EXISTS and TYPE on the
// whole hash.
func hashScenario(t *testing.T, rdb *redis.Client) {
	ctx := context.Background()
	ints := func(what string, cmd *redis.IntCmd, want int64) {
		t.Helper()
		if got, err := cmd.Result(); err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", what, got, err, want)
		}
	}
	ints("HINCRBY likes", rdb.HIncrBy(ctx, "post:42", "likes", 1), 1)
	ints("HINCRBY likes again", rdb.HIncrBy(ctx, "post:42", "likes", 4), 5)
	ints("HINCRBY views", rdb.HIncrBy(ctx, "post:42", "views", 100), 100)
	ints("HINCRBY negative", rdb.HIncrBy(ctx, "post:42", "shares", -2), -2)
	ints("HINCRBY 0", rdb.HIncrBy(ctx, "post:42", "shares", 0), -2)
	if v, err := rdb.HGet(ctx, "post:42", "likes").Result(); err != nil || v != "5" {
		t.Errorf("HGET = %q, %v", v, err)
	}
	if _, err := rdb.HGet(ctx, "post:42", "nope").Result(); err != redis.Nil {
		t.Errorf("HGET of a missing field: %v, want nil", err)
	}
	if _, err := rdb.HGet(ctx, "nohash", "f").Result(); err != redis.Nil {
		t.Errorf("HGET of a missing key: %v, want nil", err)
	}
	if v, err := rdb.HMGet(ctx, "post:42", "views", "nope", "likes").Result(); err != nil || !reflect.DeepEqual(v, []any{"100", nil, "5"}) {
		t.Errorf("HMGET = %v, %v", v, err)
	}
	want := map[string]string{"likes": "5", "views": "100", "shares": "-2"}
	if v, err := rdb.HGetAll(ctx, "post:42").Result(); err != nil || !reflect.DeepEqual(v, want) {
		t.Errorf("HGETALL = %v, %v; want %v", v, err, want)
	}
	if v, err := rdb.HKeys(ctx, "post:42").Result(); err != nil || !reflect.DeepEqual(v, []string{"likes", "shares", "views"}) {
		t.Errorf("HKEYS = %v, %v", v, err)
	}
	if v, err := rdb.HVals(ctx, "post:42").Result(); err != nil || !reflect.DeepEqual(v, []string{"5", "-2", "100"}) {
		t.Errorf("HVALS = %v, %v", v, err)
	}
	ints("HLEN", rdb.HLen(ctx, "post:42"), 3)
	ints("HLEN missing", rdb.HLen(ctx, "nohash"), 0)
	if v, err := rdb.HExists(ctx, "post:42", "views").Result(); err != nil || !v {
		t.Errorf("HEXISTS views = %v, %v", v, err)
	}
	if v, err := rdb.HGetAll(ctx, "nohash").Result(); err != nil || len(v) != 0 {
		t.Errorf("HGETALL of a missing key = %v, %v; want empty", v, err)
	}

	// Three names, three counters.
	ints("HINCRBY a:b c", rdb.HIncrBy(ctx, "a:b", "c", 1), 1)
	ints("HINCRBY a b:c", rdb.HIncrBy(ctx, "a", "b:c", 10), 10)
	ints("INCR a:b:c", rdb.IncrBy(ctx, "a:b:c", 100), 100)
	if v, _ := rdb.HGet(ctx, "a:b", "c").Result(); v != "1" {
		t.Errorf("HGET a:b c = %q, want 1", v)
	}
	if v, _ := rdb.HGet(ctx, "a", "b:c").Result(); v != "10" {
		t.Errorf("HGET a b:c = %q, want 10", v)
	}
	if v, _ := rdb.Get(ctx, "a:b:c").Result(); v != "100" {
		t.Errorf("GET a:b:c = %q, want 100", v)
	}

	// One type per name, either way round.
	wantPrefix(t, "INCR on a hash", rdb.Incr(ctx, "post:42").Err(), "WRONGTYPE")
	wantPrefix(t, "GET on a hash", rdb.Get(ctx, "post:42").Err(), "WRONGTYPE")
	wantPrefix(t, "SADD on a hash", rdb.SAdd(ctx, "post:42", "m").Err(), "WRONGTYPE")
	wantPrefix(t, "SCARD on a hash", rdb.SCard(ctx, "post:42").Err(), "WRONGTYPE")
	wantPrefix(t, "HINCRBY on a counter", rdb.HIncrBy(ctx, "a:b:c", "f", 1).Err(), "WRONGTYPE")
	wantPrefix(t, "HGET on a counter", rdb.HGet(ctx, "a:b:c", "f").Err(), "WRONGTYPE")
	wantPrefix(t, "HGETALL on a counter", rdb.HGetAll(ctx, "a:b:c").Err(), "WRONGTYPE")
	wantPrefix(t, "HLEN on a counter", rdb.HLen(ctx, "a:b:c").Err(), "WRONGTYPE")
	wantPrefix(t, "HDEL on a counter", rdb.HDel(ctx, "a:b:c", "f").Err(), "WRONGTYPE")
	wantPrefix(t, "HINCRBY a bad number", rdb.Do(ctx, "HINCRBY", "post:42", "likes", "x").Err(), "ERR value is not an integer")
	wantPrefix(t, "HINCRBY a bad field", rdb.HIncrBy(ctx, "post:42", "a\nb", 1).Err(), "ERR hash field contains control character")
	wantPrefix(t, "HINCRBY an empty field", rdb.HIncrBy(ctx, "post:42", "", 1).Err(), "ERR hash field is empty")
	if v, _ := rdb.HGet(ctx, "post:42", "likes").Result(); v != "5" {
		t.Errorf("after refused writes HGET = %q, want 5", v)
	}

	// TYPE, EXISTS and DEL act on the whole hash.
	for key, typ := range map[string]string{"post:42": "hash", "a:b:c": "string", "nohash": "none"} {
		if v, err := rdb.Type(ctx, key).Result(); err != nil || v != typ {
			t.Errorf("TYPE %s = %q, %v; want %s", key, v, err, typ)
		}
	}
	ints("EXISTS", rdb.Exists(ctx, "post:42", "a:b:c", "nohash", "a"), 3)
	ints("HDEL", rdb.HDel(ctx, "post:42", "shares", "nope"), 1)
	ints("HLEN after HDEL", rdb.HLen(ctx, "post:42"), 2)
	ints("DEL a hash", rdb.Del(ctx, "post:42"), 1)
	ints("EXISTS after DEL", rdb.Exists(ctx, "post:42"), 0)
	if _, err := rdb.HGet(ctx, "post:42", "likes").Result(); err != redis.Nil {
		t.Errorf("HGET after DEL: %v, want nil", err)
	}
	// A name whose hash is gone takes another type, and back.
	ints("INCR on a deleted hash's name", rdb.Incr(ctx, "post:42"), 1)
	ints("DEL the counter", rdb.Del(ctx, "post:42"), 1)
	ints("HINCRBY on a deleted counter's name", rdb.HIncrBy(ctx, "post:42", "likes", 2), 2)
	ints("HDEL the last field", rdb.HDel(ctx, "post:42", "likes"), 1)
	ints("EXISTS an emptied hash", rdb.Exists(ctx, "post:42"), 0)
	ints("INCR on an emptied hash's name", rdb.Incr(ctx, "post:42"), 1)
}

func TestHashes(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) { hashScenario(t, rdb) })
}

// TestHashesEveryStore runs the hash scenario over an engine on each
// store: bolt, PostgreSQL, Redis and a Redis Cluster.
func TestHashesEveryStore(t *testing.T) {
	ctx := context.Background()
	stores := map[string]func(t *testing.T) shardcounter.CounterStore{
		"bolt": func(t *testing.T) shardcounter.CounterStore {
			s, err := bolt.Open(ctx, filepath.Join(t.TempDir(), "c.db"), bolt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"postgres": func(t *testing.T) shardcounter.CounterStore {
			s, err := postgres.Open(ctx, pgtest.MustDatabase(t), postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"redis": func(t *testing.T) shardcounter.CounterStore {
			s, err := sredis.Open(ctx, "redis://"+redistest.MustStart(t).Addr, sredis.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"redis-cluster": func(t *testing.T) shardcounter.CounterStore {
			a := redistest.MustStartCluster(t, 3).Addrs()
			s, err := sredis.Open(ctx, "redis+cluster://"+a[0]+"?addr="+strings.Join(a[1:], "&addr="), sredis.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	names := make([]string, 0, len(stores))
	for n := range stores {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			store := stores[name](t)
			t.Cleanup(func() { store.Close() })
			eng, err := engine.New(store, engine.Config{DefaultShards: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { eng.Close(ctx) })
			if name == "redis-cluster" {
				// The store loads its scripts on a master when it first
				// answers NOSCRIPT, and a counter created by a write while
				// some master lacks them can be published without the shards
				// of that master (their creation's NOSCRIPT is not checked):
				// its reads then fail for good. Writes to a few counters
				// first load the scripts everywhere.
				for i := range 16 {
					eng.WriteCounter(ctx, shardcounter.Write{Counter: fmt.Sprint("warm-up/", i), Delta: 1})
				}
			}
			_, addr := MustServe(t, eng, server.Options{})
			rdb := MustClient(t, addr, 3, "")
			hashScenario(t, rdb)
			keyspaceScenario(t, rdb)
		})
	}
}
