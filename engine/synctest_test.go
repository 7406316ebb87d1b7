package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/storetest"
)

// counting wraps a store and counts Apply calls and their increments. Its
// failure switch uses no channel, so it works inside a synctest bubble
// whatever bubble made it.
type counting struct {
	shardcounter.CounterStore
	applies, items atomic.Int64
	fail           atomic.Pointer[shardcounter.Error]
}

func (c *counting) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	c.applies.Add(1)
	c.items.Add(int64(len(incs)))
	if err := c.fail.Load(); err != nil {
		return nil, err
	}
	return c.CounterStore.Apply(ctx, incs)
}

// inBubble runs f in a synctest bubble with an engine over a counting model
// store holding counter "c" with 4 shards. The engine is closed before the
// bubble ends, so its flusher exits inside it.
func inBubble(t *testing.T, cfg engine.Config, f func(t *testing.T, e *engine.Engine, s *counting)) {
	store := MustOpenStore(t)
	storetest.MustCreate(t, store, "c", 4)
	s := &counting{CounterStore: store}
	synctest.Test(t, func(t *testing.T) {
		e := MustStart(t, s, cfg)
		defer e.Close(context.Background())
		f(t, e, s)
	})
}

func mustWrite(t *testing.T, e *engine.Engine, w shardcounter.Write) *shardcounter.WriteResult {
	t.Helper()
	res, err := e.WriteCounter(context.Background(), w)
	if err != nil {
		t.Fatalf("WriteCounter(%+v) = %v", w, err)
	}
	return res
}

func TestDurableNeverWaits(t *testing.T) {
	inBubble(t, engine.Config{FlushInterval: time.Hour}, func(t *testing.T, e *engine.Engine, s *counting) {
		start := time.Now()
		res := mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 1})
		// In the bubble time moves only when every goroutine waits on a
		// timer, so a write that waited for one would see time pass.
		if got := time.Since(start); got != 0 || !res.Applied {
			t.Fatalf("a lone durable write took %v of bubble time (result %+v); want 0: no timer", got, res)
		}
		if got := storetest.MustRead(t, s, "c"); got != 1 {
			t.Fatalf("c = %d once the durable write returned, want 1", got)
		}
	})
}

func TestAsyncFlushInterval(t *testing.T) {
	const interval = 50 * time.Millisecond
	inBubble(t, engine.Config{Durability: engine.Async, FlushInterval: interval}, func(t *testing.T, e *engine.Engine, s *counting) {
		start := time.Now()
		for i := range 100 {
			if res := mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 1}); !res.Applied || res.Duplicate {
				t.Fatalf("async write %d = %+v, want applied (accepted)", i, res)
			}
			time.Sleep(interval / 200) // the writes span half the interval
		}
		synctest.Wait()
		if got := s.applies.Load(); got != 0 {
			t.Fatalf("%d commits after %v, before the flush interval ended; want 0", got, time.Since(start))
		}
		if got := storetest.MustRead(t, s, "c"); got != 0 {
			t.Fatalf("c = %d before the flush interval ended, want 0", got)
		}
		time.Sleep(interval - time.Since(start) - time.Nanosecond)
		synctest.Wait()
		if got := s.applies.Load(); got != 0 {
			t.Fatalf("committed %v after the first write, before the %v interval", time.Since(start), interval)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got, items := s.applies.Load(), s.items.Load(); got != 1 || items != 1 {
			t.Fatalf("at the interval: %d commits of %d increments, want 1 of 1 (100 writes folded)", got, items)
		}
		if got := storetest.MustRead(t, s, "c"); got != 100 {
			t.Fatalf("c = %d after the flush, want 100", got)
		}
		st := e.Stats()
		if st.Writes.Load() != 100 || st.Queued.Load() != 0 || st.AsyncLost.Load() != 0 {
			t.Fatalf("stats: writes %d queued %d lost %d; want 100, 0, 0", st.Writes.Load(), st.Queued.Load(), st.AsyncLost.Load())
		}

		// An idle engine does no work: no timer keeps running.
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := s.applies.Load(); got != 1 {
			t.Fatalf("%d commits after an idle hour, want still 1", got)
		}

		// The next write's interval starts with it, not with the last flush.
		start = time.Now()
		mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 1})
		time.Sleep(interval - time.Nanosecond)
		synctest.Wait()
		if got := s.applies.Load(); got != 1 {
			t.Fatalf("committed %v after a write to an idle engine, before the interval", time.Since(start))
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got := storetest.MustRead(t, s, "c"); got != 101 {
			t.Fatalf("c = %d one interval after the write, want 101", got)
		}
	})
}

