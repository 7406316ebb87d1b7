package redis_test

import (
	"context"
	"fmt"
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
// layout cache is shared as in a long-running server.
func TestSharedStore(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		s := MustOpen(t, dsn)
		storetest.RunCounterStore(t, func(tb testing.TB) shardcounter.CounterStore { return s }, suiteOptions(dsn))
	})
}

// suiteOptions says what the store offers: on a cluster, ReadCounters is
// linearizable per counter, not one snapshot across counters on several
// masters (docs/REDIS.md, Reads), and only writes to counters of one
// shard come with their totals (totals.go, TestTotalsAndCollects).
func suiteOptions(dsn string) storetest.Options {
	return storetest.Options{
		NoBatchSnapshot: strings.HasPrefix(dsn, "redis+cluster:"),
		Totals:          !strings.HasPrefix(dsn, "redis+cluster:"),
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
		apply := func() shardcounter.Outcome {
			t.Helper()
			out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 1, Pick: shard.PickFor(id, "r"), RequestID: "r"}})
			if err != nil || out[0].Err != nil {
				t.Fatalf("Apply: %v %+v", err, out)
			}
			return out[0]
		}
		start := time.Now()
		if apply().Duplicate {
			t.Fatal("first write reported duplicate")
		}
		if !apply().Duplicate && time.Since(start) < window {
			t.Fatal("repeat within the window was applied")
		}
		time.Sleep(window + 100*time.Millisecond)
		if apply().Duplicate {
			t.Fatal("repeat after the window is still a duplicate")
		}
		if got := storetest.MustRead(t, s, id); got != 2 {
			t.Fatalf("value = %d, want 2", got)
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
