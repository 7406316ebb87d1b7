package engine_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/sketch"
)

// eachEmbedded runs f on the model and a Pebble store: the engine's
// approx paths differ by whether the store reads from memory, and Pebble
// is the store that does (shardcounter.MemoryReader).
func eachEmbedded(t *testing.T, f func(t *testing.T, store shardcounter.CounterStore)) {
	t.Run("model", func(t *testing.T) { f(t, MustOpenStore(t)) })
	t.Run("pebble", func(t *testing.T) {
		s, err := pebble.Open(context.Background(), filepath.Join(t.TempDir(), "pebble"), pebble.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
}

func addApprox(counter, member string) shardcounter.Write {
	w := shardcounter.AddMember(counter, member)
	w.Kind = shardcounter.KindApprox
	return w
}

func within(v, want int64) bool {
	return math.Abs(float64(v-want)) <= 3*sketch.StdError*float64(want)+2
}

// TestApprox writes members of an approx counter from many writers
// through the group commit, the first write creating it, and reads its
// estimate strong, cached and in a batch.
func TestApprox(t *testing.T) {
	eachEmbedded(t, func(t *testing.T, store shardcounter.CounterStore) {
		e := MustNew(t, store, engine.Config{DefaultShards: 8, ApproxShards: 4})
		ctx := context.Background()
		const writers, each, distinct = 16, 200, 1500
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				var ws []shardcounter.Write
				for i := range each {
					ws = append(ws, addApprox("uv", fmt.Sprintf("u%d", (w*each+i)%distinct)))
				}
				res, err := e.WriteBatch(ctx, ws)
				if err != nil {
					t.Error(err)
					return
				}
				for _, r := range res {
					if r.Error != nil || !r.Applied || r.Changed == nil {
						t.Errorf("result %+v", r)
						return
					}
				}
			})
		}
		wg.Wait()
		c, err := e.GetCounter(ctx, "uv")
		if err != nil || c.Kind != shardcounter.KindApprox || c.Shards != 4 {
			t.Fatalf("GetCounter = %+v, %v; want the approx counter auto-create made", c, err)
		}
		v := read(t, e, "uv")
		if !within(v, distinct) {
			t.Fatalf("value %d, want %d within three standard errors", v, distinct)
		}
		_, sk, err := e.ReadSketches(ctx, "uv")
		if n, _ := sketch.Count(sk); err != nil || n != v {
			t.Fatalf("the sketches estimate %d (%v), the value is %d", n, err, v)
		}
		if r, err := e.ReadCounter(ctx, "uv", shardcounter.Cached); err != nil || r.Value != v {
			t.Fatalf("cached read = %+v, %v; want %d", r, err, v)
		}
		rs, err := e.ReadCounters(ctx, []string{"uv", "none"}, shardcounter.Strong)
		if err != nil || rs[0].Err != nil || rs[0].Reading.Value != v || rs[1].Err == nil {
			t.Fatalf("ReadCounters = %+v, %v", rs, err)
		}
		// A member already counted changes nothing; a write asking for the
		// value gets the estimate.
		w := addApprox("uv", "u1")
		w.WantValue = true
		res, err := e.WriteCounter(ctx, w)
		if err != nil || changed(res) || res.Value == nil || *res.Value != v {
			t.Fatalf("re-adding u1 = %+v, %v; want unchanged, value %d", res, err, v)
		}
	})
}

