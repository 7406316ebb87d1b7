package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// clock is a time source a test moves by hand, shared by a store and an
// engine.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func (c *clock) set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// TestWindow writes to a counter with hourly buckets and a 6-hour
// retention across a simulated day: windowed reads align to the buckets,
// stop at the retention, say which interval they cover, and series fill
// empty buckets with zeros and sum coarser ones.
func TestWindow(t *testing.T) {
	start := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	clk := &clock{}
	eachStore(t, clk.Now, func(t *testing.T, store shardcounter.CounterStore) {
		clk.set(start)
		e := MustNew(t, store, engine.Config{Now: clk.Now})
		ctx := context.Background()
		hour := shardcounter.Duration(time.Hour)
		if _, _, err := e.CreateCounter(ctx, "views", shardcounter.CreateOptions{Shards: 4, Window: &shardcounter.Window{Bucket: hour, Retention: 6 * hour}}); err != nil {
			t.Fatal(err)
		}
		// 09:30 +1, 10:30 +2, 11:30 nothing, 12:30 +4.
		for _, d := range []int64{1, 2, 0, 4} {
			if d != 0 {
				if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: "views", Delta: d}); err != nil {
					t.Fatal(err)
				}
			}
			clk.advance(time.Hour)
		}
		clk.advance(-time.Hour) // now 12:30
		at := func(h int) time.Time { return time.Date(2026, 3, 1, h, 0, 0, 0, time.UTC) }

		for _, tc := range []struct {
			last     time.Duration
			from     time.Time
			value    int64
			describe string
		}{
			{time.Minute, at(12), 4, "the current bucket, still filling"},
			{time.Hour, at(12), 4, "one bucket: the current one"},
			{2 * time.Hour, at(11), 4, "two buckets: the current one and the one before"},
			{150 * time.Minute, at(10), 6, "⌈2.5⌉ = 3 buckets"},
			{6 * time.Hour, at(7), 7, "the 6 buckets retained"},
			{48 * time.Hour, at(7), 7, "cut to the 6 buckets retained"},
		} {
			r, err := e.ReadWindow(ctx, "views", tc.last)
			if err != nil {
				t.Fatal(err)
			}
			if r.Value != tc.value || r.Window == nil || !r.Window.From.Equal(tc.from) || !r.Window.To.Equal(at(13)) {
				t.Fatalf("ReadWindow(last %v) = %d over %+v; want %d over [%v, %v): %s", tc.last, r.Value, r.Window, tc.value, tc.from, at(13), tc.describe)
			}
		}

		s, err := e.ReadSeries(ctx, "views", 4*time.Hour, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []int64{1, 2, 0, 4} // 09:00 to 12:00, the current hour last
		if len(s.Buckets) != len(want) || !s.From.Equal(at(9)) || !s.To.Equal(at(13)) || s.Bucket != hour {
			t.Fatalf("ReadSeries(4h) = %+v; want %d hourly buckets from 09:00 to 13:00", s, len(want))
		}
		for i, b := range s.Buckets {
			if !b.Start.Equal(at(9+i)) || b.Value != want[i] {
				t.Fatalf("bucket %d = %+v, want %v at %v", i, b, want[i], at(9+i))
			}
		}

		s, err = e.ReadSeries(ctx, "views", 5*time.Hour, 2*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// ⌈5h/2h⌉ = 3 buckets of 2h, the last holding 12:30.
		want = []int64{1, 2, 4} // 08-10, 10-12, 12-14
		if len(s.Buckets) != len(want) || !s.From.Equal(at(8)) || !s.To.Equal(at(14)) {
			t.Fatalf("ReadSeries(5h, 2h) = %+v; want 3 buckets from 08:00 to 14:00", s)
		}
		for i, b := range s.Buckets {
			if b.Value != want[i] {
				t.Fatalf("2h bucket %d = %+v, want %d", i, b, want[i])
			}
		}
		// 7h of 2h buckets would start at 06:00, before the oldest hour
		// retained (07:00): the series starts with the first whole 2h
		// bucket, 08:00.
		if s, err = e.ReadSeries(ctx, "views", 7*time.Hour, 2*time.Hour); err != nil || !s.From.Equal(at(8)) || len(s.Buckets) != 3 {
			t.Fatalf("ReadSeries(7h, 2h) = %+v, %v; want 3 buckets from 08:00, cut to the retention", s, err)
		}
		if _, err := e.ReadSeries(ctx, "views", time.Hour, 90*time.Minute); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Fatalf("ReadSeries with 90m buckets on hourly ones = %v, want invalid_argument", err)
		}
		if _, err := e.ReadSeries(ctx, "views", time.Hour, 5*time.Hour); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Fatalf("ReadSeries with 5h buckets, which do not divide a day = %v, want invalid_argument", err)
		}
		if _, err := e.ReadSeries(ctx, "views", time.Hour, 12*time.Hour); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Fatalf("ReadSeries with buckets wider than the retention = %v, want invalid_argument", err)
		}
		if got := read(t, e, "views"); got != 7 {
			t.Fatalf("all-time value %d, want 7", got)
		}
	})
}

// specReads counts a store's GetCounter calls.
type specReads struct {
	shardcounter.CounterStore
	gets atomic.Int64
}

func (s *specReads) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	s.gets.Add(1)
	return s.CounterStore.GetCounter(ctx, id)
}

// TestWindowSpecKept reads a window again and again: the counter's window
// is read from the store once per MaxStaleness, so each windowed read
// after the first is one store read, of the buckets; a counter deleted
// through the engine is forgotten at once.
func TestWindowSpecKept(t *testing.T) {
	clk := &clock{now: time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)}
	store := &specReads{CounterStore: MustOpenStore(t)}
	e := MustNew(t, store, engine.Config{Now: clk.Now, MaxStaleness: time.Second})
	ctx := context.Background()
	hour := shardcounter.Duration(time.Hour)
	if _, _, err := e.CreateCounter(ctx, "views", shardcounter.CreateOptions{Shards: 2, Window: &shardcounter.Window{Bucket: hour, Retention: 6 * hour}}); err != nil {
		t.Fatal(err)
	}
	read := func() error {
		_, err := e.ReadWindow(ctx, "views", 24*time.Hour)
		return err
	}
	store.gets.Store(0)
	for range 3 {
		if err := read(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.ReadSeries(ctx, "views", 3*time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	if got := store.gets.Load(); got != 1 {
		t.Fatalf("four windowed reads within MaxStaleness read the counter's spec %d times, want 1", got)
	}
	clk.advance(2 * time.Second)
	if err := read(); err != nil || store.gets.Load() != 2 {
		t.Fatalf("a read after MaxStaleness: %v, %d spec reads; want the spec read again (2)", err, store.gets.Load())
	}
	if err := e.DeleteCounter(ctx, "views"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.CreateCounter(ctx, "views", shardcounter.CreateOptions{Shards: 2}); err != nil {
		t.Fatal(err)
	}
	if err := read(); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Fatalf("a windowed read of a counter deleted and created again without a window: %v; want invalid_argument", err)
	}
}
