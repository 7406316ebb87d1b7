package redis_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/shard"
	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

func TestCounterStore(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		storetest.RunCounterStore(t, func(tb testing.TB) shardcounter.CounterStore { return MustOpen(tb, dsn) }, suiteOptions(dsn))
	})
}

// TestSharedStore runs the suite with one store for every subtest, so the
// layout cache is shared as in a long-running server. The differential
// test, which opens a store of its own, ran in TestCounterStore.
func TestSharedStore(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		s := MustOpen(t, dsn)
		opts := suiteOptions(dsn)
		opts.NoDifferential = true
		storetest.RunCounterStore(t, func(tb testing.TB) shardcounter.CounterStore { return s }, opts)
	})
}

// suiteOptions says what the store offers: on a cluster, ReadCounters is
// linearizable per counter, not one snapshot across counters on several
// masters (docs/REDIS.md, Reads), and only writes to counters of one
// shard come with their totals (totals.go, TestTotalsAndCollects), and
// bounded items only on counters whose shards share one slot (bound.go).
// Request ids age by the server's clock (Options.Now), and the items of a
// counter after one that waits for a rebalance apply in a later script.
func suiteOptions(dsn string) storetest.Options {
	return storetest.Options{
		SplitBatches:            true,
		NoBatchSnapshot:         strings.HasPrefix(dsn, "redis+cluster:"),
		Totals:                  !strings.HasPrefix(dsn, "redis+cluster:"),
		BoundsOneSlot:           strings.HasPrefix(dsn, "redis+cluster:"),
		RequestIDsOnServerClock: true,
		BucketPartsPerShard:     true,
		OpenWithClock: func(tb testing.TB, now func() time.Time) shardcounter.CounterStore {
			s, err := redis.Open(context.Background(), dsn, redis.Options{Now: now})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { s.Close() })
			return s
		},
	}
}

// TestDedupeAcrossReshard retries a write with a request id after the
// counter's shard count changed, up and down: the retry lands on another
// shard but is still found a duplicate.
func TestDedupeAcrossReshard(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := MustOpen(t, dsn)
		id := t.Name() + runID()
		storetest.MustCreate(t, s, id, 4)
		apply := func(rid string) shardcounter.Outcome {
			t.Helper()
			out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 10, Pick: shard.PickFor(id, rid), RequestID: rid}})
			if err != nil || out[0].Err != nil {
				t.Fatalf("Apply(%s): %v %+v", rid, err, out)
			}
			return out[0]
		}
		var rids []string
		for i := range 20 {
			rid := "req-" + string(rune('a'+i))
			rids = append(rids, rid)
			if apply(rid).Duplicate {
				t.Fatalf("first write of %s reported duplicate", rid)
			}
		}
		for _, n := range []int{7, 2, 16, 1, 4} {
			if _, err := s.ReshardCounter(ctx, id, n); err != nil {
				t.Fatal(err)
			}
			other := MustOpen(t, dsn) // another process, with no cached layout
			for _, rid := range rids {
				out, err := other.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 10, Pick: shard.PickFor(id, rid), RequestID: rid}})
				if err != nil || out[0].Err != nil || !out[0].Duplicate {
					t.Fatalf("retry of %s after reshard to %d: %v %+v, want duplicate", rid, n, err, out)
				}
			}
			if got := storetest.MustRead(t, s, id); got != 200 {
				t.Fatalf("value after reshard to %d and retries = %d, want 200", n, got)
			}
		}
	})
}

// TestSetDedupeWindow checks that the window the engine sets is the
// request ids' time to live. Redis ages ids by its own clock, so the test
// waits the (short) window out in real time.
func TestSetDedupeWindow(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := MustOpen(t, dsn)
		const window = time.Second
		s.SetDedupeWindow(window)
		id := t.Name() + runID()
		storetest.MustCreate(t, s, id, 2)
		// Every write goes to one shard, so that its set of ids outlives
		// r: r must expire by its own time, not with the set.
		apply := func(rid string) shardcounter.Outcome {
			t.Helper()
			out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 1, Pick: shard.PickFor(id, "r"), RequestID: rid}})
			if err != nil || out[0].Err != nil {
				t.Fatalf("Apply: %v %+v", err, out)
			}
			return out[0]
		}
		start := time.Now()
		if apply("r").Duplicate {
			t.Fatal("first write reported duplicate")
		}
		if !apply("r").Duplicate && time.Since(start) < window {
			t.Fatal("repeat within the window was applied")
		}
		time.Sleep(window / 2)
		if apply("r2").Duplicate {
			t.Fatal("first write of r2 reported duplicate")
		}
		time.Sleep(time.Until(start.Add(window + 100*time.Millisecond)))
		if apply("r").Duplicate {
			t.Fatal("repeat after the window is still a duplicate")
		}
		if got := storetest.MustRead(t, s, id); got != 3 {
			t.Fatalf("value = %d, want 3", got)
		}
	})
}

