package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

func bound(v int64) *int64 { return &v }

// TestBoundedOneBatch queues, into one batch, decreases of a counter with
// a floor of 0 that arrive before the increases that make room for them
// (and increases of a counter with a ceiling before its decreases), some
// with request ids (never folded) and some folded: every write fits in
// some order, so every write applies.
func TestBoundedOneBatch(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, store shardcounter.CounterStore) {
		g := newGate(store, 10)
		e := MustNew(t, g, engine.Config{})
		g.releaseOnCleanup(t)
		ctx := context.Background()
		for id, opts := range map[string]shardcounter.CreateOptions{
			"floor":   {Shards: 4, Min: bound(0)},
			"ceiling": {Shards: 4, Max: bound(0)},
		} {
			if _, _, err := e.CreateCounter(ctx, id, opts); err != nil {
				t.Fatal(err)
			}
		}
		first := startHeld(t, g, e, shardcounter.Write{Counter: "other", Delta: 1})
		const n = 40
		results, errs, wait := queueWrites(t, e, 4*n, func(i int) shardcounter.Write {
			w := shardcounter.Write{Counter: "floor", Delta: -1}
			if i >= 2*n {
				w.Counter, i = "ceiling", i-2*n
				w.Delta = 1
			}
			if i >= n { // the second half undoes the first
				w.Delta = -w.Delta
			}
			if i%2 == 0 {
				w.RequestID = fmt.Sprint(i)
			}
			return w
		})
		close(g.hold)
		<-first
		wait()
		for i := range results {
			if errs[i] != nil || !results[i].Applied {
				t.Fatalf("write %d = %+v, %v; want applied: it fits once the batch's other writes apply", i, results[i], errs[i])
			}
		}
		for _, id := range []string{"floor", "ceiling"} {
			if got := read(t, e, id); got != 0 {
				t.Fatalf("%s = %d, want 0", id, got)
			}
		}
	})
}

// TestBoundedRefusesOnlyWhatDoesNotFit sends more decreases than a floor
// allows, folded and with request ids, into one batch: exactly the excess
// is refused, with out_of_range.
func TestBoundedRefusesOnlyWhatDoesNotFit(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, store shardcounter.CounterStore) {
		g := newGate(store, 10)
		e := MustNew(t, g, engine.Config{})
		g.releaseOnCleanup(t)
		ctx := context.Background()
		if _, _, err := e.CreateCounter(ctx, "stock", shardcounter.CreateOptions{Shards: 2, Min: bound(0), Max: bound(100)}); err != nil {
			t.Fatal(err)
		}
		if out, err := store.Apply(ctx, []shardcounter.Increment{{Counter: "stock", Delta: 25}}); err != nil || out[0].Err != nil {
			t.Fatal(err, out)
		}
		first := startHeld(t, g, e, shardcounter.Write{Counter: "other", Delta: 1})
		results, errs, wait := queueWrites(t, e, 40, func(i int) shardcounter.Write {
			w := shardcounter.Write{Counter: "stock", Delta: -1}
			if i%3 == 0 {
				w.RequestID = fmt.Sprint(i)
			}
			return w
		})
		close(g.hold)
		<-first
		wait()
		applied, refused := 0, 0
		for i := range results {
			switch {
			case errs[i] == nil && results[i].Applied:
				applied++
			case shardcounter.ErrorCode(errs[i]) == shardcounter.EOUTOFRANGE:
				refused++
			default:
				t.Fatalf("write %d = %+v, %v", i, results[i], errs[i])
			}
		}
		if applied != 25 || refused != 15 {
			t.Fatalf("applied %d, refused %d; want 25 and 15", applied, refused)
		}
		if got := read(t, e, "stock"); got != 0 {
			t.Fatalf("stock = %d, want 0", got)
		}
	})
}

// TestBoundedBurst has many clients hammer +1/−1 on a counter with a
// floor of 0 while another reads it: no strong read is below 0, and the
// value is the sum of the writes that applied.
func TestBoundedBurst(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, store shardcounter.CounterStore) {
		e := MustNew(t, store, engine.Config{})
		ctx := context.Background()
		if _, _, err := e.CreateCounter(ctx, "likes", shardcounter.CreateOptions{Shards: 8, Min: bound(0)}); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var sum int64
		var wg sync.WaitGroup
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-done:
					return
				default:
				}
				if v := read(t, e, "likes"); v < 0 {
					t.Errorf("strong read %d, below the floor", v)
					return
				}
			}
		}()
		for c := range 64 {
			wg.Go(func() {
				for i := range 30 {
					d := int64(1)
					if (c+i)%2 == 1 {
						d = -1
					}
					res, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "likes", Delta: d})
					switch {
					case err == nil && res.Applied:
						mu.Lock()
						sum += d
						mu.Unlock()
					case shardcounter.ErrorCode(err) != shardcounter.EOUTOFRANGE:
						t.Errorf("write %+d = %+v, %v", d, res, err)
					}
				}
			})
		}
		wg.Wait()
		done <- struct{}{}
		<-done
		if got := read(t, e, "likes"); got != sum || got < 0 {
			t.Fatalf("likes = %d, want %d, the applied writes", got, sum)
		}
	})
}
