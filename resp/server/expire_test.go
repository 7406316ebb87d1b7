package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestExpire drives EXPIRE and its kin as a Redis client does: deadlines
// on counters and hashes, TTL's -1 and -2, the NX/XX/GT/LT conditions,
// PERSIST, a deadline in the past deleting, and a counter read as absent
// once its deadline passed, and written anew from 0.
func TestExpire(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		ints := func(what string, cmd *redis.IntCmd, want int64) {
			t.Helper()
			if v, err := cmd.Result(); err != nil || v != want {
				t.Fatalf("%s: %d, %v; want %d", what, v, err, want)
			}
		}
		doInt := func(what string, want int64, args ...any) {
			t.Helper()
			if v, err := rdb.Do(ctx, args...).Int64(); err != nil || v != want {
				t.Fatalf("%s: %d, %v; want %d", what, v, err, want)
			}
		}
		bools := func(what string, cmd *redis.BoolCmd, want bool) {
			t.Helper()
			if v, err := cmd.Result(); err != nil || v != want {
				t.Fatalf("%s: %v, %v; want %v", what, v, err, want)
			}
		}
		rdb.Incr(ctx, "c")
		doInt("TTL without a deadline", -1, "TTL", "c")
		doInt("TTL of a missing key", -2, "TTL", "none")
		bools("EXPIRE of a missing key", rdb.Expire(ctx, "none", time.Minute), false)
		bools("EXPIRE", rdb.Expire(ctx, "c", 100*time.Second), true)
		doInt("TTL", 100, "TTL", "c")
		if v, _ := rdb.Do(ctx, "PTTL", "c").Int64(); v <= 99000 || v > 100000 {
			t.Fatalf("PTTL = %d, want about 100000", v)
		}
		if v, _ := rdb.Do(ctx, "EXPIRETIME", "c").Int64(); v < time.Now().Unix()+99 || v > time.Now().Unix()+101 {
			t.Fatalf("EXPIRETIME = %d", v)
		}
		doInt("EXPIRE NX with a deadline", 0, "EXPIRE", "c", 50, "NX")
		doInt("EXPIRE GT, earlier", 0, "EXPIRE", "c", 50, "GT")
		doInt("EXPIRE LT, earlier", 1, "EXPIRE", "c", 50, "LT")
		doInt("TTL after LT", 50, "TTL", "c")
		doInt("EXPIRE XX", 1, "EXPIRE", "c", 60, "XX")
		wantErr(t, "EXPIRE NX XX", rdb.Do(ctx, "EXPIRE", "c", 60, "NX", "XX").Err(), "ERR NX and XX, GT or LT options at the same time are not compatible")
		wantErr(t, "EXPIRE not a number", rdb.Do(ctx, "EXPIRE", "c", "soon").Err(), "ERR value is not an integer or out of range")
		wantErr(t, "EXPIRE overflow", rdb.Do(ctx, "EXPIRE", "c", "9223372036854775807").Err(), "ERR invalid expire time in 'expire' command")
		bools("PERSIST", rdb.Persist(ctx, "c"), true)
		bools("PERSIST again", rdb.Persist(ctx, "c"), false)
		doInt("TTL after PERSIST", -1, "TTL", "c")

		// A hash expires whole. The deadline leaves a loaded machine's
		// race-detected server time to answer the read before it.
		rdb.HIncrBy(ctx, "post:1", "likes", 3)
		bools("EXPIRE of a hash", rdb.PExpire(ctx, "post:1", time.Second), true)
		doInt("HGET before", 3, "HGET", "post:1", "likes")
		bools("PEXPIRE of a counter", rdb.PExpire(ctx, "c", time.Second), true)
		time.Sleep(1100 * time.Millisecond)
		if err := rdb.HGet(ctx, "post:1", "likes").Err(); err != redis.Nil {
			t.Fatalf("HGET of an expired hash: %v, want nil", err)
		}
		if err := rdb.Get(ctx, "c").Err(); err != redis.Nil {
			t.Fatalf("GET of an expired counter: %v, want nil", err)
		}
		ints("EXISTS of expired keys", rdb.Exists(ctx, "c", "post:1"), 0)
		doInt("TTL of an expired key", -2, "TTL", "c")
		ints("INCR of an expired counter", rdb.Incr(ctx, "c"), 1)
		ints("HINCRBY of an expired hash", rdb.HIncrBy(ctx, "post:1", "likes", 1), 1)

		// A deadline not in the future deletes.
		bools("EXPIRE -1", rdb.Expire(ctx, "c", -time.Second), true)
		ints("EXISTS after EXPIRE -1", rdb.Exists(ctx, "c"), 0)
	})
}

