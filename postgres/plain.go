package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
)

// plainSQL applies a plain batch in one statement: $1 lists each item's
// counter, $2 its pick and $3 its delta, $4 the number of items, $5 the
// commit time (or the database's clock). It adds each shard row's deltas,
// under its row lock, and a windowed counter's to its buckets, only where
// that is exact without deciding item by item: the counter exists and is
// a sum counter without bounds, its shard row still has the shard count the
// statement read (a reshard did not move it), the row is not wide, and
// its value, and its window bucket's row, stay within the zone ±MaxInt64/n
// (decide.InZone) after the row's positive deltas and after its negative
// ones, so after every prefix of them. When any item is left over, it calls
// shardcounter.restart_batch, which fails the statement and with it the
// transaction: nothing is applied, and the batch takes the general path.
//
// The UPDATE meets the rows in u's order, (counter, shard), as batches
// that lock them do (PostgreSQL plans it as a nested loop over u with an
// index scan of shards: u is estimated at a few rows), so concurrent
// batches do not deadlock; if one ever did, PostgreSQL would pick a victim
// and that batch would start again.
var plainSQL = `
WITH u AS (
	SELECT c.id AS counter, mod(i.pick, c.shards)::integer AS shard, c.shards, c.bucket, c.retention, count(*) AS items,
		sum(i.delta) AS delta, sum(greatest(i.delta, 0)) AS up, sum(least(i.delta, 0)) AS down
	FROM unnest($1::text[], $2::numeric[], $3::bigint[]) AS i(counter, pick, delta)
	CROSS JOIN LATERAL (SELECT * FROM shardcounter.counters c WHERE c.id = i.counter LIMIT 1) AS c
	WHERE c.kind = 'sum' AND c.min IS NULL AND c.max IS NULL
	GROUP BY 1, 2, 3, 4, 5
	ORDER BY 1, 2
), ` + bucketCTEs("u", "coalesce($5, now())") + `, w AS (
	UPDATE shardcounter.shards s SET value = s.value + u.delta
	FROM u
	WHERE s.counter = u.counter AND s.shard = u.shard AND s.shards = u.shards AND NOT s.wide
		AND s.value::numeric + u.up <= 9223372036854775807 / u.shards
		AND s.value::numeric + u.down >= -(9223372036854775807 / u.shards)
	RETURNING 1
)
SELECT shardcounter.restart_batch('items left for the general path')
WHERE (SELECT coalesce(sum(items), 0) FROM u) <> $4 OR (SELECT count(*) FROM u) <> (SELECT count(*) FROM w)
	OR (SELECT count(*) FROM u WHERE bucket IS NOT NULL) <> (SELECT count(*) FROM bucketed)`

// applyPlain applies a plain batch, one whose items are all deltas
// without request ids, on counters not known to need the general path
// (see CounterStore.general), in
// one round trip: BEGIN, plainSQL, expiry, COMMIT. It reports done false,
// with nothing applied, when the batch is not plain or plainSQL left
// items over; the general path (applyOnce) then decides it item by item.
// The general path takes two round trips and locks each row before it
// writes it (a WAL record more per row); a plain batch needs neither, as
// no item of it can be refused.
func (s *CounterStore) applyPlain(ctx context.Context, conn *pgx.Conn, b *batch, out []shardcounter.Outcome, clk clock) (done bool, err error) {
	counters := make([]string, len(b.incs))
	picks := make([]uint64, len(b.incs))
	deltas := make([]int64, len(b.incs))
	for i, inc := range b.incs {
		if decide.Validate(inc) != nil || inc.RequestID != "" || inc.Member != "" || inc.Sketch != nil || (inc.Kind != "" && inc.Kind != shardcounter.KindSum) || s.general.has(inc.Counter) {
			return false, nil
		}
		counters[i], picks[i], deltas[i] = inc.Counter, inc.Pick, inc.Delta
	}
	q := &pgx.Batch{}
	q.Queue("BEGIN")
	q.Queue(pinPlans)
	q.Queue(plainSQL, counters, picks, deltas, len(b.incs), clk.now)
	var x expiry
	q.Queue(expireSQL, clk.now, clk.windowUS, expireBatch, clk.from).QueryRow(func(row pgx.Row) error {
		return row.Scan(&x.deleted, &x.newest, &x.cutoff)
	})
	marked := false
	queueMark(q, b, &marked)
	t := s.queueTotals(q, q.Queue("COMMIT"), b, out)
	if err := conn.SendBatch(ctx, q).Close(); err != nil && !t.committed() {
		if conn.PgConn().TxStatus() == 'I' || conn.IsClosed() {
			// The connection broke or the commit itself answered an
			// error: before markSQL answered, nothing committed.
			return false, mapError("apply", err, commitSent(marked, err))
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == sqlRestart {
			err = errRetry
		}
		if err := abort(ctx, conn, true, err); !errors.Is(err, errRetry) {
			return false, err
		}
		return false, nil
	}
	clear(out)
	s.expired(x, expireBatch)
	t.give(b, out)
	return true, nil
}

// idSet remembers counters known to be of a kind (CounterStore.general,
// CounterStore.unwindowed). Specs never change, so it is only ever stale
// for a counter deleted and made again, which each use handles. It is
// safe for concurrent use.
type idSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

// maxGeneral bounds a set: past it, it starts again empty.
const maxGeneral = 10000

func (g *idSet) has(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ids[id]
}

// hasAll reports whether the set has the counter of every read.
func (g *idSet) hasAll(reads []decide.Read) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range reads {
		if !g.ids[r.Counter] {
			return false
		}
	}
	return true
}

func (g *idSet) add(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ids == nil || len(g.ids) >= maxGeneral {
		g.ids = make(map[string]bool)
	}
	g.ids[id] = true
}

func (g *idSet) remove(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.ids, id)
}
