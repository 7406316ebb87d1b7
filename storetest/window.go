package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// The cases in this file check windowed counters (DESIGN invariant 10,
// issue 15 item 2) on a store whose clock the test sets
// (Options.OpenWithClock): every applied write also lands in the bucket of
// its commit time; ReadWindow sums the buckets that start in [from, to);
// ReadSeries returns the stored non-zero buckets, not filtered by
// retention; a write to a windowed counter removes that counter's buckets
// past retention (those that start before the bucket holding
// now − retention), so an idle store and counters nobody writes keep
// theirs. Times are whole seconds, finer than every store's precision.

// Clock is a time a test sets and advances, for a store's injected clock
// (Options.OpenWithClock, a store's own dedupe tests). It is safe for
// concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock that reads t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time; pass it as a store's Now.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// day0 is the midnight (UTC) the window cases start from.
var day0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// at returns day0 plus a clock time written as "15:04:05".
func at(hms string) time.Time {
	t, err := time.Parse("15:04:05", hms)
	if err != nil {
		panic(err)
	}
	return day0.Add(time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second)
}

// openWithClock returns a store on a clock the test sets, starting at
// day0, or fails the test when the store gave the suite no way to make one.
func openWithClock(t *testing.T, opts Options) (shardcounter.CounterStore, *Clock) {
	t.Helper()
	if opts.OpenWithClock == nil {
		t.Fatal("storetest.Options.OpenWithClock is nil: windowed counters are tested on a store whose clock the test sets; give the suite a way to open one")
	}
	clk := NewClock(day0)
	return opts.OpenWithClock(t, clk.Now), clk
}

// wantSeries fails the test unless ReadSeries of [from, to) returns want.
func wantSeries(tb testing.TB, s shardcounter.CounterStore, id string, from, to time.Time, want ...shardcounter.Bucket) {
	tb.Helper()
	got, err := s.ReadSeries(context.Background(), id, from, to)
	if err != nil {
		tb.Fatalf("ReadSeries(%s, %s): %v", from.Format(time.TimeOnly), to.Format(time.TimeOnly), err)
	}
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i].Start.Equal(want[i].Start) && got[i].Value == want[i].Value
	}
	if !ok {
		tb.Fatalf("ReadSeries(%s, %s) = %s, want %s", from.Format(time.DateTime), to.Format(time.DateTime), seriesString(got), seriesString(want))
	}
}

func seriesString(bs []shardcounter.Bucket) string {
	s := "["
	for i, b := range bs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s:%d", b.Start.UTC().Format("01-02T15:04"), b.Value)
	}
	return s + "]"
}

// wantWindow fails the test unless ReadWindow of [from, to) sums to want
// and says which interval it covers.
func wantWindow(tb testing.TB, s shardcounter.CounterStore, id string, from, to time.Time, want int64) {
	tb.Helper()
	r, err := s.ReadWindow(context.Background(), id, from, to)
	if err != nil {
		tb.Fatalf("ReadWindow(%s, %s): %v", from.Format(time.TimeOnly), to.Format(time.TimeOnly), err)
	}
	if r.ID != id || r.Value != want || r.Window == nil || !r.Window.From.Equal(from) || !r.Window.To.Equal(to) || r.Consistency != shardcounter.Strong {
		tb.Fatalf("ReadWindow(%s, %s) = %+v (window %+v), want %d over that interval, strong", from.Format(time.TimeOnly), to.Format(time.TimeOnly), r, r.Window, want)
	}
}

func bucket(start time.Time, v int64) shardcounter.Bucket {
	return shardcounter.Bucket{Start: start, Value: v}
}

