package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/sketch"
)

var _ shardcounter.SketchStore = (*CounterStore)(nil)

// ReadSketches returns an approx counter and its shards' sketches in shard
// order (nil for a shard with none), from one statement, so one snapshot.
func (s *CounterStore) ReadSketches(ctx context.Context, id string) (*shardcounter.Counter, [][]byte, error) {
	return readSketches(ctx, s.pool, id)
}

// ReadSketches is CounterStore.ReadSketches in the snapshot (an export
// writes the sketches of approx counters).
func (n *Snapshot) ReadSketches(ctx context.Context, id string) (*shardcounter.Counter, [][]byte, error) {
	return readSketches(ctx, n.tx, id)
}

func readSketches(ctx context.Context, q querier, id string) (*shardcounter.Counter, [][]byte, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, nil, err
	}
	c, dest, done := scanCounter()
	var sketches [][]byte
	err := q.QueryRow(ctx, `
SELECT c.id, `+specColumns("c")+`, c.created_at, array(
	SELECT s.sketch
	FROM generate_series(0, c.shards - 1) AS g
	LEFT JOIN shardcounter.shards s ON s.counter = c.id AND s.shard = g
	ORDER BY g
)
FROM shardcounter.counters c
WHERE c.id = $1`, id).Scan(append(dest, &sketches)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, notFound(id)
	}
	if err != nil {
		return nil, nil, mapError("read sketches", err, beforeCommit)
	}
	done()
	if c.Kind != shardcounter.KindApprox {
		return nil, nil, shardcounter.Errorf(shardcounter.EINVALID, "counter %q is a %s counter: only an approx counter has sketches", id, c.Kind)
	}
	return c, sketches, nil
}

// shardEstimates returns each shard's own estimate, an approx counter's
// shard values.
func shardEstimates(id string, sketches [][]byte) ([]int64, error) {
	values := make([]int64, len(sketches))
	for i, b := range sketches {
		n, err := sketch.Count([][]byte{b})
		if err != nil {
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "counter %q shard %d: %v", id, i, err)
		}
		values[i] = n
	}
	return values, nil
}