func TestAsyncFullBatchGoesAtOnce(t *testing.T) {
	inBubble(t, engine.Config{Durability: engine.Async, FlushInterval: time.Hour, MaxBatch: 10}, func(t *testing.T, e *engine.Engine, s *counting) {
		// Writes with request ids are one increment each; writes without
		// fold into one per counter as they queue, so they never fill a
		// batch of one counter.
		for i := range 25 {
			mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 1, RequestID: fmt.Sprint(i)})
		}
		for range 1000 {
			mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 1000})
		}
		synctest.Wait()
		if got := storetest.MustRead(t, s, "c"); got != 20 {
			t.Fatalf("c = %d with no time passed, want 20: two full batches go at once, the rest gathers", got)
		}
		if got := s.applies.Load(); got != 2 {
			t.Fatalf("%d commits with no time passed, want 2", got)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := storetest.MustRead(t, s, "c"); got != 25+1000*1000 {
			t.Fatalf("c = %d after the interval, want %d", got, 25+1000*1000)
		}
		if got, items := s.applies.Load(), s.items.Load(); got != 3 || items != 20+6 {
			t.Fatalf("%d commits of %d increments, want 3 of 26: the last has 5 ids and one sum", got, items)
		}
	})
}

func TestAsyncCloseCommitsAtOnce(t *testing.T) {
	inBubble(t, engine.Config{Durability: engine.Async, FlushInterval: time.Hour}, func(t *testing.T, e *engine.Engine, s *counting) {
		for range 10 {
			mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 2})
		}
		start := time.Now()
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 0 {
			t.Fatalf("Close waited %v for the flush interval, want 0", got)
		}
		if got := storetest.MustRead(t, s, "c"); got != 20 {
			t.Fatalf("c = %d after Close, want 20", got)
		}
	})
}

func TestAsyncDuplicates(t *testing.T) {
	inBubble(t, engine.Config{Durability: engine.Async}, func(t *testing.T, e *engine.Engine, s *counting) {
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				// The answer cannot know yet whether the id was seen.
				if res := mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 3, RequestID: "r"}); !res.Applied || res.Duplicate {
					t.Errorf("async write with a request id = %+v, want applied (accepted), not duplicate", res)
				}
			})
		}
		wg.Wait()
		time.Sleep(engine.DefaultFlushInterval)
		synctest.Wait()
		if got := storetest.MustRead(t, s, "c"); got != 3 {
			t.Fatalf("c = %d, want 3: the request id counts once", got)
		}
		if w, d := e.Stats().Writes.Load(), e.Stats().Duplicates.Load(); w != 1 || d != 49 {
			t.Fatalf("stats: writes %d duplicates %d, want 1 and 49", w, d)
		}
	})
}

