package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestRemovedStateLeavesNoKeys removes idle limit states and checks what
// LimitSweep cannot see: that no key of the state is left (its shards,
// its request ids, its metadata, its index entry); that a store still
// caching the removed state's layout takes from a fresh key; and that a
// removal whose second step never ran (the metadata and index entry put
// back, as a process stopped between the steps leaves them) is finished
// by whoever meets the state, a read or a take, which then see no state.
func TestRemovedStateLeavesNoKeys(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := storetest.NewClock(time.Unix(1_800_000_000, 0))
		open := func() *redis.CounterStore {
			s, err := redis.Open(ctx, dsn, redis.Options{Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		s, cached := open(), open()
		rc := redis.Client(s)
		for _, ps := range []string{"fixed 3/1m", "sliding 4/1m bucket 10s", "gcra 2/1m burst 3"} {
			p, _ := shardcounter.ParseLimitPolicy(ps)
			p = p.WithDefaults()
			id := shardcounter.LimitKeyID("rm"+runID(), p, "k")
			take := shardcounter.Increment{Counter: id, Take: &shardcounter.LimitTake{Policy: p, Cost: 1},
				Create: &shardcounter.Spec{Shards: p.StateShards(), Kind: shardcounter.KindSum}}
			takeID := take
			takeID.RequestID = "r1"
			mustTake(t, cached, takeID, p.Quota()-1)
			mustTake(t, s, take, p.Quota()-2)
			var keys []string
			for i := range p.StateShards() {
				keys = append(keys, redis.ShardKey(t, s, id, i))
			}
			keys = append(keys, keys[0]+":ids")
			meta, index := redis.MetaKey(s, id), redis.IndexKey(s, id)
			m := rc.HGetAll(ctx, meta).Val()

			clk.Advance(2 * time.Minute)
			mustRemove(t, s, id, p)
			for _, k := range append(keys, meta) {
				if n := rc.Exists(ctx, k).Val(); n != 0 {
					t.Fatalf("%s: key %q of a removed state is left", ps, k)
				}
			}
			if err := rc.ZScore(ctx, index, id).Err(); err != goredis.Nil {
				t.Fatalf("%s: the removed state's index entry: %v; want none", ps, err)
			}
			// cached still holds the removed state's layout.
			mustTake(t, cached, take, p.Quota()-1)

			// A removal stopped before its second step: the state's
			// metadata and index entry are there, its shards are not.
			clk.Advance(2 * time.Minute)
			unfinished := func() {
				m = rc.HGetAll(ctx, meta).Val()
				mustRemove(t, s, id, p)
				if err := rc.HSet(ctx, meta, m).Err(); err != nil {
					t.Fatal(err)
				}
				if err := rc.ZAdd(ctx, index, goredis.Z{Member: id}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			unfinished()
			if r, err := open().ReadCounters(ctx, []string{id}); err != nil || r[0] != nil {
				t.Fatalf("%s: a read of a state whose removal stopped: %+v, %v; want none", ps, r, err)
			}
			if rc.Exists(ctx, meta).Val() != 0 || rc.ZScore(ctx, index, id).Err() != goredis.Nil {
				t.Fatalf("%s: a read left the metadata or index entry of a removed state", ps)
			}
			mustTake(t, s, take, p.Quota()-1)
			clk.Advance(2 * time.Minute)
			unfinished()
			mustTake(t, open(), take, p.Quota()-1)
			mustTake(t, cached, takeID, p.Quota()-2) // r1 went with the state: a take of its own
			if got := rc.HGet(ctx, meta, "i").Val(); got == m["i"] || got == "" {
				t.Fatalf("%s: the state taken from after the removal has incarnation %q; want a new one", ps, got)
			}
			if err := rc.ZScore(ctx, index, id).Err(); err != nil {
				t.Fatalf("%s: the index entry of a state made again: %v", ps, err)
			}
		}
	})
}

// mustTake takes inc and checks it was allowed with remaining left.
func mustTake(t *testing.T, s shardcounter.CounterStore, inc shardcounter.Increment, remaining int64) {
	t.Helper()
	out, err := s.Apply(context.Background(), []shardcounter.Increment{inc})
	if err != nil || out[0].Err != nil || !out[0].Limit.Allowed || out[0].Limit.Remaining != remaining {
		t.Fatalf("a take: %+v, %v; want allowed with %d remaining", out, err, remaining)
	}
}

// mustRemove removes the idle state id and checks it was removed.
func mustRemove(t *testing.T, s shardcounter.CounterStore, id string, p shardcounter.LimitPolicy) {
	t.Helper()
	out, err := s.Apply(context.Background(), []shardcounter.Increment{{Counter: id, Take: &shardcounter.LimitTake{Policy: p, Remove: true}}})
	if err != nil || out[0].Err != nil || out[0].Skipped {
		t.Fatalf("a removal of an idle state: %+v, %v; want removed", out, err)
	}
}

// TestSweepRemoves runs the engine's sweeper over Redis: a pass removes
// the idle states of a defined limit's keys and keeps the one taken in
// the current window, and a key taken again after its removal starts
// afresh.
func TestSweepRemoves(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := storetest.NewClock(time.Unix(1_800_000_000, 0))
		s, err := redis.Open(ctx, dsn, redis.Options{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		e, err := engine.New(s, engine.Config{Now: clk.Now, LimitSweepInterval: time.Hour}) // passes only when the test runs them
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close(ctx)
		name := "sweep" + runID()
		p, _ := shardcounter.ParseLimitPolicy("fixed 3/10s")
		if _, _, err := e.CreateLimit(ctx, name, p); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"u1", "u2"} {
			if r, err := e.Take(ctx, name, key, 2, ""); err != nil || !r.Allowed {
				t.Fatalf("Take(%s) = %+v, %v", key, r, err)
			}
		}
		clk.Advance(10 * time.Second)
		if r, err := e.Take(ctx, name, "u2", 1, ""); err != nil || !r.Allowed || r.Remaining != 2 {
			t.Fatalf("Take(u2) in the next window = %+v, %v", r, err)
		}
		if n, err := e.SweepLimits(ctx); err != nil || n != 1 {
			t.Fatalf("SweepLimits = %d, %v; want 1 removed", n, err)
		}
		p = p.WithDefaults()
		exists := func(key string) bool {
			r, err := s.ReadCounters(ctx, []string{shardcounter.LimitKeyID(name, p, key)})
			if err != nil {
				t.Fatal(err)
			}
			return r[0] != nil
		}
		if exists("u1") || !exists("u2") {
			t.Fatalf("after the sweep: u1's idle state there %v, u2's taken one there %v", exists("u1"), exists("u2"))
		}
		if r, err := e.Take(ctx, name, "u1", 3, ""); err != nil || !r.Allowed || r.Remaining != 0 {
			t.Errorf("a take after the removal = %+v, %v; want a fresh key's", r, err)
		}
	})
}
