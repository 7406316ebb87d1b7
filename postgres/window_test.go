package postgres_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestWindow writes to a windowed counter across a simulated five hours
// (an injected clock) and checks the buckets, the windowed sums, the
// retention sweep and a reshard. The phases run in order on one counter,
// each starting from the state the one before left.
func TestWindow(t *testing.T) {
	w := newWindowTest(t)
	w.writeThreeHours()
	w.reshardFoldsBuckets()
	w.sweepPastRetention()
	t.Run("ErrInvalid", func(t *testing.T) { testWindowErrInvalid(t, w.s, w.t0) })
}

// windowTest is the state TestWindow's phases share: a store on an
// injected clock and its windowed counter "views", with 3 shards, hourly
// buckets kept for 3 hours, and a minimum of 0.
type windowTest struct {
	t   *testing.T
	ctx context.Context
	t0  time.Time // 12:00, the start of the first bucket written
	clk *clock
	s   *postgres.CounterStore
}

// newWindowTest opens a store whose clock reads 12:10 and creates "views".
func newWindowTest(t *testing.T) *windowTest {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := &clock{t: t0.Add(10 * time.Minute)}
	w := &windowTest{t: t, ctx: context.Background(), t0: t0, clk: clk, s: MustOpenWith(t, postgres.Options{Now: clk.Now})}
	zero := int64(0)
	spec := shardcounter.Spec{Shards: 3, Min: &zero, Window: &shardcounter.Window{Bucket: shardcounter.BucketHour, Retention: shardcounter.Duration(3 * time.Hour)}}
	if _, err := w.s.CreateCounter(w.ctx, "views", spec); err != nil {
		t.Fatal(err)
	}
	return w
}

// writeThreeHours writes from 12:10 to 14:10 and checks the series, the
// windowed sums and the all-time value they make.
func (w *windowTest) writeThreeHours() {
	t, s, t0 := w.t, w.s, w.t0
	// 12:10 five writes on three shards, one of them through Add.
	w.apply(shardcounter.Increment{Counter: "views", Delta: 2, Pick: 0}, shardcounter.Increment{Counter: "views", Delta: 3, Pick: 1})
	if err := s.Add(w.ctx, "views", 1, 2); err != nil {
		t.Fatal(err)
	}
	// A refused write lands in no bucket.
	out, err := s.Apply(w.ctx, []shardcounter.Increment{{Counter: "views", Delta: -100, Pick: 0}})
	if err != nil || shardcounter.ErrorCode(out[0].Err) != shardcounter.EOUTOFRANGE {
		t.Fatalf("write below min: %+v, %v", out, err)
	}
	w.clk.Advance(time.Hour) // 13:10
	w.apply(shardcounter.Increment{Counter: "views", Delta: 10, Pick: 2})
	w.clk.Advance(time.Hour) // 14:10
	w.apply(shardcounter.Increment{Counter: "views", Delta: -1, Pick: 0}, shardcounter.Increment{Counter: "views", Delta: 1, Pick: 0})
	w.apply(shardcounter.Increment{Counter: "views", Delta: 100, Pick: 4})

	w.wantSeries(t0.Add(-time.Hour), t0.Add(3*time.Hour), "12:00=6 13:00=10 14:00=100 ")
	w.wantWindow(t0, t0.Add(3*time.Hour), 116)
	w.wantWindow(t0.Add(time.Hour), t0.Add(2*time.Hour), 10)
	w.wantWindow(t0.Add(2*time.Hour), t0.Add(3*time.Hour), 100)
	if got := storetest.MustRead(t, s, "views"); got != 116 {
		t.Fatalf("all-time value = %d, want 116", got)
	}
}

// reshardFoldsBuckets grows, then shrinks the counter: the series stays
// the same and the buckets fold with the shards.
func (w *windowTest) reshardFoldsBuckets() {
	t0 := w.t0
	for _, n := range []int{5, 2} {
		if _, err := w.s.ReshardCounter(w.ctx, "views", n); err != nil {
			w.t.Fatal(err)
		}
		w.wantSeries(t0.Add(-time.Hour), t0.Add(3*time.Hour), "12:00=6 13:00=10 14:00=100 ")
	}
	if got := w.buckets(); got > 2*3 {
		w.t.Fatalf("%d bucket rows after shrinking to 2 shards over 3 hours, want at most 6", got)
	}
}

