package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/model"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/storetest"
)

// MustOpenStore returns the model of the store contract (internal/model),
// which the engine's tests run on: they test the engine, and the model is
// the contract's rules with nothing of a store's own. Tests of how the
// engine meets a real store's behaviour open that store themselves.
func MustOpenStore(tb testing.TB) *model.Store {
	tb.Helper()
	s := model.New(model.Options{})
	tb.Cleanup(func() { s.Close() })
	return s
}

// MustOpenPostgres opens a PostgreSQL store on a fresh database of the
// test server (internal/pgtest), with the clock now when it is not nil.
func MustOpenPostgres(tb testing.TB, now func() time.Time) *postgres.CounterStore {
	tb.Helper()
	s, err := postgres.Open(context.Background(), pgtest.MustDatabase(tb), postgres.Options{Now: now})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// eachStore runs f on the model and on PostgreSQL, for the tests whose
// outcome the store's rules decide (create on write, members, bounds,
// windows): the rules as the contract states them, and a real store that
// keeps them. now, when not nil, is both stores' clock.
func eachStore(t *testing.T, now func() time.Time, f func(t *testing.T, store shardcounter.CounterStore)) {
	t.Run("model", func(t *testing.T) { f(t, model.New(model.Options{Now: now})) })
	t.Run("postgres", func(t *testing.T) { f(t, MustOpenPostgres(t, now)) })
}

// MustNew returns an engine over store, closed at the end of the test.
func MustNew(tb testing.TB, store shardcounter.CounterStore, cfg engine.Config) *engine.Engine {
	tb.Helper()
	e := MustStart(tb, store, cfg)
	tb.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// MustStart returns an engine over store that the test closes itself.
func MustStart(tb testing.TB, store shardcounter.CounterStore, cfg engine.Config) *engine.Engine {
	tb.Helper()
	e, err := engine.New(store, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// gate wraps a real store and lets a test hold Apply calls, count them and
// make them fail.
type gate struct {
	shardcounter.CounterStore
	hold     chan struct{} // when non-nil, Apply waits for a value (or a close) on it
	entered  chan int      // receives len(incs) as each Apply starts
	fail     atomic.Pointer[shardcounter.Error]
	released chan struct{} // closed at the end of the test, so a failed test never hangs
}

// newGate wraps store. Call releaseOnCleanup after MustNew has registered the engine's
// Close, so that the gate opens (cleanups run last-in first-out) before
// Close waits for the flusher.
func newGate(store shardcounter.CounterStore, entered int) *gate {
	g := &gate{CounterStore: store, hold: make(chan struct{}), entered: make(chan int, entered), released: make(chan struct{})}
	return g
}

func (g *gate) releaseOnCleanup(t *testing.T) { t.Cleanup(func() { close(g.released) }) }

func (g *gate) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	if g.entered != nil {
		select {
		case g.entered <- len(incs):
		case <-g.released:
		}
	}
	if g.hold != nil {
		select {
		case <-g.hold:
		case <-g.released:
		}
	}
	if err := g.fail.Load(); err != nil {
		return nil, err
	}
	return g.CounterStore.Apply(ctx, incs)
}

func read(tb testing.TB, e *engine.Engine, id string) int64 {
	tb.Helper()
	r, err := e.ReadCounter(context.Background(), id, shardcounter.Strong)
	if err != nil {
		tb.Fatal(err)
	}
	return r.Value
}

func TestExactness(t *testing.T) {
	for _, inFlight := range []int{1, 4} {
		t.Run(fmt.Sprintf("MaxInFlight=%d", inFlight), func(t *testing.T) {
			testExactness(t, MustOpenStore(t), engine.Config{MaxInFlight: inFlight})
		})
	}
}

// TestExactnessPostgres runs concurrent flushes on a store whose commits
// run in parallel: batches that lock shard rows of several counters at
// once, with request ids, must neither deadlock nor lose a write.
func TestExactnessPostgres(t *testing.T) {
	testExactness(t, MustOpenPostgres(t, nil), engine.Config{MaxInFlight: 4, DefaultShards: 4})
}

func testExactness(t *testing.T, store shardcounter.CounterStore, cfg engine.Config) {
	e := MustNew(t, store, cfg)
	ctx := context.Background()
	ids := []string{"hot", "warm", "cold"}
	var mu sync.Mutex
	sums := map[string]int64{}
	var wg sync.WaitGroup
	writers, n := 500, 20
	if testing.Short() {
		writers = 100
	}
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range n {
				id := ids[rng.IntN(len(ids))]
				d := rng.Int64N(201) - 100
				if d == 0 {
					d = 3
				}
				wr := shardcounter.Write{Counter: id, Delta: d}
				if i%5 == 0 {
					wr.RequestID = fmt.Sprintf("w%d-%d", w, i)
				}
				res, err := e.WriteCounter(ctx, wr)
				if err != nil || !res.Applied {
					t.Errorf("WriteCounter(%+v) = %+v, %v", wr, res, err)
					return
				}
				mu.Lock()
				sums[id] += d
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		if got := read(t, e, id); got != sums[id] {
			t.Errorf("%s = %d, want %d", id, got, sums[id])
		}
	}
	st := e.Stats()
	if st.Writes.Load() != int64(writers*n) || st.Errors.Load() != 0 || st.Queued.Load() != 0 {
		t.Errorf("stats: writes %d errors %d queued %d, want %d, 0, 0", st.Writes.Load(), st.Errors.Load(), st.Queued.Load(), writers*n)
	}
}

// startHeld makes one write that the gate holds inside Apply, so that
// writes made next queue up behind it and fold into the following flush.
func startHeld(t *testing.T, g *gate, e *engine.Engine, w shardcounter.Write) <-chan error {
	t.Helper()
	first := make(chan error, 1)
	go func() {
		_, err := e.WriteCounter(context.Background(), w)
		first <- err
	}()
	if n := <-g.entered; n != 1 {
		t.Fatalf("first flush had %d increments, want 1", n)
	}
	return first
}

// queueWrites starts n writes and waits until the engine has them queued.
func queueWrites(t *testing.T, e *engine.Engine, n int, w func(i int) shardcounter.Write) (results []*shardcounter.WriteResult, errs []error, wait func()) {
	t.Helper()
	results, errs = make([]*shardcounter.WriteResult, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = e.WriteCounter(context.Background(), w(i)) })
	}
	for e.Stats().Queued.Load() < int64(n)+1 {
		time.Sleep(time.Millisecond)
	}
	return results, errs, wg.Wait
}

func TestGroupCommitFolds(t *testing.T) {
	store := MustOpenStore(t)
	storetest.MustCreate(t, store, "likes", 4)
	g := newGate(store, 10)
	e := MustNew(t, g, engine.Config{})
	g.releaseOnCleanup(t)

	first := startHeld(t, g, e, shardcounter.Write{Counter: "likes", Delta: 1})
	results, errs, wait := queueWrites(t, e, 100, func(i int) shardcounter.Write {
		if i%2 == 0 {
			return shardcounter.Write{Counter: "likes", Delta: 2}
		}
		return shardcounter.Write{Counter: "likes", Delta: -1}
	})
	g.hold <- struct{}{} // release the first flush
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := <-g.entered; n != 2 {
		t.Fatalf("second flush had %d increments for 100 writes to one counter, want 2 (one per sign)", n)
	}
	g.hold <- struct{}{}
	wait()
	for i := range results {
		if errs[i] != nil || !results[i].Applied {
			t.Fatalf("write %d: %+v, %v", i, results[i], errs[i])
		}
	}
	if got, want := read(t, e, "likes"), int64(1+50*2-50); got != want {
		t.Fatalf("likes = %d, want %d", got, want)
	}
}

func TestFailedFlush(t *testing.T) {
	store := MustOpenStore(t)
	storetest.MustCreate(t, store, "c", 2)
	g := newGate(store, 10)
	e := MustNew(t, g, engine.Config{})
	g.releaseOnCleanup(t)

	first := startHeld(t, g, e, shardcounter.Write{Counter: "c", Delta: 1})
	results, errs, wait := queueWrites(t, e, 20, func(i int) shardcounter.Write {
		return shardcounter.Write{Counter: "c", Delta: 10, RequestID: fmt.Sprint(i % 3)}
	})
	g.hold <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-g.entered
	g.fail.Store(&shardcounter.Error{Code: shardcounter.EOUTCOMEUNKNOWN, Message: "injected: connection lost during commit", OutcomeUnknown: true})
	g.hold <- struct{}{}
	wait()
	for i := range results {
		if errs[i] == nil || results[i] != nil {
			t.Fatalf("write %d of the failed flush = %+v, %v; want an error", i, results[i], errs[i])
		}
		if shardcounter.ErrorCode(errs[i]) != shardcounter.EOUTCOMEUNKNOWN || !shardcounter.IsOutcomeUnknown(errs[i]) {
			t.Fatalf("write %d error %v: want the store's error, outcome unknown", i, errs[i])
		}
	}
	if got := read(t, e, "c"); got != 1 {
		t.Fatalf("c = %d, want 1: the failed flush applied nothing", got)
	}
	// The engine recovers: the next flush applies, and retries of the
	// failed request ids count once each.
	g.fail.Store(nil)
	close(g.hold)
	g.entered = nil
	for i := range 6 {
		if _, err := e.WriteCounter(context.Background(), shardcounter.Write{Counter: "c", Delta: 10, RequestID: fmt.Sprint(i % 3)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(t, e, "c"); got != 31 {
		t.Fatalf("c = %d after retries, want 31", got)
	}
}

func TestOutOfRangeInFoldedBatch(t *testing.T) {
	store := MustOpenStore(t)
	storetest.MustCreate(t, store, "big", 1)
	if err := store.Add(context.Background(), "big", math.MaxInt64-5, 0); err != nil {
		t.Fatal(err)
	}
	storetest.MustCreate(t, store, "other", 1)
	g := newGate(store, 100)
	e := MustNew(t, g, engine.Config{})
	g.releaseOnCleanup(t)
	first := startHeld(t, g, e, shardcounter.Write{Counter: "other", Delta: 1})
	results, errs, wait := queueWrites(t, e, 10, func(int) shardcounter.Write { return shardcounter.Write{Counter: "big", Delta: 1} })
	close(g.hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wait()
	applied, refused := 0, 0
	for i := range results {
		switch {
		case errs[i] == nil && results[i].Applied:
			applied++
		case errors.Is(errs[i], shardcounter.ErrOutOfRange):
			refused++
		default:
			t.Fatalf("write %d: %+v, %v", i, results[i], errs[i])
		}
	}
	if applied != 5 || refused != 5 {
		t.Fatalf("applied %d, refused %d; want 5 and 5 (only the writes that do not fit are refused)", applied, refused)
	}
	if got := read(t, e, "big"); got != math.MaxInt64 {
		t.Fatalf("big = %d, want MaxInt64", got)
	}
}

func TestAutoCreate(t *testing.T) {
	ctx := context.Background()
	t.Run("OK", func(t *testing.T) {
		e := MustNew(t, MustOpenStore(t), engine.Config{DefaultShards: 5})
		res, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "new", Delta: -3})
		if err != nil || !res.Applied {
			t.Fatalf("WriteCounter = %+v, %v", res, err)
		}
		r, err := e.ReadCounter(ctx, "new", "")
		if err != nil || r.Value != -3 || r.Shards != 5 {
			t.Fatalf("ReadCounter = %+v, %v; want -3 over 5 shards", r, err)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		e := MustNew(t, MustOpenStore(t), engine.Config{NoAutoCreate: true})
		_, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "new", Delta: 1})
		if !errors.Is(err, shardcounter.ErrNotFound) {
			t.Fatalf("WriteCounter = %v, want ErrNotFound", err)
		}
		res, err := e.WriteBatch(ctx, []shardcounter.Write{{Counter: "new", Delta: 1}})
		if err != nil || res[0].Applied || res[0].Error == nil || res[0].Error.Code != shardcounter.ENOTFOUND {
			t.Fatalf("WriteBatch = %+v, %v; want a per-item not_found", res, err)
		}
		if _, err := e.ReadCounter(ctx, "new", ""); !errors.Is(err, shardcounter.ErrNotFound) {
			t.Fatalf("ReadCounter = %v, want ErrNotFound", err)
		}
	})
}

func TestDuplicates(t *testing.T) {
	e := MustNew(t, MustOpenStore(t), engine.Config{})
	var applied, dups atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			res, err := e.WriteCounter(context.Background(), shardcounter.Write{Counter: "c", Delta: 7, RequestID: "once"})
			if err != nil {
				t.Error(err)
				return
			}
			if res.Applied {
				applied.Add(1)
			}
			if res.Duplicate {
				dups.Add(1)
			}
		})
	}
	wg.Wait()
	if applied.Load() != 1 || dups.Load() != 199 {
		t.Fatalf("applied %d, duplicates %d; want 1 and 199", applied.Load(), dups.Load())
	}
	if got := read(t, e, "c"); got != 7 {
		t.Fatalf("c = %d, want 7", got)
	}
}