// testWindow writes across a simulated three hours into hour buckets and
// checks the exact sum of each bucket, windowed sums over several ranges,
// the all-time value, and that buckets survive reshards.
func testWindow(t *testing.T, opts Options) {
	ctx := context.Background()
	s, clk := openWithClock(t, opts)
	w := clocked{s: s, clk: clk}
	id := prefix(t) + "views"
	if _, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: 4, Window: window(time.Hour, 24*time.Hour)}); err != nil {
		t.Fatal(err)
	}
	add := func(hms string, delta int64, pick uint64) {
		t.Helper()
		w.add(t, hms, id, delta, pick)
	}
	inc := func(delta int64, pick uint64) shardcounter.Increment {
		return shardcounter.Increment{Counter: id, Delta: delta, Pick: pick}
	}

	add("10:17:00", 5, 0)
	w.apply(t, "10:59:59", inc(3, 1))            // 10:00 → 8
	w.apply(t, "11:00:00", inc(-2, 2))           // 11:00 starts here
	add("11:30:00", 12, 3)                       // 11:00 → 10
	w.apply(t, "12:45:00", inc(4, 0), inc(3, 1)) // one batch, two shards
	add("12:59:59", 8, 2)                        // 12:00 → 15
	w.apply(t, "13:05:00", inc(6, 0))            //
	w.apply(t, "13:10:00", inc(-6, 3))           // 13:00 → 0: no bucket in a series
	out := w.apply(t, "14:20:00", shardcounter.Increment{Counter: id, Delta: 2, Pick: 1, RequestID: "r"})
	if o := w.apply(t, "14:21:00", shardcounter.Increment{Counter: id, Delta: 2, Pick: 1, RequestID: "r"})[0]; out[0].Err != nil || !o.Duplicate {
		t.Fatalf("a write and its retry: %+v, %+v; want applied, duplicate", out[0], o)
	} // 14:00 → 2: a duplicate adds nothing to its bucket either

	series := []shardcounter.Bucket{bucket(at("10:00:00"), 8), bucket(at("11:00:00"), 10), bucket(at("12:00:00"), 15), bucket(at("14:00:00"), 2)}
	clk.Set(at("14:30:00"))
	checkWindowDay(t, s, id, series)

	t.Run("Reshard", func(t *testing.T) { testWindowReshard(t, w, id, series) })
	t.Run("RefusedWrites", func(t *testing.T) { testWindowRefused(t, w) })
	t.Run("MinuteAndDayBuckets", func(t *testing.T) { testWindowMinuteAndDay(t, w) })
	if !opts.BucketPartsPerShard {
		t.Run("BucketInt64", func(t *testing.T) { testWindowBucketInt64(t, w) })
	}
}

// clocked writes to a store whose clock the test sets, at a time of the
// simulated day, so each write lands in the bucket the test means.
type clocked struct {
	s   shardcounter.CounterStore
	clk *Clock
}

func (w clocked) apply(t *testing.T, hms string, incs ...shardcounter.Increment) []shardcounter.Outcome {
	t.Helper()
	w.clk.Set(at(hms))
	out, err := w.s.Apply(context.Background(), incs)
	if err != nil {
		t.Fatalf("Apply at %s: %v", hms, err)
	}
	return out
}

func (w clocked) add(t *testing.T, hms, id string, delta int64, pick uint64) {
	t.Helper()
	w.clk.Set(at(hms))
	if err := w.s.Add(context.Background(), id, delta, pick); err != nil {
		t.Fatalf("Add at %s: %v", hms, err)
	}
}

// checkWindowDay checks testWindow's counter against its expected hour
// buckets: series over several ranges, windowed sums, the all-time value.
func checkWindowDay(t *testing.T, s shardcounter.CounterStore, id string, series []shardcounter.Bucket) {
	t.Helper()
	wantSeries(t, s, id, day0, day0.Add(24*time.Hour), series...)
	wantSeries(t, s, id, at("11:00:00"), at("12:00:00"), series[1])
	wantSeries(t, s, id, at("11:30:00"), at("13:00:00"), series[2]) // by start: 11:00 is before 11:30
	wantSeries(t, s, id, at("13:00:00"), at("14:00:00"))            // 13:00 nets to 0
	wantSeries(t, s, id, at("15:00:00"), at("20:00:00"))
	wantWindow(t, s, id, at("10:00:00"), at("13:00:00"), 33)
	wantWindow(t, s, id, at("11:00:00"), at("14:00:00"), 25)
	wantWindow(t, s, id, at("13:00:00"), at("15:00:00"), 2)
	wantWindow(t, s, id, at("09:00:00"), at("10:00:00"), 0)
	wantWindow(t, s, id, at("12:00:00"), at("12:00:00"), 0)
	if got := MustRead(t, s, id); got != 35 {
		t.Fatalf("all-time value = %d, want 35", got)
	}
}

