package postgres

import (
	"cmp"
	"context"
	"math"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
)

// Round trip 1 of a batch's attempt reads, under the locks it takes, what
// package decide may ask of the batch (decide.Reads): the counters, the
// shard rows their items pick (every row of a counter read whole), the
// rows of windowed counters' buckets, the request ids, and the presence
// of the members. view answers decide from what it read.

// createSQL creates the batch's missing counters that an item would create
// (Increment.Create), with their shard rows, and returns the ids it
// created, with their creation times; an existing one is skipped by the
// conflict check, which looks
// it up before inserting anything. It inserts in id order, so two batches
// creating the same counters cannot deadlock: the second waits for the
// first to commit and then finds them, and its lock statement (next in the
// same round trip, with a snapshot of its own) locks them. A counter
// inserted here is Unborn for decide, and dropped again (dropSQL) when no
// item creates it.
const createSQL = `
WITH c AS (
	INSERT INTO shardcounter.counters AS c (id, shards, kind, min, max, bucket, retention, created_at)
	SELECT i.id, i.shards, i.kind, i.min, i.max, i.bucket, i.retention, coalesce($8, now())
	FROM unnest($1::text[], $2::integer[], $3::text[], $4::bigint[], $5::bigint[], $6::interval[], $7::interval[])
		AS i(id, shards, kind, min, max, bucket, retention)
	ORDER BY i.id
	ON CONFLICT (id) DO NOTHING
	RETURNING c.id, c.shards, c.created_at
), s AS (
	INSERT INTO shardcounter.shards (counter, shard, shards)
	SELECT c.id, g, c.shards FROM c, generate_series(0, c.shards - 1) AS g
)
SELECT id, created_at FROM c`

// lockSQL locks the shard rows a batch needs, in (counter, shard) order so
// that concurrent batches cannot deadlock, and returns each counter's spec
// with the rows: their values, wide flags and sketches (of approx
// counters), and the batch's commit time: the store's Now ($4), or the
// transaction's start on the database's clock, which every statement of
// the transaction (now()) shares. (With no row, no counter exists, and
// the batch writes nothing.) $1 lists each item's counter and $2 its
// pick. A "full"
// counter, read whole (a bounded one, or one listed in $3), has every
// shard row locked; another has the rows its items pick. A wanted row that
// a reshard rewrote or removed after this statement read the count (see
// addSQL) comes back NULL (or, of a full counter, missing): the batch then
// starts again. A counter that does not exist has no rows.
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
	coalesce(o.sketch, a.sketch), coalesce($4::timestamptz, now())
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

// presentSQL returns which of the member items' members ($1 counters, $2
// members) are present. It runs after lockSQL, with a snapshot of its
// own, so it reads each member under the lock of its shard row, which
// every batch that changes the member holds until it commits.
const presentSQL = `
SELECT i.counter, i.member
FROM unnest($1::text[], $2::text[]) AS i(counter, member)
CROSS JOIN LATERAL (
	SELECT 1 FROM shardcounter.members m WHERE m.counter = i.counter AND m.member = i.member LIMIT 1
) AS m`

// bucketRowsSQL returns the rows of the bucket of the commit time ($2, see
// nowExpr) of each windowed counter among $1: (counter, shard, value). It
// runs after lockSQL, with a snapshot of its own, so that the rows of the
// shards the batch locked are as the lock holds them (a bucket row of
// shard k is written only under shard k's row lock), and those of a
// counter read whole are all so: their sum is the bucket's value, exact.
var bucketRowsSQL = `
SELECT i.counter, b.shard, b.value
FROM (SELECT DISTINCT i.counter FROM unnest($1::text[]) AS i(counter)) AS i
CROSS JOIN LATERAL (
	SELECT c.bucket FROM shardcounter.counters c WHERE c.id = i.counter AND c.bucket IS NOT NULL LIMIT 1
) AS c
CROSS JOIN LATERAL (
	SELECT b.shard, b.value FROM shardcounter.buckets b
	WHERE b.counter = i.counter AND b.start = ` + bucketStart("c.bucket", nowExpr(2)) + `
) AS b`