func TestWriteBatch(t *testing.T) {
	e := MustNew(t, MustOpenStore(t), engine.Config{})
	ctx := context.Background()
	_, err := e.WriteBatch(ctx, []shardcounter.Write{{Counter: "a", Delta: 1}, {Counter: "b", Delta: 0}})
	if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Fatalf("batch with an invalid item = %v, want invalid_argument", err)
	}
	if _, err := e.ReadCounter(ctx, "a", ""); !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatalf("an invalid batch applied its valid item: %v", err)
	}
	res, err := e.WriteBatch(ctx, []shardcounter.Write{{Counter: "a", Delta: 1}, {Counter: "b", Delta: -2, RequestID: "r"}, {Counter: "b", Delta: -2, RequestID: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Applied || !res[1].Applied || res[2].Applied || !res[2].Duplicate {
		t.Fatalf("results = %+v", res)
	}
	if read(t, e, "a") != 1 || read(t, e, "b") != -2 {
		t.Fatalf("a, b = %d, %d; want 1, -2", read(t, e, "a"), read(t, e, "b"))
	}
}

func TestCloseCommitsQueued(t *testing.T) {
	store := MustOpenStore(t)
	storetest.MustCreate(t, store, "c", 3)
	g := newGate(store, 10)
	e := MustStart(t, g, engine.Config{})
	g.releaseOnCleanup(t)
	first := startHeld(t, g, e, shardcounter.Write{Counter: "c", Delta: 1})
	results, errs, wait := queueWrites(t, e, 50, func(int) shardcounter.Write { return shardcounter.Write{Counter: "c", Delta: 1} })
	closed := make(chan error, 1)
	go func() { closed <- e.Close(context.Background()) }()
	close(g.hold)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	<-first
	wait()
	for i := range results {
		if errs[i] != nil || !results[i].Applied {
			t.Fatalf("queued write %d after Close: %+v, %v", i, results[i], errs[i])
		}
	}
	if got := storetest.MustRead(t, store, "c"); got != 51 {
		t.Fatalf("c = %d after Close, want 51", got)
	}
	_, err := e.WriteCounter(context.Background(), shardcounter.Write{Counter: "c", Delta: 1})
	if shardcounter.ErrorCode(err) != shardcounter.EUNAVAILABLE {
		t.Fatalf("write after Close = %v, want unavailable", err)
	}
}

func TestCachedRead(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	e := MustNew(t, MustOpenStore(t), engine.Config{MaxStaleness: 2 * time.Second, Now: clock})
	ctx := context.Background()
	if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "c", Delta: 5}); err != nil {
		t.Fatal(err)
	}
	r, err := e.ReadCounter(ctx, "c", shardcounter.Cached)
	if err != nil || r.Value != 5 || r.Consistency != shardcounter.Cached || r.MaxStalenessMS != 2000 || !r.AsOf.Equal(now) {
		t.Fatalf("first cached read = %+v, %v", r, err)
	}
	if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "c", Delta: 5}); err != nil {
		t.Fatal(err)
	}
	advance(time.Second)
	if r, _ = e.ReadCounter(ctx, "c", shardcounter.Cached); r.Value != 5 {
		t.Fatalf("cached read within the staleness bound = %d, want the rollup's 5", r.Value)
	}
	advance(time.Second)
	if r, _ = e.ReadCounter(ctx, "c", shardcounter.Cached); r.Value != 10 || !r.AsOf.Equal(now) {
		t.Fatalf("cached read past the bound = %+v, want a fresh 10", r)
	}
	if _, err := e.ReadCounter(ctx, "c", "eventual"); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Fatalf("unknown consistency = %v, want invalid_argument", err)
	}
}

