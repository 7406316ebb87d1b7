package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/pebble"
)

// BenchmarkFlushZipf is one engine flush of a fixed batch of 64 writes on
// each embedded store: the writes go in one WriteBatch call, so they share
// one commit, and each op is that flush (folding, the store's Apply and
// its sync, the answers). The counters are drawn once, with a Zipf law
// (s=1.1), from 10,000 sum counters of 4 shards, so the batch folds as a
// flush of a skewed workload does. batch=sum is that batch; batch=mixed
// gives a quarter of its writes a fresh request id each op and sends
// another quarter as adds and removals of members of 100 distinct
// counters, so that the dedupe and membership rules are in the figure.
// It is the A/B of a store's write path in instructions:
//
//	scripts/bench-ab.sh -i -a REV ./engine 'BenchmarkFlushZipf/store=pebble/batch=sum$|BenchmarkFlushZipf/store=bolt/batch=sum$'
func BenchmarkFlushZipf(b *testing.B) {
	stores := []struct {
		name string
		open func(tb testing.TB) shardcounter.CounterStore
	}{
		{"pebble", func(tb testing.TB) shardcounter.CounterStore {
			s, err := pebble.Open(context.Background(), filepath.Join(tb.TempDir(), "pebble"), pebble.Options{})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { s.Close() })
			return s
		}},
		{"bolt", func(tb testing.TB) shardcounter.CounterStore {
			s, err := bolt.Open(context.Background(), filepath.Join(tb.TempDir(), "shardcounter.db"), bolt.Options{})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { s.Close() })
			return s
		}},
	}
	for _, st := range stores {
		for _, mixed := range []bool{false, true} {
			name := "store=" + st.name + "/batch=sum"
			if mixed {
				name = "store=" + st.name + "/batch=mixed"
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				s := st.open(b)
				mustCreateZipf(b, s)
				e, err := engine.New(s, engine.Config{})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close(ctx)
				ws := zipfBatch(mixed)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if mixed {
						for j := 0; j < len(ws); j += 4 {
							ws[j].RequestID = fmt.Sprint("r", i, "-", j)
						}
					}
					res, err := e.WriteBatch(ctx, ws)
					if err != nil {
						b.Fatal(err)
					}
					for j, r := range res {
						if r.Error != nil {
							b.Fatalf("write %d: %v", j, r.Error)
						}
					}
				}
			})
		}
	}
}

// mustCreateZipf creates the counters of zipfBatch: 10,000 sum counters of
// 4 shards and 100 distinct ones.
func mustCreateZipf(tb testing.TB, s shardcounter.CounterStore) {
	tb.Helper()
	sum := shardcounter.Spec{Shards: 4}
	distinct := shardcounter.Spec{Shards: 4, Kind: shardcounter.KindDistinct}
	var incs []shardcounter.Increment
	for i := range 10_000 {
		incs = append(incs, shardcounter.Increment{Counter: fmt.Sprint("z/", i), Delta: 1, Create: &sum})
	}
	for i := range 100 {
		incs = append(incs, shardcounter.Increment{Counter: fmt.Sprint("d/", i), Member: "m0", Delta: 1, Create: &distinct})
	}
	for len(incs) > 0 {
		n := min(len(incs), 1000)
		out, err := s.Apply(context.Background(), incs[:n])
		if err != nil {
			tb.Fatal(err)
		}
		for i, o := range out {
			if o.Err != nil {
				tb.Fatalf("create %s: %v", incs[i].Counter, o.Err)
			}
		}
		incs = incs[n:]
	}
}

// zipfBatch returns the fixed batch of BenchmarkFlushZipf: 64 writes of
// +1 or -1 on counters drawn with a Zipf law, the same on every call;
// mixed, every fourth write (from the second) is a member add or removal
// on one of the distinct counters.
func zipfBatch(mixed bool) []shardcounter.Write {
	rng := rand.New(rand.NewPCG(34, 64))
	z := rand.NewZipf(rng, 1.1, 1, 10_000-1)
	ws := make([]shardcounter.Write, 64)
	for j := range ws {
		ws[j] = shardcounter.Write{Counter: fmt.Sprint("z/", z.Uint64()), Delta: 1}
		if rng.IntN(4) == 0 {
			ws[j].Delta = -1
		}
		if mixed && j%4 == 1 {
			present := rng.IntN(2) == 0
			ws[j] = shardcounter.Write{Counter: fmt.Sprint("d/", rng.IntN(100)), Member: fmt.Sprint("m", rng.IntN(8)), Present: &present}
		}
	}
	return ws
}