// batch is a batch of increments as Apply prepares it once for all its
// attempts, with what attempts have learnt.
type batch struct {
	incs  []shardcounter.Increment
	reads []decide.Read // what deciding it may read: one per valid item (prepare)
	// full lists counters an attempt reads whole, every shard locked
	// (besides bounded ones, which lockSQL knows): decide asked for them.
	full []string
	// specs is the spec to create a missing counter with: the first
	// Create among its items, unless an attempt found that another one is
	// the first to apply.
	specs map[string]shardcounter.Spec
	// marker is written in the commit of the batch (markSQL), when the
	// batch runs in a transaction of its own.
	marker []byte
	// fill is set once an attempt found a wanted shard row stale: the
	// next ones insert missing rows before locking (fillSQL).
	fill bool
}

// newBatch returns the batch of incs; full lists counters known to be
// read whole.
func newBatch(incs []shardcounter.Increment, full []string) *batch {
	return &batch{incs: incs, full: full}
}

// prepare finds what the general path's attempts read, once.
func (b *batch) prepare() {
	if b.specs != nil {
		return
	}
	b.reads, b.specs = decide.Reads(b.incs), make(map[string]shardcounter.Spec)
	for _, r := range b.reads {
		if _, ok := b.specs[r.Counter]; r.Create != nil && !ok {
			b.specs[r.Counter] = *r.Create
		}
		if r.Whole {
			b.readWhole([]string{r.Counter})
		}
	}
}

// readWhole adds counters to those attempts read whole.
func (b *batch) readWhole(ids []string) {
	for _, id := range ids {
		if !slices.Contains(b.full, id) {
			b.full = append(b.full, id)
		}
	}
}

// locks returns lockSQL's arguments: each valid item's counter and pick,
// and the counters read whole (never NULL).
func (b *batch) locks() (counters []string, picks []uint64, full []string) {
	for _, r := range b.reads {
		counters, picks = append(counters, r.Counter), append(picks, r.Pick)
	}
	return counters, picks, append([]string{}, b.full...)
}

// keys returns the (counter, request id) pairs of the valid items,
// each once, sorted so that concurrent batches record them in one order;
// and the (counter, member) pairs of the member items.
func (b *batch) keys() (reqs, members []key) {
	for _, r := range b.reads {
		if r.RequestID != "" {
			reqs = append(reqs, key{r.Counter, r.RequestID})
		}
		if r.Member != "" {
			members = append(members, key{r.Counter, r.Member})
		}
	}
	slices.SortFunc(reqs, func(a, b key) int {
		return cmp.Or(strings.Compare(a.counter, b.counter), strings.Compare(a.id, b.id))
	})
	return slices.Compact(reqs), members
}

// creates returns createSQL's arguments: the counters items would
// create, with their specs.
func (b *batch) creates() (c createArgs) {
	ids := make([]string, 0, len(b.specs))
	for id := range b.specs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		c.add(id, b.specs[id])
	}
	return c
}

// createArgs are createSQL's arrays.
type createArgs struct {
	ids, kinds          []string
	shards              []int
	mins, maxs          []*int64
	buckets, retentions []*time.Duration
}

func (c *createArgs) add(id string, spec shardcounter.Spec) {
	r := rowOf(spec)
	c.ids = append(c.ids, id)
	c.shards, c.kinds = append(c.shards, r.shards), append(c.kinds, r.kind)
	c.mins, c.maxs = append(c.mins, r.min), append(c.maxs, r.max)
	c.buckets, c.retentions = append(c.buckets, r.bucket), append(c.retentions, r.retention)
}

// args returns createSQL's arguments, with now the creation time (nil
// for the database's clock).
func (c *createArgs) args(now *time.Time) []any {
	return []any{c.ids, c.shards, c.kinds, c.mins, c.maxs, c.buckets, c.retentions, now}
}

// key is a counter's request id, or one of its members.
type key struct {
	counter, id string
}

// view is what an attempt's round trip 1 read, under its locks: the
// decide.View of the batch.
type view struct {
	now      time.Time           // the commit time (lockSQL)
	counters map[string]*counter // existing counters, with what was locked
	created  map[string]bool     // counters this attempt's createSQL inserted: Unborn
	inserted map[key]bool        // request ids this attempt inserted: new
	seen     map[key]time.Time   // request ids recorded before, and when
	present  map[key]bool        // members present
	stale    bool                // a wanted shard row was moved by a reshard
}

// counter is one counter as lockSQL read it.
type counter struct {
	spec  shardcounter.Spec
	full  bool       // every shard is locked
	rows  []shardRow // the locked rows, in shard order
	wides int        // how many locked rows are marked wide
	// bucket holds a windowed counter's rows of the bucket of the commit
	// time (bucketRowsSQL), by shard; a missing row is 0.
	bucket map[int]int64
}

