package datastore

import (
	"context"
	"fmt"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/sketch"
)

// Approx counters (shardcounter.KindApprox) keep each shard's HyperLogLog
// sketch in the shard entity's property sc_sketch (a []byte, unindexed),
// beside its count, which stays 0. A batch's transaction reads the shard
// entities its items add to, as it reads every shard it writes, merges
// the batch's members and sketches into each shard's sketch once with
// sketch.Apply, and writes the shards whose sketch changed: the
// transaction makes the read-modify-write serializable, so a concurrent
// writer's registers are never lost.

// propSketch is the shard entities' property of an approx counter's
// sketch (package sketch's encoding, at most sketch.MaxEncoded bytes:
// far under Datastore's 1 MiB for an unindexed blob).
const propSketch = "sc_sketch"

var _ shardcounter.SketchStore = (*CounterStore)(nil)

// approxShard is what a pass does to one shard of an approx counter: the
// members and sketches its items bring, and their outcomes, all changed
// or all unchanged once the shard's sketch is decided.
type approxShard struct {
	members []string
	merges  [][]byte
	outs    []*shardcounter.Outcome
}

func isApprox(kind string) bool { return shardcounter.Kind(kind) == shardcounter.KindApprox }

// takeApprox takes an admitted item on an approx counter into the pass:
// its shard's pending members or merges, and its request id.
func (b *batch) takeApprox(t *target, k int, inc shardcounter.Increment, rk requestKey, o *shardcounter.Outcome) {
	t.touched = true
	if t.approx == nil {
		t.approx = make(map[int]*approxShard)
	}
	p := t.approx[k]
	if p == nil {
		p = &approxShard{}
		t.approx[k] = p
	}
	if inc.Sketch != nil {
		p.merges = append(p.merges, inc.Sketch)
	} else {
		p.members = append(p.members, inc.Member)
	}
	p.outs = append(p.outs, o)
	b.record(rk)
}

// decideSketches computes the new sketch of every approx shard the pass
// adds to, once per shard, and the outcomes of its items; a shard whose
// sketch changes is written by the commit.
func (b *batch) decideSketches() error {
	for _, id := range b.order {
		t := b.targets[id]
		for k, p := range t.approx {
			var old []byte
			if se := t.shards[k]; se != nil && !t.create {
				old = se.Sketch
			}
			out, changed, err := sketch.Apply(old, p.members, p.merges)
			if err != nil {
				return fmt.Errorf("datastore: counter %q, shard %d: %w", id, k, err)
			}
			for _, o := range p.outs {
				o.Unchanged = !changed
			}
			if changed {
				t.newSketch[k] = out
				t.dirty[k] = true
			}
		}
	}
	return nil
}

// wantsMember reports whether the batch reads inc's member entity: not
// for a counter known to be an approx one, which keeps no members.
func (b *batch) wantsMember(t *target, inc shardcounter.Increment) bool {
	if t.guess != nil {
		return !isApprox(t.guess.Kind)
	}
	return inc.Create == nil || inc.Create.Kind != shardcounter.KindApprox
}

// ReadSketches returns an approx counter and its shards' sketches, in
// shard order, from one snapshot (a read-only transaction).
func (s *CounterStore) ReadSketches(ctx context.Context, id string) (*shardcounter.Counter, [][]byte, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, nil, err
	}
	sn, err := s.read(ctx, []string{id})
	if err != nil {
		return nil, nil, err
	}
	e, ok := sn.ents[id]
	if !ok {
		return nil, nil, shardcounter.CounterNotFound(id)
	}
	if !isApprox(e.Kind) {
		return nil, nil, shardcounter.Errorf(shardcounter.EINVALID, "counter %q is a %s counter: only an approx counter has sketches", id, e.spec().Kind)
	}
	return e.counter(id), sn.sketches[id], nil
}

// approxValue is an approx counter's value: the estimate of the union of
// its shards' sketches.
func approxValue(id string, sketches [][]byte) (int64, error) {
	v, err := sketch.Count(sketches)
	if err != nil {
		return 0, fmt.Errorf("datastore: counter %q: %w", id, err)
	}
	return v, nil
}

// reshardSketches merges into the kept shards' entities the sketches of
// the removed shards j, each into shard j mod n; new shards start empty.
func reshardSketches(id string, ses []shardEntity, old, n int) error {
	for i := old; i < len(ses); i++ {
		ses[i].Sketch = nil // an entity left by another program is no shard of this counter's
	}
	for j := n; j < old; j++ {
		if len(ses[j].Sketch) == 0 {
			continue
		}
		b, _, err := sketch.Apply(ses[j%n].Sketch, nil, [][]byte{ses[j].Sketch})
		if err != nil {
			return fmt.Errorf("datastore: counter %q, shard %d: %w", id, j, err)
		}
		ses[j%n].Sketch = b
	}
	return nil
}

// hasNoMembers is the ErrInvalid of a member read of a counter that
// keeps no members.
func hasNoMembers(id, kind string) error {
	if isApprox(kind) {
		return shardcounter.Errorf(shardcounter.EINVALID, "counter %q is an approx counter: it keeps a sketch of its members, not the members; use a distinct counter to list them or test one", id)
	}
	return shardcounter.CounterHasNoMembers(id)
}
