package redis

import (
	"context"

	"github.com/shardcounter/shardcounter"
)

// ShardPlacement says where one shard of a counter lives: the seed's
// shard-to-machine map, read from the cluster rather than kept by hand.
type ShardPlacement struct {
	Shard int    `json:"shard"`
	Key   string `json:"key"`  // the shard's Redis key
	Slot  int    `json:"slot"` // its hash slot (CLUSTER KEYSLOT)
	Node  string `json:"node"` // address of the master serving the slot; the server's address on a single server
}

// ShardKeys returns where each shard of the counter lives, in shard order.
// On a cluster the node of each slot comes from CLUSTER SLOTS, asked at the
// time of the call, so it follows failovers and slot migrations; a slot no
// master serves has Node "". On a single server every shard is on it.
func (s *CounterStore) ShardKeys(ctx context.Context, id string) ([]ShardPlacement, error) {
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, err
	}
	l, err := s.layout(ctx, id, true)
	if err != nil {
		return nil, err
	}
	var owner [NumSlots]string
	if s.cluster != nil {
		slots, err := s.cluster.ClusterSlots(ctx).Result()
		if err != nil {
			return nil, storeErr("placement: cluster slots", err, false)
		}
		for _, r := range slots {
			if len(r.Nodes) == 0 {
				continue
			}
			for sl := max(r.Start, 0); sl <= r.End && sl < NumSlots; sl++ {
				owner[sl] = r.Nodes[0].Addr // the first node is the master
			}
		}
	}
	out := make([]ShardPlacement, l.n)
	for i := range out {
		key := l.keys.shard(i)
		out[i] = ShardPlacement{Shard: i, Key: key, Slot: l.keys.slot(i), Node: s.addr}
		if s.cluster != nil {
			out[i].Node = owner[out[i].Slot]
		}
	}
	return out, nil
}
