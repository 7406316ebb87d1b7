package postgres

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// loadSQL creates counters with their shard rows and members in one
// statement: $1–$5 are the counters (id, shards, kind, min, max), $6 the
// creation time (or the database's clock), $7–$11 the shard rows
// (counter, shard, value, shards, wide), $12–$14 the members (counter,
// member, hash). A counter that exists is skipped by the conflict check,
// and so are its rows; it returns the ids it created. Its inserts are
// set-wise: the planner is left free (no pinPlans), as every array is
// read whole.
const loadSQL = `
WITH c AS (
	INSERT INTO shardcounter.counters AS c (id, shards, kind, min, max, created_at)
	SELECT i.id, i.shards, i.kind, i.min, i.max, coalesce($6, now())
	FROM unnest($1::text[], $2::integer[], $3::text[], $4::bigint[], $5::bigint[]) AS i(id, shards, kind, min, max)
	ORDER BY i.id
	ON CONFLICT (id) DO NOTHING
	RETURNING c.id
), s AS (
	INSERT INTO shardcounter.shards (counter, shard, value, shards, wide)
	SELECT r.counter, r.shard, r.value, r.shards, r.wide
	FROM unnest($7::text[], $8::integer[], $9::bigint[], $10::integer[], $11::boolean[]) AS r(counter, shard, value, shards, wide)
	WHERE r.counter IN (SELECT id FROM c)
), m AS (
	INSERT INTO shardcounter.members (counter, member, hash)
	SELECT m.counter, m.member, m.hash
	FROM unnest($12::text[], $13::text[], $14::bigint[]) AS m(counter, member, hash)
	WHERE m.counter IN (SELECT id FROM c)
)
SELECT id FROM c`

// loadArgs collects loadSQL's arrays.
type loadArgs struct {
	ids, kinds  []string
	shards      []int
	mins, maxs  []*int64
	rowCounters []string
	rowShards   []int
	rowValues   []int64
	rowCounts   []int
	rowWide     []bool
	memCounters []string
	members     []string
	hashes      []int64
}

// LoadCounters creates the counters of cs that do not exist, with their
// values and members, in one statement (shardcounter.Loader), for an
// import: a few set-wise inserts instead of Apply's decisions, and only
// the shard rows that hold something. A sum counter's value goes on
// shard 0 when it is within the zone ±MaxInt64/n (decide.InZone), and is
// spread over every shard, marked wide as decide.InZone says, when it is not; a
// distinct counter's shards hold the counts of their members; a shard
// that would hold 0 gets no row (a missing row reads as 0, and the first
// write to it inserts it: see fillSQL). So a counter that is wide has
// every row, which fillSQL relies on.
func (s *CounterStore) LoadCounters(ctx context.Context, cs []shardcounter.NewCounter) ([]bool, error) {
	created := make([]bool, len(cs))
	if len(cs) == 0 {
		return created, nil
	}
	var a loadArgs
	index := make(map[string]int, len(cs))
	for i, c := range cs {
		if err := c.Validate(); err != nil {
			return nil, err
		}
		if _, dup := index[c.ID]; dup {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "load counters: %q is given twice", c.ID)
		}
		index[c.ID] = i
		a.add(c)
	}
	rows, err := s.pool.Query(ctx, loadSQL, a.ids, a.shards, a.kinds, a.mins, a.maxs, s.nowArg(),
		a.rowCounters, a.rowShards, a.rowValues, a.rowCounts, a.rowWide, a.memCounters, a.members, a.hashes)
	if err != nil {
		return nil, mapError("load counters", err, atCommit)
	}
	var id string
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
		created[index[id]] = true
		return nil
	})
	if err != nil {
		return nil, mapError("load counters", err, atCommit)
	}
	return created, nil
}

// add adds a counter and its rows to the arrays.
func (a *loadArgs) add(c shardcounter.NewCounter) {
	r := rowOf(c.Spec)
	n := r.shards
	a.ids, a.shards, a.kinds = append(a.ids, c.ID), append(a.shards, n), append(a.kinds, r.kind)
	a.mins, a.maxs = append(a.mins, r.min), append(a.maxs, r.max)
	row := func(shard int, v int64, wide bool) {
		a.rowCounters, a.rowShards, a.rowValues = append(a.rowCounters, c.ID), append(a.rowShards, shard), append(a.rowValues, v)
		a.rowCounts, a.rowWide = append(a.rowCounts, n), append(a.rowWide, wide)
	}
	if c.Spec.Kind == shardcounter.KindDistinct {
		ms := slices.Clone(c.Members)
		slices.Sort(ms)
		ms = slices.Compact(ms)
		counts := make([]int64, n)
		for _, m := range ms {
			h := shard.ForMember(m)
			counts[shard.Of(h, n)]++
			a.memCounters, a.members, a.hashes = append(a.memCounters, c.ID), append(a.members, m), append(a.hashes, int64(h))
		}
		for i, v := range counts {
			if v != 0 {
				row(i, v, false)
			}
		}
		return
	}
	switch {
	case c.Value == 0:
	case decide.InZone(c.Value, n):
		row(0, c.Value, false)
	default:
		vs := spread(c.Value, n)
		wide := false
		for _, v := range vs {
			wide = wide || !decide.InZone(v, n)
		}
		for i, v := range vs {
			row(i, v, wide)
		}
	}
}

// spread divides v over n shards, the remainder one apiece on the first
// shards, so that no shard is further from zero than it must be.
func spread(v int64, n int) []int64 {
	q, r := v/int64(n), v%int64(n)
	out := make([]int64, n)
	for i := range out {
		out[i] = q
		switch {
		case r > 0:
			out[i]++
			r--
		case r < 0:
			out[i]--
			r++
		}
	}
	return out
}
