package docstore

import (
	"context"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
)

// Bucket is a window bucket as stored: Of is the created_at of the
// counter that wrote it (zero when written before buckets carried one),
// so that one a deleted counter left is not read as one of a counter made
// again under the id (Owned).
type Bucket struct {
	shardcounter.Bucket
	Of time.Time
}

// Snapshot is counters read at one moment (a read-only transaction): each
// found one's metadata and shard values.
type Snapshot struct {
	Counters map[string]*shardcounter.Counter
	Values   map[string][]int64
	// Sketches are an approx counter's shards' sketches (its values are
	// 0: ReadShards turns them into estimates).
	Sketches map[string][][]byte
	At       time.Time
}

// Reads are the readings a document store builds on its own few reads;
// its exported methods are the store's own (embedded).
type Reads struct {
	Store string // "firestore", "datastore": the prefix of errors
	Now   func() time.Time
	// Snap reads the counters and all their shards as one snapshot;
	// missing counters are absent from its Counters.
	Snap func(ctx context.Context, ids []string) (*Snapshot, error)
	// Meta reads one counter's metadata (CounterNotFound when absent).
	Meta func(ctx context.Context, id string) (*shardcounter.Counter, error)
	// Buckets returns the buckets of counter id that start in [from, to),
	// oldest first.
	Buckets func(ctx context.Context, id string, from, to time.Time) ([]Bucket, error)
	// Node names where shard i of counter id lives, for Placement.
	Node func(id string, i int) string
	// CounterPage reads up to n counter records in key order, from the
	// one of key from on (after it, unless incl; "" from the first).
	CounterPage func(ctx context.Context, from string, incl bool, n int) ([]Listed, error)
	// MemberPage reads up to n member records of counter id in key
	// order, after the one of key after ("" from the first).
	MemberPage func(ctx context.Context, id, after string, n int) ([]Listed, error)
	// Member reads counter id's record and its member's in one
	// snapshot: the counter (CounterNotFound when absent), and the
	// member record's Of, found false when there is none.
	Member func(ctx context.Context, id, member string) (c *shardcounter.Counter, of time.Time, found bool, err error)
}

// ReadCounter sums the counter's shards, read with its metadata in one
// snapshot: linearizable.
func (r *Reads) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	rs, err := r.ReadCounters(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	if rs[0] == nil {
		return nil, shardcounter.CounterNotFound(id)
	}
	return rs[0], nil
}

// ReadCounters reads many counters in one snapshot.
func (r *Reads) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	if err := shardcounter.CheckReadBatch(len(ids)); err != nil {
		return nil, err
	}
	out := make([]*shardcounter.Reading, len(ids))
	var uniq []string
	seen := make(map[string]bool)
	for _, id := range ids {
		if !seen[id] && shardcounter.ValidateID("counter id", id) == nil {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	if len(uniq) == 0 {
		return out, nil
	}
	sn, err := r.Snap(ctx, uniq)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		c, ok := sn.Counters[id]
		if !ok {
			continue
		}
		v, ok := overflow.Sum(sn.Values[id])
		if !ok {
			return nil, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: its shards sum to more than int64 holds", id)
		}
		if IsApprox(c.Kind) {
			if v, err = ApproxValue(r.Store, id, sn.Sketches[id]); err != nil {
				return nil, err
			}
		}
		out[i] = &shardcounter.Reading{ID: id, Value: v, Shards: c.Shards, Consistency: shardcounter.Strong, AsOf: sn.At}
	}
	return out, nil
}

// snap1 reads one counter as a snapshot.
func (r *Reads) snap1(ctx context.Context, id string) (*shardcounter.Counter, *Snapshot, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, nil, err
	}
	sn, err := r.Snap(ctx, []string{id})
	if err != nil {
		return nil, nil, err
	}
	c, ok := sn.Counters[id]
	if !ok {
		return nil, nil, shardcounter.CounterNotFound(id)
	}
	return c, sn, nil
}

