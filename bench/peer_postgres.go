package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// postgresPeer is what the PostgreSQL peers share: a pgx pool of one
// connection per client, with pgx's default statement cache (each
// statement prepared once per connection), and a table of its own,
// created with columns and dropped after the run.
type postgresPeer struct {
	pool    *pgxpool.Pool
	table   string
	written []atomic.Bool
}

func openPostgresPeer(ctx context.Context, cfg Config, kind, dsn, columns string, run *Run) (*postgresPeer, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: peer %s: DSN: %w", kind, err)
	}
	pcfg.MaxConns, pcfg.MinConns = int32(cfg.Clients), int32(cfg.Clients)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("bench: peer %s: %w", kind, err)
	}
	settings, err := PostgresSettings(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("bench: peer %s: %w", kind, err)
	}
	run.Store, run.Settings = "postgres", settings
	run.Name = "peer/" + kind + "/" + settingsName(settings, "synchronous_commit")
	table := pgx.Identifier{fmt.Sprintf("shardcounter_bench_peer_%x", time.Now().UnixNano())}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" "+columns); err != nil {
		pool.Close()
		return nil, fmt.Errorf("bench: peer %s: %w", kind, err)
	}
	return &postgresPeer{pool: pool, table: table, written: make([]atomic.Bool, cfg.Counters)}, nil
}

// fail drops the table and closes the pool after a failed set-up.
func (p *postgresPeer) fail(kind string, err error) (target, error) {
	p.cleanup(context.Background()) //nolint:errcheck // err says more
	return target{}, fmt.Errorf("bench: peer %s: %w", kind, err)
}

func (p *postgresPeer) cleanup(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, "DROP TABLE "+p.table)
	p.pool.Close()
	return err
}

func (p *postgresPeer) touched() int64 { return countSet(p.written) }

// sum returns the result of a query for one bigint.
func (p *postgresPeer) sum(ctx context.Context, sql string) (int64, error) {
	var n int64
	err := p.pool.QueryRow(ctx, sql).Scan(&n)
	return n, err
}

// target drives the peer with write, read and readMany as the operations'
// statements; prefill writes a chunk of counters at once.
func (p *postgresPeer) target(write func(ctx context.Context, op *operation) error,
	read func(ctx context.Context, i int) error,
	readMany func(ctx context.Context, is []int) error,
	prefill func(ctx context.Context, is []int) (int64, error),
	total string) target {
	return target{
		do: oneByOne(
			func(ctx context.Context, op *operation) error {
				p.written[op.counter].Store(true)
				return write(ctx, op)
			},
			func(ctx context.Context, op *operation) error { return read(ctx, op.counter) },
			func(ctx context.Context, op *operation) error { return readMany(ctx, op.counters) }),
		prefill: func(ctx context.Context, is []int) (int64, error) {
			for _, i := range is {
				p.written[i].Store(true)
			}
			return prefill(ctx, is)
		},
		total:   func(ctx context.Context) (int64, error) { return p.sum(ctx, total) },
		touched: p.touched,
		cleanup: p.cleanup,
	}
}

