package postgres

import (
	"context"
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
	return listCounters(ctx, n.tx, prefix, after, limit)
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
	return listMembers(ctx, n.tx, id, after, limit)
}

// ReadSeries is CounterStore.ReadSeries in the snapshot.
func (n *Snapshot) ReadSeries(ctx context.Context, id string, from, to time.Time) ([]shardcounter.Bucket, error) {
	return readSeries(ctx, n.tx, id, from, to)
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
