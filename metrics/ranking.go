package metrics

import (
	"context"

	"github.com/shardcounter/shardcounter"
)

var _ shardcounter.RankingStore = (*store)(nil)

// rankings returns the wrapped store's ranking definitions, or an error
// that says it keeps none.
func (s *store) rankings() (shardcounter.RankingStore, error) {
	if rs, ok := s.CounterStore.(shardcounter.RankingStore); ok {
		return rs, nil
	}
	return nil, shardcounter.Errorf(shardcounter.EINVALID, "this store keeps no rankings: use bolt, pebble, postgres, redis, firestore or datastore")
}

// CreateRanking implements shardcounter.RankingStore by passing on the
// call; ranking definitions are rare writes, not counted.
func (s *store) CreateRanking(ctx context.Context, r *shardcounter.Ranking) (*shardcounter.Ranking, bool, error) {
	rs, err := s.rankings()
	if err != nil {
		return nil, false, err
	}
	return rs.CreateRanking(ctx, r)
}

// GetRanking implements shardcounter.RankingStore.
func (s *store) GetRanking(ctx context.Context, name string) (*shardcounter.Ranking, error) {
	rs, err := s.rankings()
	if err != nil {
		return nil, err
	}
	return rs.GetRanking(ctx, name)
}

// ListRankings implements shardcounter.RankingStore.
func (s *store) ListRankings(ctx context.Context) ([]*shardcounter.Ranking, error) {
	rs, err := s.rankings()
	if err != nil {
		return nil, err
	}
	return rs.ListRankings(ctx)
}

// DeleteRanking implements shardcounter.RankingStore.
func (s *store) DeleteRanking(ctx context.Context, name string) error {
	rs, err := s.rankings()
	if err != nil {
		return err
	}
	return rs.DeleteRanking(ctx, name)
}