// shardRow is a locked shard row: its value, and an approx counter's
// sketch (nil for none).
type shardRow struct {
	shard  int
	value  int64
	sketch []byte
}

// row returns the locked row of shard k, or nil. A counter read whole
// has its rows at their shards.
func (c *counter) row(k int) *shardRow {
	if c.full && k < len(c.rows) && c.rows[k].shard == k {
		return &c.rows[k]
	}
	for i := range c.rows {
		if c.rows[i].shard == k {
			return &c.rows[i]
		}
	}
	return nil
}

// lock is round trip 1 of an attempt: begin (when it owns the
// transaction), create the counters the batch may create, lock the
// shards it touches, record its request ids and read what decide needs:
// the window buckets only when buckets is set (a counter of the batch may
// have a window). The locks are held until write commits.
func lock(ctx context.Context, conn *pgx.Conn, own bool, b *batch, clk clock, buckets bool) (*view, error) {
	v := &view{counters: make(map[string]*counter, len(b.reads)), created: make(map[string]bool),
		seen: make(map[key]time.Time), present: make(map[key]bool)}
	q := &pgx.Batch{}
	if own {
		q.Queue("BEGIN")
		q.Queue(pinPlans)
	}
	if c := b.creates(); len(c.ids) > 0 {
		q.Queue(createSQL, c.args(clk.now)...).Query(func(rows pgx.Rows) error {
			var id string
			var at time.Time
			_, err := pgx.ForEachRow(rows, []any{&id, &at}, func() error {
				v.created[id] = true
				return nil
			})
			return err
		})
	}
	counters, picks, full := b.locks()
	if b.fill {
		q.Queue(fillSQL, counters, picks, full)
	}
	q.Queue(lockSQL, counters, picks, full, clk.now).Query(v.readLocks)
	if buckets {
		q.Queue(bucketRowsSQL, counters, clk.now).Query(v.readBuckets)
	}
	reqs, members := b.keys()
	if len(reqs) > 0 {
		rc, ri := split(reqs)
		v.inserted = make(map[key]bool, len(reqs))
		q.Queue(recordSQL, rc, ri, clk.now).Query(scanKeys(func(k key) { v.inserted[k] = true }))
	}
	if len(members) > 0 {
		mc, mm := split(members)
		q.Queue(presentSQL, mc, mm).Query(scanKeys(func(k key) { v.present[k] = true }))
	}
	// A stale lock read means a reshard or a delete committed under this
	// attempt, and recording may have failed because of it (its counter
	// gone); the attempt is discarded either way.
	err := conn.SendBatch(ctx, q).Close()
	if v.stale {
		// A wanted row may be missing rather than moved: the next
		// attempt inserts the missing ones first (fillSQL).
		err, b.fill = errRetry, true
	}
	if err == nil {
		err = v.readSeen(ctx, conn, reqs)
	}
	return v, err
}

// readSeen reads when the request ids that recordSQL found recorded were
// recorded (seenSQL), in a round trip of its own: a batch that carries
// none, as a batch of first tries does, pays nothing for it.
func (v *view) readSeen(ctx context.Context, conn *pgx.Conn, reqs []key) error {
	var old []key
	for _, k := range reqs {
		if v.counters[k.counter] != nil && !v.inserted[k] {
			old = append(old, k)
		}
	}
	if len(old) == 0 {
		return nil
	}
	rc, ri := split(old)
	rows, err := conn.Query(ctx, seenSQL, rc, ri)
	if err != nil {
		return err
	}
	var k key
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&k.counter, &k.id, &at}, func() error {
		v.seen[k] = at
		return nil
	})
	return err
}

// scanKeys returns a scanner of rows of a counter and an id that calls
// fn with each.
func scanKeys(fn func(key)) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		var k key
		_, err := pgx.ForEachRow(rows, []any{&k.counter, &k.id}, func() error {
			fn(k)
			return nil
		})
		return err
	}
}

