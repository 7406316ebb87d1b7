package pebble_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/storetest"
)

// MustOpen opens a store in a fresh temporary directory, closed at the end
// of the test.
func MustOpen(tb testing.TB) *pebble.CounterStore {
	tb.Helper()
	return MustOpenOptions(tb, pebble.Options{})
}

// MustOpenOptions opens a store with opts in a fresh temporary directory,
// closed at the end of the test.
func MustOpenOptions(tb testing.TB, opts pebble.Options) *pebble.CounterStore {
	tb.Helper()
	s, err := pebble.Open(context.Background(), filepath.Join(tb.TempDir(), "data", "pebble"), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestCounterStore(t *testing.T) {
	storetest.RunCounterStore(t, func(tb testing.TB) shardcounter.CounterStore { return MustOpen(tb) }, storetest.Options{
		OpenWithClock: func(tb testing.TB, now func() time.Time) shardcounter.CounterStore {
			return MustOpenOptions(tb, pebble.Options{Now: now})
		},
		Totals: true,
	})
}

func TestCollectionStore(t *testing.T) {
	storetest.RunCollectionStore(t, func(tb testing.TB) shardcounter.CollectionStore { return MustOpen(tb).Collections() })
}

func TestDedupeWindow(t *testing.T) {
	ctx := context.Background()
	clk := storetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s, err := pebble.Open(ctx, filepath.Join(t.TempDir(), "pebble"), pebble.Options{Now: clk.Now, DedupeWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.RunDedupeWindow(t, s, time.Hour, clk.Advance)
	t.Run("Expiry", func(t *testing.T) {
		ids := func(tb testing.TB) int {
			tb.Helper()
			n, indexed := s.RequestIDs()
			if n != indexed {
				tb.Fatalf("%d ids, %d in the index by age: they must agree", n, indexed)
			}
			return n
		}
		storetest.RunRequestIDExpiry(t, s, time.Hour, clk.Advance, ids, pebble.ExpireBatch)
	})
}

func TestReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pebble")
	ctx := context.Background()
	s, err := pebble.Open(ctx, dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.MustCreate(t, s, "views", 4)
	storetest.MustCreateDistinct(t, s, "likes", 3)
	for i := range 10 {
		if err := s.Add(ctx, "views", int64(i+1), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: "likes", Member: "ann", Delta: 1}, {Counter: "likes", Member: "bob", Delta: 1},
		{Counter: "new", Delta: -7, Create: &shardcounter.Spec{Shards: 2}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReshardCounter(ctx, "views", 3); err != nil {
		t.Fatal(err)
	}
	t.Run("ErrLocked", func(t *testing.T) {
		if _, err := pebble.Open(ctx, dir, pebble.Options{}); err == nil {
			t.Fatal("a second Open of a directory in use succeeded")
		}
	})
	shards := storetest.MustShards(t, s, "views")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = pebble.Open(ctx, dir, pebble.Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, want := range map[string]int64{"views": 55, "likes": 2, "new": -7} {
		if got := storetest.MustRead(t, s, id); got != want {
			t.Errorf("%s after reopening = %d, want %d", id, got, want)
		}
	}
	if got := storetest.MustShards(t, s, "views"); len(got) != 3 || got[0] != shards[0] || got[1] != shards[1] || got[2] != shards[2] {
		t.Errorf("shards after reopening = %v, want %v", got, shards)
	}
	storetest.CheckMembers(t, s, "likes", []string{"ann", "bob"})
}

func TestOpenInvalid(t *testing.T) {
	if _, err := pebble.Open(context.Background(), "", pebble.Options{}); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Fatalf("Open(\"\") = %v, want invalid_argument", err)
	}
	file := filepath.Join(t.TempDir(), "c.db")
	if err := os.WriteFile(file, []byte("bolt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pebble.Open(context.Background(), file, pebble.Options{}); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Fatalf("Open of a file = %v, want invalid_argument", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pebble.Open(ctx, filepath.Join(t.TempDir(), "p"), pebble.Options{}); shardcounter.ErrorCode(err) != shardcounter.EUNAVAILABLE {
		t.Fatalf("Open with an ended context = %v, want unavailable", err)
	}
}

// TestChurn creates and deletes counters whose ids fill many chunks: the
// chunks of deleted ids are unmapped, and the counters made again read
// right.
func TestChurn(t *testing.T) {
	defer pebble.SetIDChunkSize(1 << 10)()
	ctx := context.Background()
	s := MustOpen(t)
	id := func(round, i int) string { return fmt.Sprintf("%d/%0200d", round, i) }
	for round := range 3 {
		var incs []shardcounter.Increment
		for i := range 60 {
			incs = append(incs, shardcounter.Increment{Counter: id(round, i), Delta: int64(i + 1), Create: &shardcounter.Spec{Shards: 1}})
		}
		if _, err := s.Apply(ctx, incs); err != nil {
			t.Fatal(err)
		}
		if n := s.IDChunks(); n < 12 {
			t.Fatalf("round %d: %d chunks of ids for 60 ids of 200 bytes in 1 KiB chunks, want 12 or more", round, n)
		}
		for i := range 60 {
			if got := storetest.MustRead(t, s, id(round, i)); got != int64(i+1) {
				t.Fatalf("%s = %d, want %d", id(round, i), got, i+1)
			}
			if err := s.DeleteCounter(ctx, id(round, i)); err != nil {
				t.Fatal(err)
			}
		}
		if n := s.IDChunks(); n > 1 {
			t.Fatalf("round %d: %d chunks of ids left after deleting every counter, want at most the current one", round, n)
		}
		if _, err := s.ReadCounter(ctx, id(round, 0)); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
			t.Fatalf("ReadCounter of a deleted counter = %v, want not_found", err)
		}
	}
}

// TestThroughEngine runs the strong-read cases through an engine: on a
// store that reads from memory the engine reads it directly, without
// gathering reads, and the reads stay linearizable under writes and
// reshards. A cached read is as fresh as a strong one.
func TestThroughEngine(t *testing.T) {
	s := MustOpen(t)
	storetest.RunStrongReads(t, storetest.ThroughEngine(t, s, engine.Config{}))
	t.Run("CachedIsFresh", func(t *testing.T) {
		ctx := context.Background()
		eng, err := engine.New(s, engine.Config{MaxStaleness: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close(ctx)
		for i := range 3 {
			if _, err := eng.WriteCounter(ctx, shardcounter.Write{Counter: "fresh", Delta: 5}); err != nil {
				t.Fatal(err)
			}
			rs, err := eng.ReadCounters(ctx, []string{"fresh", "none"}, shardcounter.Cached)
			if err != nil {
				t.Fatal(err)
			}
			if r := rs[0].Reading; r == nil || r.Value != int64(5*(i+1)) || r.Consistency != shardcounter.Cached || r.MaxStalenessMS != time.Hour.Milliseconds() {
				t.Fatalf("cached read after %d writes = %+v, want %d, cached, with the staleness bound", i+1, rs[0], 5*(i+1))
			}
			if shardcounter.ErrorCode(rs[1].Err) != shardcounter.ENOTFOUND {
				t.Fatalf("cached read of a missing counter = %+v, want not_found", rs[1])
			}
		}
	})
}
