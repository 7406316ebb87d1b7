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