// ReadShards returns the counter and each shard's value, one snapshot:
// an approx counter's are each shard's own estimate.
func (r *Reads) ReadShards(ctx context.Context, id string) (*shardcounter.Counter, []int64, error) {
	c, sn, err := r.snap1(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if sks, ok := sn.Sketches[id]; ok {
		vals, err := ShardEstimates(r.Store, id, sks)
		return c, vals, err
	}
	return c, sn.Values[id], nil
}

// ReadSketches returns an approx counter and its shards' sketches, in
// shard order, from one snapshot.
func (r *Reads) ReadSketches(ctx context.Context, id string) (*shardcounter.Counter, [][]byte, error) {
	c, sn, err := r.snap1(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if kind := c.Kind; !IsApprox(kind) {
		if kind == "" {
			kind = shardcounter.KindSum
		}
		return nil, nil, shardcounter.Errorf(shardcounter.EINVALID, "counter %q is a %s counter: only an approx counter has sketches", id, kind)
	}
	return c, sn.Sketches[id], nil
}

// Placement names each shard's document as its node: the database
// spreads documents over its servers itself.
func (r *Reads) Placement(ctx context.Context, id string) (*shardcounter.Placement, error) {
	c, sn, err := r.snap1(ctx, id)
	if err != nil {
		return nil, err
	}
	vals := sn.Values[id]
	if sks, ok := sn.Sketches[id]; ok {
		if vals, err = ShardEstimates(r.Store, id, sks); err != nil {
			return nil, err
		}
	}
	p := &shardcounter.Placement{ID: id, Shards: c.Shards, AsOf: sn.At}
	for i, v := range vals {
		p.Places = append(p.Places, shardcounter.ShardPlacement{Shard: i, Value: v, Node: r.Node(id, i)})
	}
	return p, nil
}

func (r *Reads) windowed(ctx context.Context, id string) (*shardcounter.Counter, error) {
	c, err := r.Meta(ctx, id)
	if err == nil && c.Window == nil {
		err = shardcounter.CounterHasNoWindow(id)
	}
	return c, err
}

// buckets returns the windowed counter and its non-zero buckets that
// start in [from, to), oldest first: none when !to.After(from).
func (r *Reads) buckets(ctx context.Context, id string, from, to time.Time) (*shardcounter.Counter, []shardcounter.Bucket, error) {
	c, err := r.windowed(ctx, id)
	if err != nil || !to.After(from) {
		return c, nil, err
	}
	stored, err := r.Buckets(ctx, id, from, to)
	if err != nil {
		return nil, nil, err
	}
	var out []shardcounter.Bucket
	for _, b := range stored {
		if b.Value != 0 && Owned(b.Of, c.CreatedAt) {
			out = append(out, b.Bucket)
		}
	}
	return c, out, nil
}

// ReadWindow sums the buckets that start in [from, to).
func (r *Reads) ReadWindow(ctx context.Context, id string, from, to time.Time) (*shardcounter.Reading, error) {
	c, bs, err := r.buckets(ctx, id, from, to)
	if err != nil {
		return nil, err
	}
	vals := make([]int64, len(bs))
	for i, b := range bs {
		vals[i] = b.Value
	}
	sum, ok := overflow.Sum(vals)
	if !ok {
		return nil, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: its window sums to more than int64 holds", id)
	}
	return &shardcounter.Reading{ID: id, Value: sum, Shards: c.Shards, Consistency: shardcounter.Strong, AsOf: r.Now(), Window: &shardcounter.Interval{From: from, To: to}}, nil
}

// ReadSeries returns the non-zero buckets that start in [from, to).
func (r *Reads) ReadSeries(ctx context.Context, id string, from, to time.Time) ([]shardcounter.Bucket, error) {
	_, bs, err := r.buckets(ctx, id, from, to)
	return bs, err
}
