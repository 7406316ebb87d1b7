package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestWriteDuringReshard stages the race that resharding must survive: a
// write reads the shard count (8) while a reshard to 3 is under way, and
// waits for its shard row behind the reshard. When the reshard commits,
// the write must not land where the old count sent it (pick 9 → shard 1)
// but where the new one does (9 mod 3 = 0): the delta is exact either way,
// but only the second is "pick mod n for the n in force when applied".
//
// The order is forced with row locks: a transaction of the test holds
// shard 1's row, the reshard queues for it first and the write second, and
// PostgreSQL grants a row's waiters in order.
func TestWriteDuringReshard(t *testing.T) {
	for _, path := range []struct {
		name  string
		write func(s *postgres.CounterStore, id string) error
	}{
		{"Add", func(s *postgres.CounterStore, id string) error { return s.Add(context.Background(), id, 100, 9) }},
		{"Apply", func(s *postgres.CounterStore, id string) error {
			out, err := s.Apply(context.Background(), []shardcounter.Increment{{Counter: id, Delta: 100, Pick: 9, RequestID: "r"}})
			if err == nil {
				err = out[0].Err
			}
			return err
		}},
		// A batch without request ids, whose two items fold into one
		// row's new value.
		{"ApplyFolded", func(s *postgres.CounterStore, id string) error {
			out, err := s.Apply(context.Background(), []shardcounter.Increment{{Counter: id, Delta: 60, Pick: 9}, {Counter: id, Delta: 40, Pick: 9}})
			if err == nil {
				err = errors.Join(out[0].Err, out[1].Err)
			}
			return err
		}},
	} {
		t.Run(path.name, func(t *testing.T) {
			ctx := context.Background()
			s := MustOpen(t)
			storetest.MustCreate(t, s, "c", 8)

			holder, err := s.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback(ctx)
			if err := s.AddTx(ctx, holder, "c", 1, 1); err != nil { // locks shard 1
				t.Fatal(err)
			}

			reshard := make(chan error, 1)
			go func() {
				_, err := s.ReshardCounter(ctx, "c", 3)
				reshard <- err
			}()
			waitForLockWaiters(t, s, 1)
			write := make(chan error, 1)
			go func() { write <- path.write(s, "c") }()
			waitForLockWaiters(t, s, 2)

			if err := holder.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-reshard; err != nil {
				t.Fatalf("ReshardCounter: %v", err)
			}
			if err := <-write; err != nil {
				t.Fatalf("write: %v", err)
			}
			// 8 → 3 folds shard 1's 1 into shard 1; the write goes to 9 mod 3.
			if got, want := fmt.Sprint(storetest.MustShards(t, s, "c")), "[100 1 0]"; got != want {
				t.Fatalf("shards = %s, want %s", got, want)
			}
		})
	}
}

// waitForLockWaiters waits until n sessions of the store's database wait
// for a lock.
func waitForLockWaiters(tb testing.TB, s *postgres.CounterStore, n int) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		err := s.Pool().QueryRow(context.Background(), `
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		if err != nil {
			tb.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d sessions wait for a lock after 30s, want %d", waiting, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
