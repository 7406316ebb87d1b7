package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
)

// Peers, as a run's "peer" names them.
const (
	PeerRedisIncr      = "redis-incr"      // INCR on one key (one per counter) of a Redis server
	PeerPostgresUpdate = "postgres-update" // UPDATE t SET n = n + 1 of one row (one per counter)
	PeerHTTPBare       = "http-bare"       // a bare net/http handler doing one atomic add
)

// Peer is a peer to measure and the server it drives: a redis:// URL for
// redis-incr, a PostgreSQL DSN for postgres-update, nothing for
// http-bare, which this process serves.
type Peer struct {
	Kind   string
	Target string
}

// Peers measures each peer with cfg's clients, duration and workload, in
// order: what a user would run instead of a shardcounter counter. Each
// counter of the workload is one Redis key or one table row, so with
// Counters > 1 the peers spread their writes as the counters do. Reads are
// GET and SELECT. A peer's run is verified as a path's is: the keys' or
// rows' final sum equals the writes acknowledged. Runs name the settings
// that bound the peer's throughput (appendfsync, synchronous_commit).
func Peers(ctx context.Context, cfg Config, peers []Peer) ([]Run, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var runs []Run
	for _, p := range peers {
		var t target
		var err error
		run := Run{Path: PathPeer, Peer: p.Kind}
		switch p.Kind {
		case PeerRedisIncr:
			t, err = redisPeer(ctx, cfg, p.Target, &run)
		case PeerPostgresUpdate:
			t, err = postgresPeer(ctx, cfg, p.Target, &run)
		case PeerHTTPBare:
			t, err = barePeer(cfg, &run)
		default:
			err = fmt.Errorf("bench: peer %q is unknown: use %s, %s or %s", p.Kind, PeerRedisIncr, PeerPostgresUpdate, PeerHTTPBare)
		}
		if err != nil {
			return runs, err
		}
		if err := measureRun(ctx, cfg, t, nil, &run); err != nil {
			return runs, err
		}
		runs = append(runs, run)
	}
	return runs, nil
}

// settingsName is the part of a peer run's name that says its settings,
// such as "appendfsync=always".
func settingsName(settings map[string]string, keys ...string) string {
	var parts []string
	for _, k := range keys {
		if v, ok := settings[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}

// redisPeer is INCR on one key per counter, over a go-redis client with
// one connection per client (go-redis's default pool, 10 per CPU, would
// make clients wait for connections on small machines).
func redisPeer(ctx context.Context, cfg Config, url string, run *Run) (target, error) {
	opts, err := goredis.ParseURL(url)
	if err != nil {
		return target{}, fmt.Errorf("bench: peer redis-incr: %q is not a redis:// URL: %w", url, err)
	}
	opts.PoolSize, opts.MinIdleConns = cfg.Clients, cfg.Clients
	c := goredis.NewClient(opts)
	settings, err := RedisSettings(ctx, c)
	if err != nil {
		c.Close()
		return target{}, fmt.Errorf("bench: peer redis-incr on %s: %w", opts.Addr, err)
	}
	run.Store, run.Settings = "redis", settings
	// appendfsync says it all when the AOF is on; appendonly=no when not.
	run.Name = "peer/redis-incr/" + settingsName(settings, "appendfsync")
	if settings["appendonly"] == "no" {
		run.Name = "peer/redis-incr/appendonly=no"
	}
	keys := make([]string, cfg.Counters)
	prefix := fmt.Sprintf("shardcounter-bench/%x/", time.Now().UnixNano())
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
	}
	written := make([]atomic.Bool, len(keys))
	return target{
		write: func(ctx context.Context, i int) error {
			if !written[i].Load() {
				written[i].Store(true) // before the INCR, so a failed reply still gets cleaned up
			}
			return c.Incr(ctx, keys[i]).Err()
		},
		read: func(ctx context.Context, i int) error {
			if err := c.Get(ctx, keys[i]).Err(); err != nil && !errors.Is(err, goredis.Nil) {
				return err
			}
			return nil
		},
		total: func(ctx context.Context) (int64, error) {
			var total int64
			err := forChunks(written, 1000, func(idx []int) error {
				ks := make([]string, len(idx))
				for j, i := range idx {
					ks[j] = keys[i]
				}
				vals, err := c.MGet(ctx, ks...).Result()
				if err != nil {
					return err
				}
				for _, v := range vals {
					if s, ok := v.(string); ok {
						n, err := strconv.ParseInt(s, 10, 64)
						if err != nil {
							return fmt.Errorf("key holds %q, not a number", s)
						}
						total += n
					}
				}
				return nil
			})
			return total, err
		},
		cleanup: func(ctx context.Context) error {
			err := forChunks(written, 1000, func(idx []int) error {
				ks := make([]string, len(idx))
				for j, i := range idx {
					ks[j] = keys[i]
				}
				return c.Del(ctx, ks...).Err()
			})
			if cerr := c.Close(); err == nil {
				err = cerr
			}
			return err
		},
	}, nil
}

// RedisSettings returns the Redis server's version and persistence
// settings, which bound INCR's throughput: with appendfsync always every
// event-loop pass ends with an fsync.
func RedisSettings(ctx context.Context, c *goredis.Client) (map[string]string, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return nil, err
	}
	s := map[string]string{}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			s["version"] = v
		}
	}
	for _, k := range []string{"appendonly", "appendfsync"} {
		kv, err := c.ConfigGet(ctx, k).Result()
		if err != nil {
			return nil, err
		}
		if v, ok := kv[k]; ok {
			s[k] = v
		}
	}
	if s["appendonly"] == "no" {
		delete(s, "appendfsync") // it does not apply
	}
	return s, nil
}

