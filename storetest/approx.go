package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
	"github.com/shardcounter/shardcounter/sketch"
)

// The cases in this file check approx counters (KindApprox): each shard
// keeps the sketch of the members that hash to it, the value is the
// estimate of the union of the shards' sketches, an add that changes no
// sketch is Unchanged, sketches merge (PFMERGE, import) and survive
// reshards, and what an approx counter cannot take is refused as an item
// of its own.

// MustCreateApprox creates an approx counter or fails the test.
func MustCreateApprox(tb testing.TB, s shardcounter.CounterStore, id string, shards int) {
	tb.Helper()
	if _, err := s.CreateCounter(context.Background(), id, shardcounter.Spec{Shards: shards, Kind: shardcounter.KindApprox}); err != nil {
		tb.Fatalf("CreateCounter(%q, approx, %d): %v", id, shards, err)
	}
}

// MustSketches returns an approx counter's shard sketches, failing the
// test unless the store reads them.
func MustSketches(tb testing.TB, s shardcounter.CounterStore, id string) [][]byte {
	tb.Helper()
	_, shards, err := s.ReadSketches(context.Background(), id)
	if err != nil {
		tb.Fatalf("ReadSketches(%q): %v", id, err)
	}
	return shards
}

// CheckApprox fails the test unless the approx counter's value, read
// alone and in a batch, is the estimate of the union of its shards'
// sketches, and that estimate is within three standard errors (and 2) of
// want; it returns the value. Stores use it in their own tests too.
func CheckApprox(tb testing.TB, s shardcounter.CounterStore, id string, want int64) int64 {
	tb.Helper()
	shards := MustSketches(tb, s, id)
	fromShards, err := sketch.Count(shards)
	if err != nil {
		tb.Fatalf("sketches of %s: %v", id, err)
	}
	v := MustRead(tb, s, id)
	if v != fromShards {
		tb.Fatalf("value of %s = %d, but its %d shards' sketches estimate %d", id, v, len(shards), fromShards)
	}
	rs, err := s.ReadCounters(context.Background(), []string{id})
	if err != nil || rs[0] == nil || rs[0].Value != v {
		tb.Fatalf("ReadCounters(%q) = %+v, %v; ReadCounter said %d", id, rs, err, v)
	}
	if d := math.Abs(float64(v - want)); d > 3*sketch.StdError*float64(want)+2 {
		tb.Fatalf("value of %s = %d, %v away from %d: over three standard errors", id, v, d, want)
	}
	return v
}

func add(id, m string) shardcounter.Increment {
	return shardcounter.Increment{Counter: id, Member: m, Delta: 1}
}

func testApprox(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "visitors"
	MustCreateApprox(t, s, id, 4)
	if v := CheckApprox(t, s, id, 0); v != 0 {
		t.Fatalf("a new approx counter reads %d", v)
	}
	var batch []shardcounter.Increment
	for i := range 1000 {
		batch = append(batch, add(id, fmt.Sprintf("v%d", i)))
	}
	applyMembers(t, s, batch...)
	CheckApprox(t, s, id, 1000)

	// Each shard holds the members that hash to it, and nothing else.
	counts := make([]int64, 4)
	for i := range 1000 {
		counts[shard.Of(shard.ForMember(fmt.Sprintf("v%d", i)), 4)]++
	}
	for i, b := range MustSketches(t, s, id) {
		n, err := sketch.Count([][]byte{b})
		if err != nil || math.Abs(float64(n-counts[i])) > 3*sketch.StdError*float64(counts[i])+2 {
			t.Fatalf("shard %d's sketch estimates %d (%v), but %d members hash to it", i, n, err, counts[i])
		}
	}

	// Members already counted change nothing; a new one changes its shard.
	out := applyMembers(t, s, batch[:50]...)
	for i, o := range out {
		if !o.Unchanged || o.Duplicate {
			t.Fatalf("re-adding member %d: outcome %+v, want unchanged", i, o)
		}
	}
	if out := applyMembers(t, s, add(id, "new-visitor")); out[0].Unchanged {
		t.Fatalf("adding a new member to a sparse sketch: unchanged")
	}

	t.Run("Refused", func(t *testing.T) { testApproxRefused(t, s, id) })
	t.Run("Merge", func(t *testing.T) { testApproxMerge(t, s, id) })
	t.Run("Reshard", func(t *testing.T) { testApproxReshard(t, s, id) })
	t.Run("CreateOnWrite", func(t *testing.T) {
		cid := prefix(t) + "made"
		spec := &shardcounter.Spec{Shards: 3, Kind: shardcounter.KindApprox}
		out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: cid, Member: "a", Delta: 1, Create: spec}, {Counter: cid, Member: "b", Delta: 1, Create: spec}})
		if err != nil || out[0].Err != nil || out[1].Err != nil {
			t.Fatalf("create on write: %+v, %v", out, err)
		}
		if c, err := s.GetCounter(ctx, cid); err != nil || c.Kind != shardcounter.KindApprox || c.Shards != 3 {
			t.Fatalf("GetCounter(%q) = %+v, %v, want an approx counter of 3 shards", cid, c, err)
		}
		CheckApprox(t, s, cid, 2)
	})
	t.Run("Concurrent", func(t *testing.T) { testApproxConcurrent(t, s) })
	t.Run("Delete", func(t *testing.T) {
		if err := s.DeleteCounter(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.ReadSketches(ctx, id); !errors.Is(err, shardcounter.ErrNotFound) {
			t.Fatalf("ReadSketches of a deleted counter: %v, want ErrNotFound", err)
		}
		MustCreateApprox(t, s, id, 2)
		CheckApprox(t, s, id, 0) // nothing of the deleted counter's sketches is left
	})
}

