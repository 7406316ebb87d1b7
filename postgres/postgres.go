package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/dialerr"
)

// Pool defaults that Open applies when the DSN does not set them.
const (
	// DefaultMaxConns is the pool size (pool_max_conns). A write holds its
	// connection until PostgreSQL has flushed its commit, so concurrent
	// writers beyond the pool size queue in the pool instead of sharing
	// one WAL flush (group commit) or writing to different shard rows.
	// pgxpool's own default, max(4, NumCPU), would cap a 2-core machine at
	// 4 concurrent writes. 64 suits 64 writers and leaves room under
	// PostgreSQL's default max_connections of 100; lower it when several
	// processes share one server.
	DefaultMaxConns = 64
	// DefaultConnectTimeout bounds each connection attempt
	// (connect_timeout), so that writes fail with ErrUnavailable instead of
	// hanging while the server is unreachable.
	DefaultConnectTimeout = 5 * time.Second
)

// CounterStore is a shardcounter.CounterStore in a PostgreSQL database. It
// is safe for concurrent use, also by several processes sharing the
// database.
type CounterStore struct {
	pool    *pgxpool.Pool
	ownPool bool         // Close closes the pool only when Open made it
	window  atomic.Int64 // the dedupe window, in nanoseconds
	// resolved counts batches settled by their markers after a lost
	// commit answer (see resolve).
	resolved atomic.Int64

	// expiredTo is a created_at (Unix microseconds, 0 for none) below
	// which this store's batches found no more expired request ids (see
	// expired). Expiry scans the created_at index from there, past the
	// dead entries of the ids it deleted before, except every
	// expireRescan batches. applies counts batches for that.
	expiredTo, applies atomic.Int64

	now func() time.Time // Options.Now: nil for the database's clock

	// general remembers counters that a plain batch cannot write
	// (bounded, distinct or wide), so that batches on them go straight to
	// the general path instead of trying plainSQL first every time; one
	// deleted and made again takes the general path, correctly, until the
	// set is cleared.
	general idSet
	// unwindowed remembers counters without a window, so that a batch
	// only on them does not read window buckets (bucketRowsSQL); one
	// deleted and made again with a window makes the attempt start again,
	// reading them.
	unwindowed idSet
}

// Options configure a CounterStore. The zero value uses the defaults.
type Options struct {
	// Now is the store's clock: a counter's creation time, the time at
	// which a batch records its request ids and against which it ages
	// them, and the window bucket a write lands in all follow it. Default
	// nil: the database's clock (the transaction's start), which every
	// process sharing the database agrees on. Tests inject a clock they
	// control.
	Now func() time.Time
	// DedupeWindow is how long a request id is remembered after its write.
	// Default (0 or less) DefaultDedupeWindow; SetDedupeWindow changes it
	// later.
	DedupeWindow time.Duration
}

var (
	_ shardcounter.CounterStore     = (*CounterStore)(nil)
	_ shardcounter.RequestIDExpirer = (*CounterStore)(nil)
)

// DefaultDedupeWindow is how long a request id is remembered unless
// Options.DedupeWindow or SetDedupeWindow says otherwise.
const DefaultDedupeWindow = 24 * time.Hour

// SetDedupeWindow sets how long a request id is remembered after its write
// (see the package doc). It is safe to call at any time; d <= 0 restores
// DefaultDedupeWindow. The database keeps times to the microsecond, so the
// window is too.
func (s *CounterStore) SetDedupeWindow(d time.Duration) {
	if d <= 0 {
		d = DefaultDedupeWindow
	}
	s.window.Store(int64(d))
}

// Open connects to the database named by dsn, a PostgreSQL URL
// (postgres://USER:PASS@HOST:PORT/DB?sslmode=disable, also postgresql://)
// or keyword/value string, and creates or migrates the schema. The DSN
// may set pgxpool's parameters, such as pool_max_conns (default
// DefaultMaxConns) and connect_timeout (default DefaultConnectTimeout).
//
// It returns an ErrInvalid error for a DSN it cannot parse and an
// ErrUnavailable error when the server cannot be reached, each saying what
// to check.
func Open(ctx context.Context, dsn string, opts Options) (*CounterStore, error) {
	cfg, err := parseConfig(dsn)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "postgres: %v", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		cc := cfg.ConnConfig
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE,
			"postgres: cannot connect to %s:%d (database %q, user %q): %s; check that PostgreSQL runs there and that the DSN's host, port, user, password and database are right",
			cc.Host, cc.Port, cc.Database, cc.User, connectCause(err))
	}
	s, err := New(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	return s, nil
}

