package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
)

// addSQL is the seed algorithm as one statement: add $2 to shard $3 mod n
// of counter $1, where n is read from the counter's metadata in the same
// statement. The pick is numeric because it is a uint64.
//
// The shards condition makes it safe under resharding. PostgreSQL's READ
// COMMITTED re-checks an updated row's conditions against the row's newest
// version when it had to wait for the row's lock, but keeps the metadata
// row it read at the start. A reshard rewrites the shards column of every
// row it keeps and deletes the rows it removes, so a statement that read
// the old count updates nothing.
//
// The last two conditions keep it exact without a sum: it updates only a
// shard of a counter that is not wide and that stays within the zone
// ±MaxInt64/n (decide.InZone), where no total can leave int64. The sum is
// numeric, so it cannot fail on the way.
//
// The last condition leaves to a batch what a plain sum counter does not
// have: members, bounds (which need the total) and window buckets.
//
// A write that updates nothing (a missing counter, a shard moved by a
// reshard, a wide counter, a shard leaving the zone, a counter of another
// kind, with bounds or a window) is decided by a batch of one that locks
// every shard of the counter (addSlow).
const addSQL = `
UPDATE shardcounter.shards s SET value = s.value + $2
FROM shardcounter.counters c
WHERE c.id = $1 AND s.counter = $1
	AND s.shard = mod($3::numeric, c.shards)::integer
	AND s.shards = c.shards
	AND NOT s.wide
	AND s.value::numeric + $2 BETWEEN -(9223372036854775807 / c.shards) AND 9223372036854775807 / c.shards
	AND c.kind = 'sum' AND c.min IS NULL AND c.max IS NULL AND c.bucket IS NULL`

// Add adds delta to shard pick mod n of the counter with one UPDATE
// statement that commits on its own: one round trip. It returns
// ErrNotFound for an unknown counter, ErrInvalid for a distinct one, and
// ErrOutOfRange, with nothing applied, when the shard or the counter's
// total would leave int64 or its bounds.
// ErrUnavailable means nothing was applied; an error with OutcomeUnknown
// set means the statement was sent and its success was not reported.
func (s *CounterStore) Add(ctx context.Context, id string, delta int64, pick uint64) error {
	return s.add(ctx, nil, id, delta, pick)
}

// AddTx adds delta to shard pick mod n of the counter inside the caller's
// transaction tx, so that the count commits or rolls back with the
// caller's own writes. tx must be on the store's database (Pool, or a pool
// of the same database). It holds the shard row's lock until tx ends, so
// keep such transactions short: other writes that pick the same shard
// wait for it. (A write that must check the counter's total, near the
// int64 range, locks every shard.)
//
// Under READ COMMITTED (PostgreSQL's default) AddTx retries on its own
// when a concurrent reshard moves its shard. Under REPEATABLE READ or
// SERIALIZABLE such a conflict fails tx with ErrUnavailable, and the
// caller retries the transaction. After any error, tx is in an aborted
// state and must be rolled back.
func (s *CounterStore) AddTx(ctx context.Context, tx pgx.Tx, id string, delta int64, pick uint64) error {
	return s.add(ctx, tx, id, delta, pick)
}

// add runs addSQL on its own, or in tx when it is not nil. A write that
// addSQL did not apply is decided as a batch of one that reads the
// counter whole.
func (s *CounterStore) add(ctx context.Context, tx pgx.Tx, id string, delta int64, pick uint64) error {
	if err := decide.Validate(shardcounter.Increment{Counter: id, Delta: delta}); err != nil {
		return err
	}
	var q interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	} = s.pool
	sent := atCommit
	if tx != nil {
		q, sent = tx, beforeCommit
	}
	tag, err := q.Exec(ctx, addSQL, id, delta, pick)
	if err != nil {
		return mapError("add", err, sent)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	b := newBatch([]shardcounter.Increment{{Counter: id, Delta: delta, Pick: pick}}, []string{id})
	out := make([]shardcounter.Outcome, 1)
	if tx == nil {
		out, err = s.applyOwn(ctx, b, out)
	} else {
		err = s.apply(ctx, tx.Conn(), false, b, out)
	}
	if err != nil {
		return err
	}
	return out[0].Err
}

