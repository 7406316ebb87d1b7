package bolt

import (
	"context"

	bbolt "go.etcd.io/bbolt"

	"github.com/shardcounter/shardcounter"
)

// bucketRankings holds ranking definitions, name → JSON record
// (shardcounter.EncodeRanking). It is made on the first create, so files
// from before rankings open unchanged.
var bucketRankings = []byte("rankings")

var _ shardcounter.RankingStore = (*CounterStore)(nil)

// CreateRanking records r unless its name is taken, in one transaction.
func (s *CounterStore) CreateRanking(ctx context.Context, r *shardcounter.Ranking) (*shardcounter.Ranking, bool, error) {
	stored, created := r, false
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketRankings)
		if err != nil {
			return err
		}
		if v := b.Get([]byte(r.Name)); v != nil {
			stored, err = shardcounter.DecodeRanking(v)
			return err
		}
		created = true
		return b.Put([]byte(r.Name), shardcounter.EncodeRanking(r))
	})
	if err != nil {
		return nil, false, err
	}
	return stored, created, nil
}

// GetRanking returns a ranking, or ErrNotFound.
func (s *CounterStore) GetRanking(ctx context.Context, name string) (*shardcounter.Ranking, error) {
	var r *shardcounter.Ranking
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketRankings)
		if b == nil || b.Get([]byte(name)) == nil {
			return shardcounter.RankingNotFound(name)
		}
		var err error
		r, err = shardcounter.DecodeRanking(b.Get([]byte(name)))
		return err
	})
	return r, err
}

// ListRankings returns every ranking by name.
func (s *CounterStore) ListRankings(ctx context.Context) ([]*shardcounter.Ranking, error) {
	var out []*shardcounter.Ranking
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketRankings)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			r, err := shardcounter.DecodeRanking(v)
			out = append(out, r)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteRanking removes a ranking, or returns ErrNotFound.
func (s *CounterStore) DeleteRanking(ctx context.Context, name string) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketRankings)
		if b == nil || b.Get([]byte(name)) == nil {
			return shardcounter.RankingNotFound(name)
		}
		return b.Delete([]byte(name))
	})
}
