package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// load runs writers goroutines, each doing n writes of random amounts (both
// signs) through Add and Apply, and returns the sum of the acknowledged
// writes per counter. Any error fails the test: with no faults injected,
// every write must be acknowledged.
func load(t *testing.T, s shardcounter.CounterStore, counters []string, writers, n int, during func()) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	sums := make(map[string]int64)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			local := make(map[string]int64)
			for i := 0; i < n && !failed.Load(); i++ {
				id := counters[rng.IntN(len(counters))]
				amount := rng.Int64N(2001) - 1000
				if amount == 0 {
					amount = 1
				}
				if rng.IntN(2) == 0 {
					if err := s.Add(ctx, id, amount, rng.Uint64()); err != nil {
						failed.Store(true)
						t.Errorf("Add(%q, %d): %v", id, amount, err)
						return
					}
					local[id] += amount
					continue
				}
				batch := make([]shardcounter.Increment, 1+rng.IntN(8))
				for j := range batch {
					batch[j] = shardcounter.Increment{Counter: counters[rng.IntN(len(counters))], Delta: rng.Int64N(201) - 100, Pick: rng.Uint64()}
					if batch[j].Delta == 0 {
						batch[j].Delta = -7
					}
				}
				out, err := s.Apply(ctx, batch)
				if err != nil {
					failed.Store(true)
					t.Errorf("Apply: %v", err)
					return
				}
				for j, o := range out {
					if o.Err != nil || o.Duplicate {
						failed.Store(true)
						t.Errorf("Apply item %+v: %+v", batch[j], o)
						return
					}
					local[batch[j].Counter] += batch[j].Delta
				}
			}
			mu.Lock()
			for id, v := range local {
				sums[id] += v
			}
			mu.Unlock()
		})
	}
	done := make(chan struct{})
	if during != nil {
		go func() { defer close(done); during() }()
	} else {
		close(done)
	}
	wg.Wait()
	<-done
	return sums
}

func scale(short, long int) int {
	if testing.Short() {
		return short
	}
	return long
}

func testExactness(t *testing.T, s shardcounter.CounterStore, opts Options) {
	ids := []string{prefix(t) + "hot", prefix(t) + "warm", prefix(t) + "one"}
	MustCreate(t, s, ids[0], 16)
	MustCreate(t, s, ids[1], 3)
	MustCreate(t, s, ids[2], 1)
	stop := make(chan struct{})
	var reads sync.WaitGroup
	reads.Go(func() { // reads during the load must never fail
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.ReadCounter(context.Background(), ids[0]); err != nil {
				t.Errorf("ReadCounter during writes: %v", err)
				return
			}
		}
	})
	sums := load(t, s, ids, 16, opts.scaled(scale(30, 200)), nil)
	close(stop)
	reads.Wait()
	for _, id := range ids {
		if got := MustRead(t, s, id); got != sums[id] {
			t.Errorf("%s = %d, want %d (the sum of the acknowledged writes)", id, got, sums[id])
		}
	}
}

func testConcurrentDuplicates(t *testing.T, s shardcounter.CounterStore) {
	id := prefix(t) + "c"
	MustCreate(t, s, id, 8)
	var applied atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for r := range scale(5, 20) {
				rid := fmt.Sprintf("req-%d", r)
				out, err := s.Apply(context.Background(), []shardcounter.Increment{
					{Counter: id, Delta: 1, Pick: uint64(w), RequestID: rid},
				})
				if err != nil || out[0].Err != nil {
					t.Errorf("Apply: %v %+v", err, out)
					return
				}
				if !out[0].Duplicate {
					applied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	want := int64(scale(5, 20))
	if got := applied.Load(); got != want {
		t.Errorf("%d writes reported applied, want %d (one per request id)", got, want)
	}
	if got := MustRead(t, s, id); got != want {
		t.Errorf("value = %d, want %d", got, want)
	}
}

func testReshardUnderWrites(t *testing.T, s shardcounter.CounterStore, opts Options) {
	ids := []string{prefix(t) + "a", prefix(t) + "b"}
	MustCreate(t, s, ids[0], 4)
	MustCreate(t, s, ids[1], 1)
	var reshards int
	sums := load(t, s, ids, 8, opts.scaled(scale(30, 150)), func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for range scale(10, 40) {
			n := 1 + rng.IntN(32)
			if _, err := s.ReshardCounter(context.Background(), ids[rng.IntN(2)], n); err != nil {
				t.Errorf("ReshardCounter(%d): %v", n, err)
				return
			}
			reshards++
		}
	})
	for _, id := range ids {
		if got := MustRead(t, s, id); got != sums[id] {
			t.Errorf("%s = %d after %d reshards under writes, want %d", id, got, reshards, sums[id])
		}
	}
}
