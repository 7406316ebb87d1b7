package bolt_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/storetest"
)

// MustOpen opens a store in a fresh temporary directory, closed at the end
// of the test.
func MustOpen(tb testing.TB) *bolt.CounterStore {
	tb.Helper()
	return MustOpenOptions(tb, bolt.Options{})
}

// MustOpenOptions opens a store with opts in a fresh temporary directory,
// closed at the end of the test.
func MustOpenOptions(tb testing.TB, opts bolt.Options) *bolt.CounterStore {
	tb.Helper()
	s, err := bolt.Open(context.Background(), filepath.Join(tb.TempDir(), "data", "shardcounter.db"), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestCounterStore(t *testing.T) {
	storetest.RunCounterStore(t, func(tb testing.TB) shardcounter.CounterStore { return MustOpen(tb) }, storetest.Options{
		OpenWithClock: func(tb testing.TB, now func() time.Time) shardcounter.CounterStore {
			return MustOpenOptions(tb, bolt.Options{Now: now})
		},
		Totals: true,
	})
}

func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := bolt.Open(context.Background(), path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	storetest.MustCreate(t, s, "views", 4)
	for i := range 10 {
		if err := s.Add(ctx, "views", int64(i+1), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("ErrLocked", func(t *testing.T) {
		// The context's deadline, when sooner than the default second,
		// bounds the wait for the lock.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := bolt.Open(ctx, path, bolt.Options{}); err == nil {
			t.Fatal("a second Open of a file in use succeeded")
		}
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = bolt.Open(context.Background(), path, bolt.Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := storetest.MustRead(t, s, "views"); got != 55 {
		t.Fatalf("value after reopening = %d, want 55", got)
	}
}

func TestOpenInvalid(t *testing.T) {
	if _, err := bolt.Open(context.Background(), "", bolt.Options{}); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Fatalf("Open(\"\") = %v, want invalid_argument", err)
	}
	if _, err := bolt.Open(context.Background(), t.TempDir(), bolt.Options{}); err == nil {
		t.Fatal("Open of a directory succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := bolt.Open(ctx, filepath.Join(t.TempDir(), "c.db"), bolt.Options{}); shardcounter.ErrorCode(err) != shardcounter.EUNAVAILABLE {
		t.Fatalf("Open with an ended context = %v, want unavailable", err)
	}
}

// MustOpenCollections opens a collection store in a fresh temporary
// directory, closed at the end of the test.
func MustOpenCollections(tb testing.TB) *bolt.CollectionStore {
	tb.Helper()
	cs, err := MustOpen(tb).Collections()
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

func TestCollectionStore(t *testing.T) {
	storetest.RunCollectionStore(t, func(tb testing.TB) shardcounter.CollectionStore { return MustOpenCollections(tb) })
}

func TestDedupeWindow(t *testing.T) {
	ctx := context.Background()
	clk := storetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s, err := bolt.Open(ctx, filepath.Join(t.TempDir(), "c.db"), bolt.Options{Now: clk.Now, DedupeWindow: time.Hour})
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
				tb.Fatalf("%d ids, %d in the index by time: they must agree", n, indexed)
			}
			return n
		}
		storetest.RunRequestIDExpiry(t, s, time.Hour, clk.Advance, ids, bolt.ExpireBatch)
	})
}

// TestCorruptCounter checks that a counter whose record does not decode
// fails the items on it, alone: the rest of the batch applies.
func TestCorruptCounter(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	storetest.MustCreate(t, s, "bad", 2)
	storetest.MustCreate(t, s, "good", 2)
	if err := s.CorruptCounter("bad"); err != nil {
		t.Fatal(err)
	}
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "bad", Delta: 1}, {Counter: "good", Delta: 1}})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if got := shardcounter.ErrorCode(out[0].Err); got != shardcounter.EINTERNAL || out[1].Err != nil {
		t.Fatalf("outcomes %+v, want internal for bad and good applied", out)
	}
	if got := storetest.MustRead(t, s, "good"); got != 1 {
		t.Errorf("good = %d, want 1", got)
	}
}