// TestApproxRefused checks what an approx counter does not take: a
// removal, a delta, and writes meant for another kind, and that a write
// meant for an approx counter does not land in a distinct one.
func TestApproxRefused(t *testing.T) {
	eachEmbedded(t, func(t *testing.T, store shardcounter.CounterStore) {
		e := MustNew(t, store, engine.Config{DefaultShards: 2})
		ctx := context.Background()
		if _, err := e.WriteCounter(ctx, addApprox("uv", "a")); err != nil {
			t.Fatal(err)
		}
		rm := shardcounter.RemoveMember("uv", "a")
		rm.Kind = shardcounter.KindApprox
		if _, err := e.WriteCounter(ctx, rm); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Fatalf("a removal meant for an approx counter: %v, want invalid_argument", err)
		}
		sadd := shardcounter.AddMember("uv", "b")
		sadd.Kind = shardcounter.KindDistinct
		if _, err := e.WriteCounter(ctx, shardcounter.AddMember("likes", "x")); err != nil {
			t.Fatal(err)
		}
		for _, w := range []shardcounter.Write{
			shardcounter.RemoveMember("uv", "a"), // no kind: the store refuses
			{Counter: "uv", Delta: 1},
			sadd,
			addApprox("likes", "y"),
		} {
			if _, err := e.WriteCounter(ctx, w); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
				t.Fatalf("WriteCounter(%+v): %v, want invalid_argument", w, err)
			}
		}
		if v := read(t, e, "uv"); v != 1 {
			t.Fatalf("uv = %d after refused writes, want 1", v)
		}
		if v := read(t, e, "likes"); v != 1 {
			t.Fatalf("likes = %d after refused writes, want 1", v)
		}
		if _, err := e.IsMember(ctx, "uv", "a"); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Fatalf("IsMember of an approx counter: %v, want invalid_argument", err)
		}
	})
}

// TestApproxMerge checks CountUnion (PFCOUNT of several keys) and
// MergeSketches (PFMERGE): the union of the sources, into a destination
// created with the first source's shard count.
func TestApproxMerge(t *testing.T) {
	eachEmbedded(t, func(t *testing.T, store shardcounter.CounterStore) {
		e := MustNew(t, store, engine.Config{DefaultShards: 2})
		ctx := context.Background()
		if _, _, err := e.CreateCounter(ctx, "a", shardcounter.CreateOptions{Shards: 3, Kind: shardcounter.KindApprox}); err != nil {
			t.Fatal(err)
		}
		var ws []shardcounter.Write
		for i := range 800 {
			ws = append(ws, addApprox("a", fmt.Sprintf("m%d", i)), addApprox("b", fmt.Sprintf("m%d", i+400)))
		}
		if _, err := e.WriteBatch(ctx, ws); err != nil {
			t.Fatal(err)
		}
		u, err := e.CountUnion(ctx, []string{"a", "b", "missing"})
		if err != nil || !within(u, 1200) {
			t.Fatalf("CountUnion = %d, %v; want about 1200", u, err)
		}
		c, err := e.MergeSketches(ctx, "ab", []string{"missing", "a", "b"})
		if err != nil || c.Shards != 3 || c.Kind != shardcounter.KindApprox {
			t.Fatalf("MergeSketches = %+v, %v; want an approx counter of a's 3 shards", c, err)
		}
		if v := read(t, e, "ab"); v != u {
			t.Fatalf("merged counter = %d, the union estimates %d", v, u)
		}
		if _, err := e.MergeSketches(ctx, "ab", []string{"a"}); err != nil || read(t, e, "ab") != u {
			t.Fatalf("merging a source again: %v, value %d, want %d", err, read(t, e, "ab"), u)
		}
		if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "sum", Delta: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.MergeSketches(ctx, "sum", []string{"a"}); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Fatalf("merging into a sum counter: %v, want invalid_argument", err)
		}
		if _, err := e.CountUnion(ctx, []string{"a", "sum"}); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Fatalf("CountUnion with a sum counter: %v, want invalid_argument", err)
		}
		if _, err := e.MergeSketches(ctx, "empty", nil); err != nil || read(t, e, "empty") != 0 {
			t.Fatalf("PFMERGE of no source: %v", err)
		}
		// Made with no shard count: one shard on Pebble (one writer, where
		// a shard buys nothing and costs a sketch per commit), the
		// default elsewhere.
		want := 2
		if m, ok := shardcounter.As[shardcounter.MemoryReader](store); ok && m.ReadsFromMemory() {
			want = 1
		}
		if _, err := e.WriteCounter(ctx, addApprox("new", "x")); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"empty", "new"} {
			if c, err := e.GetCounter(ctx, id); err != nil || c.Shards != want {
				t.Fatalf("%s made with %+v, %v; want %d shards", id, c, err, want)
			}
		}
	})
}
