package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// lockSQL reads the shard count of the batch's counters ($1 lists each
// item's counter, $2 its pick) and locks the shard row of every item, in
// (counter, shard) order so that concurrent batches cannot deadlock. It
// returns one row per (counter, shard) that the items pick, with the
// row's current value, or a NULL value when a reshard rewrote or removed
// the row after this statement read the count (see addSQL); the batch then
// starts again. A counter that does not exist has no rows.
//
// The locking CTE is MATERIALIZED so that its lock order is its own ORDER
// BY, whatever the plan of the outer query.
const lockSQL = `
WITH c AS (
	SELECT id, shards FROM shardcounter.counters WHERE id = ANY($1::text[])
), want AS (
	SELECT DISTINCT c.id AS counter, mod(i.pick, c.shards)::integer AS shard, c.shards
	FROM unnest($1::text[], $2::numeric[]) AS i(counter, pick)
	JOIN c ON c.id = i.counter
), locked AS MATERIALIZED (
	SELECT s.counter, s.shard, s.value
	FROM shardcounter.shards s
	JOIN want w ON s.counter = w.counter AND s.shard = w.shard AND s.shards = w.shards
	ORDER BY s.counter, s.shard
	FOR UPDATE OF s
)
SELECT w.counter, w.shard, w.shards, l.value
FROM want w LEFT JOIN locked l ON l.counter = w.counter AND l.shard = w.shard`

// recordSQL records the batch's request ids ($1 counters, $2 ids, each
// pair once), in a fixed order so that two batches recording the same ids
// cannot deadlock, and returns those that were new. A pair that another
// transaction is recording waits for it to end: then it is new if that
// transaction rolled back, and a duplicate if it committed.
//
// A pair recorded at or before the cutoff ($3 and $4, see cutoffExpr) has
// expired: it counts as new, and the insert takes it over with the new
// time. The conflict check and the takeover are one atomic step, so of
// concurrent batches reviving one expired id exactly one records it.
var recordSQL = `
INSERT INTO shardcounter.requests AS r (counter, request_id, created_at)
SELECT i.counter, i.request_id, ` + nowExpr(3) + `
FROM unnest($1::text[], $2::text[]) AS i(counter, request_id)
WHERE EXISTS (SELECT 1 FROM shardcounter.counters c WHERE c.id = i.counter)
ORDER BY i.counter, i.request_id
ON CONFLICT (counter, request_id) DO UPDATE SET created_at = EXCLUDED.created_at
	WHERE r.created_at <= ` + cutoffExpr(3) + `
RETURNING counter, request_id`

// nowExpr is the time a batch records its request ids at: the store's
// Now when set (parameter $p), else the database's clock at the start of
// the transaction, so that processes sharing a database share one clock.
func nowExpr(p int) string {
	return fmt.Sprintf("coalesce($%d::timestamptz, now())", p)
}

// cutoffExpr is the time at or before which a request id has expired: the
// dedupe window (parameter $p+1, in microseconds) before nowExpr(p).
func cutoffExpr(p int) string {
	return fmt.Sprintf("(%s - $%d::bigint * interval '1 microsecond')", nowExpr(p), p+1)
}

// expireExpr deletes up to $p+2 expired request ids (now and window in
// $p and $p+1), oldest first, through the index on created_at, and
// returns the created_at of each: it reads only the ids it deletes, or,
// when none has expired, one index entry. SKIP LOCKED lets concurrent
// batches expire different ids instead of queueing behind each other.
//
// The scan starts at $p+3 when it is not null: deleted ids stay in the
// index, as dead entries at its low end, until VACUUM removes them, and
// every scan from the start steps over all of them: with 100,000 dead
// entries it read 275 index pages and took 0.67 ms, from where the last
// scan stopped 2 pages and 0.07 ms (EXPLAIN ANALYZE). See
// CounterStore.expiredTo.
func expireExpr(p int) string {
	return fmt.Sprintf(`
DELETE FROM shardcounter.requests WHERE ctid = ANY (ARRAY (
	SELECT ctid FROM shardcounter.requests
	WHERE created_at <= %s AND created_at >= coalesce($%d, '-infinity'::timestamptz)
	ORDER BY created_at
	LIMIT $%d
	FOR UPDATE SKIP LOCKED
))
RETURNING created_at`, cutoffExpr(p), p+3, p+2)
}

// expireSQL is expireExpr as a statement of its own, returning what
// CounterStore.expired needs: how many ids it deleted, the newest
// created_at among them and the cutoff.
var expireSQL = `WITH expired AS (` + expireExpr(1) + `
)
SELECT count(*), max(created_at), ` + cutoffExpr(1) + ` FROM expired`

// expireRescan is how often (in batches) expiry scans from the start of
// the index rather than from CounterStore.expiredTo, to delete ids that a
// scan skipped (locked by a batch that then rolled back) or that another
// process recorded with an older time.
var expireRescan int64 = 1024 // a variable for tests