// testWindowReshard checks that a counter's buckets survive reshards up
// and down, and that writes after them land in the same buckets.
func testWindowReshard(t *testing.T, w clocked, id string, series []shardcounter.Bucket) {
	for _, n := range []int{7, 2, 1, 5} {
		if _, err := w.s.ReshardCounter(context.Background(), id, n); err != nil {
			t.Fatal(err)
		}
		checkWindowDay(t, w.s, id, series)
	}
	w.add(t, "14:40:00", id, 3, 4)
	series = slices.Clone(series)
	series[3].Value += 3
	wantSeries(t, w.s, id, day0, day0.Add(24*time.Hour), series...)
}

// testWindowRefused checks that a refused write lands in no bucket.
func testWindowRefused(t *testing.T, w clocked) {
	id := prefix(t) + "floor"
	if _, err := w.s.CreateCounter(context.Background(), id, shardcounter.Spec{Shards: 2, Min: ptr(0), Window: window(time.Hour, 24*time.Hour)}); err != nil {
		t.Fatal(err)
	}
	out := w.apply(t, "14:10:00",
		shardcounter.Increment{Counter: id, Delta: -1},
		shardcounter.Increment{Counter: id, Delta: 4, Pick: 1},
		shardcounter.Increment{Counter: id, Delta: -5},
	)
	wantCode(t, "write below min", out[0].Err, shardcounter.EOUTOFRANGE)
	wantCode(t, "write below min", out[2].Err, shardcounter.EOUTOFRANGE)
	wantSeries(t, w.s, id, day0, day0.Add(24*time.Hour), bucket(at("14:00:00"), 4))
}

// testWindowMinuteAndDay checks bucket edges at other widths: minute
// buckets at the last seconds of a minute, day buckets across midnight UTC.
func testWindowMinuteAndDay(t *testing.T, w clocked) {
	ctx := context.Background()
	minute, day := prefix(t)+"minute", prefix(t)+"day"
	for id, win := range map[string]*shardcounter.Window{minute: window(time.Minute, time.Hour), day: window(24*time.Hour, 7*24*time.Hour)} {
		if _, err := w.s.CreateCounter(ctx, id, shardcounter.Spec{Shards: 3, Window: win}); err != nil {
			t.Fatal(err)
		}
	}
	w.apply(t, "00:00:30", shardcounter.Increment{Counter: day, Delta: 8})
	for _, x := range []struct {
		hms   string
		delta int64
	}{{"23:58:59", 1}, {"23:59:00", 2}, {"23:59:59", 4}} {
		w.apply(t, x.hms,
			shardcounter.Increment{Counter: minute, Delta: x.delta, Pick: uint64(x.delta)},
			shardcounter.Increment{Counter: day, Delta: x.delta, Pick: uint64(x.delta)})
	}
	w.clk.Set(day0.Add(24*time.Hour + 30*time.Second)) // the next day, UTC
	if _, err := w.s.Apply(ctx, []shardcounter.Increment{{Counter: day, Delta: 16}}); err != nil {
		t.Fatal(err)
	}
	wantSeries(t, w.s, minute, day0, day0.Add(48*time.Hour), bucket(at("23:58:00"), 1), bucket(at("23:59:00"), 6))
	wantSeries(t, w.s, day, day0, day0.Add(48*time.Hour), bucket(day0, 15), bucket(day0.Add(24*time.Hour), 16))
}

