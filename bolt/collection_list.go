package bolt

import (
	"context"

	bbolt "go.etcd.io/bbolt"

	"github.com/shardcounter/shardcounter"
)

// ListCollections returns every collection, by name, from one snapshot
// (for export).
func (s *CollectionStore) ListCollections(ctx context.Context) ([]*shardcounter.Collection, error) {
	var out []*shardcounter.Collection
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketCollections).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			r, err := getColl(tx, string(k), nil)
			if err != nil {
				return err
			}
			out = append(out, r.Collection(string(k)))
		}
		return nil
	})
	return out, err
}