// forChunks calls fn with the indexes i where set[i] is true, up to n at a
// time.
func forChunks(set []atomic.Bool, n int, fn func(idx []int) error) error {
	var idx []int
	for i := range set {
		if !set[i].Load() {
			continue
		}
		if idx = append(idx, i); len(idx) == n {
			if err := fn(idx); err != nil {
				return err
			}
			idx = idx[:0]
		}
	}
	if len(idx) > 0 {
		return fn(idx)
	}
	return nil
}

// postgresPeer is a plain UPDATE t SET n = n + 1 of one row per counter,
// through a pgx pool of one connection per client, with pgx's default
// statement cache (each statement prepared once per connection), in a
// table of its own that it drops after.
func postgresPeer(ctx context.Context, cfg Config, dsn string, run *Run) (target, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return target{}, fmt.Errorf("bench: peer postgres-update: DSN: %w", err)
	}
	pcfg.MaxConns, pcfg.MinConns = int32(cfg.Clients), int32(cfg.Clients)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return target{}, fmt.Errorf("bench: peer postgres-update: %w", err)
	}
	fail := func(err error) (target, error) {
		pool.Close()
		return target{}, fmt.Errorf("bench: peer postgres-update: %w", err)
	}
	settings, err := PostgresSettings(ctx, pool)
	if err != nil {
		return fail(err)
	}
	run.Store, run.Settings = "postgres", settings
	run.Name = "peer/postgres-update/" + settingsName(settings, "synchronous_commit")
	table := pgx.Identifier{fmt.Sprintf("shardcounter_bench_peer_%x", time.Now().UnixNano())}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" (id integer PRIMARY KEY, n bigint NOT NULL DEFAULT 0)"); err != nil {
		return fail(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO "+table+" (id) SELECT generate_series(0, $1::integer - 1)", cfg.Counters); err != nil {
		pool.Exec(ctx, "DROP TABLE "+table) //nolint:errcheck // the insert's error says more
		return fail(err)
	}
	update := "UPDATE " + table + " SET n = n + 1 WHERE id = $1"
	sel := "SELECT n FROM " + table + " WHERE id = $1"
	return target{
		write: func(ctx context.Context, i int) error {
			tag, err := pool.Exec(ctx, update, i)
			if err == nil && tag.RowsAffected() != 1 {
				err = fmt.Errorf("UPDATE changed %d rows, want 1", tag.RowsAffected())
			}
			return err
		},
		read: func(ctx context.Context, i int) error {
			var n int64
			return pool.QueryRow(ctx, sel, i).Scan(&n)
		},
		total: func(ctx context.Context) (int64, error) {
			var total int64
			err := pool.QueryRow(ctx, "SELECT coalesce(sum(n), 0)::bigint FROM "+table).Scan(&total)
			return total, err
		},
		cleanup: func(ctx context.Context) error {
			_, err := pool.Exec(ctx, "DROP TABLE "+table)
			pool.Close()
			return err
		},
	}, nil
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

// barePeer serves the bare handler on a loopback port of this process and
// drives it with the http path's load generator and requests.
func barePeer(cfg Config, run *Run) (target, error) {
	h := &bareHandler{}
	srv, url, err := serveLoopback(h)
	if err != nil {
		return target{}, err
	}
	run.Store, run.Name = "http", "peer/http-bare"
	svc := &httpService{lg: newLoadgen(url, "", cfg.Clients)}
	return target{
		// The counter ids go in the path as for the http path, so both
		// build the same requests; the handler ignores them.
		write: func(ctx context.Context, i int) error { return svc.write(ctx, strconv.Itoa(i)) },
		read:  func(ctx context.Context, i int) error { return svc.read(ctx, strconv.Itoa(i), "strong") },
		total: func(context.Context) (int64, error) { return h.n.Load(), nil },
		cleanup: func(ctx context.Context) error {
			svc.lg.close()
			return srv.Shutdown(ctx)
		},
	}, nil
}
