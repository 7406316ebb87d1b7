package bolt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/internal/shard"
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
	storetest.MustCreate(t, s, "c", 4)
	apply := func(rid string) shardcounter.Outcome {
		t.Helper()
		out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "c", Delta: 1, Pick: shard.PickFor("c", rid), RequestID: rid}})
		if err != nil || out[0].Err != nil {
			t.Fatalf("Apply(%s) = %+v, %v", rid, out, err)
		}
		return out[0]
	}

	storetest.RunDedupeWindow(t, s, time.Hour, clk.Advance)
	t.Run("Expiry", func(t *testing.T) {
		clk.Advance(2 * time.Hour) // everything so far has expired
		var incs []shardcounter.Increment
		for i := range 500 {
			rid := fmt.Sprint("old-", i)
			incs = append(incs, shardcounter.Increment{Counter: "c", Delta: 1, Pick: shard.PickFor("c", rid), RequestID: rid})
		}
		if _, err := s.Apply(ctx, incs); err != nil {
			t.Fatal(err)
		}
		// It records 500 ids and deletes the 2 that had expired (a and
		// flood, from the contract cases).
		ids, indexed := s.RequestIDs()
		if ids != 500 || indexed != 500 {
			t.Fatalf("%d ids, %d indexed; want 500 of each", ids, indexed)
		}
		// An idle store deletes nothing, however old the ids.
		clk.Advance(48 * time.Hour)
		if ids, _ := s.RequestIDs(); ids != 500 {
			t.Fatalf("%d ids after idling, want 500", ids)
		}
		// Each write deletes a bounded number of the oldest, so a backlog
		// goes within a few writes and no write pays for all of it.
		for i := 1; i <= 8; i++ {
			if err := s.Add(ctx, "c", 1, 0); err != nil {
				t.Fatal(err)
			}
			ids, indexed := s.RequestIDs()
			if want := max(500-64*i, 0); ids != want || indexed != want {
				t.Fatalf("after %d writes: %d ids, %d indexed; want %d", i, ids, indexed, want)
			}
		}
		// A write with ids deletes at least as many expired ones as it adds.
		clk.Advance(time.Minute)
		apply("new")
		if ids, indexed := s.RequestIDs(); ids != 1 || indexed != 1 {
			t.Fatalf("%d ids, %d indexed after a new id; want 1, 1", ids, indexed)
		}
	})
	t.Run("DeleteCounter", func(t *testing.T) {
		if err := s.DeleteCounter(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		if ids, indexed := s.RequestIDs(); ids != 0 || indexed != 0 {
			t.Fatalf("%d ids, %d indexed after deleting the counter; want 0, 0", ids, indexed)
		}
	})
}