// TestExpireInTransaction is the rate-limit pattern: MULTI, INCR, EXPIRE,
// EXEC; EXPIRE in its turn among a transaction's writes; and the refusal
// of a write queued after a PERSIST of its key.
func TestExpireInTransaction(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		for want := int64(1); want <= 3; want++ {
			var incr *redis.IntCmd
			var exp *redis.BoolCmd
			_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				incr = p.Incr(ctx, "rate:u1")
				exp = p.Expire(ctx, "rate:u1", time.Minute)
				return nil
			})
			if err != nil || incr.Val() != want || !exp.Val() {
				t.Fatalf("MULTI INCR EXPIRE EXEC: %v, incr %d, expire %v; want %d, true", err, incr.Val(), exp.Val(), want)
			}
		}
		if v, _ := rdb.TTL(ctx, "rate:u1").Result(); v <= 58*time.Second {
			t.Fatalf("TTL after the transactions: %v", v)
		}
		// EXPIRE is a write of the transaction, in its turn: of a key the
		// transaction creates after it, it finds nothing (0), as Redis.
		var exp0, exp1 *redis.BoolCmd
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			exp0 = p.Expire(ctx, "rate:u2", time.Minute)
			p.Incr(ctx, "rate:u2")
			exp1 = p.ExpireNX(ctx, "rate:u2", time.Hour)
			p.Incr(ctx, "rate:u2")
			return nil
		})
		if err != nil || exp0.Val() || !exp1.Val() {
			t.Fatalf("EXPIRE, INCR, EXPIRE NX, INCR: %v, expire %v then %v; want false then true", err, exp0.Val(), exp1.Val())
		}
		if v, _ := rdb.TTL(ctx, "rate:u2").Result(); v <= 59*time.Minute {
			t.Fatalf("TTL after EXPIRE NX in the transaction: %v, want about an hour", v)
		}
		_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Persist(ctx, "rate:u2")
			p.Incr(ctx, "rate:u2")
			return nil
		})
		wantPrefix(t, "PERSIST then INCR in one transaction", err, "EXECABORT")
		if n, _ := rdb.Get(ctx, "rate:u2").Int(); n != 2 {
			t.Fatalf("the aborted transaction applied its INCR: %d", n)
		}
	})
}

// TestSetGetDel drives SET of integers with its options, GETSET and
// GETDEL, and the types SET replaces or refuses.
func TestSetGetDel(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		str := func(what string, cmd interface{ Err() error }, want string) {
			t.Helper()
			var v string
			var err error
			switch c := cmd.(type) {
			case interface{ Result() (string, error) }:
				v, err = c.Result()
			case *redis.Cmd:
				v, err = c.Text()
			}
			if err != nil || v != want {
				t.Fatalf("%s: %q, %v; want %q", what, v, err, want)
			}
		}
		str("SET", rdb.Set(ctx, "k", 10, 0), "OK")
		str("GET", rdb.Get(ctx, "k"), "10")
		if v, err := rdb.Incr(ctx, "k").Result(); err != nil || v != 11 {
			t.Fatalf("INCR after SET: %d, %v", v, err)
		}
		str("GETSET", rdb.GetSet(ctx, "k", 0), "11")
		str("GET after GETSET", rdb.Get(ctx, "k"), "0")
		if err := rdb.SetNX(ctx, "k", 5, 0).Err(); err != nil {
			t.Fatal(err)
		}
		str("GET after SET NX of an existing key", rdb.Get(ctx, "k"), "0")
		if ok, _ := rdb.SetXX(ctx, "none", 5, 0).Result(); ok {
			t.Fatal("SET XX of a missing key set it")
		}
		str("SET EX", rdb.Set(ctx, "k", 7, time.Minute), "OK")
		if v, _ := rdb.TTL(ctx, "k").Result(); v != time.Minute {
			t.Fatalf("TTL after SET EX: %v", v)
		}
		str("SET KEEPTTL", rdb.Do(ctx, "SET", "k", 8, "KEEPTTL"), "OK")
		if v, _ := rdb.TTL(ctx, "k").Result(); v != time.Minute {
			t.Fatalf("TTL after SET KEEPTTL: %v", v)
		}
		str("SET", rdb.Set(ctx, "k", 9, 0), "OK")
		if v, _ := rdb.TTL(ctx, "k").Result(); v != -1 {
			t.Fatalf("TTL after SET without EX: %v, want -1 (SET removes the deadline)", v)
		}
		str("SET GET", rdb.Do(ctx, "SET", "k", 1, "GET"), "9")
		str("GETDEL", rdb.GetDel(ctx, "k"), "1")
		if err := rdb.Get(ctx, "k").Err(); err != redis.Nil {
			t.Fatalf("GET after GETDEL: %v", err)
		}
		if err := rdb.GetDel(ctx, "k").Err(); err != redis.Nil {
			t.Fatalf("GETDEL of a missing key: %v", err)
		}
		wantPrefix(t, "SET of a string", rdb.Set(ctx, "k", "hello", 0).Err(), "ERR value is not an integer")
		wantErr(t, "SET EX 0", rdb.Do(ctx, "SET", "k", 1, "EX", 0).Err(), "ERR invalid expire time in 'set' command")
		wantErr(t, "SET EX KEEPTTL", rdb.Do(ctx, "SET", "k", 1, "EX", 5, "KEEPTTL").Err(), "ERR syntax error")

		rdb.HIncrBy(ctx, "h", "f", 1)
		wantPrefix(t, "GETDEL of a hash", rdb.GetDel(ctx, "h").Err(), "WRONGTYPE")
		str("SET over a hash", rdb.Set(ctx, "h", 4, 0), "OK")
		if typ, _ := rdb.Type(ctx, "h").Result(); typ != "string" {
			t.Fatalf("TYPE after SET over a hash: %q", typ)
		}
		rdb.SAdd(ctx, "s", "m")
		wantPrefix(t, "GETSET of a set", rdb.GetSet(ctx, "s", 1).Err(), "WRONGTYPE")
		str("SET over a set", rdb.Set(ctx, "s", 2, 0), "OK")
		str("GET after SET over a set", rdb.Get(ctx, "s"), "2")
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "k", 1, 0)
			return nil
		})
		wantPrefix(t, "SET in a transaction", err, "EXECABORT")
	})
}
