package postgres

import (
	"bytes"
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/sketch"
)

var _ shardcounter.SketchStore = (*CounterStore)(nil)

// sketchSQL sets the sketches of approx counters' shard rows that a batch
// changed. The batch locked the rows (lockSQL) and read the sketches it
// changed with the lock held, so no other writer's registers are lost.
const sketchSQL = `
UPDATE shardcounter.shards s SET sketch = u.sketch
FROM unnest($1::text[], $2::integer[], $3::bytea[]) AS u(counter, shard, sketch)
WHERE s.counter = u.counter AND s.shard = u.shard`

// shardAdds is what a batch's approx items do to one shard: the members
// added, the sketches merged, and the items, which share one outcome.
type shardAdds struct {
	members []string
	merges  [][]byte
	items   []int
}

// addApprox notes approx item i on shard k.
func (d *decision) addApprox(k shardKey, i int, inc shardcounter.Increment) {
	if d.approx == nil {
		d.approx = make(map[shardKey]*shardAdds)
	}
	sa := d.approx[k]
	if sa == nil {
		sa = &shardAdds{}
		d.approx[k] = sa
	}
	if inc.Sketch != nil {
		sa.merges = append(sa.merges, inc.Sketch)
	} else {
		sa.members = append(sa.members, inc.Member)
	}
	sa.items = append(sa.items, i)
}

// planSketches runs sketch.Apply once on each shard the batch's approx
// items touch, on the sketch locked with the row, and plans the write of
// those that changed. Every item of a shard is Unchanged when its
// shard's sketch did not change. A stored sketch that does not decode
// (nothing this package writes) fails the shard's items with EINTERNAL.
func (a *attempt) planSketches(d *decision, p *plan, out []shardcounter.Outcome) {
	for k, sa := range d.approx {
		old := a.counters[k.counter].sketches[k.shard]
		next, changed, err := sketch.Apply(old, sa.members, sa.merges)
		for _, i := range sa.items {
			if err != nil {
				out[i].Err = shardcounter.Errorf(shardcounter.EINTERNAL, "counter %q shard %d: %v", k.counter, k.shard, err)
				continue
			}
			out[i].Unchanged = !changed
		}
		if err == nil && !bytes.Equal(old, next) {
			p.sketches.add(k, next)
		}
	}
}

// sketchWrites collects sketchSQL's arguments.
type sketchWrites struct {
	counters []string
	shards   []int
	sketches [][]byte
}

func (w *sketchWrites) add(k shardKey, b []byte) {
	w.counters, w.shards, w.sketches = append(w.counters, k.counter), append(w.shards, k.shard), append(w.sketches, b)
}

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

// rowQuerier is a pool, or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func readSketches(ctx context.Context, q rowQuerier, id string) (*shardcounter.Counter, [][]byte, error) {
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

// foldSketches returns the sketches of shards shards that hold sketches:
// shard j is the union of every shard i ≡ j (mod shards), through
// sketch.Apply as every write. Growing keeps the sketches and adds empty
// shards.
func foldSketches(id string, sketches [][]byte, shards int) ([][]byte, error) {
	out := make([][]byte, shards)
	for j := range shards {
		if j < len(sketches) {
			out[j] = sketches[j]
		}
		var merges [][]byte
		for i := j + shards; i < len(sketches); i += shards {
			if sketches[i] != nil {
				merges = append(merges, sketches[i])
			}
		}
		if len(merges) == 0 {
			continue
		}
		b, _, err := sketch.Apply(out[j], nil, merges)
		if err != nil {
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "reshard counter %q: %v", id, err)
		}
		out[j] = b
	}
	return out, nil
}