func TestAsyncFailedFlush(t *testing.T) {
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	inBubble(t, engine.Config{Durability: engine.Async, Logger: log}, func(t *testing.T, e *engine.Engine, s *counting) {
		s.fail.Store(&shardcounter.Error{Code: shardcounter.EUNAVAILABLE, Message: "injected: store down"})
		for range 5 {
			if res := mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 1}); !res.Applied {
				t.Fatalf("async write = %+v, want accepted", res)
			}
		}
		time.Sleep(engine.DefaultFlushInterval)
		synctest.Wait()
		st := e.Stats()
		if st.AsyncLost.Load() != 5 || st.Errors.Load() != 5 || st.Writes.Load() != 0 {
			t.Fatalf("stats: lost %d errors %d writes %d; want 5, 5, 0", st.AsyncLost.Load(), st.Errors.Load(), st.Writes.Load())
		}
		logMu.Lock()
		line := logs.String()
		logMu.Unlock()
		if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "writes=5") || !strings.Contains(line, "injected: store down") {
			t.Fatalf("log = %q, want one error line naming 5 writes and the store's error", line)
		}
		// The engine goes on once the store is back.
		s.fail.Store(nil)
		mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 1})
		time.Sleep(engine.DefaultFlushInterval)
		synctest.Wait()
		if got := storetest.MustRead(t, s, "c"); got != 1 {
			t.Fatalf("c = %d, want 1: only the write after the outage applied", got)
		}
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestCachedReadStaleness(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  engine.Config
		want int64 // max_staleness_ms
	}{
		{"Durable", engine.Config{MaxStaleness: 2 * time.Second}, 2000},
		{"Async", engine.Config{MaxStaleness: 2 * time.Second, Durability: engine.Async, FlushInterval: 100 * time.Millisecond}, 2100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, tc.cfg, func(t *testing.T, e *engine.Engine, s *counting) {
				ctx := context.Background()
				cached := func() *shardcounter.Reading {
					t.Helper()
					r, err := e.ReadCounter(ctx, "c", shardcounter.Cached)
					if err != nil {
						t.Fatal(err)
					}
					if r.Consistency != shardcounter.Cached || r.MaxStalenessMS != tc.want {
						t.Fatalf("cached reading %+v: want consistency cached, max_staleness_ms %d", r, tc.want)
					}
					return r
				}
				waitFlushed := func() { time.Sleep(tc.cfg.FlushInterval); synctest.Wait() }
				mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 5})
				waitFlushed()
				first := cached()
				if first.Value != 5 || !first.AsOf.Equal(time.Now()) {
					t.Fatalf("first cached read = %+v at %v, want a fresh 5", first, time.Now())
				}
				mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 5})
				waitFlushed()
				time.Sleep(2*time.Second - time.Since(first.AsOf) - time.Nanosecond)
				if r := cached(); r.Value != 5 || !r.AsOf.Equal(first.AsOf) {
					t.Fatalf("cached read within the bound = %+v, want the rollup's 5 as of %v", r, first.AsOf)
				}
				time.Sleep(time.Nanosecond)
				if r := cached(); r.Value != 10 || !r.AsOf.Equal(time.Now()) {
					t.Fatalf("cached read at the bound = %+v, want a fresh 10", r)
				}
				// A strong read refreshes the rollup too.
				mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 1})
				waitFlushed()
				if r := read(t, e, "c"); r != 11 {
					t.Fatalf("strong read = %d, want 11", r)
				}
				if r := cached(); r.Value != 11 {
					t.Fatalf("cached read after a strong one = %d, want 11", r.Value)
				}
			})
		})
	}
}

func TestParseDurability(t *testing.T) {
	for in, want := range map[string]engine.Durability{"": engine.Durable, "durable": engine.Durable, "async": engine.Async} {
		if got, err := engine.ParseDurability(in); err != nil || got != want {
			t.Errorf("ParseDurability(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := engine.ParseDurability("fsync"); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Errorf("ParseDurability(fsync) = %v, want invalid_argument", err)
	}
}

// holding wraps a store and holds every Apply until release is closed
// (while open is unset), counting the calls in progress. Make it inside
// the synctest bubble, so that an Apply waiting on release is durably
// blocked. Replace release only while no Apply runs.
type holding struct {
	shardcounter.CounterStore
	release           chan struct{}
	open              atomic.Bool
	inFlight, maxSeen atomic.Int64
}

func (h *holding) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	n := h.inFlight.Add(1)
	for {
		m := h.maxSeen.Load()
		if n <= m || h.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	defer h.inFlight.Add(-1)
	if !h.open.Load() {
		<-h.release
	}
	return h.CounterStore.Apply(ctx, incs)
}

// TestMaxInFlight checks that, once a flush has been broad (many
// counters), up to MaxInFlight flushes run at once, each started as soon
// as a write finds a free slot; that writes arriving while every slot is
// busy gather into one batch for the next free slot; and that after
// narrow flushes (one hot counter) they run one at a time again.
func TestMaxInFlight(t *testing.T) {
	const writes = 10
	for _, k := range []int{1, 3} {
		t.Run(fmt.Sprintf("MaxInFlight=%d", k), func(t *testing.T) {
			store := MustOpenStore(t)
			storetest.MustCreate(t, store, "c", 4)
			synctest.Test(t, func(t *testing.T) {
				h := &holding{CounterStore: store, release: make(chan struct{})}
				e := MustStart(t, h, engine.Config{MaxInFlight: k})
				defer e.Close(context.Background())
				// A broad flush: 20 counters in one batch. WriteBatch
				// queues its writes one by one, and the flusher could cut
				// a batch between two of them; so a first write's flush is
				// held while they queue, and they gather behind it.
				broad := make([]shardcounter.Write, 20)
				for i := range broad {
					broad[i] = shardcounter.Write{Counter: fmt.Sprint("b", i), Delta: 1}
				}
				var warm sync.WaitGroup
				warm.Go(func() { mustWrite(t, e, shardcounter.Write{Counter: "first", Delta: 1}) })
				synctest.Wait()
				warm.Go(func() {
					if _, err := e.WriteBatch(context.Background(), broad); err != nil {
						t.Error(err)
					}
				})
				synctest.Wait()
				close(h.release)
				warm.Wait()
				h.release = make(chan struct{}) // no Apply runs now
				flushes := e.Stats().Flushes.Load()
				var wg sync.WaitGroup
				for i := range writes {
					wg.Go(func() { mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 1}) })
					synctest.Wait()
					if got, want := h.inFlight.Load(), int64(min(i+1, k)); got != want {
						t.Fatalf("after %d writes: %d flushes in flight, want %d", i+1, got, want)
					}
				}
				if got := e.Stats().Queued.Load(); got != writes {
					t.Fatalf("queued = %d, want %d", got, writes)
				}
				close(h.release)
				wg.Wait()
				// k flushes of one write each, then one of the rest.
				if got, want := e.Stats().Flushes.Load()-flushes, int64(k+1); got != want {
					t.Errorf("flushes = %d, want %d", got, want)
				}
				if got := h.maxSeen.Load(); got != int64(k) {
					t.Errorf("at most %d flushes were in flight, want %d", got, k)
				}
				if got := storetest.MustRead(t, store, "c"); got != writes {
					t.Errorf("c = %d, want %d", got, writes)
				}

				// The last flushes were narrow: one at a time now.
				h.release = make(chan struct{})
				h.maxSeen.Store(0)
				for range writes {
					wg.Go(func() { mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 1}) })
					synctest.Wait()
					if got := h.inFlight.Load(); got != 1 {
						t.Fatalf("%d flushes of one hot counter in flight, want 1", got)
					}
				}
				close(h.release)
				wg.Wait()
			})
		})
	}
}

