package model

import (
	"context"
	"math/big"
	"slices"
	"time"

	"github.com/shardcounter/shardcounter"
)

func (s *Store) reading(c *counter) *shardcounter.Reading {
	return &shardcounter.Reading{ID: c.c.ID, Value: c.value(), Shards: c.c.Shards, Consistency: shardcounter.Strong, AsOf: s.now()}
}

// withCounter calls f with counter id, under the model's lock, or fails
// as get does.
func withCounter[T any](ctx context.Context, s *Store, id string, f func(c *counter) (T, error)) (T, error) {
	var zero T
	if err := s.lock(ctx); err != nil {
		return zero, err
	}
	defer s.mu.Unlock()
	c, err := s.get(id)
	if err != nil {
		return zero, err
	}
	return f(c)
}

// ReadCounter returns a counter's value.
func (s *Store) ReadCounter(ctx context.Context, id string) (*shardcounter.Reading, error) {
	return withCounter(ctx, s, id, func(c *counter) (*shardcounter.Reading, error) { return s.reading(c), nil })
}

// ReadCounters reads many counters at one moment, nil for a missing one.
func (s *Store) ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error) {
	if err := shardcounter.CheckReadBatch(len(ids)); err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]*shardcounter.Reading, len(ids))
	for i, id := range ids {
		if c := s.counters[id]; c != nil {
			out[i] = s.reading(c)
		}
	}
	return out, nil
}

// shardValues returns each shard's value: an approx shard's is the
// estimate of its own sketch.
func (c *counter) shardValues() []int64 {
	if kind(c) == shardcounter.KindApprox {
		vals := make([]int64, len(c.sketches))
		for i, b := range c.sketches {
			vals[i] = estimate(b)
		}
		return vals
	}
	return slices.Clone(c.shards)
}

// ReadShards returns a counter and its shards' values.
func (s *Store) ReadShards(ctx context.Context, id string) (*shardcounter.Counter, []int64, error) {
	var vals []int64
	meta, err := withCounter(ctx, s, id, func(c *counter) (*shardcounter.Counter, error) {
		vals = c.shardValues()
		return c.meta(), nil
	})
	return meta, vals, err
}

// Placement returns each shard's value, all on the one node "model".
func (s *Store) Placement(ctx context.Context, id string) (*shardcounter.Placement, error) {
	return withCounter(ctx, s, id, func(c *counter) (*shardcounter.Placement, error) {
		p := &shardcounter.Placement{ID: id, Shards: c.c.Shards, AsOf: s.now()}
		for i, v := range c.shardValues() {
			p.Places = append(p.Places, shardcounter.ShardPlacement{Shard: i, Value: v, Node: "model"})
		}
		return p, nil
	})
}

// withWindow is withCounter for a counter that must have a window.
func withWindow[T any](ctx context.Context, s *Store, id string, f func(c *counter) (T, error)) (T, error) {
	return withCounter(ctx, s, id, func(c *counter) (T, error) {
		if c.c.Window == nil {
			var zero T
			return zero, shardcounter.CounterHasNoWindow(id)
		}
		return f(c)
	})
}

// ReadWindow sums the buckets that start in [from, to).
func (s *Store) ReadWindow(ctx context.Context, id string, from, to time.Time) (*shardcounter.Reading, error) {
	return withWindow(ctx, s, id, func(c *counter) (*shardcounter.Reading, error) { return s.windowSum(c, from, to) })
}

func (s *Store) windowSum(c *counter, from, to time.Time) (*shardcounter.Reading, error) {
	r := s.reading(c)
	// The window's value is the buckets' exact sum: buckets may pass
	// int64's ends on the way (one near the top, the next near the
	// bottom) while the sum is an int64.
	sum := new(big.Int)
	for _, b := range c.series(from, to) {
		sum.Add(sum, big.NewInt(b.Value))
	}
	if !sum.IsInt64() {
		return nil, shardcounter.Errorf(shardcounter.EOUTOFRANGE, "counter %q: its buckets from %s to %s sum outside int64", c.c.ID, from, to)
	}
	r.Value = sum.Int64()
	r.Window = &shardcounter.Interval{From: from, To: to}
	return r, nil
}

// ReadSeries returns the non-zero buckets that start in [from, to), oldest
// first.
func (s *Store) ReadSeries(ctx context.Context, id string, from, to time.Time) ([]shardcounter.Bucket, error) {
	return withWindow(ctx, s, id, func(c *counter) ([]shardcounter.Bucket, error) { return c.series(from, to), nil })
}

func (c *counter) series(from, to time.Time) []shardcounter.Bucket {
	var out []shardcounter.Bucket
	for start, v := range c.buckets {
		t := time.Unix(0, start).UTC()
		if v != 0 && !t.Before(from) && t.Before(to) {
			out = append(out, shardcounter.Bucket{Start: t, Value: v})
		}
	}
	slices.SortFunc(out, func(a, b shardcounter.Bucket) int { return a.Start.Compare(b.Start) })
	return out
}

// distinct returns a distinct counter: another kind has no members.
func (s *Store) distinct(id string) (*counter, error) {
	c, err := s.get(id)
	if err == nil && kind(c) != shardcounter.KindDistinct {
		err = shardcounter.Errorf(shardcounter.EINVALID, "counter %q is a %s counter: it keeps no members", id, kind(c))
	}
	return c, err
}

// IsMember reports whether member is present in a distinct counter.
func (s *Store) IsMember(ctx context.Context, id, member string) (bool, error) {
	if err := shardcounter.ValidateID("member", member); err != nil {
		return false, err
	}
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	c, err := s.distinct(id)
	if err != nil {
		return false, err
	}
	return c.members[member], nil
}

// ListMembers returns up to limit members that sort after after.
func (s *Store) ListMembers(ctx context.Context, id, after string, limit int) ([]string, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	c, err := s.distinct(id)
	if err != nil {
		return nil, err
	}
	var out []string
	for m := range c.members {
		if m > after {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), max(limit, 0))], nil
}

// ReadSketches returns an approx counter's shard sketches.
func (s *Store) ReadSketches(ctx context.Context, id string) (*shardcounter.Counter, [][]byte, error) {
	var out [][]byte
	meta, err := withCounter(ctx, s, id, func(c *counter) (*shardcounter.Counter, error) {
		if kind(c) != shardcounter.KindApprox {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "counter %q is a %s counter: it keeps no sketches", id, kind(c))
		}
		out = make([][]byte, len(c.sketches))
		for i, b := range c.sketches {
			out[i] = slices.Clone(b)
		}
		return c.meta(), nil
	})
	return meta, out, err
}
