package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/storetest"
)

// slowReads wraps a real store whose reads take a second of bubble time
// and are counted. Make it inside the bubble.
type slowReads struct {
	shardcounter.CounterStore
	reads atomic.Int64 // counters read
	calls atomic.Int64 // store calls
}

func (s *slowReads) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	s.reads.Add(1)
	s.calls.Add(1)
	time.Sleep(time.Second)
	return s.CounterStore.ReadCounter(ctx, id)
}

func (s *slowReads) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	s.reads.Add(int64(len(ids)))
	s.calls.Add(1)
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.CounterStore.ReadCounters(ctx, ids)
}

// TestCachedReadMissesCollapse starts many cached reads of a counter with
// no rollup at once: one store read serves them all.
func TestCachedReadMissesCollapse(t *testing.T) {
	store := MustOpenStore(t)
	storetest.MustCreate(t, store, "c", 4)
	synctest.Test(t, func(t *testing.T) {
		s := &slowReads{CounterStore: store}
		e := MustStart(t, s, engine.Config{})
		defer e.Close(context.Background())
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if _, err := e.ReadCounter(context.Background(), "c", shardcounter.Cached); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := s.reads.Load(); got != 1 {
			t.Fatalf("50 concurrent cached misses made %d store reads, want 1", got)
		}
	})
}

// TestCachedReadMissesGather starts cached reads of 50 different
// counters at once with one store read allowed in flight: the first read
// goes alone, and the misses that queued while it ran go together in the
// next.
func TestCachedReadMissesGather(t *testing.T) {
	store := MustOpenStore(t)
	for i := range 50 {
		storetest.MustCreate(t, store, fmt.Sprint(i), 2)
	}
	synctest.Test(t, func(t *testing.T) {
		s := &slowReads{CounterStore: store}
		e := MustStart(t, s, engine.Config{MaxReadsInFlight: 1})
		defer e.Close(context.Background())
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				r, err := e.ReadCounter(context.Background(), fmt.Sprint(i), shardcounter.Cached)
				if err != nil || r.ID != fmt.Sprint(i) {
					t.Error(r, err)
				}
			})
		}
		wg.Wait()
		if calls, reads := s.calls.Load(), s.reads.Load(); calls != 2 || reads != 50 {
			t.Fatalf("50 concurrent misses of different counters made %d store calls reading %d counters, want 2 calls reading 50", calls, reads)
		}
	})
}

// TestCachedReadFetcherGivesUp cancels a read while its store call, which
// also carries another read's counter, is in flight: the other read
// still gets its reading, from a store call of its own.
func TestCachedReadFetcherGivesUp(t *testing.T) {
	store := MustOpenStore(t)
	for _, id := range []string{"a", "b"} {
		storetest.MustCreate(t, store, id, 2)
	}
	synctest.Test(t, func(t *testing.T) {
		s := &slowReads{CounterStore: store}
		e := MustStart(t, s, engine.Config{MaxReadsInFlight: 1})
		defer e.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		done := make(chan error)
		go func() {
			_, err := e.ReadCounters(ctx, []string{"a", "b"}, shardcounter.Cached)
			done <- err
		}()
		synctest.Wait() // the first read's store call is in flight
		r, err := e.ReadCounter(context.Background(), "b", shardcounter.Cached)
		if err != nil || r.ID != "b" {
			t.Fatalf("the read that waited: %v, %v; want b's reading", r, err)
		}
		<-done
		if calls := s.calls.Load(); calls != 2 {
			t.Fatalf("%d store calls, want 2: the abandoned one and the retry", calls)
		}
	})
}

// TestCachedReadStampedBeforeRead checks that a rollup's as_of is the
// moment before its store read began: a reading stamped after the read
// would claim to hold writes acknowledged while the read ran.
func TestCachedReadStampedBeforeRead(t *testing.T) {
	store := MustOpenStore(t)
	storetest.MustCreate(t, store, "c", 4)
	synctest.Test(t, func(t *testing.T) {
		e := MustStart(t, &slowReads{CounterStore: store}, engine.Config{MaxStaleness: time.Minute})
		defer e.Close(context.Background())
		for _, c := range []shardcounter.Consistency{shardcounter.Cached, shardcounter.Strong} {
			start := time.Now()
			if _, err := e.ReadCounter(context.Background(), "c", c); err != nil {
				t.Fatal(err)
			}
			r, err := e.ReadCounter(context.Background(), "c", shardcounter.Cached)
			if err != nil {
				t.Fatal(err)
			}
			if !r.AsOf.Equal(start) {
				t.Fatalf("after a %s read that began at %v, the rollup is as of %v; want the start", c, start, r.AsOf)
			}
			time.Sleep(time.Minute) // the rollup goes stale
		}
	})
}

