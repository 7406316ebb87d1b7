package server_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter/resp/server"
)

// scanAll follows SCAN's cursors to the end and returns the keys, sorted,
// failing on a key returned twice.
func scanAll(t *testing.T, rdb *redis.Client, match string, count int64, typ string) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	seen := map[string]bool{}
	var cursor uint64
	for calls := 0; ; calls++ {
		if calls > 10000 {
			t.Fatal("SCAN never ended")
		}
		page, next, err := rdb.ScanType(ctx, cursor, match, count, typ).Result()
		if err != nil {
			t.Fatalf("SCAN %d MATCH %q COUNT %d TYPE %q: %v", cursor, match, count, typ, err)
		}
		for _, k := range page {
			if seen[k] {
				t.Errorf("SCAN returned %q twice", k)
			}
			seen[k] = true
			keys = append(keys, k)
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	sort.Strings(keys)
	return keys
}

// keyspaceScenario checks SCAN, TYPE, DBSIZE and the set listings on a
// keyspace of plain counters, distinct counters and hashes, one of them
// with many fields, from a store that may already hold the keys of
// hashScenario (a:b:c, a, a:b, post:42).
func keyspaceScenario(t *testing.T, rdb *redis.Client) {
	ctx := context.Background()
	before := scanAll(t, rdb, "", 0, "")
	var want []string
	for i := range 25 {
		k := fmt.Sprintf("ks:c:%02d", i)
		rdb.Incr(ctx, k)
		want = append(want, k)
	}
	for i := range 3 {
		k := fmt.Sprintf("ks:s:%d", i)
		rdb.SAdd(ctx, k, "x", "y")
		want = append(want, k)
	}
	for f := range 40 {
		rdb.HIncrBy(ctx, "ks:h:big", fmt.Sprint("f", f), 1)
	}
	rdb.HIncrBy(ctx, "ks:h:small", "f", 1)
	rdb.HIncrBy(ctx, "ks:h:gone", "f", 1)
	rdb.HDel(ctx, "ks:h:gone", "f") // its marker stays: not a key
	want = append(want, "ks:h:big", "ks:h:small")
	sort.Strings(want)
	for _, count := range []int64{0, 1, 7, 1000} {
		if got := scanAll(t, rdb, "ks:*", count, ""); !reflect.DeepEqual(got, want) {
			t.Errorf("SCAN MATCH ks:* COUNT %d = %q\nwant %q", count, got, want)
		}
	}
	all := append(append([]string{}, before...), want...)
	sort.Strings(all)
	if got := scanAll(t, rdb, "", 3, ""); !reflect.DeepEqual(got, all) {
		t.Errorf("SCAN = %q\nwant %q", got, all)
	}
	if got := scanAll(t, rdb, "ks:*", 5, "hash"); !reflect.DeepEqual(got, []string{"ks:h:big", "ks:h:small"}) {
		t.Errorf("SCAN TYPE hash = %q", got)
	}
	if got := scanAll(t, rdb, "ks:*", 5, "set"); len(got) != 3 || got[0] != "ks:s:0" {
		t.Errorf("SCAN TYPE set = %q", got)
	}
	if got := scanAll(t, rdb, "ks:?:1[0-4]", 4, "string"); !reflect.DeepEqual(got, []string{"ks:c:10", "ks:c:11", "ks:c:12", "ks:c:13", "ks:c:14"}) {
		t.Errorf("SCAN MATCH ks:?:1[0-4] TYPE string = %q", got)
	}
	if got := scanAll(t, rdb, "*:small", 2, ""); !reflect.DeepEqual(got, []string{"ks:h:small"}) {
		t.Errorf("SCAN MATCH *:small = %q", got)
	}
	if got := scanAll(t, rdb, "ks:*", 5, "zset"); len(got) != 0 {
		t.Errorf("SCAN TYPE zset = %q, want none", got)
	}
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != int64(len(all)) {
		t.Errorf("DBSIZE = %d, %v; want %d", n, err, len(all))
	}
	if v, err := rdb.Type(ctx, "ks:s:1").Result(); err != nil || v != "set" {
		t.Errorf("TYPE of a distinct counter = %q, %v", v, err)
	}
	if v, err := rdb.SMembers(ctx, "ks:s:1").Result(); err != nil || !reflect.DeepEqual(v, []string{"x", "y"}) {
		t.Errorf("SMEMBERS = %v, %v", v, err)
	}
	if v, err := rdb.SMembers(ctx, "ks:none").Result(); err != nil || len(v) != 0 {
		t.Errorf("SMEMBERS of a missing key = %v, %v", v, err)
	}
	wantPrefix(t, "SMEMBERS of a sum counter", rdb.SMembers(ctx, "ks:c:01").Err(), "WRONGTYPE")
	wantPrefix(t, "SMEMBERS of a hash", rdb.SMembers(ctx, "ks:h:big").Err(), "WRONGTYPE")
	var members []string
	iter := rdb.SScan(ctx, "ks:s:2", 0, "*", 1).Iterator()
	for iter.Next(ctx) {
		members = append(members, iter.Val())
	}
	if err := iter.Err(); err != nil || !reflect.DeepEqual(members, []string{"x", "y"}) {
		t.Errorf("SSCAN = %v, %v", members, err)
	}
	wantErr(t, "SCAN of a cursor never given", rdb.Scan(ctx, 12345, "", 0).Err(),
		"ERR cursor 12345 is unknown or has expired (the server keeps the last 16384 cursors it handed out): start the scan again from 0")
	wantErr(t, "SCAN COUNT 0", rdb.Do(ctx, "SCAN", 0, "COUNT", 0).Err(), "ERR syntax error")
	wantErr(t, "SCAN x", rdb.Do(ctx, "SCAN", "x").Err(), "ERR invalid cursor")
}

func TestKeyspace(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) { keyspaceScenario(t, rdb) })
}

