package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestQueueFullHonoursContext checks that a writer waiting for room in a
// full queue gives up when its context ends: it gets unavailable (nothing
// applied) and its write is not queued.
func TestQueueFullHonoursContext(t *testing.T) {
	store := MustOpenStore(t)
	storetest.MustCreate(t, store, "c", 2)
	synctest.Test(t, func(t *testing.T) {
		h := &holding{CounterStore: store, release: make(chan struct{})}
		e := MustStart(t, h, engine.Config{MaxBatch: 1, MaxQueued: 1})
		first := make(chan error, 1)
		go func() {
			_, err := e.WriteCounter(context.Background(), shardcounter.Write{Counter: "c", Delta: 1})
			first <- err
		}()
		synctest.Wait() // the first write is in Apply, holding the one place in the queue
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "c", Delta: 10})
		if shardcounter.ErrorCode(err) != shardcounter.EUNAVAILABLE || shardcounter.IsOutcomeUnknown(err) {
			t.Fatalf("write whose deadline passed while the queue was full = %v, want unavailable", err)
		}
		if got := e.Stats().Queued.Load(); got != 1 {
			t.Fatalf("queued = %d after the refused write, want 1", got)
		}
		close(h.release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := storetest.MustRead(t, store, "c"); got != 1 {
			t.Fatalf("c = %d, want 1: the refused write must not apply", got)
		}
	})
}

// TestWriteBatchOneCommit checks that the writes of one WriteBatch (a
// RESP pipeline's) share one commit when they fit in one batch: the
// flusher cannot cut the batch between two of them, even when the first
// wakes it.
func TestWriteBatchOneCommit(t *testing.T) {
	store := MustOpenStore(t)
	for i := range 7 {
		storetest.MustCreate(t, store, fmt.Sprint("c", i), 4)
	}
	var mu sync.Mutex
	var flushes []int
	e := MustNew(t, store, engine.Config{OnFlush: func(ev engine.FlushEvent) {
		mu.Lock()
		flushes = append(flushes, ev.Writes)
		mu.Unlock()
	}})
	ws := make([]shardcounter.Write, 200)
	for i := range ws {
		ws[i] = shardcounter.Write{Counter: fmt.Sprint("c", i%7), Delta: 1}
	}
	for round := range 20 {
		mu.Lock()
		flushes = flushes[:0]
		mu.Unlock()
		if _, err := e.WriteBatch(context.Background(), ws); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := slices.Clone(flushes)
		mu.Unlock()
		if len(got) != 1 || got[0] != len(ws) {
			t.Fatalf("round %d: the %d writes of one WriteBatch took commits of %v writes, want one", round, len(ws), got)
		}
	}
}

// recordingApplies is a store that notes which Apply call each counter's
// increments went in.
type recordingApplies struct {
	shardcounter.CounterStore
	mu      sync.Mutex
	applies int
	in      map[string]int // counter → the Apply call it went in
	maxLen  int
}

func (s *recordingApplies) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	s.mu.Lock()
	s.applies++
	for _, inc := range incs {
		s.in[inc.Counter] = s.applies
	}
	s.maxLen = max(s.maxLen, len(incs))
	s.mu.Unlock()
	return s.CounterStore.Apply(ctx, incs)
}

// TestJoinedWritesOneCommit checks that a run of writes joined by
// JoinNext (a RESP transaction's) is never cut between two commits, while
// many writers fill batches around it: with MaxBatch 8, runs of 1 to 20
// writes from 16 writers each land whole in one store Apply, and a run
// longer than MaxBatch goes in one Apply of its own size.
func TestJoinedWritesOneCommit(t *testing.T) {
	store := &recordingApplies{CounterStore: MustOpenStore(t), in: make(map[string]int)}
	e := MustNew(t, store, engine.Config{MaxBatch: 8, MaxQueued: 64})
	var wg sync.WaitGroup
	runs := make(chan []string, 16*40)
	for w := range 16 {
		wg.Go(func() {
			for r := range 40 {
				n := 1 + (w*7+r*3)%20
				ws := make([]shardcounter.Write, n)
				ids := make([]string, n)
				for i := range ws {
					ids[i] = fmt.Sprintf("w%d/r%d/%d", w, r, i)
					ws[i] = shardcounter.Write{Counter: ids[i], Delta: 1, JoinNext: i < n-1}
				}
				if r%2 == 1 { // a plain write before the run, filling batches
					ws = append([]shardcounter.Write{{Counter: fmt.Sprintf("w%d/plain", w), Delta: 1}}, ws...)
				}
				res, err := e.WriteBatch(context.Background(), ws)
				if err != nil {
					t.Error(err)
					return
				}
				for _, r := range res {
					if r.Error != nil || !r.Applied {
						t.Errorf("write %+v", r)
					}
				}
				runs <- ids
			}
		})
	}
	wg.Wait()
	close(runs)
	store.mu.Lock()
	defer store.mu.Unlock()
	for ids := range runs {
		for _, id := range ids[1:] {
			if store.in[id] != store.in[ids[0]] {
				t.Fatalf("a joined run of %d writes was cut: %s in commit %d, %s in commit %d", len(ids), ids[0], store.in[ids[0]], id, store.in[id])
			}
		}
	}
	if store.maxLen < 20 {
		t.Errorf("the largest commit had %d increments; a run of 20 joined writes must go whole", store.maxLen)
	}
}
