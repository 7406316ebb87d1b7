package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/shardcounter/shardcounter"
)

// bucketStart is the SQL expression of the start of the bucket of width
// width (an interval of 1 minute, 1 hour or 1 day) that holds t: t
// truncated in UTC, as shardcounter.Window.BucketOf does.
func bucketStart(width, t string) string {
	return fmt.Sprintf(`date_trunc(CASE WHEN %[1]s >= interval '1 day' THEN 'day' WHEN %[1]s >= interval '1 hour' THEN 'hour' ELSE 'minute' END, %[2]s, 'UTC')`, width, t)
}

// bucketCTEs are the CTEs that add a batch's deltas to the window
// buckets of their commit time (now, an SQL expression) and delete the
// buckets of the same counters that lie past their retention: each bucket
// is deleted once, by a batch that writes the counter, so the work is
// proportional to writes. src is a relation of (counter, shard, shards,
// delta, up, down, bucket, retention), one row per shard row, up and down
// the sums of its positive and of its negative deltas, with bucket NULL
// for a counter without a window. The two never meet: retention is at
// least one bucket. A bucket row is written only when every row of its
// bucket is within the zone ±MaxInt64/n and it stays there after up and
// after down, as the general path keeps them (checkBuckets), so that no
// sum of a bucket's rows leaves int64; bucketed returns a row for each
// written, and a row short means the batch must take the general path.
func bucketCTEs(src, now string) string {
	zone := "(9223372036854775807 / z.shards)" // ±MaxInt64/n, of src's row z
	return `swept AS (
	DELETE FROM shardcounter.buckets b
	USING (SELECT DISTINCT counter, bucket, retention FROM ` + src + ` WHERE bucket IS NOT NULL) AS w
	WHERE b.counter = w.counter AND b.start < ` + bucketStart("w.bucket", now+" - w.retention") + `
), bucketed AS (
	INSERT INTO shardcounter.buckets AS b (counter, start, shard, value)
	SELECT counter, ` + bucketStart("bucket", now) + `, shard, sum(delta)
	FROM ` + src + ` AS z WHERE bucket IS NOT NULL AND up <= ` + zone + ` AND down >= -(` + zone + `)
		AND NOT EXISTS (SELECT 1 FROM shardcounter.buckets o WHERE o.counter = z.counter AND o.start = ` + bucketStart("z.bucket", now) + `
			AND o.value NOT BETWEEN -(` + zone + `) AND ` + zone + `)
	GROUP BY 1, 2, 3
	ON CONFLICT (counter, start, shard) DO UPDATE SET value = b.value + excluded.value
	WHERE (SELECT b.value::numeric + z.up <= ` + zone + ` AND b.value::numeric + z.down >= -(` + zone + `)
		FROM ` + src + ` AS z WHERE z.counter = b.counter AND z.shard = b.shard)
	RETURNING 1
)`
}

// ReadWindow sums the counter's buckets that start in [from, to) on every
// shard, in one statement.
func (s *CounterStore) ReadWindow(ctx context.Context, id string, from, to time.Time) (*shardcounter.Reading, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	r := &shardcounter.Reading{ID: id, Consistency: shardcounter.Strong, Window: &shardcounter.Interval{From: from.UTC(), To: to.UTC()}}
	var windowed, fits bool
	var total *int64
	err := s.pool.QueryRow(ctx, `
SELECT c.shards, c.bucket IS NOT NULL,
	CASE WHEN t.total BETWEEN -9223372036854775808 AND 9223372036854775807 THEN t.total::bigint END,
	t.total BETWEEN -9223372036854775808 AND 9223372036854775807,
	coalesce($4, statement_timestamp())
FROM shardcounter.counters c
CROSS JOIN LATERAL (
	SELECT coalesce(sum(b.value), 0) AS total FROM shardcounter.buckets b
	WHERE b.counter = c.id AND b.start >= $2 AND b.start < $3
) AS t
WHERE c.id = $1`, id, from, to, s.nowArg()).Scan(&r.Shards, &windowed, &total, &fits, &r.AsOf)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, mapError("read window", err, beforeCommit)
	}
	if !windowed {
		return nil, noWindow(id)
	}
	if !fits {
		return nil, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: the sum of its buckets from %s to %s is outside the int64 range", id, from, to)
	}
	r.Value, r.AsOf = *total, r.AsOf.UTC()
	return r, nil
}

// ReadSeries returns the counter's non-zero buckets that start in
// [from, to), summed over its shards, oldest first, in one statement.
// Buckets past retention that no write has swept yet are included.
func (s *CounterStore) ReadSeries(ctx context.Context, id string, from, to time.Time) ([]shardcounter.Bucket, error) {
	return readSeries(ctx, s.pool, id, from, to)
}

func readSeries(ctx context.Context, q querier, id string, from, to time.Time) ([]shardcounter.Bucket, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, `
SELECT c.bucket IS NOT NULL, t.start, t.total BETWEEN -9223372036854775808 AND 9223372036854775807,
	CASE WHEN t.total BETWEEN -9223372036854775808 AND 9223372036854775807 THEN t.total::bigint END
FROM shardcounter.counters c
LEFT JOIN LATERAL (
	SELECT b.start, sum(b.value) AS total FROM shardcounter.buckets b
	WHERE b.counter = c.id AND b.start >= $2 AND b.start < $3
	GROUP BY b.start HAVING sum(b.value) <> 0
) AS t ON true
WHERE c.id = $1
ORDER BY t.start`, id, from, to)
	if err != nil {
		return nil, mapError("read series", err, beforeCommit)
	}
	out := []shardcounter.Bucket{}
	found := false
	var windowed bool
	var start *time.Time
	var fits *bool
	var total *int64
	_, err = pgx.ForEachRow(rows, []any{&windowed, &start, &fits, &total}, func() error {
		found = true
		switch {
		case !windowed:
			return noWindow(id)
		case start == nil:
		case !*fits:
			return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: its bucket at %s sums outside the int64 range", id, start.UTC())
		default:
			out = append(out, shardcounter.Bucket{Start: start.UTC(), Value: *total})
		}
		return nil
	})
	if err != nil {
		return nil, mapError("read series", err, beforeCommit)
	}
	if !found {
		return nil, notFound(id)
	}
	return out, nil
}

func noWindow(id string) error {
	return shardcounter.Errorf(shardcounter.EINVALID, "counter %q has no window: create it with one to read its time buckets", id)
}