// testApproxRefused checks that what an approx counter cannot take fails
// as an item of its own, beside an item that applies.
func testApproxRefused(t *testing.T, s shardcounter.CounterStore, id string) {
	ctx := context.Background()
	sum := prefix(t) + "sum"
	MustCreate(t, s, sum, 2)
	before := MustRead(t, s, id)
	bad := []shardcounter.Increment{
		{Counter: id, Member: "v1", Delta: -1},                                 // a removal
		{Counter: id, Delta: 5},                                                // a delta
		{Counter: id, Sketch: []byte{1, 2, 3}},                                 // a broken sketch
		{Counter: sum, Sketch: MustSketches(t, s, id)[0]},                      // a sketch on a sum counter
		{Counter: id, Member: "v1", Delta: 1, Kind: shardcounter.KindDistinct}, // an add meant for a set (SADD)
		{Counter: sum, Delta: 1, Kind: shardcounter.KindApprox},                // an item meant for an approx counter
	}
	for _, inc := range bad {
		out, err := s.Apply(ctx, []shardcounter.Increment{inc, {Counter: sum, Delta: 1}})
		if err != nil {
			t.Fatalf("Apply(%+v): the whole batch failed: %v", inc, err)
		}
		if !errors.Is(out[0].Err, shardcounter.ErrInvalid) {
			t.Fatalf("Apply(%+v): %+v, want ErrInvalid", inc, out[0])
		}
		if out[1].Err != nil {
			t.Fatalf("the item beside %+v failed too: %v", inc, out[1].Err)
		}
	}
	if v := MustRead(t, s, id); v != before {
		t.Fatalf("refused items changed the value: %d, was %d", v, before)
	}
	if v := MustRead(t, s, sum); v != int64(len(bad)) {
		t.Fatalf("the sum counter beside them = %d, want %d", v, len(bad))
	}
	for _, spec := range []shardcounter.Spec{
		{Shards: 2, Kind: shardcounter.KindApprox, Max: new(int64(10))},
		{Shards: 2, Kind: shardcounter.KindApprox, Window: &shardcounter.Window{Bucket: shardcounter.Duration(60e9), Retention: shardcounter.Duration(3600e9)}},
	} {
		if _, err := s.CreateCounter(ctx, prefix(t)+"bad", spec); !errors.Is(err, shardcounter.ErrInvalid) {
			t.Fatalf("CreateCounter(approx with %+v): %v, want ErrInvalid", spec, err)
		}
	}
	if _, _, err := s.ReadSketches(ctx, sum); !errors.Is(err, shardcounter.ErrInvalid) {
		t.Fatalf("ReadSketches of a sum counter: %v, want ErrInvalid", err)
	}
}

