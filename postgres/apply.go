package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
)

// maxApplyAttempts bounds how many times Apply starts a batch again because
// a reshard moved one of its shards, PostgreSQL chose it as a deadlock
// victim, or decide asked for a counter to be read whole. Each attempt
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
// and one made while a table was nearly empty may read all of it: a
// presence check of members became a hashed subplan over every member of
// the counter, 30 ms a batch of 64 once 10,000 members were in, growing
// with them. With sequential scans, hash joins and merge joins off for the
// batch's transaction, and every lookup written as a lateral subquery
// (which a hashed subplan cannot replace), no plan of a batch depends on
// the size of a table.
const pinPlans = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
	set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true),
	set_config('enable_mergejoin', 'off', true)`

// errRetry says that a batch attempt was rolled back and may start again.
var errRetry = errors.New("batch must start again")

// Apply applies a batch of increments in one transaction with two round
// trips. The first begins, creates missing counters that items would
// create, locks the shard rows in (counter, shard) order, records the
// request ids and reads what package decide may ask (view); decide then
// decides every item, and the second round trip writes its mutations,
// expires old request ids and commits. An item that fails on its own
// (ErrInvalid, ErrNotFound, ErrOutOfRange) changes nothing, and the
// others apply.
func (s *CounterStore) Apply(ctx context.Context, incs []shardcounter.Increment) ([]shardcounter.Outcome, error) {
	out := make([]shardcounter.Outcome, len(incs))
	if len(incs) == 0 {
		return out, nil
	}
	return s.applyOwn(ctx, newBatch(incs, nil), out)
}

// applyOwn applies b in transactions of its own, with a marker that
// settles a lost commit answer (resolve).
func (s *CounterStore) applyOwn(ctx context.Context, b *batch, out []shardcounter.Outcome) ([]shardcounter.Outcome, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, mapError("apply", err, beforeCommit)
	}
	// A connection left inside a transaction by a failure is closed, not
	// reused, by the pool.
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
	if own && len(b.full) == 0 { // a batch that reads a counter whole is not plain
		if done, err := s.applyPlain(ctx, conn, b, out, clk); done || err != nil {
			return err
		}
	}
	b.prepare()
	for range maxApplyAttempts {
		clear(out)
		if err := s.applyOnce(ctx, conn, own, b, out, clk); !errors.Is(err, errRetry) {
			return err
		}
	}
	return shardcounter.Errorf(shardcounter.EUNAVAILABLE,
		"apply: the batch was interrupted by reshards or deadlocks %d times: retry", maxApplyAttempts)
}

// applyOnce runs one attempt of a batch on conn, filling out, in two
// round trips: lock and read (view), decide every item, then write the
// mutations and commit. It returns errRetry, after rolling back (when it
// owns the transaction), when the batch may start again.
func (s *CounterStore) applyOnce(ctx context.Context, conn *pgx.Conn, own bool, b *batch, out []shardcounter.Outcome, clk clock) error {
	buckets := !s.unwindowed.hasAll(b.reads)
	v, err := lock(ctx, conn, own, b, clk, buckets)
	if err != nil {
		return abort(ctx, conn, own, err)
	}
	s.noteGeneral(v)
	if !buckets && v.windowed() {
		return abort(ctx, conn, own, errRetry) // made again with a window: read its bucket
	}
	m, err := decide.Decide(v, decide.Batch{Incs: b.incs, Now: v.now, Cutoff: v.now.Add(-clk.window())}, out)
	var whole *decide.NeedWhole
	if errors.As(err, &whole) {
		b.readWhole(whole.Counters)
		err = errRetry
	}
	if err == nil {
		err = v.creations(b, m)
	}
	if err == nil {
		err = v.checkBuckets(b, out, m)
	}
	if err != nil {
		return abort(ctx, conn, own, err)
	}
	return s.write(ctx, conn, own, b, v, m, out, clk)
}

// noteGeneral remembers the counters that cannot take the fast path of
// applyPlain (not a plain sum, or bounded, or wide), so that later
// batches touching them go straight to the locking path, and those
// without a window.
func (s *CounterStore) noteGeneral(v *view) {
	for id, c := range v.counters {
		if c.spec.Kind != shardcounter.KindSum || c.spec.Bounded() || c.wides > 0 {
			s.general.add(id)
		}
		if c.spec.Window == nil {
			s.unwindowed.add(id)
		} else {
			s.unwindowed.remove(id)
		}
	}
}

// write is round trip 2 of an attempt: the mutations (see encode),
// expiry of old request ids, the marker, commit, and the read of the
// totals decide did not know. A failure after COMMIT was sent is reported
// as one whose outcome may be unknown (commitSent), never retried
// blindly.
func (s *CounterStore) write(ctx context.Context, conn *pgx.Conn, own bool, b *batch, v *view, m decide.Mutations, out []shardcounter.Outcome, clk clock) error {
	q := &pgx.Batch{}
	v.encode(q, m)
	// Expiry is left out of a caller's transaction (AddTx), which has no
	// request ids to make up for.
	var x expiry
	limit := expireBatch + len(v.inserted)
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
// (Increment.Total) and did not get it from decide (it knows the totals
// of counters read whole), queued after COMMIT in the commit's round trip.
// It is readSQL, a statement that begins once the commit is done, so each
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
// of the counters of b's items that asked for their total, have not
// failed and have none (out). It returns nil when none did.
func (s *CounterStore) queueTotals(q *pgx.Batch, commit *pgx.QueuedQuery, b *batch, out []shardcounter.Outcome) *totals {
	var t *totals
	for i, inc := range b.incs {
		if !inc.Total || out[i].Err != nil || out[i].Total != nil {
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
		if !inc.Total || out[i].Err != nil || out[i].Total != nil || !ok {
			continue
		}
		if r := t.readings[j]; r != nil {
			v := r.Value
			out[i].Total = &v
		}
	}
}

// abort ends the attempt and returns err classified, or errRetry when the
// attempt may start again: after a stale read, a deadlock or a
// serialization failure, nothing was applied. When it owns the
// transaction it rolls it back, and when the rollback cannot be sent it
// closes the connection, which the pool then discards. In the caller's
// transaction a deadlock or serialization failure has aborted it, and is
// returned as ErrUnavailable.
func abort(ctx context.Context, conn *pgx.Conn, own bool, err error) error {
	if own && !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
		if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
			conn.Close(ctx) //nolint:errcheck // already failing
		}
	}
	if errors.Is(err, errRetry) {
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
