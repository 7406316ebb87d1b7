package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// lockSQL locks the shard rows a batch needs, in (counter, shard) order so
// that concurrent batches cannot deadlock, and returns one row per shard
// row wanted: the counter's shard count, and the row's value and wide flag,
// or NULLs when a reshard rewrote or removed the row after this statement
// read the count (see addSQL); the batch then starts again. $1 lists each
// item's counter and $2 its pick; the items of a counter listed in $3
// (a "full" counter, whose total the batch must check) lock every shard row
// of it. A counter that does not exist has no rows.
//
// w is MATERIALIZED and sorted, and each row is locked by a lateral
// subquery as w is read in order, so the lock order is w's whatever the
// plan; and the result pairs each wanted row with its lock without a join.
const lockSQL = `
WITH w AS MATERIALIZED (
	SELECT DISTINCT c.id AS counter, g.shard, c.shards
	FROM unnest($1::text[], $2::numeric[]) AS i(counter, pick)
	JOIN shardcounter.counters c ON c.id = i.counter
	CROSS JOIN LATERAL (
		SELECT mod(i.pick, c.shards)::integer WHERE c.id <> ALL ($3::text[])
		UNION ALL
		SELECT generate_series(0, c.shards - 1) WHERE c.id = ANY ($3::text[])
	) AS g(shard)
	ORDER BY 1, 2
)
SELECT w.counter, w.shard, w.shards, l.value, l.wide
FROM w LEFT JOIN LATERAL (
	SELECT s.value, s.wide FROM shardcounter.shards s
	WHERE s.counter = w.counter AND s.shard = w.shard AND s.shards = w.shards
	FOR UPDATE
) AS l ON true`

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

// writeSQL sets the shard rows the batch changed to their new values and
// wide flags. The batch holds their locks and computed the values from
// what it locked, so setting is exact; it also lets the batch refuse, item
// by item, a delta that would leave int64.
const writeSQL = `
UPDATE shardcounter.shards s SET value = u.value, wide = u.wide
FROM unnest($1::text[], $2::integer[], $3::bigint[], $4::boolean[]) AS u(counter, shard, value, wide)
WHERE s.counter = u.counter AND s.shard = u.shard`

// unrecordSQL forgets request ids that the batch recorded for items it then
// refused, so a retry of such an item is not taken for a duplicate.
const unrecordSQL = `
DELETE FROM shardcounter.requests r
USING unnest($1::text[], $2::text[]) AS u(counter, request_id)
WHERE r.counter = u.counter AND r.request_id = u.request_id`

// maxApplyAttempts bounds how many times Apply starts a batch again because
// a reshard moved one of its shards, PostgreSQL chose it as a deadlock
// victim, or a counter turned out to need its total checked. Each attempt
// waits for the reshard in its way to commit.
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

// needFull is the error of a batch attempt that found counters whose
// total it must check (see zone): it rolled back, and the next attempt
// locks every shard of them.
type needFull []string

func (n needFull) Error() string {
	return fmt.Sprintf("counters %q need their totals checked", []string(n))
}

// zone reports whether a shard value v of a counter with n shards is
// within ±MaxInt64/n. While every shard of a counter is, no total of them
// leaves int64, so a write that keeps its own shard in the zone needs no
// sum. A counter with a shard outside has every shard row marked wide,
// and its writes lock every shard and check the total.
func zone(v int64, n int) bool {
	lim := math.MaxInt64 / int64(n)
	return -lim <= v && v <= lim
}

