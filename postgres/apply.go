package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardcounter/shardcounter"
)

// createSQL creates the batch's missing counters that an item would create
// (Increment.Create), with their shard rows, and returns the ids it
// created; an existing one is skipped by the conflict check, which looks
// it up before inserting anything. It inserts in id order, so two batches
// creating the same
// counters cannot deadlock: the second waits for the first to commit and
// then finds them, and its lock statement (next in the same round trip,
// with a snapshot of its own) locks them. An id inserted here may be
// dropped again (dropSQL) when no item that would create it applies.
const createSQL = `
WITH c AS (
	INSERT INTO shardcounter.counters AS c (id, shards, kind, min, max, bucket, retention, created_at)
	SELECT i.id, i.shards, i.kind, i.min, i.max, i.bucket, i.retention, coalesce($8, now())
	FROM unnest($1::text[], $2::integer[], $3::text[], $4::bigint[], $5::bigint[], $6::interval[], $7::interval[])
		AS i(id, shards, kind, min, max, bucket, retention)
	ORDER BY i.id
	ON CONFLICT (id) DO NOTHING
	RETURNING c.id, c.shards
), s AS (
	INSERT INTO shardcounter.shards (counter, shard, shards)
	SELECT c.id, g, c.shards FROM c, generate_series(0, c.shards - 1) AS g
)
SELECT id FROM c`

// dropSQL removes counters that this batch created and then did not use.
const dropSQL = `DELETE FROM shardcounter.counters WHERE id = ANY ($1::text[])`

// lockSQL locks the shard rows a batch needs, in (counter, shard) order so
// that concurrent batches cannot deadlock, and returns each counter's spec
// with the rows: their values, wide flags and sketches (of approx
// counters). $1 lists each item's counter
// and $2 its pick. A "full" counter, whose total the batch must check (a
// bounded one, or one listed in $3), has every shard row locked; another
// has the rows its items pick. A wanted row that a reshard rewrote or
// removed after this statement read the count (see addSQL) comes back
// NULL (or, of a full counter, missing): the batch then starts again. A
// counter that does not exist has no rows.
//
// w is MATERIALIZED and sorted, and the rows are locked by lateral
// subqueries as w is read in order, so the lock order is w's whatever the
// plan; and the result pairs each wanted row with its lock without a join.
// Nothing in it is estimated at more rows than the batch has: a
// generate_series of every shard was, which made PostgreSQL plan a batch
// of 32 items as 32,032 rows and compile it with JIT (27 ms).
var lockSQL = `
WITH w AS MATERIALIZED (
	SELECT DISTINCT ON (c.id, 2) c.id AS counter,
		CASE WHEN NOT f.full THEN mod(i.pick, c.shards)::integer END AS shard,
		f.full, ` + specColumns("c") + `
	FROM unnest($1::text[], $2::numeric[]) AS i(counter, pick)
	CROSS JOIN LATERAL (SELECT * FROM shardcounter.counters c WHERE c.id = i.counter LIMIT 1) AS c
	CROSS JOIN LATERAL (SELECT c.id = ANY ($3::text[]) OR c.min IS NOT NULL OR c.max IS NOT NULL AS full) AS f
	ORDER BY c.id, 2
)
SELECT w.counter, coalesce(w.shard, a.shard), w.full, ` + specColumns("w") + `, coalesce(o.value, a.value), coalesce(o.wide, a.wide),
	coalesce(o.sketch, a.sketch)
FROM w
LEFT JOIN LATERAL (
	SELECT s.value, s.wide, s.sketch FROM shardcounter.shards s
	WHERE NOT w.full AND s.counter = w.counter AND s.shard = w.shard AND s.shards = w.shards
	FOR UPDATE
) AS o ON true
LEFT JOIN LATERAL (
	SELECT s.shard, s.value, s.wide, s.sketch FROM shardcounter.shards s
	WHERE w.full AND s.counter = w.counter AND s.shards = w.shards
	ORDER BY s.shard
	FOR UPDATE
) AS a ON true`