// sweepPastRetention writes at 15:10 and 16:10: a write sweeps the buckets
// past the 3h retention, those before the bucket holding now − 3h. An idle
// store sweeps nothing, however late it is; nor does a read.
func (w *windowTest) sweepPastRetention() {
	t0 := w.t0
	w.clk.Advance(time.Hour)
	w.apply(shardcounter.Increment{Counter: "views", Delta: 1, Pick: 0})
	w.wantSeries(t0.Add(-time.Hour), t0.Add(5*time.Hour), "12:00=6 13:00=10 14:00=100 15:00=1 ")
	w.clk.Advance(time.Hour)
	w.apply(shardcounter.Increment{Counter: "views", Delta: 1, Pick: 1})
	w.wantSeries(t0.Add(-time.Hour), t0.Add(5*time.Hour), "13:00=10 14:00=100 15:00=1 16:00=1 ")
	w.clk.Advance(24 * time.Hour)
	w.wantSeries(t0.Add(-time.Hour), t0.Add(48*time.Hour), "13:00=10 14:00=100 15:00=1 16:00=1 ")
	if got := storetest.MustRead(w.t, w.s, "views"); got != 118 {
		w.t.Fatalf("all-time value = %d, want 118: the window never changes it", got)
	}
}

// apply applies incs as one batch and fails the test unless every item
// applied.
func (w *windowTest) apply(incs ...shardcounter.Increment) {
	w.t.Helper()
	out, err := w.s.Apply(w.ctx, incs)
	if err != nil {
		w.t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil {
			w.t.Fatalf("item %d: %v", i, o.Err)
		}
	}
}

// buckets counts the bucket rows "views" has in the database.
func (w *windowTest) buckets() int {
	w.t.Helper()
	var n int
	if err := w.s.Pool().QueryRow(w.ctx, "SELECT count(*) FROM shardcounter.buckets WHERE counter = 'views'").Scan(&n); err != nil {
		w.t.Fatal(err)
	}
	return n
}

// wantWindow fails the test unless "views" sums to want over [from, to).
func (w *windowTest) wantWindow(from, to time.Time, want int64) {
	w.t.Helper()
	r, err := w.s.ReadWindow(w.ctx, "views", from, to)
	if err != nil {
		w.t.Fatal(err)
	}
	if r.Value != want || !r.Window.From.Equal(from) || !r.Window.To.Equal(to) || r.Shards != 3 {
		w.t.Fatalf("ReadWindow(%s, %s) = %d over %+v, want %d", from.Format("15:04"), to.Format("15:04"), r.Value, r.Window, want)
	}
}

// wantSeries fails the test unless the buckets of "views" over [from, to),
// written as "15:04=value " each, are want.
func (w *windowTest) wantSeries(from, to time.Time, want string) {
	w.t.Helper()
	bs, err := w.s.ReadSeries(w.ctx, "views", from, to)
	if err != nil {
		w.t.Fatal(err)
	}
	got := ""
	for _, b := range bs {
		got += fmt.Sprintf("%s=%d ", b.Start.Format("15:04"), b.Value)
	}
	if got != want {
		w.t.Fatalf("ReadSeries = %q, want %q", got, want)
	}
}

// testWindowErrInvalid checks the errors of windowed reads: a counter
// without a window, and a missing counter.
func testWindowErrInvalid(t *testing.T, s *postgres.CounterStore, t0 time.Time) {
	ctx := context.Background()
	storetest.MustCreate(t, s, "plain", 1)
	_, err := s.ReadWindow(ctx, "plain", t0, t0.Add(time.Hour))
	if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Fatalf("ReadWindow of a counter without a window = %v, want invalid_argument", err)
	}
	_, err = s.ReadSeries(ctx, "missing", t0, t0.Add(time.Hour))
	if shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("ReadSeries of a missing counter = %v, want not_found", err)
	}
}