// expireBatch is how many expired request ids a batch deletes beyond the
// number it records: enough to work off a backlog (after the window was
// shortened, say) within a few batches, few enough that a batch's cost
// stays bounded.
const expireBatch = 64

// writeSQL sets the shard rows the batch changed to their new values. The
// batch holds their locks and computed the values from what it locked, so
// setting is exact; it also lets the batch refuse, item by item, a delta
// that would leave int64.
const writeSQL = `
UPDATE shardcounter.shards s SET value = u.value
FROM unnest($1::text[], $2::integer[], $3::bigint[]) AS u(counter, shard, value)
WHERE s.counter = u.counter AND s.shard = u.shard`

// unrecordSQL forgets request ids that the batch recorded for items it then
// refused, so a retry of such an item is not taken for a duplicate.
const unrecordSQL = `
DELETE FROM shardcounter.requests r
USING unnest($1::text[], $2::text[]) AS u(counter, request_id)
WHERE r.counter = u.counter AND r.request_id = u.request_id`

// maxApplyAttempts bounds how many times Apply starts a batch again because
// a reshard moved one of its shards or PostgreSQL chose it as a deadlock
// victim. Each attempt waits for the reshard in its way to commit.
const maxApplyAttempts = 16

type shardKey struct {
	counter string
	shard   int
}

type requestKey struct {
	counter, id string
}

// errRetry says that a batch attempt was rolled back and may start again.
var errRetry = errors.New("batch must start again")

// Apply applies a batch of increments in one transaction with two round
// trips: the first begins, locks the shard rows in (counter, shard) order
// and records the request ids; the second writes the new values, expires
// old request ids and commits. Items on missing counters fail with
// ErrNotFound and items that would take a shard out of int64 with
// ErrOutOfRange, while the others apply. An invalid item fails the whole
// batch with ErrInvalid, nothing applied.
func (s *CounterStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	for i, inc := range incs {
		if err := shardcounter.ValidateIncrement(inc); err != nil {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "batch item %d: %s", i, shardcounter.ErrorMessage(err))
		}
	}
	out := make([]shardcounter.Outcome, len(incs))
	if len(incs) == 0 {
		return out, nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, mapError("apply", err, beforeCommit)
	}
	// A connection left inside a transaction by a failure is closed, not
	// reused, by the pool.
	defer conn.Release()
	clk := s.clock()
	for range maxApplyAttempts {
		clear(out)
		err := s.applyOnce(ctx, conn, incs, out, clk)
		if errors.Is(err, errRetry) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE,
		"apply: the batch was interrupted by reshards or deadlocks %d times: retry", maxApplyAttempts)
}

// clock is the time arguments of a batch's statements: the store's Now,
// or nil for the database's clock; the dedupe window in microseconds; and
// where expiry starts its scan, nil for the start of the index.
type clock struct {
	now      *time.Time
	windowUS int64
	from     *time.Time
}

func (s *CounterStore) clock() clock {
	c := clock{windowUS: s.window.Load() / int64(time.Microsecond)}
	if s.Now != nil {
		t := s.Now()
		c.now = &t
	}
	if us := s.expiredTo.Load(); us != 0 && s.applies.Add(1)%expireRescan != 0 {
		t := time.UnixMicro(us)
		c.from = &t
	}
	return c
}

// expiry is what a batch's expiry did: how many ids it deleted, the
// newest created_at among them, and the cutoff it deleted up to.
type expiry struct {
	deleted int
	newest  *time.Time
	cutoff  time.Time
}

// expired moves expiredTo forward (never back) past what a batch with
// limit limit deleted. A scan that deleted fewer than its limit found no
// more expired ids up to the cutoff: the next scan can start there, as
// ids recorded from now on are younger than the cutoff. One that deleted
// its limit may have left some: the next starts at the newest it deleted.
func (s *CounterStore) expired(x expiry, limit int) {
	to := x.cutoff
	if x.deleted >= limit {
		if x.newest == nil {
			return
		}
		to = *x.newest
	}
	us := to.UnixMicro()
	for {
		old := s.expiredTo.Load()
		if us <= old || s.expiredTo.CompareAndSwap(old, us) {
			return
		}
	}
}

