package redis_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// overlapping wraps a store so that its commits overlap however fast it
// answers: an Apply that begins while no other runs waits, for up to
// 50ms, until another begins (a flush holding every client's write waits
// in vain). It counts the Applies that began beside
// another. Like every wrapper it hides none of the store's capabilities
// (Unwrap), so the engine takes the store's own advice.
type overlapping struct {
	shardcounter.CounterStore
	mu         sync.Mutex
	running    int
	arrived    chan struct{} // closed when an Apply begins beside the waiting one
	overlapped atomic.Int64
}

func (o *overlapping) Unwrap() shardcounter.CounterStore { return o.CounterStore }

func (o *overlapping) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	o.mu.Lock()
	o.running++
	var wait chan struct{}
	if o.running == 1 {
		o.arrived = make(chan struct{})
		wait = o.arrived
	} else {
		o.overlapped.Add(1)
		if o.arrived != nil {
			close(o.arrived)
			o.arrived = nil
		}
	}
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.running--
		o.mu.Unlock()
	}()
	if wait != nil {
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-wait:
		case <-t.C:
		}
		t.Stop()
	}
	return o.CounterStore.Apply(ctx, incs)
}

// TestHotCommitsOverlap checks that the store advises the engine to run
// two flushes at once, also on one hot counter
// (shardcounter.HotCommitPipeliner), and that flushes of one hot counter
// that overlap on Redis, their scripts reaching the master in either
// order, keep the engine's promises: INCRs of many clients each answered
// with a value the counter held after it (rising for each client), none
// lost or doubled, and takes from one key admitted exactly up to its
// burst.
func TestHotCommitsOverlap(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		o := &overlapping{CounterStore: MustOpen(t, dsn)}
		e, err := engine.New(o, engine.Config{DefaultShards: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close(ctx)
		h, ok := shardcounter.As[shardcounter.HotCommitPipeliner](e.Store())
		if !ok || !h.PipelinesHotCommits() || h.CommitsInFlight() < 2 {
			t.Fatalf("the Redis store's advice: HotCommitPipeliner %v, PipelinesHotCommits and CommitsInFlight %v; want true, true and at least 2", ok, h)
		}

		const clients, rounds = 16, 25
		run := runID()
		hot := "hot" + run
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				last := int64(0)
				for i := range rounds {
					r, err := e.WriteCounter(ctx, shardcounter.Write{Counter: hot, Delta: 1, WantValue: true})
					if err != nil {
						t.Errorf("client %d, INCR %d: %v", c, i, err)
						return
					}
					if r.Value == nil || *r.Value <= last || *r.Value > clients*rounds {
						t.Errorf("client %d, INCR %d = %v after a value of %d; want one above it, at most %d", c, i, r.Value, last, clients*rounds)
						return
					}
					last = *r.Value
				}
			})
		}
		wg.Wait()
		r, err := e.ReadCounter(ctx, hot, shardcounter.Strong)
		if err != nil || r.Value != clients*rounds {
			t.Fatalf("%s after %d INCRs = %+v, %v", hot, clients*rounds, r, err)
		}

		const burst = 100
		name := "l" + run
		p, _ := shardcounter.ParseLimitPolicy(fmt.Sprintf("gcra 1/366d burst %d", burst))
		if _, _, err := e.CreateLimit(ctx, name, p); err != nil {
			t.Fatal(err)
		}
		var allowed atomic.Int64
		for range clients {
			wg.Go(func() {
				for range 10 {
					r, err := e.Take(ctx, name, "k", 1, "")
					if err != nil {
						t.Error(err)
						return
					}
					if r.Allowed {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if got := allowed.Load(); got != burst {
			t.Errorf("%d of %d takes from one key allowed, want the burst, %d", got, clients*10, burst)
		}
		if o.overlapped.Load() == 0 {
			t.Errorf("no commit began while another ran: the test saw no overlap")
		}
		t.Logf("%d commits began beside another", o.overlapped.Load())
	})
}
