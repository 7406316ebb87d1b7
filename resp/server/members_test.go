package server_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestSets(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		if n, err := rdb.SAdd(ctx, "post:1:likes", "alice", "bob", "alice").Result(); err != nil || n != 2 {
			t.Errorf("SADD alice bob alice: %d, %v; want 2", n, err)
		}
		if n, err := rdb.SAdd(ctx, "post:1:likes", "alice").Result(); err != nil || n != 0 {
			t.Errorf("SADD of a present member: %d, %v; want 0", n, err)
		}
		if ok, err := rdb.SIsMember(ctx, "post:1:likes", "alice").Result(); err != nil || !ok {
			t.Errorf("SISMEMBER alice: %v, %v; want true", ok, err)
		}
		if ok, err := rdb.SIsMember(ctx, "post:1:likes", "carol").Result(); err != nil || ok {
			t.Errorf("SISMEMBER carol: %v, %v; want false", ok, err)
		}
		if n, err := rdb.SCard(ctx, "post:1:likes").Result(); err != nil || n != 2 {
			t.Errorf("SCARD: %d, %v; want 2", n, err)
		}
		if n, err := rdb.SRem(ctx, "post:1:likes", "alice", "carol").Result(); err != nil || n != 1 {
			t.Errorf("SREM alice carol: %d, %v; want 1", n, err)
		}
		if n, err := rdb.SCard(ctx, "post:1:likes").Result(); err != nil || n != 1 {
			t.Errorf("SCARD after SREM: %d, %v; want 1", n, err)
		}
		if v, err := rdb.Get(ctx, "post:1:likes").Result(); err != nil || v != "1" {
			t.Errorf("GET of a distinct counter: %q, %v; want its member count", v, err)
		}
		if ok, err := rdb.SIsMember(ctx, "missing", "alice").Result(); err != nil || ok {
			t.Errorf("SISMEMBER of a missing key: %v, %v; want false", ok, err)
		}
		if n, err := rdb.SCard(ctx, "missing").Result(); err != nil || n != 0 {
			t.Errorf("SCARD of a missing key: %d, %v; want 0", n, err)
		}
		// Pipelined, the set commands of one connection apply in order.
		cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.SAdd(ctx, "post:2:likes", "dave")
			p.SRem(ctx, "post:2:likes", "dave")
			p.SAdd(ctx, "post:2:likes", "erin")
			p.SIsMember(ctx, "post:2:likes", "dave")
			p.SCard(ctx, "post:2:likes")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got := []any{cmds[0].(*redis.IntCmd).Val(), cmds[1].(*redis.IntCmd).Val(), cmds[2].(*redis.IntCmd).Val(),
			cmds[3].(*redis.BoolCmd).Val(), cmds[4].(*redis.IntCmd).Val()}
		want := []any{int64(1), int64(1), int64(1), false, int64(1)}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("pipelined set commands: got %v, want %v", got, want)
				break
			}
		}

		// The kinds do not mix, as Redis strings and sets do not.
		rdb.Incr(ctx, "views")
		wantPrefix(t, "INCR of a distinct counter", rdb.Incr(ctx, "post:1:likes").Err(), "WRONGTYPE Operation against a key holding the wrong kind of value")
		wantPrefix(t, "SADD to a sum counter", rdb.SAdd(ctx, "views", "x").Err(), "WRONGTYPE Operation against a key holding the wrong kind of value")
		wantPrefix(t, "SCARD of a sum counter", rdb.SCard(ctx, "views").Err(), "WRONGTYPE Operation against a key holding the wrong kind of value")
		wantPrefix(t, "SISMEMBER of a sum counter", rdb.SIsMember(ctx, "views", "x").Err(), "WRONGTYPE Operation against a key holding the wrong kind of value")
		wantPrefix(t, "SADD empty member", rdb.SAdd(ctx, "post:1:likes", "").Err(), "ERR member is empty")
		wantErr(t, "SADD arity", rdb.Do(ctx, "SADD", "post:1:likes").Err(), "ERR wrong number of arguments for 'sadd' command")
		if n, err := rdb.SCard(ctx, "post:1:likes").Result(); err != nil || n != 1 {
			t.Errorf("SCARD after refused writes: %d, %v; want 1", n, err)
		}
		if err := rdb.Do(ctx, "SC.CREATE", "explicit", "KIND", "distinct").Err(); err != nil {
			t.Fatal(err)
		}
		if n, err := rdb.SAdd(ctx, "explicit", "a").Result(); err != nil || n != 1 {
			t.Errorf("SADD to a counter made by SC.CREATE KIND distinct: %d, %v", n, err)
		}
	})
}
