package redis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestStrongReadHeldValue checks that a strong read returns a value the
// counter held. Writer w, a process of its own, adds 8^w and then takes
// it away, again and again, each write on a random shard and acknowledged
// before the next is sent. Whatever the interleaving, the counter then
// holds a sum of distinct powers of 8: in base 8 every digit is 0 or 1. A
// read that saw a writer's −8^w but not the +8^w acknowledged before it
// (the reads of different masters answering at different moments) has a
// digit that is neither: a value the counter never held.
func TestStrongReadHeldValue(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		const writers, readers = 12, 4
		ctx := context.Background()
		id := t.Name() + runID()
		storetest.MustCreate(t, MustOpen(t, dsn), id, 16)
		cycles := 150
		if testing.Short() {
			cycles = 40
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		for w := range writers {
			s := MustOpen(t, dsn)
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				x := int64(1) << (3 * w)
				for range cycles {
					for _, d := range []int64{x, -x} {
						if err := s.Add(ctx, id, d, rng.Uint64()); err != nil {
							t.Errorf("Add(%d): %v", d, err)
							return
						}
					}
				}
			})
		}
		var reads, bad atomic.Int64
		var once sync.Once
		var rwg sync.WaitGroup
		var rs []*redis.CounterStore
		for range readers {
			s := MustOpen(t, dsn)
			rs = append(rs, s)
			rwg.Go(func() {
				for !stop.Load() {
					r, err := s.ReadCounter(ctx, id)
					if err != nil {
						t.Errorf("ReadCounter: %v", err)
						return
					}
					reads.Add(1)
					if !held(r.Value, writers) {
						bad.Add(1)
						once.Do(func() {
							t.Errorf("strong read = %d (octal %s): a value the counter never held", r.Value, octal(r.Value))
						})
					}
				}
			})
		}
		wg.Wait()
		stop.Store(true)
		rwg.Wait()
		for _, s := range rs {
			t.Logf("reader stats: %+v", s.Stats())
		}
		if bad.Load() > 0 {
			t.Errorf("%d of %d strong reads returned a value the counter never held", bad.Load(), reads.Load())
		}
		if got := storetest.MustRead(t, MustOpen(t, dsn), id); got != 0 {
			t.Errorf("final value = %d, want 0", got)
		}
	})
}

// held reports whether v is a sum of distinct powers 8^w, w < writers.
func held(v int64, writers int) bool {
	if v < 0 || v >= int64(1)<<(3*writers) {
		return false
	}
	for ; v > 0; v >>= 3 {
		if v&7 > 1 {
			return false
		}
	}
	return true
}

func octal(v int64) string {
	if v < 0 {
		return "-" + fmt.Sprintf("%o", -v)
	}
	return fmt.Sprintf("%o", v)
}