// testWindowRetention checks that buckets past retention are removed as a
// side effect of later writes to their counter, and only then: an idle
// store, and a counter nobody writes, keep theirs, and ReadSeries shows
// them. A store may keep a counter's buckets per shard and sweep a shard
// when it is written, so the later writes go to every shard.
func testWindowRetention(t *testing.T, opts Options) {
	ctx := context.Background()
	s, clk := openWithClock(t, opts)
	const shards = 3
	id, idle := prefix(t)+"c", prefix(t)+"idle"
	for _, c := range []string{id, idle} {
		if _, err := s.CreateCounter(ctx, c, shardcounter.Spec{Shards: shards, Window: window(time.Hour, 3*time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	write := func(hms string, c string, delta int64) {
		t.Helper()
		clk.Set(at(hms))
		var incs []shardcounter.Increment
		for pick := range shards { // every shard
			incs = append(incs, shardcounter.Increment{Counter: c, Delta: delta, Pick: uint64(pick)})
		}
		out, err := s.Apply(ctx, incs)
		if err != nil {
			t.Fatalf("Apply at %s: %v", hms, err)
		}
		for _, o := range out {
			if o.Err != nil {
				t.Fatalf("Apply at %s: %v", hms, o.Err)
			}
		}
	}
	all := func(c string, want ...shardcounter.Bucket) {
		t.Helper()
		wantSeries(t, s, c, day0.Add(-24*time.Hour), day0.Add(48*time.Hour), want...)
	}

	write("00:30:00", id, 1)
	write("00:40:00", idle, 1)
	write("01:10:00", id, 2)
	write("02:20:00", id, 4)
	clk.Set(at("09:00:00")) // idle: every bucket is past retention now, and stays
	all(id, bucket(at("00:00:00"), 3), bucket(at("01:00:00"), 6), bucket(at("02:00:00"), 12))

	// At 04:10 the bucket holding 01:10 (04:10 − 3h) is the oldest kept:
	// 00:00 goes, 01:00 and 02:00 stay.
	write("04:10:00", id, 8)
	all(id, bucket(at("01:00:00"), 6), bucket(at("02:00:00"), 12), bucket(at("04:00:00"), 24))
	wantWindow(t, s, id, day0, day0.Add(24*time.Hour), 42)
	all(idle, bucket(at("00:00:00"), 3)) // nobody wrote it: nothing done

	clk.Set(at("20:00:00"))
	all(id, bucket(at("01:00:00"), 6), bucket(at("02:00:00"), 12), bucket(at("04:00:00"), 24))
	write("20:00:00", id, 16)
	all(id, bucket(at("20:00:00"), 48))
	all(idle, bucket(at("00:00:00"), 3))
	if got := MustRead(t, s, id); got != 3+6+12+24+48 {
		t.Fatalf("all-time value = %d, want %d: removing buckets must not change it", got, 3+6+12+24+48)
	}
}

// testWindowUnderWrites has writers write concurrently while a resharder
// changes the shard count, one hour at a time on the test's clock: each
// hour's bucket equals the sum of the writes acknowledged in it.
func testWindowUnderWrites(t *testing.T, opts Options) {
	ctx := context.Background()
	s, clk := openWithClock(t, opts)
	id := prefix(t) + "c"
	if _, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: 4, Window: window(time.Hour, 24*time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var want []shardcounter.Bucket
	var total int64
	for hour := range 3 {
		start := day0.Add(time.Duration(10+hour) * time.Hour)
		clk.Set(start.Add(30 * time.Minute))
		var sum atomic.Int64
		done := make(chan struct{})
		var wg, resharder sync.WaitGroup
		resharder.Go(func() { reshardUntil(t, s, []string{id}, done) })
		for w := range 6 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
				for range scale(5, 15) {
					d := rng.Int64N(200) - 50
					if d == 0 {
						d = 1
					}
					if err := writeOnce(ctx, s, id, d, rng); err != nil {
						t.Errorf("write: %v", err)
						return
					}
					sum.Add(d)
				}
			})
		}
		wg.Wait()
		close(done)
		resharder.Wait()
		if t.Failed() {
			return
		}
		if sum.Load() != 0 {
			want = append(want, bucket(start, sum.Load()))
		}
		total += sum.Load()
		wantSeries(t, s, id, day0, day0.Add(24*time.Hour), want...)
	}
	if got := MustRead(t, s, id); got != total {
		t.Fatalf("all-time value = %d, want %d", got, total)
	}
}