// applyOnce runs one attempt of a batch on conn, filling out. It returns
// errRetry after rolling back when the batch may start again.
func (s *CounterStore) applyOnce(ctx context.Context, conn *pgxpool.Conn, incs []shardcounter.Increment, out []shardcounter.Outcome, clk clock) error {
	counters := make([]string, len(incs))
	picks := make([]uint64, len(incs))
	var reqs []requestKey
	for i, inc := range incs {
		counters[i], picks[i] = inc.Counter, inc.Pick
		if inc.RequestID != "" {
			reqs = append(reqs, requestKey{inc.Counter, inc.RequestID})
		}
	}
	slices.SortFunc(reqs, func(a, b requestKey) int {
		if c := strings.Compare(a.counter, b.counter); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	reqs = slices.Compact(reqs)

	// Round trip 1: begin, lock, record request ids.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(lockSQL, counters, picks)
	if len(reqs) > 0 {
		rc, ri := splitRequests(reqs)
		b.Queue(recordSQL, rc, ri, clk.now, clk.windowUS)
	}
	br := conn.SendBatch(ctx, b)
	shards, values, stale, err := readLocks(br)
	if err != nil {
		br.Close()
		return abort(ctx, conn, err)
	}
	recorded := make(map[requestKey]bool)
	if len(reqs) > 0 {
		rows, err := br.Query()
		if err == nil {
			var k requestKey
			_, err = pgx.ForEachRow(rows, []any{&k.counter, &k.id}, func() error {
				recorded[k] = true
				return nil
			})
		}
		// A stale lock read means a reshard or a delete committed under
		// this attempt, and recording may have failed because of it
		// (its counter gone); the attempt is discarded either way.
		if err != nil && !stale {
			br.Close()
			return abort(ctx, conn, err)
		}
	}
	if err := br.Close(); err != nil && !stale {
		return abort(ctx, conn, err)
	}
	if stale {
		return abort(ctx, conn, errRetry)
	}

	// Decide each item in batch order, on the values just locked.
	dirty := make(map[shardKey]bool)
	used := make(map[requestKey]bool)
	for i, inc := range incs {
		n, ok := shards[inc.Counter]
		if !ok {
			out[i].Err = notFound(inc.Counter)
			continue
		}
		rk := requestKey{inc.Counter, inc.RequestID}
		if inc.RequestID != "" && (!recorded[rk] || used[rk]) {
			out[i].Duplicate = true
			continue
		}
		k := shardKey{inc.Counter, shard.Of(inc.Pick, n)}
		v, ok := overflow.Add(values[k], inc.Delta)
		if !ok {
			out[i].Err = shardcounter.Errorf(shardcounter.EOUTOFRANGE,
				"counter %q: adding %d to shard %d would leave the int64 range", inc.Counter, inc.Delta, k.shard)
			continue
		}
		values[k] = v
		dirty[k] = true
		if inc.RequestID != "" {
			used[rk] = true
		}
	}

	// Round trip 2: write, forget refused request ids, expire old ones,
	// commit.
	b = &pgx.Batch{}
	if len(dirty) > 0 {
		wc := make([]string, 0, len(dirty))
		ws := make([]int, 0, len(dirty))
		wv := make([]int64, 0, len(dirty))
		for k := range dirty {
			wc, ws, wv = append(wc, k.counter), append(ws, k.shard), append(wv, values[k])
		}
		b.Queue(writeSQL, wc, ws, wv)
	}
	var refused []requestKey
	for k := range recorded {
		if !used[k] {
			refused = append(refused, k)
		}
	}
	if len(refused) > 0 {
		rc, ri := splitRequests(refused)
		b.Queue(unrecordSQL, rc, ri)
	}
	var x expiry
	limit := expireBatch + len(recorded)
	b.Queue(expireSQL, clk.now, clk.windowUS, limit, clk.from).QueryRow(func(row pgx.Row) error {
		return row.Scan(&x.deleted, &x.newest, &x.cutoff)
	})
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		if conn.Conn().PgConn().TxStatus() == 'I' || conn.Conn().IsClosed() {
			// The connection broke or the commit itself answered an error.
			return mapError("apply", err, atCommit)
		}
		// A statement before COMMIT failed, so COMMIT never ran.
		return abort(ctx, conn, err)
	}
	s.expired(x, limit)
	return nil
}

// readLocks reads the BEGIN and lock results of a batch: each existing
// counter's shard count, the locked shard values, and whether any of them
// was stale.
func readLocks(br pgx.BatchResults) (shards map[string]int, values map[shardKey]int64, stale bool, err error) {
	if _, err := br.Exec(); err != nil {
		return nil, nil, false, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, false, err
	}
	shards = make(map[string]int)
	values = make(map[shardKey]int64)
	var k shardKey
	var n int
	var v *int64
	_, err = pgx.ForEachRow(rows, []any{&k.counter, &k.shard, &n, &v}, func() error {
		shards[k.counter] = n
		if v == nil {
			stale = true
		} else {
			values[k] = *v
		}
		return nil
	})
	return shards, values, stale, err
}

// abort rolls back the attempt's transaction and returns err classified,
// or errRetry when the attempt may start again: after a stale read, a
// deadlock or a serialization failure, nothing was applied. When the
// rollback cannot be sent the connection is closed, and the pool discards
// it.
func abort(ctx context.Context, conn *pgxpool.Conn, err error) error {
	if !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' {
		if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
			conn.Conn().Close(ctx) //nolint:errcheck // already failing
		}
	}
	if errors.Is(err, errRetry) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == sqlDeadlock || pe.Code == sqlSerialization) && !conn.Conn().IsClosed() {
		return errRetry
	}
	return mapError("apply", err, beforeCommit)
}

func splitRequests(reqs []requestKey) (counters, ids []string) {
	counters = make([]string, len(reqs))
	ids = make([]string, len(reqs))
	for i, r := range reqs {
		counters[i], ids[i] = r.counter, r.id
	}
	return counters, ids
}