// TestAsyncOneFlushInFlight checks that async mode ignores MaxInFlight:
// its writes were answered when queued, so they commit in that order.
func TestAsyncOneFlushInFlight(t *testing.T) {
	store := MustOpenStore(t)
	storetest.MustCreate(t, store, "c", 4)
	synctest.Test(t, func(t *testing.T) {
		h := &holding{CounterStore: store, release: make(chan struct{})}
		e := MustStart(t, h, engine.Config{Durability: engine.Async, MaxInFlight: 4, FlushInterval: time.Millisecond})
		for range 3 {
			mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 1})
			time.Sleep(time.Millisecond) // the flush interval passes: a flush starts if a slot is free
			synctest.Wait()
		}
		if got := h.inFlight.Load(); got != 1 {
			t.Errorf("%d async flushes in flight, want 1", got)
		}
		close(h.release)
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := storetest.MustRead(t, store, "c"); got != 3 {
			t.Errorf("c = %d, want 3", got)
		}
	})
}

// slow wraps a store and makes every Apply take a millisecond of bubble
// time, as a commit with an fsync does. Make it inside the bubble.
type slow struct{ shardcounter.CounterStore }

func (s slow) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	time.Sleep(time.Millisecond)
	return s.CounterStore.Apply(ctx, incs)
}

// TestClosedLoopOneBatchPerCommit checks that writers which each send
// their next write as soon as the last is answered share one commit per
// round: the flusher lets the writers it just answered queue again before
// it cuts the next batch, instead of committing whatever trickled in
// first and leaving the rest for the commit after (half batches, twice
// the commits).
func TestClosedLoopOneBatchPerCommit(t *testing.T) {
	const writers, rounds = 16, 40
	store := MustOpenStore(t)
	storetest.MustCreate(t, store, "c", 4)
	synctest.Test(t, func(t *testing.T) {
		e := MustStart(t, slow{store}, engine.Config{})
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for range rounds {
					mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 1})
				}
			})
		}
		wg.Wait()
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := e.Stats()
		perCommit := float64(st.Writes.Load()) / float64(st.Flushes.Load())
		t.Logf("%d writes in %d commits: %.1f a commit", st.Writes.Load(), st.Flushes.Load(), perCommit)
		// Cutting the batch at once gives exactly writers/2 (8.0); letting
		// the answered writers queue gives 13-16, depending on how the
		// scheduler interleaves them with the flusher.
		if perCommit < 0.7*writers {
			t.Errorf("%.1f writes a commit from %d closed-loop writers, want at least %.1f", perCommit, writers, 0.7*writers)
		}
	})
	if got := storetest.MustRead(t, store, "c"); got != writers*rounds {
		t.Errorf("c = %d, want %d", got, writers*rounds)
	}
}

