package postgres

import (
	"fmt"
	"time"
)

// Request ids: a batch records the ids of its items in the same
// transaction as their deltas, and expires old ones as it goes (see the
// package doc, "Dedupe window").

// recordSQL records the batch's request ids ($1 counters, $2 ids, each
// pair once, of counters that exist) at the commit time ($3, see nowExpr),
// in a fixed order so that two batches recording the same ids cannot
// deadlock, and returns those it inserted: new to the counter. It locks
// the others (DO UPDATE ... WHERE false changes nothing and locks the
// row), so that seenSQL reads when they were recorded and no other batch
// decides on them until this one ends. A pair that another transaction is
// recording waits for it to end: then it is new if that transaction
// rolled back, and locked if it committed.
var recordSQL = `
INSERT INTO shardcounter.requests AS r (counter, request_id, created_at)
SELECT i.counter, i.request_id, ` + nowExpr(3) + `
FROM unnest($1::text[], $2::text[]) AS i(counter, request_id)
CROSS JOIN LATERAL (SELECT 1 FROM shardcounter.counters c WHERE c.id = i.counter LIMIT 1) AS c
ORDER BY i.counter, i.request_id
ON CONFLICT (counter, request_id) DO UPDATE SET created_at = r.created_at WHERE false
RETURNING counter, request_id`

// seenSQL returns when each of the batch's request ids ($1 counters, $2
// ids) was recorded, with a snapshot taken after recordSQL locked them.
const seenSQL = `
SELECT r.counter, r.request_id, r.created_at
FROM unnest($1::text[], $2::text[]) AS i(counter, request_id)
CROSS JOIN LATERAL (
	SELECT r.counter, r.request_id, r.created_at FROM shardcounter.requests r
	WHERE r.counter = i.counter AND r.request_id = i.request_id
) AS r`

// requestsSQL settles the request ids recordSQL took: it forgets those
// ($1 counters, $2 ids) it inserted for items that then did not apply,
// so that a retry of such an item is not taken for a duplicate, and
// records those ($3, $4) that had expired and were recorded afresh at the
// commit time $5.
const requestsSQL = `
WITH forgot AS (
	DELETE FROM shardcounter.requests r
	USING unnest($1::text[], $2::text[]) AS u(counter, request_id)
	WHERE r.counter = u.counter AND r.request_id = u.request_id
)
UPDATE shardcounter.requests r SET created_at = $5
FROM unnest($3::text[], $4::text[]) AS u(counter, request_id)
WHERE r.counter = u.counter AND r.request_id = u.request_id`

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

// clock is the time arguments of a batch's statements: the store's Now,
// or nil for the database's clock; the dedupe window in microseconds; and
// where expiry starts its scan, nil for the start of the index.
type clock struct {
	now      *time.Time
	windowUS int64
	from     *time.Time
}

// window is the dedupe window.
func (c clock) window() time.Duration { return time.Duration(c.windowUS) * time.Microsecond }

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

// split returns the counters and the ids of keys, as two arrays.
func split(keys []key) (counters, ids []string) {
	counters = make([]string, len(keys))
	ids = make([]string, len(keys))
	for i, k := range keys {
		counters[i], ids[i] = k.counter, k.id
	}
	return counters, ids
}
