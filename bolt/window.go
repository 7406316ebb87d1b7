package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/overflow"
)

// bucketKey is the window_buckets key of the counter's bucket starting at
// start: its unix nanoseconds with the sign bit flipped, big-endian, so
// that keys sort by time on both sides of 1970.
func bucketKey(id string, start time.Time) []byte {
	return binary.BigEndian.AppendUint64(prefixKey(id), uint64(start.UnixNano())^1<<63)
}

func bucketStart(k []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(k[len(k)-8:])^1<<63)).UTC()
}

// sweep deletes the counter's buckets that start before before: those
// past retention (decide.BucketWrite.Sweep). Buckets are made by writes
// and each is deleted once, so sweeping costs work proportional to the
// writes, and a counter nobody writes costs nothing.
func sweep(window *bbolt.Bucket, id string, before time.Time) error {
	end := bucketKey(id, before)
	c := window.Cursor()
	p := prefixKey(id)
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p) && bytes.Compare(k, end) < 0; k, _ = c.Seek(p) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// windowMeta returns a windowed counter's record: ErrNotFound when it is
// missing, ErrInvalid when it has no window.
func windowMeta(tx *bbolt.Tx, id string) (meta, error) {
	m, err := getMeta(tx, id)
	if err == nil && m.spec.Window == nil {
		err = shardcounter.CounterHasNoWindow(id)
	}
	return m, err
}

// buckets calls fn with each stored bucket of the counter that starts in
// [from, to), oldest first.
func buckets(tx *bbolt.Tx, id string, from, to time.Time, fn func(start time.Time, v int64)) {
	if !from.Before(to) {
		return
	}
	end := bucketKey(id, to)
	c := tx.Bucket(bucketWindow).Cursor()
	for k, v := c.Seek(bucketKey(id, from)); k != nil && bytes.Compare(k, end) < 0; k, v = c.Next() {
		fn(bucketStart(k), decodeInt(v))
	}
}

// ReadWindow sums the counter's buckets that start in [from, to), from one
// snapshot.
func (s *CounterStore) ReadWindow(ctx context.Context, id string, from, to time.Time) (*shardcounter.Reading, error) {
	var r *shardcounter.Reading
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		m, err := windowMeta(tx, id)
		if err != nil {
			return err
		}
		var vals []int64
		buckets(tx, id, from, to, func(_ time.Time, v int64) { vals = append(vals, v) })
		sum, ok := overflow.Sum(vals)
		if !ok {
			return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: the sum of its buckets from %s to %s is outside the int64 range", id, from, to)
		}
		r = &shardcounter.Reading{
			ID: id, Value: sum, Shards: m.spec.Shards, Consistency: shardcounter.Strong, AsOf: s.now().UTC(),
			Window: &shardcounter.Interval{From: from.UTC(), To: to.UTC()},
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ReadSeries returns the counter's non-zero buckets that start in
// [from, to), oldest first, as stored: buckets past retention that no
// write has swept yet are included.
func (s *CounterStore) ReadSeries(ctx context.Context, id string, from, to time.Time) ([]shardcounter.Bucket, error) {
	var out []shardcounter.Bucket
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		if _, err := windowMeta(tx, id); err != nil {
			return err
		}
		buckets(tx, id, from, to, func(start time.Time, v int64) {
			if v != 0 {
				out = append(out, shardcounter.Bucket{Start: start, Value: v})
			}
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
