package pebble

import (
	"context"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
)

// Window buckets are kept per counter, not per shard: writes are built
// under one lock, so per-shard buckets would buy nothing. A write reads
// its bucket (to refuse one that would leave int64), sets it, and, when
// it starts a new bucket, deletes those past retention with one range
// deletion: work proportional to the writes, nothing while idle.

// windowRecord returns a windowed counter's record: ErrNotFound when it
// is missing, ErrInvalid when it has no window.
func windowRecord(r pdb.Reader, id string) (*record, error) {
	rec, err := getRecord(r, id)
	if err == nil && rec.meta.spec.Window == nil {
		err = shardcounter.CounterHasNoWindow(id)
	}
	return rec, err
}

// buckets calls fn with each stored bucket of the counter that starts in
// [from, to), oldest first.
func buckets(r pdb.Reader, id string, from, to time.Time, fn func(start time.Time, v int64)) error {
	if !from.Before(to) {
		return nil
	}
	it, err := r.NewIter(&pdb.IterOptions{LowerBound: bucketKey(id, from), UpperBound: bucketKey(id, to)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		fn(bucketStart(it.Key()), decodeInt(v))
	}
	return it.Error()
}

// ReadWindow sums the counter's buckets that start in [from, to), from
// one snapshot.
func (s *CounterStore) ReadWindow(ctx context.Context, id string, from, to time.Time) (*shardcounter.Reading, error) {
	var rd *shardcounter.Reading
	err := s.durableRead(ctx, func(r pdb.Reader) error {
		rec, err := windowRecord(r, id)
		if err != nil {
			return err
		}
		var vals []int64
		if err := buckets(r, id, from, to, func(_ time.Time, v int64) { vals = append(vals, v) }); err != nil {
			return err
		}
		sum, ok := overflow.Sum(vals)
		if !ok {
			return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: the sum of its buckets from %s to %s is outside the int64 range", id, from, to)
		}
		rd = &shardcounter.Reading{
			ID: id, Value: sum, Shards: rec.meta.spec.Shards, Consistency: shardcounter.Strong, AsOf: s.now().UTC(),
			Window: &shardcounter.Interval{From: from.UTC(), To: to.UTC()},
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rd, nil
}

// ReadSeries returns the counter's non-zero buckets that start in
// [from, to), oldest first, as stored: buckets past retention that no
// write has swept yet are included.
func (s *CounterStore) ReadSeries(ctx context.Context, id string, from, to time.Time) ([]shardcounter.Bucket, error) {
	var out []shardcounter.Bucket
	err := s.durableRead(ctx, func(r pdb.Reader) error {
		if _, err := windowRecord(r, id); err != nil {
			return err
		}
		return buckets(r, id, from, to, func(start time.Time, v int64) {
			if v != 0 {
				out = append(out, shardcounter.Bucket{Start: start, Value: v})
			}
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