// testApproxMerge merges one counter's shards into another's (PFMERGE's
// step, and import's).
func testApproxMerge(t *testing.T, s shardcounter.CounterStore, id string) {
	other := prefix(t) + "other"
	MustCreateApprox(t, s, other, 2)
	var incs []shardcounter.Increment
	for i := 500; i < 1500; i++ { // half of them already in id
		incs = append(incs, add(other, fmt.Sprintf("v%d", i)))
	}
	applyMembers(t, s, incs...)
	dest := prefix(t) + "union"
	MustCreateApprox(t, s, dest, 4)
	var merges []shardcounter.Increment
	for _, src := range []string{id, other} {
		for i, b := range MustSketches(t, s, src) {
			if b != nil {
				merges = append(merges, shardcounter.Increment{Counter: dest, Sketch: b, Pick: uint64(i)})
			}
		}
	}
	applyMembers(t, s, merges...)
	union, err := sketch.Union(append(MustSketches(t, s, id), MustSketches(t, s, other)...))
	if err != nil {
		t.Fatal(err)
	}
	if v := CheckApprox(t, s, dest, 1501); v != union.Estimate() {
		t.Fatalf("merged counter = %d, the union of its sources estimates %d", v, union.Estimate())
	}
	out := applyMembers(t, s, merges[0])
	if !out[0].Unchanged {
		t.Fatalf("merging a sketch already merged: %+v, want unchanged", out[0])
	}
}

// testApproxReshard checks that reshards keep an approx counter's value
// exactly: the union of the same registers, however grouped.
func testApproxReshard(t *testing.T, s shardcounter.CounterStore, id string) {
	ctx := context.Background()
	want := MustRead(t, s, id)
	for _, n := range []int{2, 7, 1, 4} {
		c, err := s.ReshardCounter(ctx, id, n)
		if err != nil || c.Shards != n {
			t.Fatalf("ReshardCounter(%q, %d) = %+v, %v", id, n, c, err)
		}
		if got := len(MustSketches(t, s, id)); got != n {
			t.Fatalf("after a reshard to %d, %d shard sketches", n, got)
		}
		if v := MustRead(t, s, id); v != want {
			t.Fatalf("after a reshard to %d shards the value is %d, was %d", n, v, want)
		}
	}
}

// testApproxConcurrent adds overlapping members from several writers,
// with request ids and a reshard going on, and checks the estimate.
func testApproxConcurrent(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "hot"
	MustCreateApprox(t, s, id, 4)
	const writers, perWriter, distinct = 8, 40, 2000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for b := range perWriter {
				var incs []shardcounter.Increment
				for j := range 10 {
					i := (w*perWriter*10 + b*10 + j) * 7 % distinct // every writer covers members others cover too
					inc := add(id, fmt.Sprintf("u%d", i))
					inc.RequestID = fmt.Sprintf("w%d-%d-%d", w, b, j)
					incs = append(incs, inc)
				}
				out, err := s.Apply(ctx, incs)
				if err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				for _, o := range out {
					if o.Err != nil || o.Duplicate {
						t.Errorf("outcome %+v", o)
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for _, n := range []int{6, 3, 5} {
			if _, err := s.ReshardCounter(ctx, id, n); err != nil {
				t.Errorf("ReshardCounter(%d) under writes: %v", n, err)
			}
		}
	})
	wg.Wait()
	if !t.Failed() {
		CheckApprox(t, s, id, distinct)
	}
}

// RunApproxTwoStores adds members to one approx shard from two stores on
// one database, as two processes would: their in-process locks do not see
// each other, so only the store's concurrency control keeps one writer's
// read-modify-write of the sketch from dropping the other's registers.
// Every member must count: the shard's sketch must estimate what one
// sketch of all the members does (a union of registers does not depend on
// the order of the adds).
func RunApproxTwoStores(t *testing.T, a, b shardcounter.CounterStore) {
	id := prefix(t) + "uniques"
	MustCreateApprox(t, a, id, 1)
	const perStore, batch = 600, 20
	var wg sync.WaitGroup
	for w, s := range []shardcounter.CounterStore{a, b} {
		wg.Go(func() {
			for i := 0; i < perStore; i += batch {
				var incs []shardcounter.Increment
				for j := i; j < i+batch; j++ {
					incs = append(incs, add(id, fmt.Sprintf("w%d-%d", w, j)))
				}
				out, err := s.Apply(context.Background(), incs)
				if err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				for _, o := range out {
					if o.Err != nil || o.Unchanged {
						t.Errorf("a new member: outcome %+v", o)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var all []string
	for w := range 2 {
		for j := range perStore {
			all = append(all, fmt.Sprintf("w%d-%d", w, j))
		}
	}
	one, _, err := sketch.Apply(nil, all, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := sketch.Count([][]byte{one})
	for _, s := range []shardcounter.CounterStore{a, b} {
		if v := CheckApprox(t, s, id, 2*perStore); v != want {
			t.Fatalf("the counter estimates %d, one sketch of its %d members %d: registers were lost", v, len(all), want)
		}
	}
}