// TestRequestIDSetsExpire checks that a shard's set of request ids
// expires with the newest id in it: a shard that stops getting ids must
// not keep them for ever. A shorter window set later does not cut the
// life of ids recorded under the longer one.
func TestRequestIDSetsExpire(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := MustOpen(t, dsn)
		s.SetDedupeWindow(time.Hour)
		id := t.Name() + runID()
		storetest.MustCreate(t, s, id, 1)
		out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 1, RequestID: "r1"}})
		if err != nil || out[0].Err != nil {
			t.Fatalf("Apply: %+v, %v", out, err)
		}
		key := redis.ShardKey(t, s, id, 0) + ":ids"
		ttl, err := redis.Client(s).PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 || ttl > time.Hour {
			t.Fatalf("PTTL of the request-id set = %v, want within (0, 1h]", ttl)
		}
		s.SetDedupeWindow(time.Minute)
		if out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 1, RequestID: "r2"}}); err != nil || out[0].Err != nil {
			t.Fatalf("Apply: %+v, %v", out, err)
		}
		if ttl, err = redis.Client(s).PTTL(ctx, key).Result(); err != nil || ttl < 50*time.Minute {
			t.Fatalf("PTTL after a shorter window = %v, %v; want the hour of r1 kept", ttl, err)
		}
	})
}

// TestListMerge pages through 100 counters spread over the index's
// buckets with several page sizes: each comes once, in byte order.
func TestListMerge(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := MustOpen(t, dsn)
		p := t.Name() + runID() + "/"
		var want []string
		for i := range 100 {
			id := fmt.Sprintf("%s%x", p, i*7919%1000)
			storetest.MustCreate(t, s, id, 1)
			want = append(want, id)
		}
		slices.Sort(want)
		for _, limit := range []int{1, 7, 50, 1000} {
			var got []string
			after := ""
			for {
				cs, err := s.ListCounters(ctx, p, after, limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(cs) > limit {
					t.Fatalf("page of %d for limit %d", len(cs), limit)
				}
				if len(cs) == 0 {
					break
				}
				for _, c := range cs {
					got = append(got, c.ID)
				}
				after = cs[len(cs)-1].ID
			}
			if !slices.Equal(got, want) {
				t.Fatalf("limit %d: listed %d counters %v, want %d", limit, len(got), got, len(want))
			}
		}
	})
}

// TestEngineStrongReads runs the linearizability cases through an engine
// over the store, one store read in flight, so that strong reads gather
// into ReadCounters calls: per counter on a cluster, that is still
// linearizable.
func TestEngineStrongReads(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		storetest.RunStrongReads(t, storetest.ThroughEngine(t, MustOpen(t, dsn), engine.Config{MaxReadsInFlight: 1}))
	})
}

// TestTxnShortOfRoom sends a transaction one of whose items finds its
// shard short of the room its allowance keeps for the total (redis/
// allowance.go): after the rebalance it asks for, each item of the
// transaction has applied once. (That no item is visible before the
// others, the script's reserve pass, no test here observes.)
func TestTxnShortOfRoom(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := MustOpen(t, dsn)
		x, y := t.Name()+runID()+"x", t.Name()+runID()+"y"
		storetest.MustCreate(t, s, x, 16)
		storetest.MustCreate(t, s, y, 2)
		const pick = 7
		// Shard pick of y spends nearly all of its room up.
		near := int64(math.MaxInt64/2 - 5)
		if out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: y, Delta: near, Pick: pick}}); err != nil || out[0].Err != nil {
			t.Fatalf("Apply: %+v, %v", out, err)
		}
		out, err := s.Apply(ctx, []shardcounter.Increment{
			{Counter: x, Delta: 1, Txn: 1},
			{Counter: y, Delta: 100, Pick: pick, Txn: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range out {
			if o.Err != nil || o.Duplicate {
				t.Fatalf("outcome %d = %+v", i, o)
			}
		}
		if got := storetest.MustRead(t, s, x); got != 1 {
			t.Errorf("%s = %d, want 1: an item of the transaction applied before the rebalance and again after it", x, got)
		}
		if got := storetest.MustRead(t, s, y); got != near+100 {
			t.Errorf("%s = %d, want %d", y, got, near+100)
		}
	})
}
