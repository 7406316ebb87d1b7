package pebble

import (
	"context"

	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/shardcounter/shardcounter"
)

// ListCollections returns every collection, by name (for export).
func (cs *CollectionStore) ListCollections(ctx context.Context) ([]*shardcounter.Collection, error) {
	var names []string
	err := cs.s.durableRead(ctx, func(r pdb.Reader) error {
		it, err := r.NewIter(&pdb.IterOptions{LowerBound: []byte{prefixCollection}, UpperBound: []byte{prefixCollection + 1}})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			names = append(names, string(it.Key()[1:]))
		}
		return it.Close()
	})
	if err != nil {
		return nil, err
	}
	out := make([]*shardcounter.Collection, 0, len(names))
	for _, n := range names {
		c, err := cs.GetCollection(ctx, n)
		if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
			continue // deleted since
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
