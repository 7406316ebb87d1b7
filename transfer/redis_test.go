package transfer_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/expiry"
	"github.com/shardcounter/shardcounter/internal/redistest"
	"github.com/shardcounter/shardcounter/transfer"
)

// TestImportRedis migrates a live Redis's INCR-fed keys, SADD-fed sets
// and HINCRBY-fed hashes, lists what it cannot move, and brings the
// counters up to date when run again after more writes.
func TestImportRedis(t *testing.T) {
	ctx := context.Background()
	srv := redistest.MustStart(t)
	src := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer src.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(src.IncrBy(ctx, "app:views", 41).Err())
	must(src.IncrBy(ctx, "app:stock", -3).Err())
	must(src.Set(ctx, "app:session", "1", time.Hour).Err())
	for i := range 2500 {
		must(src.SAdd(ctx, "app:likers", fmt.Sprintf("u%04d", i)).Err())
	}
	must(src.HIncrBy(ctx, "app:post:1", "likes", 7).Err())
	must(src.HIncrBy(ctx, "app:post:1", "shares", 2).Err())
	must(src.HSet(ctx, "app:profile", "name", "ann").Err())
	must(src.Set(ctx, "app:name", "ann", 0).Err())
	must(src.RPush(ctx, "app:queue", "a").Err())
	must(src.PFAdd(ctx, "app:uniques", "a", "b").Err())
	must(src.IncrBy(ctx, "other:x", 1).Err())
	must(src.Expire(ctx, "app:likers", 2*time.Hour).Err())
	must(src.Expire(ctx, "app:post:1", 3*time.Hour).Err())

	store := openBolt(t)
	var skipped []string
	run := func() (transfer.Stats, transfer.RedisStats) {
		st, rs, err := transfer.ImportRedis(ctx, src, store, transfer.RedisOptions{Match: "app:*", Shards: 4,
			Skipped: func(s transfer.Skipped) { skipped = append(skipped, s.Key+" ("+s.Type+"): "+s.Reason) }}, transfer.ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return st, rs
	}
	st, rs := run()
	if rs.Keys != 9 || rs.Skipped != 4 || rs.WithTTL != 3 || st.Members != 2500 {
		t.Fatalf("stats %+v %+v, skipped %q", st, rs, skipped)
	}
	slices.Sort(skipped)
	want := []string{
		`app:name (string): the string is not an integer`,
		`app:profile (hash): field "name" is not an integer`,
		`app:queue (list): a list has no counterpart among counters`,
		`app:uniques (string): a HyperLogLog: its registers are of Redis's hash, which approx counters' sketches do not use (PFADD its members to an approx counter)`,
	}
	for _, w := range want {
		if !slices.Contains(skipped, w) {
			t.Errorf("skipped %q, want it to hold %q", skipped, w)
		}
	}
	check := func(id string, want int64) {
		t.Helper()
		r, err := store.ReadCounter(ctx, id)
		if err != nil || r.Value != want {
			t.Fatalf("%q: %+v, %v; want %d", id, r, err, want)
		}
	}
	check("app:views", 41)
	check("app:stock", -3)
	check("app:likers", 2500)
	check(shardcounter.HashFieldID("app:post:1", "likes"), 7)
	check(shardcounter.HashFieldID("app:post:1", "shares"), 2)
	check(shardcounter.HashMarkerID("app:post:1"), 0)
	if _, err := store.GetCounter(ctx, "other:x"); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("other:x outside --match: %v", err)
	}
	// TTLs become deadlines of the same names, as the engine keeps them.
	ex := expiry.Wrap(store, expiry.Options{})
	for name, ttl := range map[string]time.Duration{"app:session": time.Hour, "app:likers": 2 * time.Hour, "app:post:1": 3 * time.Hour, "app:views": 0} {
		got, err := ex.CounterTTL(ctx, name)
		if err != nil || !got.Exists {
			t.Fatalf("ttl of %s: %+v, %v", name, got, err)
		}
		left := time.Duration(got.RemainingMS) * time.Millisecond
		if ttl == 0 && got.ExpiresAt != nil || ttl != 0 && (left > ttl || left < ttl-time.Minute) {
			t.Fatalf("ttl of %s: %+v, want %s", name, got, ttl)
		}
	}

	// More writes, and the same command again: the counters catch up.
	must(src.IncrBy(ctx, "app:views", 9).Err())
	must(src.SAdd(ctx, "app:likers", "zed").Err())
	skipped = nil
	run()
	check("app:views", 50)
	check("app:likers", 2501)
	if len(skipped) != 4 || !strings.Contains(strings.Join(skipped, "\n"), "app:queue") {
		t.Fatalf("second run skipped %q", skipped)
	}
}

// TestImportRedisCluster migrates a Redis Cluster's keys: SCAN walks
// every master.
func TestImportRedisCluster(t *testing.T) {
	ctx := context.Background()
	cl := redistest.MustStartCluster(t, 3)
	src, err := transfer.OpenRedisSource(ctx, "redis+cluster://"+cl.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i := range 50 {
		if err := src.IncrBy(ctx, fmt.Sprintf("k:%02d", i), int64(i+1)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.SAdd(ctx, "s", "a", "b", "c").Err(); err != nil {
		t.Fatal(err)
	}
	store := openBolt(t)
	st, rs, err := transfer.ImportRedis(ctx, src, store, transfer.RedisOptions{Shards: 2}, transfer.ImportOptions{})
	if err != nil || st.Counters != 51 || rs.Keys != 51 || st.Members != 3 {
		t.Fatalf("import-redis of a cluster: %+v %+v %v", st, rs, err)
	}
	for _, c := range []struct {
		id   string
		want int64
	}{{"k:00", 1}, {"k:49", 50}, {"s", 3}} {
		if r, err := store.ReadCounter(ctx, c.id); err != nil || r.Value != c.want {
			t.Fatalf("%s: %+v %v, want %d", c.id, r, err, c.want)
		}
	}
}