// gated wraps a store and holds each Apply until the test opens its gate
// (or opens them all), counting the Applies running at once. It gives the
// advice of a store whose commits of one counter overlap, as Redis's do
// (shardcounter.HotCommitPipeliner), when hot is set. Make it inside the
// bubble.
type gated struct {
	shardcounter.CounterStore
	advice            int
	hot               bool
	mu                sync.Mutex
	gates             []chan struct{}
	opened            bool
	inFlight, maxSeen atomic.Int64
}

func (g *gated) CommitsInFlight() int      { return g.advice }
func (g *gated) PipelinesHotCommits() bool { return g.hot }

func (g *gated) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	gate := make(chan struct{})
	g.mu.Lock()
	if g.opened {
		close(gate)
	}
	g.gates = append(g.gates, gate)
	g.mu.Unlock()
	n := g.inFlight.Add(1)
	for {
		m := g.maxSeen.Load()
		if n <= m || g.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	defer g.inFlight.Add(-1)
	<-gate
	return g.CounterStore.Apply(ctx, incs)
}

// open lets the i-th Apply (from 0, in the order they began) go on.
func (g *gated) open(i int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gates[i])
}

// openAll lets every Apply go on, and those that begin later not wait.
func (g *gated) openAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, gate := range g.gates {
		select {
		case <-gate:
		default:
			close(g.gates[i])
		}
	}
	g.opened = true
}

// TestHotFlushesInFlight checks the flushes of one hot counter: one at a
// time, unless the store's commits of one counter overlap
// (HotCommitPipeliner), where up to MaxInFlight run at once (the store's
// CommitsInFlight when MaxInFlight is 0) from the first write, each
// answering its own writes once its own commit returns, whichever commit
// returns first.
func TestHotFlushesInFlight(t *testing.T) {
	const writes = 6
	for _, tc := range []struct {
		name        string
		maxInFlight int
		hot         bool
		want        int
	}{
		{"advised", 0, true, 2},
		{"MaxInFlight=3", 3, true, 3},
		{"MaxInFlight=1", 1, true, 1},
		{"row locks", 0, false, 1}, // PostgreSQL's case, and Pebble's advice of 2
		{"row locks/MaxInFlight=3", 3, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := MustOpenStore(t)
			storetest.MustCreate(t, store, "c", 4)
			synctest.Test(t, func(t *testing.T) {
				g := &gated{CounterStore: store, advice: 2, hot: tc.hot}
				e := MustStart(t, g, engine.Config{MaxInFlight: tc.maxInFlight})
				defer e.Close(context.Background())
				defer g.openAll() // before Close, also when the test fails
				var wg sync.WaitGroup
				var answered atomic.Int64
				for i := range writes {
					wg.Go(func() {
						mustWrite(t, e, shardcounter.Write{Counter: "c", Delta: 1})
						answered.Add(1)
					})
					synctest.Wait()
					if got, want := g.inFlight.Load(), int64(min(i+1, tc.want)); got != want {
						t.Fatalf("after %d writes to one counter: %d flushes in flight, want %d", i+1, got, want)
					}
				}
				if tc.want > 1 {
					// The newest flush, of one write, commits first: its
					// write is answered, the older flushes' are not, and the
					// writes queued behind them go in a flush of their own.
					g.open(tc.want - 1)
					synctest.Wait()
					if got := answered.Load(); got != 1 {
						t.Fatalf("%d writes answered once the newest of %d flushes committed, want 1: its own", got, tc.want)
					}
					if got := storetest.MustRead(t, store, "c"); got != 1 {
						t.Fatalf("c = %d with one flush committed, want 1", got)
					}
					if got, want := g.inFlight.Load(), int64(tc.want); got != want {
						t.Fatalf("%d flushes in flight after one committed with writes queued, want %d", got, want)
					}
				}
				g.openAll()
				wg.Wait()
				if got := g.maxSeen.Load(); got != int64(tc.want) {
					t.Errorf("at most %d flushes were in flight, want %d", got, tc.want)
				}
				if got := storetest.MustRead(t, store, "c"); got != writes {
					t.Errorf("c = %d, want %d", got, writes)
				}
			})
		})
	}
}