// TestFlush checks FLUSHDB and FLUSHALL: refused, naming the flag, and
// deleting nothing, unless the server allows them; then every counter and
// hash is gone and names are free to take any type. FUNCTION FLUSH
// succeeds either way.
func TestFlush(t *testing.T) {
	ctx := context.Background()
	eng := MustEngine(t)
	_, addr := MustServe(t, eng, server.Options{})
	rdb := MustClient(t, addr, 2, "")
	rdb.Incr(ctx, "a")
	rdb.HIncrBy(ctx, "h", "f", 1)
	for _, cmd := range []string{"FLUSHALL", "FLUSHDB"} {
		err := rdb.Do(ctx, cmd).Err()
		if err == nil || !strings.Contains(err.Error(), "--resp-allow-flush") {
			t.Errorf("%s without --resp-allow-flush: %v, want it refused naming the flag", cmd, err)
		}
	}
	if n, _ := rdb.Exists(ctx, "a", "h").Result(); n != 2 {
		t.Fatalf("a refused FLUSHALL deleted keys: EXISTS = %d", n)
	}
	if err := rdb.FunctionFlush(ctx).Err(); err != nil {
		t.Errorf("FUNCTION FLUSH: %v", err)
	}

	_, addr = MustServe(t, eng, server.Options{AllowFlush: true})
	rdb = MustClient(t, addr, 3, "")
	for i := range 30 {
		rdb.Incr(ctx, fmt.Sprint("k", i))
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatalf("FLUSHALL: %v", err)
	}
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("DBSIZE after FLUSHALL = %d, %v", n, err)
	}
	if v, err := rdb.HIncrBy(ctx, "a", "f", 1).Result(); err != nil || v != 1 {
		t.Errorf("HINCRBY on a flushed counter's name = %d, %v", v, err)
	}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Errorf("FLUSHDB: %v", err)
	}
	if v, err := rdb.Incr(ctx, "a").Result(); err != nil || v != 1 {
		t.Errorf("INCR on a flushed hash's name = %d, %v", v, err)
	}
}

// TestCommandTable checks that COMMAND, COMMAND COUNT, LIST, INFO and DOCS
// agree and describe every command the server answers.
func TestCommandTable(t *testing.T) {
	ctx := context.Background()
	eng := MustEngine(t)
	_, addr := MustServe(t, eng, server.Options{})
	rdb := MustClient(t, addr, 3, "")
	n, err := rdb.Do(ctx, "COMMAND", "COUNT").Int64()
	if err != nil {
		t.Fatal(err)
	}
	names, err := rdb.CommandList(ctx, nil).Result()
	if err != nil || int64(len(names)) != n {
		t.Fatalf("COMMAND LIST = %d names, %v; COUNT = %d", len(names), err, n)
	}
	docs, err := rdb.Do(ctx, "COMMAND", "DOCS").Result()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := docs.(map[any]any)
	if !ok || len(m) != len(names) {
		t.Fatalf("COMMAND DOCS = %T of %d, want a map of %d", docs, len(m), len(names))
	}
	for _, name := range names {
		d, ok := m[name].(map[any]any)
		if !ok || d["summary"] == "" || d["group"] == "" {
			t.Errorf("COMMAND DOCS %s = %v, want a summary and a group", name, m[name])
		}
		if err := rdb.Do(ctx, name).Err(); err != nil && strings.HasPrefix(err.Error(), "ERR unknown command") {
			t.Errorf("%s is in the table but unknown", name)
		}
	}
	for _, name := range []string{"multi", "exec", "hincrby", "scan", "type", "flushall"} {
		if _, ok := m[name]; !ok {
			t.Errorf("COMMAND DOCS has no %s", name)
		}
	}
	r := MustRaw(t, addr)
	r.send("COMMAND DOCS HINCRBY nope\r\n")
	r.expect("*2\r\n", "$7\r\nhincrby\r\n", "*4\r\n", "$7\r\nsummary\r\n")
}
