package datastore

import (
	"context"
	"slices"
	"strings"

	"cloud.google.com/go/datastore"

	"github.com/shardcounter/shardcounter"
)

// ListCollections returns every collection, by name (for export): one
// query of the SC_Collection entities, which a store holds few of.
func (cs *CollectionStore) ListCollections(ctx context.Context) ([]*shardcounter.Collection, error) {
	var es []collectionEntity
	q := datastore.NewQuery(collectionKind).Namespace(cs.s.namespace)
	if _, err := cs.s.client.GetAll(ctx, q, &es); err != nil {
		return nil, readError("list collections", err)
	}
	out := make([]*shardcounter.Collection, 0, len(es))
	for i := range es {
		out = append(out, es[i].collection())
	}
	slices.SortFunc(out, func(a, b *shardcounter.Collection) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