func TestCreateOptions(t *testing.T) {
	e := MustNew(t, MustOpenStore(t), engine.Config{})
	ctx := context.Background()
	f := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name string
		opts shardcounter.CreateOptions
		want int
		code string
	}{
		{"Default", shardcounter.CreateOptions{}, 16, ""},
		{"Shards", shardcounter.CreateOptions{Shards: 3}, 3, ""},
		{"Policy", shardcounter.CreateOptions{FollowersCount: f(10_000_000), Visibility: "public"}, 32, ""},
		{"PolicyProtected", shardcounter.CreateOptions{FollowersCount: f(10_000_000), Visibility: "protected"}, 8, ""},
		{"Both", shardcounter.CreateOptions{Shards: 2, FollowersCount: f(1)}, 0, shardcounter.EINVALID},
		{"VisibilityAlone", shardcounter.CreateOptions{Visibility: "public"}, 0, shardcounter.EINVALID},
		{"BadVisibility", shardcounter.CreateOptions{FollowersCount: f(1), Visibility: "secret"}, 0, shardcounter.EINVALID},
		{"NegativeFollowers", shardcounter.CreateOptions{FollowersCount: f(-1)}, 0, shardcounter.EINVALID},
		{"TooManyShards", shardcounter.CreateOptions{Shards: 1025}, 0, shardcounter.EINVALID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := e.CreateCounter(ctx, tc.name, tc.opts)
			if got := shardcounter.ErrorCode(err); got != tc.code {
				t.Fatalf("CreateCounter(%+v) error %v, want code %q", tc.opts, err, tc.code)
			}
			if err == nil && c.Shards != tc.want {
				t.Fatalf("CreateCounter(%+v) = %d shards, want %d", tc.opts, c.Shards, tc.want)
			}
		})
	}
}