// New returns a CounterStore on a pool the caller made and keeps, for
// applications that already have one and want to use AddTx in their own
// transactions. It creates or migrates the schema. Close does not close
// the pool. A nil pool is an ErrInvalid error.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*CounterStore, error) {
	if pool == nil {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "postgres: New needs a pool: give the *pgxpool.Pool of the database, or use Open with a DSN")
	}
	if err := migrate(ctx, pool); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL,
				"postgres: create the shardcounter schema: %s: grant the DSN's user CREATE on the database, or run shardcounter once as a user who has it", pe.Message)
		}
		return nil, mapError("postgres: create the shardcounter schema", err, beforeCommit)
	}
	s := &CounterStore{pool: pool, now: opts.Now}
	s.SetDedupeWindow(opts.DedupeWindow)
	return s, nil
}

// nowArg is the time argument of a statement: Options.Now's time, or nil
// for the database's clock.
func (s *CounterStore) nowArg() *time.Time {
	if s.now == nil {
		return nil
	}
	t := s.now()
	return &t
}

// parseConfig parses a DSN and applies the package's defaults where the
// DSN does not say otherwise.
func parseConfig(dsn string) (*pgxpool.Config, error) {
	if dsn == "" {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "postgres: empty DSN: give postgres://USER:PASS@HOST:PORT/DB?sslmode=disable")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, shardcounter.Errorf(shardcounter.EINVALID,
			"postgres: invalid DSN: %v: the form is postgres://USER:PASS@HOST:PORT/DB?sslmode=disable", err)
	}
	// pgxpool removes its own parameters from the connection's settings,
	// so parse once more to see which ones the DSN set.
	set, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "postgres: invalid DSN: %v", err)
	}
	if _, ok := set.RuntimeParams["pool_max_conns"]; !ok {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	// JIT compiles a statement whose estimated cost passes
	// jit_above_cost, which costs tens of milliseconds and pays off only
	// for long analytic queries: never for this store's, which touch a few
	// rows each and whose estimates can pass it (see lockSQL).
	if _, ok := set.RuntimeParams["jit"]; !ok {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	return cfg, nil
}

// connectCause says why Open could not connect, without the address and
// user that pgx's error repeats at each layer and Open's message names
// once: the server's refusal (a wrong password, a missing database), or
// the network's reason.
func connectCause(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Sprintf("the server refused: %s (SQLSTATE %s)", pe.Message, pe.Code)
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		err = ce.Unwrap()
	}
	return dialerr.Cause(err)
}

// Pool returns the store's connection pool, for applications that run
// their own statements next to the store's, such as in AddTx.
func (s *CounterStore) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool if Open made it. It waits for queries in flight.
func (s *CounterStore) Close() error {
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// Ping checks that the server answers.
func (s *CounterStore) Ping(ctx context.Context) error {
	return mapError("ping", s.pool.Ping(ctx), beforeCommit)
}

// CreateCounter creates the counter and its shard rows in one statement
// (createSQL).
func (s *CounterStore) CreateCounter(ctx context.Context, id string, spec shardcounter.Spec) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateSpec(spec); err != nil {
		return nil, err
	}
	var a createArgs
	a.add(id, spec)
	r := rowOf(spec)
	c := &shardcounter.Counter{ID: id, Spec: r.spec()}
	err := s.pool.QueryRow(ctx, createSQL, a.args(s.nowArg())...).Scan(&c.ID, &c.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, shardcounter.Errorf(shardcounter.EEXISTS, "counter %q already exists", id)
	}
	if err != nil {
		return nil, mapError("create counter", err, atCommit)
	}
	c.CreatedAt = c.CreatedAt.UTC()
	return c, nil
}

