package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardcounter/shardcounter"
)

// Snapshot is the store as it was at one moment, for reading alone: a
// REPEATABLE READ, READ ONLY transaction on a connection of its own,
// which every read of it shares. An export reads through one, so that it
// is one consistent snapshot of the whole store while writes go on. It
// holds the connection (and keeps PostgreSQL from removing row versions
// newer than it) until Close. It is not safe for concurrent use.
type Snapshot struct {
	conn *pgxpool.Conn
	tx   pgx.Tx
}

// Snapshot begins a Snapshot.
func (s *CounterStore) Snapshot(ctx context.Context) (*Snapshot, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, mapError("snapshot", err, beforeCommit)
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		conn.Release()
		return nil, mapError("snapshot", err, beforeCommit)
	}
	return &Snapshot{conn: conn, tx: tx}, nil
}

// Close ends the snapshot's transaction and gives its connection back.
func (n *Snapshot) Close() error {
	err := n.tx.Rollback(context.Background())
	n.conn.Release()
	return err
}

// ListCounters is CounterStore.ListCounters in the snapshot.
func (n *Snapshot) ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID(shardcounter.CounterIDKind, prefix); prefix != "" && err != nil {
		return nil, err
	}
	rows, err := n.tx.Query(ctx, `
SELECT c.id, `+specColumns("c")+`, c.created_at FROM shardcounter.counters c
WHERE c.id >= $1 AND starts_with(c.id, $1) AND c.id > $2
ORDER BY c.id
LIMIT $3`, prefix, after, max(limit, 0))
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
	// Past the prefix's ids the scan goes on to the end of the index
	// without matching; a short page ends the listing either way.
	return cs, nil
}

// ReadCounters is CounterStore.ReadCounters in the snapshot.
func (n *Snapshot) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	if err := shardcounter.CheckReadBatch(len(ids)); err != nil {
		return nil, err
	}
	out := make([]*shardcounter.Reading, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := n.tx.Query(ctx, readSQL, ids, nil)
	if err != nil {
		return nil, mapError("read counters", err, beforeCommit)
	}
	if err := scanReadings(rows, ids, out); err != nil {
		return nil, mapError("read counters", err, beforeCommit)
	}
	return out, nil
}

// ListMembers is CounterStore.ListMembers in the snapshot.
func (n *Snapshot) ListMembers(ctx context.Context, id, after string, limit int) ([]string, error) {
	rows, err := n.tx.Query(ctx, `SELECT m.member FROM shardcounter.members m
WHERE m.counter = $1 AND m.member > $2 ORDER BY m.member LIMIT $3`, id, after, max(limit, 0))
	if err != nil {
		return nil, mapError("list members", err, beforeCommit)
	}
	ms, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapError("list members", err, beforeCommit)
	}
	return ms, nil
}

// ReadSeries is CounterStore.ReadSeries in the snapshot: the counter's
// non-zero buckets that start in [from, to), summed over its shards.
func (n *Snapshot) ReadSeries(ctx context.Context, id string, from, to time.Time) ([]shardcounter.Bucket, error) {
	rows, err := n.tx.Query(ctx, `SELECT b.start,
	CASE WHEN sum(b.value) BETWEEN -9223372036854775808 AND 9223372036854775807 THEN sum(b.value)::bigint END
FROM shardcounter.buckets b WHERE b.counter = $1 AND b.start >= $2 AND b.start < $3
GROUP BY b.start HAVING sum(b.value) <> 0 ORDER BY b.start`, id, from, to)
	if err != nil {
		return nil, mapError("read series", err, beforeCommit)
	}
	var out []shardcounter.Bucket
	var start time.Time
	var v *int64
	_, err = pgx.ForEachRow(rows, []any{&start, &v}, func() error {
		if v == nil {
			return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: a bucket's sum leaves the int64 range", id)
		}
		out = append(out, shardcounter.Bucket{Start: start.UTC(), Value: *v})
		return nil
	})
	var e *shardcounter.Error
	if errors.As(err, &e) {
		return nil, err
	}
	if err != nil {
		return nil, mapError("read series", err, beforeCommit)
	}
	return out, nil
}

// EachMember calls fn with each member of the counters ids (in byte
// order), by counter and member in byte order, from one query in the
// snapshot: an export reads a page's members so, instead of a query per
// counter. The rows stream from the server as fn takes them.
func (n *Snapshot) EachMember(ctx context.Context, ids []string, fn func(id, member string) error) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := n.tx.Query(ctx, `SELECT m.counter, m.member FROM shardcounter.members m
WHERE m.counter = ANY ($1::text[]) ORDER BY m.counter, m.member`, ids)
	if err != nil {
		return mapError("list members", err, beforeCommit)
	}
	var id, member string
	var fnErr error // fn's own, returned as it is
	_, err = pgx.ForEachRow(rows, []any{&id, &member}, func() error {
		fnErr = fn(id, member)
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	return mapError("list members", err, beforeCommit)
}