// TestWindowBucketEdgeUnderWrites writes +1s from several goroutines to a
// windowed counter whose bucket is 50 below MaxInt64 while its shards are
// near 0: plain batches and batches with request ids, on every shard.
// Exactly 50 apply, the rest are refused out_of_range, and the bucket ends
// at MaxInt64, readable. A bucket is a row per shard, so this holds only
// if no two batches on different shards both take the last room: the
// rows stay in the zone ±MaxInt64/n until the last room, which batches
// that lock every shard decide.
func TestWindowBucketEdgeUnderWrites(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := &clock{t: t0.Add(-50 * time.Minute)}
	s := MustOpenWith(t, postgres.Options{Now: clk.Now})
	spec := shardcounter.Spec{Shards: 4, Window: &shardcounter.Window{Bucket: shardcounter.BucketHour, Retention: shardcounter.Duration(3 * time.Hour)}}
	if _, err := s.CreateCounter(ctx, "edge", spec); err != nil {
		t.Fatal(err)
	}
	// 11:10: each shard near the zone's bottom. 12:10: each back near 0,
	// the bucket's rows near the zone's top, its sum MaxInt64 − 50.
	const z = math.MaxInt64 / 4
	for k := range uint64(4) {
		mustApply(t, s, shardcounter.Increment{Counter: "edge", Delta: -(z - 25), Pick: k})
	}
	clk.Advance(time.Hour)
	for k, d := range []int64{z - 11, z - 12, z - 12, z - 12} {
		mustApply(t, s, shardcounter.Increment{Counter: "edge", Delta: d, Pick: uint64(k)})
	}
	if r, err := s.ReadWindow(ctx, "edge", t0, t0.Add(time.Hour)); err != nil || r.Value != math.MaxInt64-50 {
		t.Fatalf("ReadWindow = %+v, %v; want MaxInt64 - 50", r, err)
	}

	const writers, writes = 6, 20
	var applied atomic.Int64
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range writes {
				inc := shardcounter.Increment{Counter: "edge", Delta: 1, Pick: uint64(g*writes + i)}
				if i%3 == 0 {
					inc.RequestID = fmt.Sprintf("g%d-%d", g, i)
				}
				out, err := s.Apply(ctx, []shardcounter.Increment{inc})
				switch {
				case err != nil:
					t.Error(err)
					return
				case out[0].Err == nil:
					applied.Add(1)
				case shardcounter.ErrorCode(out[0].Err) != shardcounter.EOUTOFRANGE:
					t.Errorf("+1 near the bucket's end: %v, want applied or out_of_range", out[0].Err)
				}
			}
		}()
	}
	wg.Wait()
	if got := applied.Load(); got != 50 {
		t.Errorf("%d of %d writes applied, want 50: the bucket's room", got, writers*writes)
	}
	r, err := s.ReadWindow(ctx, "edge", t0, t0.Add(time.Hour))
	if err != nil || r.Value != math.MaxInt64 {
		t.Fatalf("ReadWindow = %+v, %v; want MaxInt64", r, err)
	}
}

// mustApply applies one item and fails the test unless it applied.
func mustApply(t *testing.T, s *postgres.CounterStore, inc shardcounter.Increment) {
	t.Helper()
	out, err := s.Apply(context.Background(), []shardcounter.Increment{inc})
	if err != nil || out[0].Err != nil {
		t.Fatalf("Apply(%+v) = %+v, %v", inc, out, err)
	}
}

// TestWindowMadeAgain has one process (store) learn that a counter has
// no window, and another delete it and make it again with one, writing
// its bucket to MaxInt64 while the total has room: the first still judges
// the bucket on its rows, and refuses +1. (Bounded, the counter is read
// whole from the first attempt, which would otherwise decide on no rows.)
func TestWindowMadeAgain(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 3, 1, 11, 10, 0, 0, time.UTC)}
	dsn := pgtest.MustDatabase(t)
	s1, s2 := mustOpenDSN(t, dsn, postgres.Options{Now: clk.Now}), mustOpenDSN(t, dsn, postgres.Options{Now: clk.Now})
	storetest.MustCreate(t, s1, "again", 2)
	mustApply(t, s1, shardcounter.Increment{Counter: "again", Delta: 1, RequestID: "a"})
	if err := s2.DeleteCounter(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	floor := int64(math.MinInt64)
	spec := shardcounter.Spec{Shards: 2, Min: &floor, Window: &shardcounter.Window{Bucket: shardcounter.BucketHour, Retention: shardcounter.Duration(3 * time.Hour)}}
	if _, err := s2.CreateCounter(ctx, "again", spec); err != nil {
		t.Fatal(err)
	}
	mustApply(t, s2, shardcounter.Increment{Counter: "again", Delta: -5, RequestID: "b"})
	clk.Advance(time.Hour)
	mustApply(t, s2, shardcounter.Increment{Counter: "again", Delta: math.MaxInt64, RequestID: "c"})
	out, err := s1.Apply(ctx, []shardcounter.Increment{{Counter: "again", Delta: 1, Pick: 1, RequestID: "d"}})
	if err != nil || shardcounter.ErrorCode(out[0].Err) != shardcounter.EOUTOFRANGE {
		t.Fatalf("+1 on a bucket at MaxInt64: %+v, %v; want out_of_range", out, err)
	}
}
