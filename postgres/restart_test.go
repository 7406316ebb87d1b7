package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestRestart stops and starts PostgreSQL under an open store, on a
// private server so that the shared one is not disturbed: writes during
// the outage fail with ErrUnavailable on their own (not by hanging until a
// deadline), and once the server is back the same store writes again and
// the counter holds exactly the acknowledged writes.
func TestRestart(t *testing.T) {
	srv := pgtest.StartServer(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, srv.URL(), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.MustCreate(t, s, "c", 4)
	var acked int64
	write := func(ctx context.Context, i int) error {
		if i%2 == 0 {
			return s.Add(ctx, "c", 1, uint64(i))
		}
		out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "c", Delta: 1, Pick: uint64(i)}})
		if err == nil {
			err = out[0].Err
		}
		return err
	}
	for i := range 20 {
		if err := write(ctx, i); err != nil {
			t.Fatalf("write %d before the restart: %v", i, err)
		}
		acked++
	}

	srv.Stop(t)
	// A connection that the shutdown ended may still sit in the pool: a
	// commit sent on it gets the server's farewell (SQLSTATE 57P01), which
	// can also follow a flushed commit, so its outcome is reported
	// unknown. Once the pool has dropped such connections, every write
	// fails with ErrUnavailable: it was not applied.
	const outage = 10
	for i := range outage {
		// The deadline only guards against a hang; the call must fail
		// before it, on its own.
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := write(wctx, i)
		expired := wctx.Err()
		cancel()
		switch {
		case expired != nil:
			t.Fatalf("write %d while PostgreSQL is down waited for its deadline instead of failing: %v", i, err)
		case errors.Is(err, shardcounter.ErrUnavailable) && !shardcounter.IsOutcomeUnknown(err):
		case shardcounter.IsOutcomeUnknown(err) && i < outage/2:
			t.Logf("write %d on a connection the shutdown ended: %v", i, err)
		default:
			t.Fatalf("write %d while PostgreSQL is down = %v, want ErrUnavailable", i, err)
		}
	}
	if _, err := s.ReadCounter(ctx, "c"); !errors.Is(err, shardcounter.ErrUnavailable) {
		t.Fatalf("ReadCounter while PostgreSQL is down = %v, want ErrUnavailable", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, shardcounter.ErrUnavailable) {
		t.Fatalf("Ping while PostgreSQL is down = %v, want ErrUnavailable", err)
	}

	srv.Start(t)
	for i := range 20 {
		if err := write(ctx, i); err != nil {
			t.Fatalf("write %d after the restart: %v", i, err)
		}
		acked++
	}
	// The writes that failed during the outage were not applied.
	if got := storetest.MustRead(t, s, "c"); got != acked {
		t.Fatalf("value after the restart = %d, want %d (the acknowledged writes)", got, acked)
	}
}