// ReshardCounter changes the shard count in one transaction. It locks the
// metadata row, then every shard row in shard order (waiting for writes in
// flight, whose deltas it then includes), folds each removed shard i into
// shard i mod shards, adds zero-valued rows when growing, and marks every
// kept row with the new count, which sends writers that read the old count
// back to read the new one. A distinct counter's shards are counted again
// from its members, each on shard ForMember(member) mod shards; a windowed
// counter's buckets fold as its shards do; an approx counter's removed
// shard i is merged into the sketch of shard i mod shards. It returns ErrOutOfRange,
// changing nothing, when folding would take a shard out of int64.
func (s *CounterStore) ReshardCounter(ctx context.Context, id string, shards int) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateShards(shards); err != nil {
		return nil, err
	}
	c, dest, done := scanCounter()
	err := s.inTx(ctx, "reshard counter", func(tx pgx.Tx) error {
		// FOR NO KEY UPDATE, not FOR UPDATE: batches that record request
		// ids take KEY SHARE locks on the counter row (the foreign key)
		// while holding shard rows, and must not wait for this lock.
		err := tx.QueryRow(ctx, "SELECT c.id, "+specColumns("c")+", c.created_at FROM shardcounter.counters c WHERE c.id = $1 FOR NO KEY UPDATE", id).
			Scan(dest...)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return err
		}
		done()
		old := c.Shards
		if old == shards {
			return nil
		}
		c.Shards = shards
		values, sketches, err := lockShardRows(ctx, tx, id, old, shards)
		if err != nil {
			return err
		}
		switch c.Kind {
		case shardcounter.KindDistinct:
			values, err = countMembers(ctx, tx, id, shards)
		case shardcounter.KindApprox:
			if sketches, _, err = decide.FoldSketches(sketches, shards); err != nil {
				err = shardcounter.Errorf(shardcounter.EINTERNAL, "reshard counter %q: %v", id, err)
			}
			values = make([]int64, shards)
		default:
			values, err = decide.FoldShards(id, values, shards)
		}
		if err != nil {
			return err
		}
		if c.Window != nil && shards < old {
			if err := foldBuckets(ctx, tx, id, shards); err != nil {
				return err
			}
		}
		// The zone narrows as the count grows: mark the rows wide if a
		// shard is outside the new one.
		wide := false
		for _, v := range values {
			wide = wide || !decide.InZone(v, shards)
		}
		_, err = tx.Exec(ctx, `
WITH removed AS (
	DELETE FROM shardcounter.shards WHERE counter = $1 AND shard >= $2
), kept AS (
	INSERT INTO shardcounter.shards (counter, shard, value, shards, wide, sketch)
	SELECT $1, v.ord - 1, v.value, $2, $4, v.sketch FROM unnest($3::bigint[], $5::bytea[]) WITH ORDINALITY AS v(value, sketch, ord)
	ON CONFLICT (counter, shard) DO UPDATE SET value = excluded.value, shards = excluded.shards, wide = excluded.wide, sketch = excluded.sketch
)
UPDATE shardcounter.counters SET shards = $2 WHERE id = $1`, id, shards, values, wide, padSketches(sketches, shards))
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// lockShardRows locks a counter's shard rows in shard order and returns
// their values and sketches, room made for max(old, shards) shards.
func lockShardRows(ctx context.Context, tx pgx.Tx, id string, old, shards int) ([]int64, [][]byte, error) {
	rows, err := tx.Query(ctx, "SELECT shard, value, sketch FROM shardcounter.shards WHERE counter = $1 ORDER BY shard FOR UPDATE", id)
	if err != nil {
		return nil, nil, err
	}
	values := make([]int64, max(old, shards))
	sketches := make([][]byte, max(old, shards))
	var shard int
	var value int64
	var sk []byte
	_, err = pgx.ForEachRow(rows, []any{&shard, &value, &sk}, func() error {
		if shard >= len(values) {
			return shardcounter.Errorf(shardcounter.EINTERNAL, "counter %q has a row for shard %d but %d shards", id, shard, old)
		}
		values[shard], sketches[shard] = value, sk
		return nil
	})
	return values, sketches, err
}

// padSketches returns sketches cut or padded with nils to shards, the
// sketch column of the rows a reshard keeps (NULL but on approx
// counters' shards that have one).
func padSketches(sketches [][]byte, shards int) [][]byte {
	out := make([][]byte, shards)
	copy(out, sketches)
	return out
}

// foldBuckets folds the window buckets of each removed shard i into
// shard i mod shards. A bucket that would leave int64 fails the reshard
// (SQLSTATE 22003: out_of_range).
func foldBuckets(ctx context.Context, tx pgx.Tx, id string, shards int) error {
	_, err := tx.Exec(ctx, `
WITH removed AS (
	DELETE FROM shardcounter.buckets WHERE counter = $1 AND shard >= $2
	RETURNING start, shard, value
)
INSERT INTO shardcounter.buckets AS b (counter, start, shard, value)
SELECT $1, start, shard % $2, sum(value) FROM removed GROUP BY start, shard % $2
ON CONFLICT (counter, start, shard) DO UPDATE SET value = b.value + excluded.value`, id, shards)
	return err
}

// countMembers counts a distinct counter's members on each of shards
// shards.
func countMembers(ctx context.Context, tx pgx.Tx, id string, shards int) ([]int64, error) {
	rows, err := tx.Query(ctx, "SELECT "+memberShard("hash", "$2")+", count(*) FROM shardcounter.members WHERE counter = $1 GROUP BY 1", id, shards)
	if err != nil {
		return nil, err
	}
	values := make([]int64, shards)
	var shard int
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&shard, &n}, func() error {
		values[shard] = n
		return nil
	})
	return values, err
}
