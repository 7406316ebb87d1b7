package engine_test

import (
	"context"
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
