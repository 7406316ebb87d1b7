package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/storetest"
)

// clock is a settable time for the store's Now. PostgreSQL keeps times to
// the microsecond, so tests step it by a microsecond at the finest.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// requestIDs counts the request ids the store keeps.
func requestIDs(tb testing.TB, s *postgres.CounterStore) int {
	tb.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM shardcounter.requests").Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

func TestDedupeWindow(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	s := MustOpenWith(t, postgres.Options{Now: clk.Now, DedupeWindow: time.Hour})
	storetest.MustCreate(t, s, "c", 4)
	storetest.RunDedupeWindow(t, s, time.Hour, clk.Advance)
	t.Run("Expiry", func(t *testing.T) {
		clk.Advance(2 * time.Hour) // everything so far has expired
		var incs []shardcounter.Increment
		for i := range 500 {
			rid := fmt.Sprint("old-", i)
			incs = append(incs, shardcounter.Increment{Counter: "c", Delta: 1, Pick: shard.PickFor("c", rid), RequestID: rid})
		}
		// This batch records 500 ids and deletes the 2 that expired
		// before it (a and flood).
		if _, err := s.Apply(ctx, incs); err != nil {
			t.Fatal(err)
		}
		if got := requestIDs(t, s); got != 500 {
			t.Fatalf("%d ids, want 500", got)
		}
		// An idle store deletes nothing, however old the ids; nor does a
		// read.
		clk.Advance(48 * time.Hour)
		storetest.MustRead(t, s, "c")
		if got := requestIDs(t, s); got != 500 {
			t.Fatalf("%d ids after idling, want 500", got)
		}
		// Each batch deletes a bounded number of the oldest, so a backlog
		// goes within a few batches and no batch pays for all of it. A
		// batch without request ids expires too.
		for i := 1; i <= 8; i++ {
			if out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "c", Delta: 1, Pick: uint64(i)}}); err != nil || out[0].Err != nil {
				t.Fatalf("Apply = %+v, %v", out, err)
			}
			if got, want := requestIDs(t, s), max(500-64*i, 0); got != want {
				t.Fatalf("after %d batches: %d ids, want %d", i, got, want)
			}
		}
	})
	t.Run("ExpiryKeepsPace", func(t *testing.T) {
		// A batch with ids deletes as many expired ones as it records,
		// plus the bounded extra: the table does not grow past a window
		// of ids however long writes go on.
		for round := range 3 {
			var incs []shardcounter.Increment
			for i := range 200 {
				rid := fmt.Sprint("round-", round, "-", i)
				incs = append(incs, shardcounter.Increment{Counter: "c", Delta: 1, Pick: shard.PickFor("c", rid), RequestID: rid})
			}
			if _, err := s.Apply(ctx, incs); err != nil {
				t.Fatal(err)
			}
			if got := requestIDs(t, s); got != 200 {
				t.Fatalf("round %d: %d ids, want the 200 of the round", round, got)
			}
			clk.Advance(time.Hour) // this round's ids expire
		}
	})
	t.Run("DeleteCounter", func(t *testing.T) {
		if err := s.DeleteCounter(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		if got := requestIDs(t, s); got != 0 {
			t.Fatalf("%d ids after deleting the counter, want 0", got)
		}
	})
}

// TestDedupeWindowDatabaseClock checks the default, the database's clock:
// ids are remembered, and a window shorter than the time between two
// batches lets the id apply again.
func TestDedupeWindowDatabaseClock(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	storetest.MustCreate(t, s, "c", 1)
	inc := []shardcounter.Increment{{Counter: "c", Delta: 1, Pick: shard.PickFor("c", "r"), RequestID: "r"}}
	for i, want := range []bool{false, true} {
		out, err := s.Apply(ctx, inc)
		if err != nil {
			t.Fatal(err)
		}
		if out[0].Duplicate != want {
			t.Fatalf("write %d of r: duplicate %v, want %v", i+1, out[0].Duplicate, want)
		}
	}
	s.SetDedupeWindow(time.Microsecond)
	time.Sleep(time.Millisecond) // the database's clock moves on by more than the window
	out, err := s.Apply(ctx, inc)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Duplicate {
		t.Fatal("r repeated after a 1µs window was still a duplicate")
	}
	if got := storetest.MustRead(t, s, "c"); got != 2 {
		t.Fatalf("c = %d, want 2", got)
	}
}

// TestExpiryScansFromWhereItStopped checks that expiry starts its scan
// where the previous one found no more expired ids, and still, every
// expireRescan batches, deletes an expired id below that point (one that
// another process recorded with a clock behind this one's, say).
func TestExpiryScansFromWhereItStopped(t *testing.T) {
	const rescan = 4
	defer postgres.SetExpireRescan(rescan)()
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	s := MustOpenWith(t, postgres.Options{Now: clk.Now, DedupeWindow: time.Hour})
	storetest.MustCreate(t, s, "c", 1)
	apply := func(inc shardcounter.Increment) {
		t.Helper()
		if out, err := s.Apply(ctx, []shardcounter.Increment{inc}); err != nil || out[0].Err != nil {
			t.Fatalf("Apply = %+v, %v", out, err)
		}
	}
	apply(shardcounter.Increment{Counter: "c", Delta: 1, Pick: shard.PickFor("c", "a"), RequestID: "a"})
	clk.Advance(2 * time.Hour)
	apply(shardcounter.Increment{Counter: "c", Delta: 1}) // deletes a; the next scan starts an hour ago
	if got := requestIDs(t, s); got != 0 {
		t.Fatalf("%d ids, want 0", got)
	}
	if _, err := s.Pool().Exec(ctx, "INSERT INTO shardcounter.requests (counter, request_id, created_at) VALUES ('c', 'late', $1)",
		clk.Now().Add(-90*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// The late id is below where scans start, so the next batch keeps it;
	// one of the next rescan batches scans from the start and deletes it.
	gone := 0
	for i := 1; i <= rescan && gone == 0; i++ {
		apply(shardcounter.Increment{Counter: "c", Delta: 1})
		if requestIDs(t, s) == 0 {
			gone = i
		}
	}
	if gone == 0 || gone == 1 {
		t.Fatalf("the late id went after %d batches (0: never); want it kept by the first, deleted within %d", gone, rescan)
	}
}