// fillSQL inserts the shard rows that lockSQL wants and that do not
// exist: a counter loaded in bulk (LoadCounters) has rows only for the
// shards that hold something, and a missing row reads as 0. The
// arguments are lockSQL's. An attempt that found a wanted row missing
// (stale) runs it before lockSQL in the next attempt; it is never in the
// way of a counter whose rows all exist.
//
// It locks each counter's row FOR SHARE first, in id order: a reshard
// or a delete (FOR NO KEY UPDATE) that is under way is waited for, and
// the shard count then read is the one that holds, so no row is made for
// a shard that a reshard removed. A row it makes is wide when any row of
// its counter is (a wide counter has every row: see LoadCounters).
const fillSQL = `
WITH i AS MATERIALIZED (
	SELECT DISTINCT i.counter, i.pick FROM unnest($1::text[], $2::numeric[]) AS i(counter, pick) ORDER BY 1, 2
), c AS MATERIALIZED (
	SELECT c.id, c.shards, i.pick, c.id = ANY ($3::text[]) OR c.min IS NOT NULL OR c.max IS NOT NULL AS full
	FROM i
	CROSS JOIN LATERAL (
		SELECT c.id, c.shards, c.min, c.max FROM shardcounter.counters c WHERE c.id = i.counter FOR SHARE
	) AS c
)
INSERT INTO shardcounter.shards (counter, shard, shards, wide)
SELECT DISTINCT c.id, g.shard, c.shards, w.wide
FROM c
CROSS JOIN LATERAL (
	SELECT mod(c.pick, c.shards)::integer AS shard WHERE NOT c.full
	UNION ALL
	SELECT generate_series(0, c.shards - 1) WHERE c.full
) AS g
CROSS JOIN LATERAL (
	SELECT EXISTS (SELECT 1 FROM shardcounter.shards w WHERE w.counter = c.id AND w.wide) AS wide
) AS w
ORDER BY 1, 2
ON CONFLICT (counter, shard) DO NOTHING`

// writeSQL sets the shard rows of sum counters that the batch changed to
// their new values and wide flags. The batch holds their locks and
// computed the values from what it locked, so setting is exact; it also
// lets the batch refuse, item by item, a delta that would leave int64 or
// the counter's bounds.
const writeSQL = `
UPDATE shardcounter.shards s SET value = u.value, wide = u.wide
FROM unnest($1::text[], $2::integer[], $3::bigint[], $4::boolean[]) AS u(counter, shard, value, wide)
WHERE s.counter = u.counter AND s.shard = u.shard`

// maxApplyAttempts bounds how many times Apply starts a batch again because
// a reshard moved one of its shards, PostgreSQL chose it as a deadlock
// victim, or a counter turned out to need its total checked. Each attempt
// waits for the reshard in its way to commit.
const maxApplyAttempts = 16