// TestCacheSize checks that the rollups are bounded by CacheSize, least
// recently read dropped first.
func TestCacheSize(t *testing.T) {
	store := MustOpenStore(t)
	for i := range 3 {
		storetest.MustCreate(t, store, fmt.Sprint(i), 1)
	}
	synctest.Test(t, func(t *testing.T) {
		s := &slowReads{CounterStore: store}
		e := MustStart(t, s, engine.Config{CacheSize: 2, MaxStaleness: time.Hour})
		defer e.Close(context.Background())
		cached := func(id string) {
			t.Helper()
			if _, err := e.ReadCounter(context.Background(), id, shardcounter.Cached); err != nil {
				t.Fatal(err)
			}
		}
		cached("0")
		cached("1")
		cached("0") // 0 is now the most recently read
		cached("2") // drops 1
		if got := s.reads.Load(); got != 3 {
			t.Fatalf("%d store reads, want 3", got)
		}
		cached("0")
		cached("2")
		if got := s.reads.Load(); got != 3 {
			t.Fatalf("%d store reads after reading kept rollups, want still 3", got)
		}
		cached("1")
		if got := s.reads.Load(); got != 4 {
			t.Fatalf("%d store reads after reading a dropped rollup, want 4", got)
		}
	})
}

// TestReadCounters reads counters in one call, a missing one among them:
// results come in order, the missing one not_found in its place. Strong
// reads are one store call; cached reads read from the store only the
// counters without a fresh rollup, in one call.
func TestReadCounters(t *testing.T) {
	store := MustOpenStore(t)
	for i, id := range []string{"a", "b", "c"} {
		storetest.MustCreate(t, store, id, 2)
		if out, err := store.Apply(context.Background(), []shardcounter.Increment{{Counter: id, Delta: int64(i + 1)}}); err != nil || out[0].Err != nil {
			t.Fatal(err, out)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		s := &slowReads{CounterStore: store}
		e := MustStart(t, s, engine.Config{MaxStaleness: 10 * time.Second})
		defer e.Close(context.Background())
		ctx := context.Background()
		ids := []string{"c", "nope", "a", "b"}
		check := func(c shardcounter.Consistency, res []shardcounter.ReadResult, err error) {
			t.Helper()
			if err != nil || len(res) != len(ids) {
				t.Fatalf("ReadCounters(%s) = %+v, %v", c, res, err)
			}
			for i, want := range []int64{3, 0, 1, 2} {
				r := res[i]
				switch {
				case ids[i] == "nope":
					if shardcounter.ErrorCode(r.Err) != shardcounter.ENOTFOUND || r.Reading != nil {
						t.Fatalf("%s read of a missing counter = %+v, want not_found", c, r)
					}
				case r.Err != nil || r.Reading.ID != ids[i] || r.Reading.Value != want || r.Reading.Consistency != c:
					t.Fatalf("%s read %d = %+v (%v), want %s = %d", c, i, r.Reading, r.Err, ids[i], want)
				}
			}
		}
		res, err := e.ReadCounters(ctx, ids, shardcounter.Strong)
		check(shardcounter.Strong, res, err)
		if got := s.calls.Load(); got != 1 {
			t.Fatalf("a strong batch read made %d store calls, want 1", got)
		}
		// The strong read left rollups of a, b and c; "nope" has none.
		time.Sleep(5 * time.Second)
		aTaken := time.Now()
		if _, err := e.ReadCounter(ctx, "a", shardcounter.Strong); err != nil { // a's rollup is fresher
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second) // b and c are now stale, a is not
		calls, reads := s.calls.Load(), s.reads.Load()
		res, err = e.ReadCounters(ctx, ids, shardcounter.Cached)
		check(shardcounter.Cached, res, err)
		if c, r := s.calls.Load()-calls, s.reads.Load()-reads; c != 1 || r != 3 {
			t.Fatalf("a cached batch read made %d store calls for %d counters, want 1 call for 3 (c, nope, b)", c, r)
		}
		if got := res[2].Reading.AsOf; !got.Equal(aTaken) {
			t.Fatalf("a's cached reading is as of %v, want its fresh rollup's time", got)
		}
	})
}
