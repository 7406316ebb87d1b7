package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestMain gives the package's examples a database of their own, in
// $DATABASE_URL as an application would have it. Without a server it
// fails the run: it never skips.
func TestMain(m *testing.M) {
	dsn, drop, err := pgtest.CreateDatabase(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	os.Setenv("DATABASE_URL", dsn)
	code := m.Run()
	if err := drop(); err != nil {
		fmt.Fprintln(os.Stderr, "drop example database:", err)
	}
	os.Exit(code)
}

// MustOpen opens a store on a fresh database, closed and dropped when the
// test ends.
func MustOpen(tb testing.TB) *postgres.CounterStore {
	tb.Helper()
	return mustOpenDSN(tb, pgtest.MustDatabase(tb), postgres.Options{})
}

// MustOpenWith is MustOpen with options, such as a clock.
func MustOpenWith(tb testing.TB, opts postgres.Options) *postgres.CounterStore {
	tb.Helper()
	return mustOpenDSN(tb, pgtest.MustDatabase(tb), opts)
}

// testPoolSize bounds each test store's pool: the shared test server
// allows 100 connections (PostgreSQL's default) to every package testing
// at once, and a test's writers beyond it queue in the pool.
const testPoolSize = "16"

func mustOpenDSN(tb testing.TB, dsn string, opts postgres.Options) *postgres.CounterStore {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	if q := u.Query(); q.Get("pool_max_conns") == "" {
		q.Set("pool_max_conns", testPoolSize)
		u.RawQuery = q.Encode()
	}
	s, err := postgres.Open(context.Background(), u.String(), opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestCounterStore(t *testing.T) {
	dsn := pgtest.MustDatabase(t)
	s := mustOpenDSN(t, dsn, postgres.Options{})
	storetest.RunCounterStore(t, func(testing.TB) shardcounter.CounterStore { return s }, storetest.Options{
		OpenWithClock: func(tb testing.TB, now func() time.Time) shardcounter.CounterStore {
			return mustOpenDSN(tb, dsn, postgres.Options{Now: now})
		},
		Totals: true,
	})
}

// TestOpen checks how a store opens: the schema migrations, the options,
// the session settings, and the errors for what it cannot open.
func TestOpen(t *testing.T) {
	t.Run("Idempotent", testOpenIdempotent)
	t.Run("Concurrent", testOpenConcurrent)
	t.Run("NewerSchema", testOpenNewerSchema)
	t.Run("Options", testOpenOptions)
	t.Run("NoJIT", testOpenNoJIT)
	t.Run("NewWithoutPool", testOpenNewWithoutPool)
	t.Run("ErrInvalid", testOpenErrInvalid)
	t.Run("ErrUnavailable", testOpenErrUnavailable)
}

// testOpenIdempotent opens a store twice on one database: the second Open
// finds the schema in place, migrates nothing and loses nothing.
func testOpenIdempotent(t *testing.T) {
	dsn := pgtest.MustDatabase(t)
	a := mustOpenDSN(t, dsn, postgres.Options{})
	storetest.MustCreate(t, a, "c", 4)
	if err := a.Add(context.Background(), "c", 5, 1); err != nil {
		t.Fatal(err)
	}
	b := mustOpenDSN(t, dsn, postgres.Options{}) // the schema exists: nothing to migrate, nothing lost
	if got := storetest.MustRead(t, b, "c"); got != 5 {
		t.Fatalf("value after a second Open = %d, want 5", got)
	}
	if got := schemaVersions(t, b); got != allVersions() {
		t.Fatalf("schema_migrations = %s, want one row per version", got)
	}
}

// testOpenConcurrent opens stores together on an empty database, as
// processes starting at once do: without the migration lock, CREATE
// SCHEMA IF NOT EXISTS races and fails.
func testOpenConcurrent(t *testing.T) {
	dsn := pgtest.MustDatabase(t)
	stores := make([]*postgres.CounterStore, 6)
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(context.Background(), dsn, postgres.Options{}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d of %d at once: %v", i, len(stores), err)
		}
		defer stores[i].Close()
	}
	if got := schemaVersions(t, stores[0]); got != allVersions() {
		t.Fatalf("schema_migrations = %s, want each version once", got)
	}
}

// testOpenNewerSchema checks that a store refuses a schema newer than it
// knows, saying to upgrade, rather than writing to it.
func testOpenNewerSchema(t *testing.T) {
	dsn := pgtest.MustDatabase(t)
	s := mustOpenDSN(t, dsn, postgres.Options{})
	if _, err := s.Pool().Exec(context.Background(), "INSERT INTO shardcounter.schema_migrations (version) VALUES ($1)", postgres.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err == nil || !strings.Contains(err.Error(), "upgrade shardcounter") {
		t.Fatalf("Open of a newer schema: %v, want an error saying to upgrade", err)
	}
}

// testOpenOptions checks that the injected clock sets the creation time.
func testOpenOptions(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := MustOpenWith(t, postgres.Options{Now: func() time.Time { return at }})
	c := storetest.MustCreate(t, s, "c", 1)
	if !c.CreatedAt.Equal(at) {
		t.Fatalf("created_at = %v, want the injected clock's %v", c.CreatedAt, at)
	}
	if got, err := s.GetCounter(context.Background(), "c"); err != nil || !got.CreatedAt.Equal(at) {
		t.Fatalf("GetCounter = %+v, %v, want created_at %v", got, err, at)
	}
}

// testOpenNoJIT checks that the store turns JIT off unless the DSN sets it:
// JIT compiled a batch's lock statement (its estimate passed
// jit_above_cost) for 27 ms.
func testOpenNoJIT(t *testing.T) {
	dsn := pgtest.MustDatabase(t)
	for _, c := range []struct{ dsn, want string }{{dsn, "off"}, {dsn + "&jit=on", "on"}} {
		s := mustOpenDSN(t, c.dsn, postgres.Options{})
		var jit string
		if err := s.Pool().QueryRow(context.Background(), "SHOW jit").Scan(&jit); err != nil {
			t.Fatal(err)
		}
		if jit != c.want {
			t.Errorf("jit = %s on a store opened with %s, want %s", jit, c.dsn, c.want)
		}
	}
}

// testOpenNewWithoutPool checks that New refuses a nil pool.
func testOpenNewWithoutPool(t *testing.T) {
	_, err := postgres.New(context.Background(), nil, postgres.Options{})
	if !errors.Is(err, shardcounter.ErrInvalid) {
		t.Fatalf("New(nil pool) = %v, want ErrInvalid", err)
	}
}

// testOpenErrInvalid checks that Open refuses DSNs it cannot use.
func testOpenErrInvalid(t *testing.T) {
	for _, dsn := range []string{"", "postgres://a:b@host:notaport/db", "mysql://x"} {
		_, err := postgres.Open(context.Background(), dsn, postgres.Options{})
		if !errors.Is(err, shardcounter.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", dsn, err)
		}
	}
}

// testOpenErrUnavailable checks that an unreachable server is
// ErrUnavailable with an error that names the address and what to check,
// and never shows the password.
func testOpenErrUnavailable(t *testing.T) {
	// Port 1 on the loopback refuses connections at once.
	_, err := postgres.Open(context.Background(), "postgres://postgres:secret@127.0.0.1:1/app?sslmode=disable", postgres.Options{})
	if !errors.Is(err, shardcounter.ErrUnavailable) {
		t.Fatalf("Open of an unreachable server = %v, want ErrUnavailable", err)
	}
	for _, want := range []string{"127.0.0.1:1", "check that PostgreSQL runs"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q shows the password", err)
	}
}

func schemaVersions(tb testing.TB, s *postgres.CounterStore) string {
	tb.Helper()
	rows, err := s.Pool().Query(context.Background(), "SELECT version FROM shardcounter.schema_migrations ORDER BY version")
	if err != nil {
		tb.Fatal(err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		tb.Fatal(err)
	}
	return fmt.Sprint(vs)
}

func TestAddTx(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	storetest.MustCreate(t, s, "c", 4)

	t.Run("Commit", func(t *testing.T) {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if err := s.AddTx(ctx, tx, "c", 7, 2); err != nil {
			t.Fatal(err)
		}
		// Uncommitted: invisible outside the transaction.
		if got := storetest.MustRead(t, s, "c"); got != 0 {
			t.Fatalf("value before commit = %d, want 0", got)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if got := storetest.MustShards(t, s, "c"); fmt.Sprint(got) != "[0 0 7 0]" {
			t.Fatalf("shards after commit = %v, want [0 0 7 0]", got)
		}
	})
	t.Run("Rollback", func(t *testing.T) {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.AddTx(ctx, tx, "c", 100, 0); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if got := storetest.MustRead(t, s, "c"); got != 7 {
			t.Fatalf("value after rollback = %d, want 7", got)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if err := s.AddTx(ctx, tx, "missing", 1, 0); !errors.Is(err, shardcounter.ErrNotFound) {
			t.Fatalf("AddTx on a missing counter = %v, want ErrNotFound", err)
		}
	})
	t.Run("ErrOutOfRange", func(t *testing.T) {
		storetest.MustCreate(t, s, "full", 1)
		if err := s.Add(ctx, "full", 1<<62, 0); err != nil {
			t.Fatal(err)
		}
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		err = s.AddTx(ctx, tx, "full", 1<<62, 0)
		if !errors.Is(err, shardcounter.ErrOutOfRange) {
			t.Fatalf("AddTx past MaxInt64 = %v, want ErrOutOfRange", err)
		}
	})
}

// TestApplyFolds checks that a batch of many items on few shards writes the
// right per-shard values, including items refused in the middle.
func TestApplyFolds(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	storetest.MustCreate(t, s, "a", 2)
	storetest.MustCreate(t, s, "b", 3)
	var incs []shardcounter.Increment
	for i := range 100 {
		incs = append(incs, shardcounter.Increment{Counter: "a", Delta: int64(i + 1), Pick: uint64(i)})
		incs = append(incs, shardcounter.Increment{Counter: "b", Delta: -1, Pick: uint64(i)})
	}
	incs = append(incs,
		shardcounter.Increment{Counter: "a", Delta: 1 << 62, Pick: 0},
		shardcounter.Increment{Counter: "a", Delta: 1 << 62, Pick: 0}, // 2500 + 2^63 does not fit
		shardcounter.Increment{Counter: "a", Delta: 1, Pick: 1},
	)
	out, err := s.Apply(ctx, incs)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		wantErr := i == len(out)-2
		if (o.Err != nil) != wantErr || o.Duplicate {
			t.Fatalf("outcome %d = %+v, want error %v", i, o, wantErr)
		}
	}
	if !errors.Is(out[len(out)-2].Err, shardcounter.ErrOutOfRange) {
		t.Fatalf("refused item: %v, want ErrOutOfRange", out[len(out)-2].Err)
	}
	// a: i+1 for even i on shard 0, for odd i on shard 1.
	if got, want := fmt.Sprint(storetest.MustShards(t, s, "a")), fmt.Sprint([]int64{2500 + 1<<62, 2550 + 1}); got != want {
		t.Fatalf("shards of a = %v, want %v", got, want)
	}
	if got, want := fmt.Sprint(storetest.MustShards(t, s, "b")), "[-34 -33 -33]"; got != want {
		t.Fatalf("shards of b = %v, want %v", got, want)
	}
}

// allVersions is schema_migrations after migrating an empty database: one
// row per version, 1 to SchemaVersion.
func allVersions() string {
	var v []int
	for i := 1; i <= postgres.SchemaVersion; i++ {
		v = append(v, i)
	}
	return fmt.Sprint(v)
}

// TestTotalsReadFails makes the read of a batch's totals, queued after its
// COMMIT, fail: the batch was committed, so its items apply without a
// total (the engine then reads the counters), on the plain path and the
// general one (an item with a request id, on a counter read shard by
// shard, whose total decide does not know), and the connection serves the
// next batch. A bounded counter, read whole, gets its total from the
// decision, without the read.
func TestTotalsReadFails(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t)
	storetest.MustCreate(t, s, "plain", 2)
	storetest.MustCreate(t, s, "general", 2)
	if _, err := s.CreateCounter(ctx, "bounded", shardcounter.Spec{Shards: 2, Min: new(int64)}); err != nil {
		t.Fatal(err)
	}
	restore := postgres.SetTotalsSQL(`SELECT 1/0, $1::text[], $2::timestamptz`)
	for round := range 3 {
		out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "bounded", Delta: 4, Pick: uint64(round), Total: true}})
		if err != nil || out[0].Err != nil || out[0].Total == nil || *out[0].Total != int64(4*(round+1)) {
			t.Fatalf("round %d, bounded: Apply = %+v, %v; want applied with the total %d", round, out, err, 4*(round+1))
		}
	}
	for round := range 3 {
		out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "plain", Delta: 2, Pick: 1, Total: true}})
		if err != nil || out[0].Err != nil || out[0].Total != nil {
			t.Fatalf("round %d, plain: Apply = %+v, %v; want applied without a total", round, out, err)
		}
		out, err = s.Apply(ctx, []shardcounter.Increment{{Counter: "general", Delta: 3, Pick: 0, Total: true, RequestID: fmt.Sprint("r", round)}})
		if err != nil || out[0].Err != nil || out[0].Total != nil {
			t.Fatalf("round %d, general: Apply = %+v, %v; want applied without a total", round, out, err)
		}
	}
	restore()
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "plain", Delta: 1, Pick: 0, Total: true}})
	if err != nil || out[0].Total == nil || *out[0].Total != 7 {
		t.Fatalf("after the failing reads: Apply = %+v, %v; want the total 7", out, err)
	}
	if got := storetest.MustRead(t, s, "general"); got != 9 {
		t.Fatalf("general reads %d, want 9: every write applied once", got)
	}
}