// scanCounter returns the destinations of a counter's id, specColumns and
// created_at, and a func that completes the counter once they are scanned.
func scanCounter() (*shardcounter.Counter, []any, func()) {
	c := new(shardcounter.Counter)
	var r specRow
	dest := append(append([]any{&c.ID}, r.dest()...), &c.CreatedAt)
	return c, dest, func() {
		c.Spec = r.spec()
		c.CreatedAt = c.CreatedAt.UTC()
	}
}

// GetCounter returns the counter's metadata.
func (s *CounterStore) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	c, dest, done := scanCounter()
	err := s.pool.QueryRow(ctx, "SELECT c.id, "+specColumns("c")+", c.created_at FROM shardcounter.counters c WHERE c.id = $1", id).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, mapError("get counter", err, beforeCommit)
	}
	done()
	return c, nil
}

// ListCounters returns up to limit counters whose ids start with prefix
// and sort after after, in byte order. A limit below 1 returns none.
func (s *CounterStore) ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error) {
	return listCounters(ctx, s.pool, prefix, after, limit)
}

// querier is a pool, or a transaction (a Snapshot's).
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func listCounters(ctx context.Context, q querier, prefix, after string, limit int) ([]*shardcounter.Counter, error) {
	if limit < 1 {
		return []*shardcounter.Counter{}, nil
	}
	for _, p := range []struct{ name, v string }{{"prefix", prefix}, {"page start", after}} {
		if strings.ContainsRune(p.v, 0) || !utf8.ValidString(p.v) {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "list %s is not valid UTF-8 without NUL bytes", p.name)
		}
	}
	// The index scan starts at the prefix and, when the prefix ends in an
	// ASCII character, stops at the first id past every id that starts
	// with it; starts_with keeps the match exact whatever the prefix holds.
	bound, args := "", []any{prefix, after, limit}
	if n := len(prefix); n > 0 && prefix[n-1] < 0x7f {
		bound, args = "AND c.id < $4", append(args, prefix[:n-1]+string(prefix[n-1]+1))
	}
	rows, err := q.Query(ctx, `
SELECT c.id, `+specColumns("c")+`, c.created_at FROM shardcounter.counters c
WHERE c.id >= $1 `+bound+` AND starts_with(c.id, $1) AND c.id > $2
ORDER BY c.id
LIMIT $3`, args...)
	if err != nil {
		return nil, mapError("list counters", err, beforeCommit)
	}
	cs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*shardcounter.Counter, error) {
		c, dest, done := scanCounter()
		err := row.Scan(dest...)
		done()
		return c, err
	})
	if err != nil {
		return nil, mapError("list counters", err, beforeCommit)
	}
	return cs, nil
}

// DeleteCounter removes the counter, its shard rows and its request ids.
// It takes its locks in the order every writer of a counter does: the
// counter's row first (FOR NO KEY UPDATE, as a reshard does, which batches'
// KEY SHARE locks do not wait for), then the shard rows in shard order, as
// batches do; so a delete cannot deadlock with a reshard or a batch of the
// same counter.
func (s *CounterStore) DeleteCounter(ctx context.Context, id string) error {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return err
	}
	return s.inTx(ctx, "delete counter", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT 1 FROM shardcounter.counters WHERE id = $1 FOR NO KEY UPDATE", id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT 1 FROM shardcounter.shards WHERE counter = $1 ORDER BY shard FOR UPDATE", id); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, "DELETE FROM shardcounter.counters WHERE id = $1", id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return notFound(id)
		}
		return nil
	})
}

// inTx runs fn in a transaction and commits it, classifying a failed
// commit as one whose outcome is unknown.
func (s *CounterStore) inTx(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return mapError(op, err, beforeCommit)
	}
	// After Commit, Rollback does nothing; after a failure it ends the
	// transaction, or pgx closes the connection if it cannot.
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := fn(tx); err != nil {
		return mapError(op, err, beforeCommit)
	}
	return mapError(op, tx.Commit(ctx), atCommit)
}

func notFound(id string) error {
	return shardcounter.Errorf(shardcounter.ENOTFOUND, "counter %q does not exist", id)
}
