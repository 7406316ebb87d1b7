package postgres

import (
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// Round trip 2 of a batch's attempt writes what decide decided
// (decide.Mutations) with the statements below, before its COMMIT. Every
// row they write is one the batch locked in round trip 1, or made.

// dropSQL removes counters that this batch created and then did not use.
const dropSQL = `DELETE FROM shardcounter.counters WHERE id = ANY ($1::text[])`

// writeSQL sets shard rows to their values after the batch and their wide
// flags.
const writeSQL = `
UPDATE shardcounter.shards s SET value = u.value, wide = u.wide
FROM unnest($1::text[], $2::integer[], $3::bigint[], $4::boolean[]) AS u(counter, shard, value, wide)
WHERE s.counter = u.counter AND s.shard = u.shard`

// sketchSQL sets the sketches of approx counters' shard rows that a batch
// changed. The batch read the sketches it changed with the rows' locks
// held, so no other writer's registers are lost.
const sketchSQL = `
UPDATE shardcounter.shards s SET sketch = u.sketch
FROM unnest($1::text[], $2::integer[], $3::bytea[]) AS u(counter, shard, sketch)
WHERE s.counter = u.counter AND s.shard = u.shard`

// membersSQL puts ($3 true) and deletes ($3 false) the members whose
// presence the batch changed: $1 counters, $2 members, $4 each one's
// shard.ForMember, kept as its hash (see memberShard). Their shards'
// counts are in writeSQL's values.
const membersSQL = `
WITH gone AS (
	DELETE FROM shardcounter.members m
	USING unnest($1::text[], $2::text[], $3::boolean[]) AS u(counter, member, present)
	WHERE NOT u.present AND m.counter = u.counter AND m.member = u.member
)
INSERT INTO shardcounter.members (counter, member, hash)
SELECT u.counter, u.member, u.hash
FROM unnest($1::text[], $2::text[], $3::boolean[], $4::bigint[]) AS u(counter, member, present, hash)
WHERE u.present`

// bucketsSQL adds a batch's deltas to windowed counters' buckets, on the
// shard each went to ($3 counter, $4 bucket start, $5 shard, $6 delta),
// and deletes the buckets of those counters ($1) that start before where
// their retention ends ($2): each bucket is deleted once, by a batch that
// writes the counter, so the work is proportional to writes. The two
// never meet: retention is at least one bucket. A bucket that would leave
// int64 fails the batch with SQLSTATE 22003 (out_of_range).
const bucketsSQL = `
WITH swept AS (
	DELETE FROM shardcounter.buckets b
	USING unnest($1::text[], $2::timestamptz[]) AS w(counter, sweep)
	WHERE b.counter = w.counter AND b.start < w.sweep
)
INSERT INTO shardcounter.buckets AS b (counter, start, shard, value)
SELECT u.counter, u.start, u.shard, sum(u.delta)
FROM unnest($3::text[], $4::timestamptz[], $5::integer[], $6::bigint[]) AS u(counter, start, shard, delta)
GROUP BY 1, 2, 3
ON CONFLICT (counter, start, shard) DO UPDATE SET value = b.value + excluded.value`

// creations checks the counters decide created against those createSQL
// made (Unborn): one made with another spec than the first item that
// applied is made with that spec in the next attempt, and one that
// createSQL did not make (deleted under the attempt) is made then.
func (v *view) creations(b *batch, m decide.Mutations) error {
	retry := false
	for _, c := range m.Counters {
		made := v.counters[c.ID]
		switch {
		case !c.Create:
		case !v.created[c.ID] || made == nil:
			retry = true
		case !c.Spec.Equal(made.spec):
			b.specs[c.ID] = *c.Spec
			retry = true
		}
	}
	if retry {
		return errRetry
	}
	return nil
}

// encode queues the statements that write m.
func (v *view) encode(q *pgx.Batch, m decide.Mutations) {
	born := make(map[string]bool)
	for _, c := range m.Counters {
		born[c.ID] = c.Create
	}
	var drop []string
	for id := range v.created {
		if !born[id] {
			drop = append(drop, id)
		}
	}
	// A limit state removed idle goes as an unborn counter does: its
	// shard rows, locked since the batch's first round trip, and every
	// row of it with them (ON DELETE CASCADE), so no take of another
	// transaction lands between the read it was decided on and the delete.
	drop = append(drop, m.Removes...)
	if len(drop) > 0 {
		q.Queue(dropSQL, drop)
	}
	if w := v.rows(m.Shards); len(w.counters) > 0 {
		q.Queue(writeSQL, w.counters, w.shards, w.values, w.wide)
	}
	if len(m.Sketches) > 0 {
		var w rows
		for _, s := range m.Sketches {
			w.add(s.Counter, s.Shard)
			w.sketches = append(w.sketches, s.New)
		}
		q.Queue(sketchSQL, w.counters, w.shards, w.sketches)
	}
	if len(m.Members) > 0 {
		var counters, members []string
		var present []bool
		var hashes []int64
		for _, w := range m.Members {
			counters, members = append(counters, w.Counter), append(members, w.Member)
			present, hashes = append(present, w.Present), append(hashes, int64(shard.ForMember(w.Member)))
		}
		q.Queue(membersSQL, counters, members, present, hashes)
	}
	if len(m.Buckets) > 0 {
		v.queueBuckets(q, m)
	}
	forget, revive := v.requests(m.Requests)
	if len(forget)+len(revive) > 0 {
		fc, fi := split(forget)
		rc, ri := split(revive)
		q.Queue(requestsSQL, fc, fi, rc, ri, v.now)
	}
}

// rows holds the arrays of a statement that writes shard rows.
type rows struct {
	counters []string
	shards   []int
	values   []int64
	wide     []bool
	sketches [][]byte
}

func (w *rows) add(counter string, shard int) {
	w.counters, w.shards = append(w.counters, counter), append(w.shards, shard)
}

// rows returns writeSQL's rows: each shard the batch changed, with its
// value after the batch. A counter read shard by shard keeps them in the
// zone (decide takes no other write on it), so they are not wide; one
// whose every shard the batch knows (read whole, or made by it) is wide
// when a shard is outside the zone, and when that changes, every row is
// written to carry the mark.
func (v *view) rows(ws []decide.ShardWrite) (w rows) {
	for i := 0; i < len(ws); {
		j := i + 1
		for j < len(ws) && ws[j].Counter == ws[i].Counter {
			j++
		}
		v.counterRows(&w, ws[i:j])
		i = j
	}
	return w
}

// counterRows adds to w the rows of one counter's writes ws.
func (v *view) counterRows(w *rows, ws []decide.ShardWrite) {
	id := ws[0].Counter
	c := v.counters[id]
	after := make(map[int]int, len(ws)) // shard → its last write in ws
	for i, x := range ws {
		after[x.Shard] = i
	}
	row := func(k int, value int64, wide bool) {
		w.add(id, k)
		w.values, w.wide = append(w.values, value), append(w.wide, wide)
	}
	if !c.full && !v.created[id] {
		for i, x := range ws {
			if after[x.Shard] == i {
				row(x.Shard, x.Value, false)
			}
		}
		return
	}
	n := c.spec.Shards
	vals := make([]int64, n) // a shard of a counter made by the batch that it did not lock is 0
	for _, r := range c.rows {
		vals[r.shard] = r.value
	}
	wide := false
	for k := range vals {
		if i, ok := after[k]; ok {
			vals[k] = ws[i].Value
		}
		wide = wide || !decide.InZone(vals[k], n)
	}
	all := (wide && c.wides != n) || (!wide && c.wides != 0)
	for k, x := range vals {
		if _, ok := after[k]; ok || all {
			row(k, x, wide)
		}
	}
}

// levelSQL sets the rows of the bucket of a windowed counter that the
// batch read whole ($1 counter, $2 bucket start, $3 shard, $4 value): the
// bucket's value after the batch, levelled over the shards (see levelled).
const levelSQL = `
INSERT INTO shardcounter.buckets AS b (counter, start, shard, value)
SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::integer[], $4::bigint[])
ON CONFLICT (counter, start, shard) DO UPDATE SET value = excluded.value`

// queueBuckets queues bucketsSQL for m's buckets, and levelSQL for those
// of counters the batch holds whole. A bucket of a counter read shard by
// shard takes the deltas of its shard writes, on their shards, as its
// shard rows do; one of a counter read whole (or made by the batch), whose
// value decide knows, is written levelled: the zone then holds each row,
// unless the bucket is within n of int64's ends.
func (v *view) queueBuckets(q *pgx.Batch, m decide.Mutations) {
	var swept []string
	var sweeps, starts []time.Time
	bucket := make(map[string]int, len(m.Buckets)) // counter → its last bucket write
	for i, b := range m.Buckets {
		swept, sweeps = append(swept, b.Counter), append(sweeps, b.Sweep)
		bucket[b.Counter] = i
	}
	var w, level rows
	var levelStarts []time.Time
	known := func(b decide.BucketWrite) bool { return b.Known && v.counters[b.Counter] != nil }
	for i, b := range m.Buckets {
		if known(b) && bucket[b.Counter] == i {
			for k, x := range levelled(b.Value, v.counters[b.Counter].spec.Shards) {
				level.add(b.Counter, k)
				level.values, levelStarts = append(level.values, x), append(levelStarts, b.Start)
			}
		}
	}
	for _, s := range m.Shards {
		if i, ok := bucket[s.Counter]; ok && !known(m.Buckets[i]) {
			w.add(s.Counter, s.Shard)
			w.values, starts = append(w.values, s.Delta), append(starts, m.Buckets[i].Start)
		}
	}
	q.Queue(bucketsSQL, swept, sweeps, w.counters, starts, w.shards, w.values)
	if len(level.counters) > 0 {
		q.Queue(levelSQL, level.counters, levelStarts, level.shards, level.values)
	}
}

// levelled splits a bucket's value into n shares that differ by at most
// one and sum to it: each is within the zone ±MaxInt64/n unless the value
// is within n of int64's ends.
func levelled(value int64, n int) []int64 {
	q, r := value/int64(n), value%int64(n) // r has value's sign
	out := make([]int64, n)
	for k := range out {
		out[k] = q
		switch {
		case int64(k) < r:
			out[k]++
		case int64(k) < -r:
			out[k]--
		}
	}
	return out
}

// checkBuckets holds the buckets of the windowed counters that the batch
// read shard by shard, whose values decide did not know, within int64
// whatever concurrent batches on their other shards do: every row of the
// bucket stays within the zone ±MaxInt64/n (n shards), so no sum of them
// leaves int64. It asks for the counters whose rows do not (one is out
// already, or the batch's applied deltas on a shard would take its row
// out after its positive ones or after its negative ones) to be read
// whole (errRetry): decide then judges the bucket on its exact value.
// A row of a shard the batch did not lock may change under it, but only
// by batches that keep it in the zone too, or that lock every shard.
func (v *view) checkBuckets(b *batch, out []shardcounter.Outcome, m decide.Mutations) error {
	var whole []string
	for _, bw := range m.Buckets {
		c := v.counters[bw.Counter]
		if bw.Known || c == nil {
			continue
		}
		n := c.spec.Shards
		z := int64(math.MaxInt64) / int64(n)
		hi, lo := make(map[int]int64), make(map[int]int64)
		ok := true
		for k, x := range c.bucket {
			ok = ok && -z <= x && x <= z
			hi[k], lo[k] = x, x
		}
		for _, r := range b.reads {
			o := out[r.Item]
			if !ok || r.Counter != bw.Counter || o.Err != nil || o.Duplicate || o.Unchanged {
				continue
			}
			k, d := shard.Of(r.Pick, n), b.incs[r.Item].Delta
			if d > 0 {
				ok = d <= z-hi[k]
				hi[k] += d
			} else {
				ok = d >= -z-lo[k]
				lo[k] += d
			}
		}
		if !ok {
			whole = append(whole, bw.Counter)
		}
	}
	if len(whole) == 0 {
		return nil
	}
	b.readWhole(whole)
	return errRetry
}

// requests returns the request ids recordSQL inserted that the batch did
// not record (their items did not apply), to forget, and those decide
// recorded afresh because they had expired, to revive.
func (v *view) requests(rs []decide.RequestWrite) (forget, revive []key) {
	for _, r := range rs {
		if r.Expired {
			revive = append(revive, key{r.Counter, r.ID})
		}
	}
	if len(rs)-len(revive) == len(v.inserted) {
		return nil, revive // every id inserted is recorded: the others are the revived
	}
	recorded := make(map[key]bool, len(rs))
	for _, r := range rs {
		recorded[key{r.Counter, r.ID}] = true
	}
	for k := range v.inserted {
		if !recorded[k] {
			forget = append(forget, k)
		}
	}
	return forget, revive
}
