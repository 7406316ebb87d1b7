package firestore

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/sketch"
)

// Approx counters (shardcounter.KindApprox) keep each shard's HyperLogLog
// sketch in the shard document's fieldSketch, beside its count (which
// stays 0). A batch reads the sketch of every shard it adds to in the
// same round trip as the rest of its reads (never from the cache: a
// sketch is up to 16 KiB, and the cache holds 100,000 counters), merges
// the batch's members and sketches into it with sketch.Apply, and writes
// it back under the shard's update-time precondition, as every shard
// write is: a writer that came first fails the commit, and the batch is
// decided again on the sketch that writer left, so no writer's registers
// are lost.

// fieldSketch is the shard documents' field of an approx counter's
// sketch (package sketch's encoding, at most sketch.MaxEncoded bytes).
const fieldSketch = "sc_sketch"

var _ shardcounter.SketchStore = (*CounterStore)(nil)

// approxShard is what a batch does to one shard of an approx counter:
// the members and sketches its items bring, and their outcomes, which
// are all changed or all unchanged once the shard's sketch is decided.
type approxShard struct {
	members []string
	merges  [][]byte
	outs    []*shardcounter.Outcome
}

func isApprox(spec shardcounter.Spec) bool { return spec.Kind == shardcounter.KindApprox }

// sketchOf returns the sketch a shard document holds, nil for none.
func sketchOf(snap *firestore.DocumentSnapshot) []byte {
	if snap == nil || !snap.Exists() {
		return nil
	}
	b, _ := snap.Data()[fieldSketch].([]byte)
	return b
}

// takeApprox takes an admitted item on an approx counter into the
// batch: its shard's pending members or merges, and its request id. The
// shard's version is checked by the commit even when its sketch does not
// change, so that "unchanged" holds at the commit.
func (b *batchState) takeApprox(it *item, inc shardcounter.Increment, o *shardcounter.Outcome) {
	t := it.t
	b.adopt(t, it.st, it.creating)
	if t.approx == nil {
		t.approx = make(map[int]*approxShard)
	}
	p := t.approx[it.k]
	if p == nil {
		p = &approxShard{}
		t.approx[it.k] = p
	}
	if inc.Sketch != nil {
		p.merges = append(p.merges, inc.Sketch)
	} else {
		p.members = append(p.members, inc.Member)
	}
	p.outs = append(p.outs, o)
	t.verify[it.k] = true
	b.record(t, it.rk)
}

// decideSketches computes the new sketch of every approx shard the batch
// adds to, once per shard, and the outcomes of its items.
func (b *batchState) decideSketches(order []string) error {
	for _, id := range order {
		t := b.targets[id]
		for k, p := range t.approx {
			var old []byte
			if !t.create {
				old = t.sketches[k]
			}
			out, changed, err := sketch.Apply(old, p.members, p.merges)
			if err != nil {
				return fmt.Errorf("firestore: counter %q, shard %d: %w", id, k, err)
			}
			for _, o := range p.outs {
				o.Unchanged = !changed
			}
			if changed {
				if t.newSketch == nil {
					t.newSketch = make(map[int][]byte)
				}
				t.newSketch[k] = out
			}
		}
	}
	return nil
}

// ReadSketches returns an approx counter and its shards' sketches, in
// shard order, from one snapshot (one BatchGetDocuments).
func (s *CounterStore) ReadSketches(ctx context.Context, id string) (*shardcounter.Counter, [][]byte, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, nil, err
	}
	sn, err := s.read(ctx, []string{id})
	if err != nil {
		return nil, nil, err
	}
	m, ok := sn.metas[id]
	if !ok {
		return nil, nil, shardcounter.CounterNotFound(id)
	}
	if !isApprox(m.spec) {
		return nil, nil, shardcounter.Errorf(shardcounter.EINVALID, "counter %q is a %s counter: only an approx counter has sketches", id, kindOf(m.spec))
	}
	return m.counter(id), sn.sketches[id], nil
}

// approxValue is an approx counter's value: the estimate of the union of
// its shards' sketches.
func approxValue(id string, sketches [][]byte) (int64, error) {
	v, err := sketch.Count(sketches)
	if err != nil {
		return 0, fmt.Errorf("firestore: counter %q: %w", id, err)
	}
	return v, nil
}

// shardEstimates returns each shard's own estimate, an approx counter's
// shard values (ReadShards, Placement).
func shardEstimates(id string, sketches [][]byte) ([]int64, error) {
	vals := make([]int64, len(sketches))
	for i, b := range sketches {
		v, err := approxValue(id, [][]byte{b})
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	return vals, nil
}

// reshardSketches returns the sketches of an approx counter's n shards
// after a reshard from the old ones: shard i keeps its own and takes the
// removed shards j with j mod n = i. A shard with none stays nil.
func reshardSketches(id string, old [][]byte, n int) ([][]byte, error) {
	out := make([][]byte, n)
	for i := range min(len(old), n) {
		out[i] = old[i]
	}
	for j := n; j < len(old); j++ {
		if len(old[j]) == 0 {
			continue
		}
		b, _, err := sketch.Apply(out[j%n], nil, [][]byte{old[j]})
		if err != nil {
			return nil, fmt.Errorf("firestore: counter %q, shard %d: %w", id, j, err)
		}
		out[j%n] = b
	}
	return out, nil
}

// hasNoMembers is the ErrInvalid of a member read of a counter that
// keeps no members.
func hasNoMembers(id string, spec shardcounter.Spec) error {
	if isApprox(spec) {
		return shardcounter.Errorf(shardcounter.EINVALID, "counter %q is an approx counter: it keeps a sketch of its members, not the members; use a distinct counter to list them or test one", id)
	}
	return shardcounter.CounterHasNoMembers(id)
}