// pinPlans makes PostgreSQL run the batch's statements on their generic
// plans, and keeps those plans what the statements are written as: nested
// loops over the batch's arrays that read and write rows by key.
//
// Left to choose, PostgreSQL planned the statements afresh for the actual
// arrays on many runs: 0.2 to 0.9 ms a statement on a busy machine
// (pg_stat_statements), more than executing them, for the same nested
// loops. But a generic plan is kept until the next ANALYZE of its tables,
// and one made while a table was nearly empty may read all of it: the
// member statement's presence check became a hashed subplan over every
// member of the counter, 30 ms a batch of 64 once 10,000 members were in,
// growing with them. With sequential scans, hash joins and merge joins off
// for the batch's transaction, and every lookup written as a lateral
// subquery (which a hashed subplan cannot replace), no plan of a batch
// depends on the size of a table.
const pinPlans = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
	set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true),
	set_config('enable_mergejoin', 'off', true)`

// errRetry says that a batch attempt was rolled back and may start again.
var errRetry = errors.New("batch must start again")

// Apply applies a batch of increments in one transaction with two round
// trips. The first begins, creates missing counters that items would
// create, locks the shard rows in (counter, shard) order and records the
// request ids; the second writes the shard values and members the items
// decided, expires old request ids and commits. Items are decided in batch
// order on the locked values, as one write at a time would be (see
// decide): an item that fails on its own (ErrInvalid, ErrNotFound,
// ErrOutOfRange) changes nothing, and the others apply.
func (s *CounterStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
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
	b := newBatch(incs, nil)
	b.marker = newMarker(time.Now())
	err = s.apply(ctx, conn.Conn(), true, b, out)
	conn.Release()
	if shardcounter.IsOutcomeUnknown(err) {
		return s.resolve(ctx, b, out, err)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// apply runs attempts of a batch on conn until one completes, filling
// out. With own set it runs each attempt in a transaction of its own;
// otherwise conn is in the caller's transaction, which it neither begins
// nor ends.
func (s *CounterStore) apply(ctx context.Context, conn *pgx.Conn, own bool, b *batch, out []shardcounter.Outcome) error {
	clk := s.clock()
	if own {
		if done, err := s.applyPlain(ctx, conn, b, out, clk); done || err != nil {
			return err
		}
	}
	for range maxApplyAttempts {
		clear(out)
		err := s.applyOnce(ctx, conn, own, b, out, clk)
		var r *restart
		switch {
		case errors.As(err, &r):
			b.learn(r)
			continue
		case errors.Is(err, errRetry):
			continue
		}
		return err
	}
	return shardcounter.Errorf(shardcounter.EUNAVAILABLE,
		"apply: the batch was interrupted by reshards or deadlocks %d times: retry", maxApplyAttempts)
}

// applyOnce runs one attempt of a batch on conn, filling out, in two
// round trips: lock (create, lock, record request ids), decide every item
// in Go against the locked values, then write and commit. It returns
// errRetry or a *restart, after rolling back (when it owns the
// transaction), when the batch may start again.
func (s *CounterStore) applyOnce(ctx context.Context, conn *pgx.Conn, own bool, b *batch, out []shardcounter.Outcome, clk clock) error {
	a, err := lock(ctx, conn, own, b, clk)
	if err != nil {
		return abort(ctx, conn, own, err)
	}
	s.noteGeneral(a)
	p, err := a.decide(b, out)
	if err != nil {
		return abort(ctx, conn, own, err)
	}
	return s.write(ctx, conn, own, b, a, p, out, clk)
}

// lock is round trip 1 of an attempt: begin (when it owns the
// transaction), create the counters the batch may create, lock the
// shards it touches and record its request ids. The attempt it returns
// holds what the decision needs; the locks are held until write commits.
func lock(ctx context.Context, conn *pgx.Conn, own bool, b *batch, clk clock) (*attempt, error) {
	a := &attempt{counters: make(map[string]*counter), created: make(map[string]bool), recorded: make(map[requestKey]bool)}
	q := &pgx.Batch{}
	if own {
		q.Queue("BEGIN")
		q.Queue(pinPlans)
	}
	if c := b.creates(); len(c.ids) > 0 {
		q.Queue(createSQL, c.ids, c.shards, c.kinds, c.mins, c.maxs, c.buckets, c.retentions, clk.now).Query(func(rows pgx.Rows) error {
			var id string
			_, err := pgx.ForEachRow(rows, []any{&id}, func() error {
				a.created[id] = true
				return nil
			})
			return err
		})
	}
	counters, picks := b.locks()
	if b.fill {
		q.Queue(fillSQL, counters, picks, b.fullList())
	}
	q.Queue(lockSQL, counters, picks, b.fullList()).Query(a.readLocks)
	if reqs := b.requests(); len(reqs) > 0 {
		rc, ri := splitRequests(reqs)
		q.Queue(recordSQL, rc, ri, clk.now, clk.windowUS).Query(func(rows pgx.Rows) error {
			var k requestKey
			_, err := pgx.ForEachRow(rows, []any{&k.counter, &k.id}, func() error {
				a.recorded[k] = true
				return nil
			})
			return err
		})
	}
	// A stale lock read means a reshard or a delete committed under this
	// attempt, and recording may have failed because of it (its counter
	// gone); the attempt is discarded either way.
	err := conn.SendBatch(ctx, q).Close()
	if a.stale {
		// A wanted row may be missing rather than moved: the next
		// attempt inserts the missing ones first (fillSQL).
		err, b.fill = errRetry, true
	}
	return a, err
}

// noteGeneral remembers the counters that cannot take the fast path of
// applyPlain (not a plain sum, or bounded, or wide), so that later
// batches touching them go straight to the locking path.
func (s *CounterStore) noteGeneral(a *attempt) {
	for id, c := range a.counters {
		if c.spec.Kind != shardcounter.KindSum || c.spec.Bounded() || c.wides > 0 {
			s.general.add(id)
		}
	}
}

// write is round trip 2 of an attempt: drop counters created for
// nothing, write shard values, members and window buckets, forget
// refused request ids, expire old ones, commit, and read the totals
// items asked for. A failure after COMMIT was sent is reported as one
// whose outcome may be unknown (commitSent), never retried blindly.
func (s *CounterStore) write(ctx context.Context, conn *pgx.Conn, own bool, b *batch, a *attempt, p *plan, out []shardcounter.Outcome, clk clock) error {
	q := &pgx.Batch{}
	if len(p.drop) > 0 {
		q.Queue(dropSQL, p.drop)
	}
	if len(p.rows.counters) > 0 {
		q.Queue(writeSQL, p.rows.counters, p.rows.shards, p.rows.values, p.rows.wide)
	}
	if len(p.sketches.counters) > 0 {
		q.Queue(sketchSQL, p.sketches.counters, p.sketches.shards, p.sketches.sketches)
	}
	if len(p.members.items) > 0 {
		m := p.members
		q.Queue(membersSQL, m.ords, m.counters, m.members, m.adds, m.hashes, m.shards).Query(func(rows pgx.Rows) error {
			var ord int
			_, err := pgx.ForEachRow(rows, []any{&ord}, func() error {
				out[m.items[ord]].Unchanged = true
				return nil
			})
			return err
		})
	}
	if len(p.buckets.counters) > 0 {
		q.Queue(bucketsSQL, p.buckets.counters, p.buckets.shards, p.buckets.deltas, clk.now)
	}
	if len(p.refused) > 0 {
		rc, ri := splitRequests(p.refused)
		q.Queue(unrecordSQL, rc, ri)
	}
	// Expiry is left out of a caller's transaction (AddTx), which has no
	// request ids to make up for.
	var x expiry
	limit := expireBatch + len(a.recorded)
	var t *totals
	marked := false
	if own {
		q.Queue(expireSQL, clk.now, clk.windowUS, limit, clk.from).QueryRow(func(row pgx.Row) error {
			return row.Scan(&x.deleted, &x.newest, &x.cutoff)
		})
		queueMark(q, b, &marked)
		t = s.queueTotals(q, q.Queue("COMMIT"), b, out)
	}
	if q.Len() == 0 {
		return nil
	}
	if err := conn.SendBatch(ctx, q).Close(); err != nil && !t.committed() {
		if own && (conn.PgConn().TxStatus() == 'I' || conn.IsClosed()) {
			// The connection broke or the commit itself answered an error.
			return mapError("apply", err, commitSent(marked, err))
		}
		// A statement before COMMIT failed, so COMMIT never ran.
		return abort(ctx, conn, own, err)
	}
	if own {
		s.expired(x, limit)
	}
	t.give(b, out)
	return nil
}

// totals is the read of the counters whose items asked for their total
// (Increment.Total), queued after COMMIT in the commit's round trip. It
// is readSQL, a statement that begins once the commit is done, so each
// value is one the counter held between the commit and the reply, as a
// strong read's is, without a round trip of its own.
type totals struct {
	ids      []string
	index    map[string]int // of each id in ids
	readings []*shardcounter.Reading
	commit   bool // COMMIT's result came, without error
}

// totalsSQL is readSQL; a test replaces it with a statement that fails.
var totalsSQL = readSQL

// queueTotals queues, at the end of q, after commit (its COMMIT), the read
// of the counters of b's items that asked for their total and have not
// failed (out). It returns nil when none did.
func (s *CounterStore) queueTotals(q *pgx.Batch, commit *pgx.QueuedQuery, b *batch, out []shardcounter.Outcome) *totals {
	var t *totals
	for i, inc := range b.incs {
		if !inc.Total || b.errs[i] != nil || out[i].Err != nil {
			continue
		}
		if t == nil {
			t = &totals{index: make(map[string]int)}
		}
		if _, ok := t.index[inc.Counter]; !ok {
			t.index[inc.Counter] = len(t.ids)
			t.ids = append(t.ids, inc.Counter)
		}
	}
	if t == nil {
		return nil
	}
	t.readings = make([]*shardcounter.Reading, len(t.ids))
	commit.Exec(func(pgconn.CommandTag) error {
		t.commit = true
		return nil
	})
	q.Queue(pinPlans) // COMMIT ended the batch's settings: see ReadCounters
	q.Queue(totalsSQL, t.ids, s.nowArg()).Query(func(rows pgx.Rows) error {
		return scanReadings(rows, t.ids, t.readings)
	})
	return t
}

// committed reports whether the round trip's error, if any, came after
// its COMMIT succeeded: from the read of the totals, which leaves the
// items without a total (the engine then reads them) but applied.
func (t *totals) committed() bool { return t != nil && t.commit }

// give sets the total of each item that asked for it and has not failed,
// from the readings that came.
func (t *totals) give(b *batch, out []shardcounter.Outcome) {
	if t == nil {
		return
	}
	for i, inc := range b.incs {
		j, ok := t.index[inc.Counter]
		if !inc.Total || out[i].Err != nil || !ok {
			continue
		}
		if r := t.readings[j]; r != nil {
			v := r.Value
			out[i].Total = &v
		}
	}
}

// readLocks reads lockSQL's rows into the attempt: each existing counter's
// spec and locked shard values, and whether any wanted row was stale.
func (a *attempt) readLocks(rows pgx.Rows) error {
	var (
		id    string
		shard *int
		full  bool
		spec  specRow
		v     *int64
		wide  *bool
		sk    []byte
	)
	_, err := pgx.ForEachRow(rows, append(append([]any{&id, &shard, &full}, spec.dest()...), &v, &wide, &sk), func() error {
		c := a.counters[id]
		if c == nil {
			c = &counter{spec: spec.spec(), full: full, values: make(map[int]int64)}
			a.counters[id] = c
		}
		if v == nil {
			a.stale = true
			return nil
		}
		c.values[*shard] = *v
		if sk != nil {
			if c.sketches == nil {
				c.sketches = make(map[int][]byte)
			}
			c.sketches[*shard] = sk
		}
		if *wide {
			c.wides++
		}
		return nil
	})
	for _, c := range a.counters {
		if c.full && len(c.values) != c.spec.Shards {
			a.stale = true // a reshard removed or added rows after the count was read
		}
	}
	return err
}

// abort ends the attempt and returns err classified, or err itself
// (errRetry, *restart) when the attempt may start again: after a stale
// read, a deadlock or a serialization failure, nothing was applied. When
// it owns the transaction it rolls it back, and when the rollback cannot
// be sent it closes the connection, which the pool then discards. In the
// caller's transaction a deadlock or serialization failure has aborted
// it, and is returned as ErrUnavailable.
func abort(ctx context.Context, conn *pgx.Conn, own bool, err error) error {
	if own && !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
		if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
			conn.Close(ctx) //nolint:errcheck // already failing
		}
	}
	var r *restart
	if errors.Is(err, errRetry) || errors.As(err, &r) {
		return err
	}
	if isMarkerConflict(err) {
		return errMarkerFound
	}
	var pe *pgconn.PgError
	if own && errors.As(err, &pe) && (pe.Code == sqlDeadlock || pe.Code == sqlSerialization) && !conn.IsClosed() {
		return errRetry
	}
	return mapError("apply", err, beforeCommit)
}

// fullList is b.full as lockSQL's $3, never NULL.
func (b *batch) fullList() []string {
	if b.full == nil {
		return []string{}
	}
	return slices.Clone(b.full)
}
