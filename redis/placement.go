package redis

import (
	"context"

	"github.com/shardcounter/shardcounter"
)

// Placement returns where each shard of the counter lives and what it
// holds: the seed's shard-to-machine map, read from the cluster rather
// than kept by hand. The values are one linearizable read (as
// ReadCounter's); on a cluster each shard's node is the master that
// serves its slot, from CLUSTER SLOTS asked at the time of the call, so it
// follows failovers and slot migrations ("" for a slot no master serves),
// and Slot is set. On one server every shard is on that server.
func (s *CounterStore) Placement(ctx context.Context, id string) (*shardcounter.Placement, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	shots, err := s.snapshot(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	sh := shots[0]
	if sh.l == nil {
		return nil, notFound(id)
	}
	vals, err := shardValues(sh)
	if err != nil {
		return nil, err
	}
	owner, err := s.slotOwners(ctx)
	if err != nil {
		return nil, err
	}
	p := &shardcounter.Placement{ID: id, Shards: sh.l.n, AsOf: s.now().UTC(), Places: make([]shardcounter.ShardPlacement, sh.l.n)}
	for i := range p.Places {
		p.Places[i] = shardcounter.ShardPlacement{Shard: i, Value: vals[i], Node: s.addr}
		if owner != nil {
			slot := sh.l.keys.slot(i)
			p.Places[i].Node, p.Places[i].Slot = owner[slot], &slot
		}
	}
	return p, nil
}

// slotOwners returns the address of the master serving each slot, from
// CLUSTER SLOTS, or nil on a single server.
func (s *CounterStore) slotOwners(ctx context.Context) ([]string, error) {
	if s.cluster == nil {
		return nil, nil
	}
	slots, err := s.cluster.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, storeErr("placement: cluster slots", err, false)
	}
	owner := make([]string, NumSlots)
	for _, r := range slots {
		if len(r.Nodes) == 0 {
			continue
		}
		for sl := max(r.Start, 0); sl <= r.End && sl < NumSlots; sl++ {
			owner[sl] = r.Nodes[0].Addr // the first node is the master
		}
	}
	return owner, nil
}