// Apply applies a batch of increments in one transaction with two round
// trips: the first begins, locks the shard rows in (counter, shard) order
// and records the request ids; the second writes the new values, expires
// old request ids and commits. Items are decided in batch order on the
// locked values, as one write at a time would be: items on missing
// counters fail with ErrNotFound, and items that would take a shard or
// the counter's total out of int64 with ErrOutOfRange, while the others
// apply. An invalid item fails the whole batch with ErrInvalid, nothing
// applied.
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
	if err := s.apply(ctx, conn.Conn(), true, incs, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// apply runs attempts of a batch on conn until one completes, filling
// out. With own set it runs each attempt in a transaction of its own;
// otherwise conn is in the caller's transaction, which it neither begins
// nor ends. full lists counters known to need their totals checked.
func (s *CounterStore) apply(ctx context.Context, conn *pgx.Conn, own bool, incs []shardcounter.Increment, out []shardcounter.Outcome, full []string) error {
	clk := s.clock()
	for range maxApplyAttempts {
		clear(out)
		err := s.applyOnce(ctx, conn, own, incs, out, clk, full)
		var more needFull
		switch {
		case errors.As(err, &more):
			full = append(full, more...)
			continue
		case errors.Is(err, errRetry):
			continue
		}
		return err
	}
	return shardcounter.Errorf(shardcounter.EUNAVAILABLE,
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
	c := clock{now: s.nowArg(), windowUS: s.window.Load() / int64(time.Microsecond)}
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

// locked is what a batch attempt locked of one counter.
type locked struct {
	shards int
	full   bool          // every shard is locked, and total is their sum
	values map[int]int64 // the locked shards' values, as the batch changes them
	wide   bool          // a locked row is marked wide
	wides  int           // how many locked rows are
	total  int64
	// overflowed is set on a full counter whose shards already sum
	// outside int64 (written before this rule): it takes no writes.
	overflowed bool
}

// applyOnce runs one attempt of a batch on conn, filling out. It returns
// errRetry or needFull after rolling back (when it owns the transaction)
// when the batch may start again.
func (s *CounterStore) applyOnce(ctx context.Context, conn *pgx.Conn, own bool, incs []shardcounter.Increment, out []shardcounter.Outcome, clk clock, full []string) error {
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
	if full == nil {
		full = []string{}
	}

	// Round trip 1: begin, lock, record request ids.
	b := &pgx.Batch{}
	if own {
		b.Queue("BEGIN")
	}
	b.Queue(lockSQL, counters, picks, full)
	if len(reqs) > 0 {
		rc, ri := splitRequests(reqs)
		b.Queue(recordSQL, rc, ri, clk.now, clk.windowUS)
	}
	br := conn.SendBatch(ctx, b)
	counts, stale, err := readLocks(br, own, full)
	if err != nil {
		br.Close()
		return abort(ctx, conn, own, err)
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
			return abort(ctx, conn, own, err)
		}
	}
	if err := br.Close(); err != nil && !stale {
		return abort(ctx, conn, own, err)
	}
	if stale {
		return abort(ctx, conn, own, errRetry)
	}

	// Decide each item in batch order, on the values just locked.
	dirty := make(map[shardKey]bool)
	used := make(map[requestKey]bool)
	for i, inc := range incs {
		c, ok := counts[inc.Counter]
		if !ok {
			out[i].Err = notFound(inc.Counter)
			continue
		}
		rk := requestKey{inc.Counter, inc.RequestID}
		if inc.RequestID != "" && (!recorded[rk] || used[rk]) {
			out[i].Duplicate = true
			continue
		}
		k := shard.Of(inc.Pick, c.shards)
		v, ok := overflow.Add(c.values[k], inc.Delta)
		total := c.total
		if ok && c.full {
			total, ok = overflow.Add(c.total, inc.Delta)
			ok = ok && !c.overflowed
		}
		if !ok {
			out[i].Err = shardcounter.Errorf(shardcounter.EOUTOFRANGE,
				"counter %q: adding %d would take it outside the int64 range", inc.Counter, inc.Delta)
			continue
		}
		c.values[k], c.total = v, total
		dirty[shardKey{inc.Counter, k}] = true
		if inc.RequestID != "" {
			used[rk] = true
		}
	}

	// A counter locked shard by shard may take these writes only if it is
	// not wide and its written shards stay in the zone; otherwise the
	// attempt starts again, locking all of its shards.
	var more needFull
	for k := range dirty {
		c := counts[k.counter]
		if !c.full && (c.wide || !zone(c.values[k.shard], c.shards)) && !slices.Contains(more, k.counter) {
			more = append(more, k.counter)
		}
	}
	if len(more) > 0 {
		return abort(ctx, conn, own, more)
	}

	// Round trip 2: write, forget refused request ids, expire old ones,
	// commit.
	b = &pgx.Batch{}
	var w writes
	for k := range dirty {
		c := counts[k.counter]
		if !c.full {
			w.add(k, c.values[k.shard], false)
		}
	}
	for id, c := range counts {
		if c.full {
			w.addFull(id, c, dirty)
		}
	}
	if len(w.counters) > 0 {
		b.Queue(writeSQL, w.counters, w.shards, w.values, w.wide)
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
	// Expiry is left out of a caller's transaction (AddTx), which has no
	// request ids to make up for.
	var x expiry
	limit := expireBatch + len(recorded)
	if own {
		b.Queue(expireSQL, clk.now, clk.windowUS, limit, clk.from).QueryRow(func(row pgx.Row) error {
			return row.Scan(&x.deleted, &x.newest, &x.cutoff)
		})
		b.Queue("COMMIT")
	}
	if b.Len() == 0 {
		return nil
	}
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		if own && (conn.PgConn().TxStatus() == 'I' || conn.IsClosed()) {
			// The connection broke or the commit itself answered an error.
			return mapError("apply", err, atCommit)
		}
		// A statement before COMMIT failed, so COMMIT never ran.
		return abort(ctx, conn, own, err)
	}
	if own {
		s.expired(x, limit)
	}
	return nil
}

// writes collects the rows writeSQL sets.
type writes struct {
	counters []string
	shards   []int
	values   []int64
	wide     []bool
}

func (w *writes) add(k shardKey, value int64, wide bool) {
	w.counters, w.shards = append(w.counters, k.counter), append(w.shards, k.shard)
	w.values, w.wide = append(w.values, value), append(w.wide, wide)
}

// addFull adds the rows of a full counter: those the batch changed, and,
// when whether the counter is wide changes, every row, to mark them all.
func (w *writes) addFull(id string, c *locked, dirty map[shardKey]bool) {
	wide := false
	for _, v := range c.values {
		wide = wide || !zone(v, c.shards)
	}
	// Rewrite every row when the mark changes (or was not on all rows).
	all := (wide && c.wides != len(c.values)) || (!wide && c.wides != 0)
	for shard, v := range c.values {
		k := shardKey{id, shard}
		if dirty[k] || all {
			w.add(k, v, wide)
		}
	}
}

// readLocks reads the BEGIN (when own) and lock results of a batch: what
// it locked of each existing counter, and whether any wanted row was
// stale.
func readLocks(br pgx.BatchResults, own bool, full []string) (counts map[string]*locked, stale bool, err error) {
	if own {
		if _, err := br.Exec(); err != nil {
			return nil, false, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, false, err
	}
	counts = make(map[string]*locked)
	var k shardKey
	var n int
	var v *int64
	var wide *bool
	_, err = pgx.ForEachRow(rows, []any{&k.counter, &k.shard, &n, &v, &wide}, func() error {
		c := counts[k.counter]
		if c == nil {
			c = &locked{shards: n, full: slices.Contains(full, k.counter), values: make(map[int]int64)}
			counts[k.counter] = c
		}
		if v == nil {
			stale = true
			return nil
		}
		c.values[k.shard] = *v
		if *wide {
			c.wide = true
			c.wides++
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	for _, c := range counts {
		if c.full {
			vals := make([]int64, 0, len(c.values))
			for _, v := range c.values {
				vals = append(vals, v)
			}
			var ok bool
			c.total, ok = overflow.Sum(vals)
			c.overflowed = !ok
		}
	}
	return counts, stale, nil
}

// abort ends the attempt and returns err classified, or err itself
// (errRetry, needFull) when the attempt may start again: after a stale
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
	var more needFull
	if errors.Is(err, errRetry) || errors.As(err, &more) {
		return err
	}
	var pe *pgconn.PgError
	if own && errors.As(err, &pe) && (pe.Code == sqlDeadlock || pe.Code == sqlSerialization) && !conn.IsClosed() {
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
