package storetest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// testFullShard checks that out of range is judged on the counter's
// total, never on one shard: a 2-shard counter holding +MaxInt64 on one
// shard and -MaxInt64 on the other (total 0) takes every +1 and -1,
// whatever shard it picks (or its request id picks), by Add and by Apply,
// alone, in batches and from many writers at once. Some other shard always
// has room when the total does, so a store places a write that its own
// shard cannot hold elsewhere (or moves value between shards) and stays
// exact: the total is the sum of the writes, every shard an int64, and a
// retried request id is still a duplicate. The same holds for a counter
// with bounds as wide as they go.
func testFullShard(t *testing.T, s shardcounter.CounterStore) {
	t.Run("Sum", func(t *testing.T) { testFullShardSpec(t, s, shardcounter.Spec{Shards: 2}) })
	t.Run("Bounded", func(t *testing.T) {
		testFullShardSpec(t, s, shardcounter.Spec{Shards: 2, Min: ptr(-math.MaxInt64), Max: ptr(math.MaxInt64)})
	})
}

func testFullShardSpec(t *testing.T, s shardcounter.CounterStore, spec shardcounter.Spec) {
	ctx := context.Background()
	id := prefix(t) + "c"
	if _, err := s.CreateCounter(ctx, id, spec); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, id, math.MaxInt64, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, id, -math.MaxInt64, 1); err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	ids := requestIDsOnShards(id, 2, 8)
	for i, w := range []struct {
		delta int64
		pick  uint64
		how   string
	}{
		{1, 0, "add"}, {1, 0, "apply"}, {-1, 1, "add"}, {-1, 1, "apply"},
		{-1, 1, "add"}, {-1, 1, "apply"}, {-1, 1, "apply"}, {1, 0, "id"},
		{1, 0, "id"}, {-1, 1, "id"}, {-1, 1, "id"}, {-1, 1, "id"},
		{1, 0, "add"}, {1, 0, "id"}, {-1, 1, "add"}, {-1, 0, "apply"},
	} {
		what := fmt.Sprintf("write %d (%+d on shard %d by %s)", i, w.delta, w.pick, w.how)
		switch w.how {
		case "add":
			if err := s.Add(ctx, id, w.delta, w.pick); err != nil {
				t.Fatalf("%s: %v; the total %d would be %d", what, err, want, want+w.delta)
			}
		case "apply", "id":
			inc := shardcounter.Increment{Counter: id, Delta: w.delta, Pick: w.pick}
			if w.how == "id" {
				inc.RequestID = ids[w.pick][0]
				ids[w.pick] = ids[w.pick][1:]
				inc.Pick = shard.PickFor(id, inc.RequestID)
			}
			out, err := s.Apply(ctx, []shardcounter.Increment{inc})
			if err != nil || out[0].Err != nil || out[0].Duplicate {
				t.Fatalf("%s: %v %+v; the total %d would be %d", what, err, out, want, want+w.delta)
			}
			if inc.RequestID != "" {
				out, err = s.Apply(ctx, []shardcounter.Increment{inc})
				if err != nil || out[0].Err != nil || !out[0].Duplicate {
					t.Fatalf("%s, retried: %v %+v, want a duplicate", what, err, out)
				}
			}
		}
		want += w.delta
		checkTotal(t, s, id, want, what)
	}

	// A batch of writes to both full shards.
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: id, Delta: 1, Pick: 0}, {Counter: id, Delta: 1, Pick: 0},
		{Counter: id, Delta: -1, Pick: 1}, {Counter: id, Delta: -1, Pick: 1},
		{Counter: id, Delta: -1, Pick: 1}, {Counter: id, Delta: 1, Pick: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil || o.Duplicate {
			t.Fatalf("batch item %d: %+v, want applied", i, o)
		}
	}
	checkTotal(t, s, id, want, "after a batch")

	// Many writers at once, each write on a random shard; every one fits
	// the total, so every one applies.
	const writers, each = 8, 25
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range each {
				d := int64(1)
				if r.IntN(2) == 0 {
					d = -1
				}
				out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: d, Pick: r.Uint64()}})
				if err != nil || out[0].Err != nil {
					t.Errorf("concurrent %+d: %v %+v", d, err, out)
					return
				}
				mu.Lock()
				want += d
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	checkTotal(t, s, id, want, "after concurrent writes")
}

// checkTotal checks that the counter reads want and its shards sum to it.
func checkTotal(tb testing.TB, s shardcounter.CounterStore, id string, want int64, what string) {
	tb.Helper()
	if got := MustRead(tb, s, id); got != want {
		tb.Fatalf("%s: value %d, want %d", what, got, want)
	}
	vals := MustShards(tb, s, id)
	if sum, ok := overflow.Sum(vals); !ok || sum != want {
		tb.Fatalf("%s: shards %v sum to %d (fits: %v), want %d", what, vals, sum, ok, want)
	}
}

// requestIDsOnShards returns, for each shard of an n-shard counter, k
// request ids whose writes land on it (shard.PickFor).
func requestIDsOnShards(counter string, n, k int) [][]string {
	out := make([][]string, n)
	for i, full := 0, 0; full < n; i++ {
		rid := fmt.Sprintf("full-%d", i)
		sh := shard.Of(shard.PickFor(counter, rid), n)
		if len(out[sh]) < k {
			if out[sh] = append(out[sh], rid); len(out[sh]) == k {
				full++
			}
		}
	}
	return out
}