// readLocks reads lockSQL's rows into the view: each existing counter's
// spec and locked shard values, and whether any wanted row was stale.
func (v *view) readLocks(rows pgx.Rows) error {
	var (
		id    string
		shard *int
		full  bool
		spec  specRow
		val   *int64
		wide  *bool
		sk    []byte
	)
	_, err := pgx.ForEachRow(rows, append(append([]any{&id, &shard, &full}, spec.dest()...), &val, &wide, &sk, &v.now), func() error {
		c := v.counters[id]
		if c == nil {
			c = &counter{spec: spec.spec(), full: full}
			v.counters[id] = c
		}
		if val == nil {
			v.stale = true
			return nil
		}
		c.rows = append(c.rows, shardRow{*shard, *val, sk})
		if *wide {
			c.wides++
		}
		return nil
	})
	for _, c := range v.counters {
		if c.full && len(c.rows) != c.spec.Shards {
			v.stale = true // a reshard removed or added rows after the count was read
		}
	}
	return err
}

// windowed reports whether a counter of the view has a window.
func (v *view) windowed() bool {
	for _, c := range v.counters {
		if c.spec.Window != nil {
			return true
		}
	}
	return false
}

// readBuckets reads bucketRowsSQL's rows into the view.
func (v *view) readBuckets(rows pgx.Rows) error {
	var (
		id    string
		shard int
		value int64
	)
	_, err := pgx.ForEachRow(rows, []any{&id, &shard, &value}, func() error {
		if c := v.counters[id]; c != nil {
			if c.bucket == nil {
				c.bucket = make(map[int]int64)
			}
			c.bucket[shard] = value
		}
		return nil
	})
	return err
}

// Counter returns the counter as lockSQL read it. One read whole has its
// total; another vouches for the shards it did not read (decide.SumInZone)
// while its rows are not wide: a wide mark is on every row of a counter
// with a shard outside the zone.
func (v *view) Counter(id string) (decide.Counter, error) {
	c := v.counters[id]
	if c == nil {
		return decide.Counter{}, nil
	}
	dc := decide.Counter{Exists: true, Unborn: v.created[id], Spec: c.spec, Sum: decide.SumInZone}
	switch {
	case c.full:
		vals := make([]int64, len(c.rows))
		for i, r := range c.rows {
			vals[i] = r.value
		}
		dc.Total, dc.Sum = decide.Total(vals)
	case c.wides > 0:
		dc.Sum = decide.SumUnknown
	}
	return dc, nil
}

// Shard returns a locked shard's value; the others are not known.
func (v *view) Shard(counter string, shard int) (int64, bool, error) {
	if r := v.row(counter, shard); r != nil {
		return r.value, true, nil
	}
	return 0, false, nil
}

// Request reports whether the request id was recorded before the batch:
// recordSQL inserted the new ones and locked the others, and readSeen
// read when those were recorded. One it did neither to was recorded by a batch
// that committed in between (its counter was deleted, or made): the
// attempt starts again.
func (v *view) Request(counter, id string) (time.Time, bool, error) {
	k := key{counter, id}
	if v.inserted[k] {
		return time.Time{}, false, nil
	}
	if at, ok := v.seen[k]; ok {
		return at, true, nil
	}
	return time.Time{}, false, errRetry
}

// Member reports whether presentSQL found the member.
func (v *view) Member(counter, member string) (bool, error) {
	return v.present[key{counter, member}], nil
}

// Bucket returns the bucket's value, the sum of its rows, when the batch
// holds every row: the counter is read whole (every shard locked) or was
// made by the batch. Otherwise it is not known, and the batch adds to the
// bucket blindly, as the zone lets it (see checkBuckets). A sum outside
// int64 (written before that was refused) is given as the int64 end it
// passed, so that only writes back toward the range apply.
func (v *view) Bucket(counter string, _ time.Time) (int64, bool, error) {
	c := v.counters[counter]
	if c == nil || !(c.full || v.created[counter]) {
		return 0, false, nil
	}
	sum := new(big.Int)
	for _, x := range c.bucket {
		sum.Add(sum, big.NewInt(x))
	}
	switch {
	case sum.IsInt64():
		return sum.Int64(), true, nil
	case sum.Sign() > 0:
		return math.MaxInt64, true, nil
	default:
		return math.MinInt64, true, nil
	}
}

// Sketch returns a locked shard's sketch.
func (v *view) Sketch(counter string, shard int) ([]byte, error) {
	if r := v.row(counter, shard); r != nil {
		return r.sketch, nil
	}
	return nil, nil
}

// row returns the counter's locked row of shard k, or nil.
func (v *view) row(counter string, k int) *shardRow {
	if c := v.counters[counter]; c != nil {
		return c.row(k)
	}
	return nil
}
