package engine

import (
	"context"
	"errors"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/sketch"
)

// Approx counters (shardcounter.KindApprox) are written like distinct
// ones, a member write each (Write.Kind approx, Present true), through the
// group commit: a member write is never folded, and the store changes each
// shard's sketch once per commit. Their value is read like any other: the
// store returns the estimate of the union of the shards' sketches, and the
// engine's cached reads, rankings and value reads pass it on, never adding
// or subtracting it. What the methods below add is what RESP's PFCOUNT of
// several keys and PFMERGE need: sketches themselves.

// mergeChunk is how many sketch increments PFMERGE sends in one Apply: a
// sketch is up to 16 KiB, and stores bound a commit's size.
const mergeChunk = 64

// ReadSketches returns an approx counter and its shards' sketches in shard
// order (nil for a shard with none), read in one snapshot where the store
// has one. A counter of another kind is ErrInvalid.
func (e *Engine) ReadSketches(ctx context.Context, id string) (*shardcounter.Counter, [][]byte, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, nil, err
	}
	return e.store.ReadSketches(ctx, id)
}

// CountUnion returns the estimate of the union of approx counters: how
// many distinct members they saw together (PFCOUNT of several keys). A
// missing counter counts as empty, as a missing key does in Redis; one of
// another kind is ErrInvalid. The counters are read one after another,
// not in one snapshot.
func (e *Engine) CountUnion(ctx context.Context, ids []string) (int64, error) {
	if err := shardcounter.CheckReadBatch(len(ids)); err != nil {
		return 0, err
	}
	var all [][]byte
	for _, id := range ids {
		_, sk, err := e.ReadSketches(ctx, id)
		if errors.Is(err, shardcounter.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, err
		}
		all = append(all, sk...)
	}
	v, err := sketch.Count(all)
	if err != nil {
		return 0, shardcounter.Errorf(shardcounter.EINTERNAL, "%v", err)
	}
	return v, nil
}

// MergeSketches merges approx counters srcs into approx counter dest
// (PFMERGE): each source shard's sketch is merged into dest's shard of the
// same index mod dest's count, with Sketch increments, so dest counts the
// union of what it and the sources saw. A missing dest is created with the
// shard count of the first source that exists (or Config.ApproxShards), so that
// merging keeps the sources' layout; a missing source is empty. Each
// source is read in one snapshot; the merges are committed in chunks of
// mergeChunk, each atomic where the store's Apply is, so a failure may
// leave part of the union merged (a retry merges it again, unchanged).
func (e *Engine) MergeSketches(ctx context.Context, dest string, srcs []string) (*shardcounter.Counter, error) {
	if err := shardcounter.ValidateID("counter id", dest); err != nil {
		return nil, err
	}
	spec := shardcounter.Spec{Shards: e.cfg.ApproxShards, Kind: shardcounter.KindApprox}
	var incs []shardcounter.Increment
	found := false
	for _, src := range srcs {
		c, sk, err := e.ReadSketches(ctx, src)
		if errors.Is(err, shardcounter.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !found {
			spec.Shards, found = c.Shards, true
		}
		for i, b := range sk {
			if b != nil {
				incs = append(incs, shardcounter.Increment{Counter: dest, Sketch: b, Pick: uint64(i), Kind: shardcounter.KindApprox})
			}
		}
	}
	if e.create == nil {
		if _, err := e.GetCounter(ctx, dest); err != nil {
			return nil, err
		}
	}
	if err := e.createApprox(ctx, dest, spec); err != nil {
		return nil, err
	}
	for len(incs) > 0 {
		n := min(len(incs), mergeChunk)
		c := &shardcounter.Commit{Op: shardcounter.CommitBatch, Incs: incs[:n]}
		err := e.observe(ctx, c, func(ctx context.Context) error {
			out, err := e.store.Apply(ctx, c.Incs)
			c.Outcomes, err = outcomes(c.Incs, out, err)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, o := range c.Outcomes {
			if o.Err != nil {
				return nil, o.Err
			}
		}
		incs = incs[n:]
	}
	return e.GetCounter(ctx, dest)
}

// createApprox creates approx counter id unless it exists; an existing
// counter of another kind is ErrInvalid.
func (e *Engine) createApprox(ctx context.Context, id string, spec shardcounter.Spec) error {
	c, err := e.store.GetCounter(ctx, id)
	if err == nil {
		if c.Kind != shardcounter.KindApprox {
			return shardcounter.Errorf(shardcounter.EINVALID, "counter %q is a %s counter, not approx", id, c.Kind)
		}
		return nil
	}
	if !errors.Is(err, shardcounter.ErrNotFound) {
		return err
	}
	err = e.observe(ctx, &shardcounter.Commit{Op: shardcounter.CommitCreate, Counter: id}, func(ctx context.Context) error {
		_, err := e.store.CreateCounter(ctx, id, spec)
		return err
	})
	if errors.Is(err, shardcounter.ErrExists) {
		return e.createApprox(ctx, id, spec) // made meanwhile: check its kind
	}
	return err
}