func TestDefaultPolicy(t *testing.T) {
	for _, tc := range []struct {
		followers int64
		vis       string
		want      int
	}{{0, "public", 1}, {10_000, "public", 1}, {1_000_000, "public", 2}, {10_000_000, "", 32}, {100_000_000, "public", 256}, {1 << 62, "public", 1024}} {
		if got, err := engine.DefaultPolicy(tc.followers, tc.vis); err != nil || got != tc.want {
			t.Errorf("DefaultPolicy(%d, %q) = %d, %v; want %d", tc.followers, tc.vis, got, err, tc.want)
		}
	}
}

func TestList(t *testing.T) {
	e := MustNew(t, MustOpenStore(t), engine.Config{})
	ctx := context.Background()
	for _, id := range []string{"a/1", "a/2", "a/3", "b/1"} {
		if _, _, err := e.CreateCounter(ctx, id, shardcounter.CreateOptions{Shards: 1}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := e.ListCounters(ctx, shardcounter.ListOptions{Prefix: "a/", Limit: 2})
	if err != nil || len(l.Counters) != 2 || l.Next != "a/2" {
		t.Fatalf("first page = %+v, %v", l, err)
	}
	l, err = e.ListCounters(ctx, shardcounter.ListOptions{Prefix: "a/", Limit: 2, After: l.Next})
	if err != nil || len(l.Counters) != 1 || l.Counters[0].ID != "a/3" || l.Next != "" {
		t.Fatalf("second page = %+v, %v", l, err)
	}
	for _, bad := range []shardcounter.ListOptions{{Limit: -1}, {Limit: 1001}, {Prefix: "b/", After: "a/2"}} {
		if _, err := e.ListCounters(ctx, bad); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Errorf("ListCounters(%+v) = %v, want invalid_argument", bad, err)
		}
	}
}

// TestDuplicateFloodTwoEngines floods one request id from many goroutines
// through two engines over one store, each folding its own batches: the
// id counts once.
func TestDuplicateFloodTwoEngines(t *testing.T) {
	store := MustOpenStore(t)
	engines := []*engine.Engine{MustNew(t, store, engine.Config{}), MustNew(t, store, engine.Config{})}
	var applied, dups atomic.Int64
	var wg sync.WaitGroup
	for i := range 400 {
		wg.Go(func() {
			res, err := engines[i%2].WriteCounter(context.Background(), shardcounter.Write{Counter: "c", Delta: 7, RequestID: "once"})
			switch {
			case err != nil:
				t.Error(err)
			case res.Applied:
				applied.Add(1)
			case res.Duplicate:
				dups.Add(1)
			}
		})
	}
	wg.Wait()
	if applied.Load() != 1 || dups.Load() != 399 {
		t.Fatalf("applied %d, duplicates %d; want 1 and 399", applied.Load(), dups.Load())
	}
	if got := storetest.MustRead(t, store, "c"); got != 7 {
		t.Fatalf("c = %d, want 7", got)
	}
}

// TestDedupeWindow checks that Config.DedupeWindow reaches the store: a
// request id repeated within it is a duplicate, after it a new write.
func TestDedupeWindow(t *testing.T) {
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	store := model.New(model.Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	e := MustNew(t, store, engine.Config{DedupeWindow: time.Hour})
	write := func() *shardcounter.WriteResult {
		t.Helper()
		res, err := e.WriteCounter(context.Background(), shardcounter.Write{Counter: "c", Delta: 1, RequestID: "r"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := write(); !res.Applied {
		t.Fatalf("first write = %+v", res)
	}
	advance(59 * time.Minute)
	if res := write(); !res.Duplicate {
		t.Fatalf("repeat within the window = %+v, want duplicate", res)
	}
	advance(2 * time.Minute)
	if res := write(); !res.Applied {
		t.Fatalf("repeat past the window = %+v, want applied", res)
	}
	if got := read(t, e, "c"); got != 2 {
		t.Fatalf("c = %d, want 2", got)
	}
}

// TestAsyncExactness writes concurrently in async mode, with and without
// request ids: once Close returns, every accepted write is committed.
func TestAsyncExactness(t *testing.T) {
	store := MustOpenStore(t)
	e := MustStart(t, store, engine.Config{Durability: engine.Async, FlushInterval: time.Millisecond, MaxBatch: 64})
	ctx := context.Background()
	ids := []string{"a", "b"}
	var mu sync.Mutex
	sums := map[string]int64{}
	var wg sync.WaitGroup
	for w := range 100 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := range 50 {
				wr := shardcounter.Write{Counter: ids[rng.IntN(2)], Delta: rng.Int64N(21) - 10}
				if wr.Delta == 0 {
					wr.Delta = 1
				}
				if i%7 == 0 {
					wr.RequestID = fmt.Sprintf("%d-%d", w, i)
				}
				if res, err := e.WriteCounter(ctx, wr); err != nil || !res.Applied {
					t.Errorf("WriteCounter(%+v) = %+v, %v", wr, res, err)
					return
				}
				mu.Lock()
				sums[wr.Counter] += wr.Delta
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if got := storetest.MustRead(t, store, id); got != sums[id] {
			t.Errorf("%s = %d, want %d", id, got, sums[id])
		}
	}
	if st := e.Stats(); st.Writes.Load() != 5000 || st.Queued.Load() != 0 || st.AsyncLost.Load() != 0 {
		t.Errorf("stats: writes %d queued %d lost %d; want 5000, 0, 0", st.Writes.Load(), st.Queued.Load(), st.AsyncLost.Load())
	}
}

// hung wraps a real store whose Apply, while hang is set, answers only
// when its context ends, as a store behind a dead network link would.
type hung struct {
	shardcounter.CounterStore
	hang atomic.Bool
}

func (h *hung) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	if h.hang.Load() {
		<-ctx.Done()
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "injected: no answer: %v", ctx.Err())
	}
	return h.CounterStore.Apply(ctx, incs)
}

// TestFlushTimeout checks that a commit hung on the store is bounded by
// Config.FlushTimeout: the writer gets the store's unavailable error, not
// the outcome-unknown error of its own deadline, and the engine commits
// again once the store answers. OnFlush sees both commits.
func TestFlushTimeout(t *testing.T) {
	store := MustOpenStore(t)
	storetest.MustCreate(t, store, "c", 2)
	h := &hung{CounterStore: store}
	var mu sync.Mutex
	var events []engine.FlushEvent
	e := MustNew(t, h, engine.Config{FlushTimeout: 50 * time.Millisecond, OnFlush: func(ev engine.FlushEvent) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}})

	h.hang.Store(true)
	// The caller's deadline only keeps a broken engine from hanging the
	// test; the write must fail long before it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "c", Delta: 1})
	if !errors.Is(err, shardcounter.ErrUnavailable) || shardcounter.IsOutcomeUnknown(err) {
		t.Fatalf("write to a hung store = %v, want the store's unavailable error", err)
	}

	h.hang.Store(false)
	if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "c", Delta: 2}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, e, "c"); got != 2 {
		t.Fatalf("c = %d, want 2", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 {
		t.Fatalf("OnFlush saw %d commits, want 2: %+v", len(events), events)
	}
	if ev := events[0]; ev.Writes != 1 || ev.Items != 1 || !errors.Is(ev.Err, shardcounter.ErrUnavailable) {
		t.Errorf("first commit %+v, want 1 write, 1 item, unavailable", ev)
	}
	if ev := events[1]; ev.Writes != 1 || ev.Items != 1 || ev.Err != nil || ev.Duration <= 0 {
		t.Errorf("second commit %+v, want 1 write, 1 item, no error", ev)
	}
}
