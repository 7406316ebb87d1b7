package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestStrongReadsGather starts strong reads of 50 counters at once with
// one store read allowed in flight: the first goes alone, and those that
// queued while it ran go together in the next.
func TestStrongReadsGather(t *testing.T) {
	store := MustOpenStore(t)
	for i := range 50 {
		storetest.MustCreate(t, store, fmt.Sprint(i), 2)
		if err := store.Add(context.Background(), fmt.Sprint(i), int64(i)+1, 0); err != nil {
			t.Fatal(err)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		s := &slowReads{CounterStore: store}
		e := MustStart(t, s, engine.Config{MaxReadsInFlight: 1})
		defer e.Close(context.Background())
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				r, err := e.ReadCounter(context.Background(), fmt.Sprint(i), shardcounter.Strong)
				if err != nil || r.ID != fmt.Sprint(i) || r.Value != int64(i)+1 {
					t.Errorf("read %d: %+v, %v", i, r, err)
				}
			})
		}
		wg.Wait()
		if calls, reads := s.calls.Load(), s.reads.Load(); calls != 2 || reads != 50 {
			t.Fatalf("50 concurrent strong reads of different counters made %d store calls reading %d counters, want 2 calls reading 50", calls, reads)
		}
	})
}

// readsBeforeWaiting reads the store when called, then takes a second to
// answer: a store read whose moment is its start.
type readsBeforeWaiting struct {
	shardcounter.CounterStore
	calls atomic.Int64
}

func (s *readsBeforeWaiting) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	s.calls.Add(1)
	r, err := s.CounterStore.ReadCounter(ctx, id)
	time.Sleep(time.Second)
	return r, err
}

func (s *readsBeforeWaiting) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	s.calls.Add(1)
	rs, err := s.CounterStore.ReadCounters(ctx, ids)
	time.Sleep(time.Second)
	return rs, err
}

// TestStrongReadJoinsNoEarlierRead is linearizability's rule for the
// gathering: a strong read that starts while another's store read runs
// must not take that read's answer, which may predate a write
// acknowledged before the second read began.
func TestStrongReadJoinsNoEarlierRead(t *testing.T) {
	store := MustOpenStore(t)
	storetest.MustCreate(t, store, "c", 2)
	synctest.Test(t, func(t *testing.T) {
		s := &readsBeforeWaiting{CounterStore: store}
		e := MustStart(t, s, engine.Config{MaxReadsInFlight: 1})
		defer e.Close(context.Background())
		first := make(chan int64)
		go func() {
			r, err := e.ReadCounter(context.Background(), "c", shardcounter.Strong)
			if err != nil {
				t.Error(err)
			}
			first <- r.Value
		}()
		synctest.Wait() // the first read has read 0 and waits to answer
		mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 1})
		r, err := e.ReadCounter(context.Background(), "c", shardcounter.Strong)
		if err != nil {
			t.Fatal(err)
		}
		if r.Value != 1 {
			t.Errorf("a strong read begun after a write was acknowledged read %d, want 1", r.Value)
		}
		if v := <-first; v != 0 {
			t.Errorf("the first read read %d, want 0 (it read before the write)", v)
		}
		if calls := s.calls.Load(); calls != 2 {
			t.Errorf("%d store reads, want 2", calls)
		}
	})
}

// failsOn fails every store read that asks for the counter bad, after a
// second: a counter whose node is down, say.
type failsOn struct {
	shardcounter.CounterStore
	bad string
}

func (s failsOn) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	rs, err := s.ReadCounters(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	return rs[0], nil
}

func (s failsOn) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	time.Sleep(time.Second)
	if slices.Contains(ids, s.bad) {
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "the node of %s is down", s.bad)
	}
	return s.CounterStore.ReadCounters(ctx, ids)
}

// TestStrongReadsFailAlone gathers reads of a healthy counter and one the
// store cannot read: the failure is the second's readers' alone.
func TestStrongReadsFailAlone(t *testing.T) {
	store := MustOpenStore(t)
	for _, id := range []string{"a", "b", "down"} {
		storetest.MustCreate(t, store, id, 2)
	}
	synctest.Test(t, func(t *testing.T) {
		e := MustStart(t, failsOn{store, "down"}, engine.Config{MaxReadsInFlight: 1})
		defer e.Close(context.Background())
		go e.ReadCounter(context.Background(), "a", shardcounter.Strong)
		synctest.Wait() // a's store read is in flight: the next two queue together
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := e.ReadCounter(context.Background(), "b", shardcounter.Strong); err != nil {
				t.Errorf("b: %v, want its reading", err)
			}
		})
		wg.Go(func() {
			_, err := e.ReadCounters(context.Background(), []string{"down", "a"}, shardcounter.Strong)
			if !errors.Is(err, shardcounter.ErrUnavailable) {
				t.Errorf("down: %v, want unavailable", err)
			}
		})
		wg.Wait()
	})
}

// TestStrongReadGivesUp cancels a strong read whose store read carries
// another's counter: the other still gets its reading, from a store read
// of its own.
func TestStrongReadGivesUp(t *testing.T) {
	store := MustOpenStore(t)
	for _, id := range []string{"a", "b"} {
		storetest.MustCreate(t, store, id, 2)
	}
	synctest.Test(t, func(t *testing.T) {
		s := &slowReads{CounterStore: store}
		e := MustStart(t, s, engine.Config{MaxReadsInFlight: 1})
		defer e.Close(context.Background())
		go e.ReadCounter(context.Background(), "a", shardcounter.Strong)
		synctest.Wait() // a's store read is in flight: the next two queue together
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		done := make(chan error)
		go func() {
			_, err := e.ReadCounters(ctx, []string{"a", "b"}, shardcounter.Strong)
			done <- err
		}()
		synctest.Wait()
		r, err := e.ReadCounter(context.Background(), "b", shardcounter.Strong)
		if err != nil || r.ID != "b" {
			t.Fatalf("the read that waited: %v, %v; want b's reading", r, err)
		}
		if err := <-done; !errors.Is(err, shardcounter.ErrUnavailable) {
			t.Errorf("the read that gave up: %v, want unavailable", err)
		}
	})
}

// TestStrongReadsLinearizable runs the store suite's linearizability
// cases through the engine, one store read in flight so that concurrent
// strong reads gather as much as they can: a history of reads, writes and
// reshards must still be linearizable.
func TestStrongReadsLinearizable(t *testing.T) {
	eachStore(t, nil, func(t *testing.T, store shardcounter.CounterStore) {
		storetest.RunStrongReads(t, storetest.ThroughEngine(t, store, engine.Config{MaxReadsInFlight: 1}))
	})
}