// postgresUpdatePeer is a plain UPDATE t SET n = n + 1 (or − 1) of one row
// per counter, the rows inserted before the run as an application
// inserts a post's row when the post is made; reads are a SELECT of the
// row, or of a timeline's rows with id = ANY($1).
func postgresUpdatePeer(ctx context.Context, cfg Config, dsn string, run *Run) (target, error) {
	const kind = PeerPostgresUpdate
	p, err := openPostgresPeer(ctx, cfg, kind, dsn, "(id integer PRIMARY KEY, n bigint NOT NULL DEFAULT 0)", run)
	if err != nil {
		return target{}, err
	}
	if _, err := p.pool.Exec(ctx, "INSERT INTO "+p.table+" (id) SELECT generate_series(0, $1::integer - 1)", cfg.Counters); err != nil {
		return p.fail(kind, err)
	}
	update := "UPDATE " + p.table + " SET n = n + $2 WHERE id = $1"
	sel := "SELECT n FROM " + p.table + " WHERE id = $1"
	selMany := "SELECT id, n FROM " + p.table + " WHERE id = ANY($1)"
	return p.target(
		func(ctx context.Context, op *operation) error {
			tag, err := p.pool.Exec(ctx, update, op.counter, op.delta)
			if err == nil && tag.RowsAffected() != 1 {
				err = fmt.Errorf("UPDATE changed %d rows, want 1", tag.RowsAffected())
			}
			op.changed = err == nil
			return err
		},
		func(ctx context.Context, i int) error {
			var n int64
			return p.pool.QueryRow(ctx, sel, i).Scan(&n)
		},
		func(ctx context.Context, is []int) error {
			rows, err := p.pool.Query(ctx, selMany, is)
			if err != nil {
				return err
			}
			_, err = pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ ID, N int64 }])
			return err
		},
		func(ctx context.Context, is []int) (int64, error) {
			tag, err := p.pool.Exec(ctx, "UPDATE "+p.table+" SET n = n + 1 WHERE id = ANY($1)", is)
			return tag.RowsAffected(), err
		},
		"SELECT coalesce(sum(n), 0)::bigint FROM "+p.table,
	), nil
}

// postgresInsertPeer keeps a distinct counter's members as rows (counter,
// member) with that primary key: an add is INSERT ... ON CONFLICT DO
// NOTHING (a row inserted is a member added), a removal a DELETE, and a
// read count(*) of the counter's rows, which costs what the members
// number; a timeline reads its counters' counts in one GROUP BY.
func postgresInsertPeer(ctx context.Context, cfg Config, dsn string, run *Run) (target, error) {
	const kind = PeerPostgresInsert
	p, err := openPostgresPeer(ctx, cfg, kind, dsn, "(counter integer, member integer, PRIMARY KEY (counter, member))", run)
	if err != nil {
		return target{}, err
	}
	insert := "INSERT INTO " + p.table + " (counter, member) VALUES ($1, $2) ON CONFLICT DO NOTHING"
	del := "DELETE FROM " + p.table + " WHERE counter = $1 AND member = $2"
	count := "SELECT count(*) FROM " + p.table + " WHERE counter = $1"
	countMany := "SELECT counter, count(*) FROM " + p.table + " WHERE counter = ANY($1) GROUP BY counter"
	return p.target(
		func(ctx context.Context, op *operation) error {
			sql := insert
			if op.delta < 0 {
				sql = del
			}
			tag, err := p.pool.Exec(ctx, sql, op.counter, op.member)
			op.changed = err == nil && tag.RowsAffected() == 1
			return err
		},
		func(ctx context.Context, i int) error {
			var n int64
			return p.pool.QueryRow(ctx, count, i).Scan(&n)
		},
		func(ctx context.Context, is []int) error {
			rows, err := p.pool.Query(ctx, countMany, is)
			if err != nil {
				return err
			}
			_, err = pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Counter, N int64 }])
			return err
		},
		func(ctx context.Context, is []int) (int64, error) {
			tag, err := p.pool.Exec(ctx, "INSERT INTO "+p.table+" (counter, member) SELECT unnest($1::integer[]), 0 ON CONFLICT DO NOTHING", is)
			return tag.RowsAffected(), err
		},
		"SELECT count(*) FROM "+p.table,
	), nil
}

// PostgresSettings returns the server's version and the settings that
// bound a single-row UPDATE: synchronous_commit (on: a commit waits for
// its WAL flush), fsync, wal_sync_method, commit_delay.
func PostgresSettings(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}) (map[string]string, error) {
	rows, err := q.Query(ctx, `SELECT name, setting || coalesce(unit, '') FROM pg_settings
WHERE name IN ('server_version', 'synchronous_commit', 'fsync', 'wal_sync_method', 'commit_delay', 'shared_buffers', 'max_connections')`)
	if err != nil {
		return nil, err
	}
	kv, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Name, Setting string
	}])
	if err != nil {
		return nil, err
	}
	s := map[string]string{}
	for _, r := range kv {
		name := r.Name
		if name == "server_version" {
			name = "version"
		}
		s[name] = r.Setting
	}
	return s, nil
}
